"""The analysis stage: pure functions of results and request records. No I/O, no clocks, no
printing; every estimator named in its module's docstring.

- ``summary``: one level's numbers from its requests, and the aggregates across repetitions.
- ``decide``: comparisons (ratios with intervals, their verdicts); ``welch``: the same by
  each comparison's own two sides (how older runs were decided); ``tails``: p99 compared
  from the requests; ``adopt``: the objective's verdict and the sentences that say it.
- ``noise``: the run's noise model; ``moderated``: Smyth's prior and Satterthwaite's degrees
  of freedom, which it uses.
- ``verdict``: an experiment's decision (the runner and verify call it); ``drift``: the
  bracket's drift check and the best chosen after it.
- ``checks`` (with ``checks_levels``, ``checks_engine``, ``checks_server``,
  ``checks_stalls``, ``checks_telemetry``): the assumptions checked. ``unjudged``: the
  experiments whose numbers are no verdict (another load, an expected failure that ran,
  speculation over degenerate text, another machine or model build than the parent's).
- ``differences``: what differs between two records, leaf by leaf. ``text``: degenerate
  answers and word agreement. ``allocation``: the repetitions per server start a run's own
  costs and spreads call for. ``selection``: the best's gain shrunk for having been chosen.
- ``roofline``: a model's weights and KV cache counted from its config, and the bounds its
  GPUs' published bandwidth and tensor throughput put on decode and prefill.

Imports ``reportgen.results`` (the typed model), ``reportgen.load.records``,
``reportgen.campaign`` and ``reportgen.metrics``; nothing of run, observe or render.
"""
