"""The run stage: a campaign in, a run directory out, saved after every experiment.

- ``runner``: the table of contents (fingerprint, preflight, start or resume, each experiment,
  its verdict, save).
- ``plan``: each experiment's configuration, command and server launches, before anything runs.
- ``preflight``: the host, the engine's flags and the ports, checked before anything starts.
- ``resume``: continuing a run in its own directory.
- ``experiment``: one experiment's sessions, telemetry, evidence, tables and checks.
- ``session``: one server launch (start, ready, info and golden prompts, warm-up, levels, stop).
- ``server``: one engine process in its own process group; ``serverlog``: its log, read back
  (secrets hidden, the engine's fatal line). ``driver``: a workload against a ready server.
  ``probes``: the golden prompts. ``calibrate``: the client's ceiling.
- ``progress``: what the terminal shows. ``interrupt``: Ctrl-C and SIGTERM, never lost.
- ``local``: the ``Executor`` protocol and this host's executor; ``executor``: SSH and Slurm;
  ``remote``: the far side of either.

May import every stage below it: campaign, load, observe, results, analysis; never render.
"""
