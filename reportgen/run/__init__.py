"""The run stage: a campaign in, a run directory out, saved after every experiment.

- ``runner``: the experiment loop and the results it saves (the table of contents).
- ``server``: one engine process in its own process group, its readiness and its stop.
- ``driver``: one experiment's workload against a ready server (warm-up, levels).
- ``probes``: the golden prompts. ``progress``: what the terminal shows.
- ``interrupt``: Ctrl-C and SIGTERM, never lost.

May import every stage below it: campaign, load, observe, results, analysis.
"""
