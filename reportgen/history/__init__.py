"""The history of a campaign across runs: where a regression happened, and what changed there.

- ``record``: what is kept of a run (``RunRecord``: identity, fingerprint as flat text split
  into what breaks a series and what a change could come from, each experiment's level values
  per repetition), made from a loaded ``Run``;
- ``store``: the SQLite file that keeps them (``open_store``, ``Store.add``/``runs``);
- ``changes``: the statistics: change points in a comparable stretch of runs (binary
  segmentation, Student's t, Bonferroni over the splits) and the gate on the newest run;
- ``series``: a campaign's runs as series per experiment and level, their breaks, change points
  and suspects;
- ``prior``: the spread between server starts earlier runs of a campaign measured on the same
  host, where a new run's decisions start from (``reportgen run --history``);
- ``replication``: whether a run's decided changes replicate earlier runs of its campaign
  (their ratios to the baseline then against now), said on its page one.

Imports ``reportgen.results`` (the runs), ``reportgen.diff`` (which fields are volatile, the
model's identity) and ``reportgen.analysis`` (level values, flattening), nothing of render: its
words (``render.historytext``, shared by the terminal and the page) and the history report
(``render.historypage``) are render's.
"""
