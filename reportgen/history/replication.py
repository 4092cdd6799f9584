"""Whether a run's verdicts replicate: each judged experiment that earlier runs of the same
campaign in the history store also ran, its ratio to the baseline then against now.

A change that won on one host and lost on another is a finding about the host, not the
change (a level bound by the server's CPU on one machine and by the GPU on the other, say).
For every experiment of the run that was judged (adopted, rejected, equivalent or
inconclusive: its interval still says where this run puts it), each earlier
run of the campaign (by name) holding that experiment and the baseline gives, at each of the
objective's levels, the ratio of the geometric means of their repetitions; it agrees with
this run where it lies inside this run's interval for the same comparison (the experiment
against the baseline, as decided). Runs on other GPUs are kept and named by their GPUs: that
they did not replicate is the point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from reportgen.history.record import RunRecord
from reportgen.history.store import open_store
from reportgen.results.model import ReplicatedLevel, Replication, Run
from reportgen.results.verdicts import Comparison

JUDGED = ("adopted", "rejected", "equivalent", "inconclusive")  # not failed, not the baseline


def replications(run: Run, store: Path) -> list[Replication]:
    """The judged experiments of ``run`` that earlier runs in ``store`` of its campaign also
    ran, one record per (experiment, earlier run), oldest run first; [] where there are none
    or no such file."""
    if not store.is_file() or run.baseline is None:
        return []
    with open_store(store, create=False) as history:
        records = history.runs(str(run.info.get("name") or ""))
    earlier = sorted(
        (r for r in records if r.run_id != run.run_id and r.metric == run.metric),
        key=lambda r: r.started_at,
    )
    out = []
    for e in run.experiments:
        d = e.decision
        if e.role != "experiment" or d is None or d.verdict not in JUDGED or not d.vs_baseline:
            continue
        if d.unjudged:  # its numbers are no verdict on a server change
            continue
        for record in earlier:
            found = _levels(record, run, e.id, d.vs_baseline)
            if found:
                out.append(
                    Replication(
                        experiment=e.id,
                        run_id=record.run_id,
                        started_at=record.started_at,
                        gpus=record.gate.get("GPUs", ""),
                        levels=found,
                    )
                )
    return out


def _levels(
    record: RunRecord, run: Run, exp_id: str, now: Sequence[Comparison]
) -> list[ReplicatedLevel]:
    """``exp_id``'s ratio to the baseline in ``record`` at each level this run compared it,
    beside this run's ratio and interval; [] where the record lacks either side there."""
    base = run.baseline.id if run.baseline else ""
    mine, theirs = record.values(exp_id, run.metric), record.values(base, run.metric)
    out = []
    for c in now:
        a, b = mine.get(c.point), theirs.get(c.point)
        if not a or not b or c.ratio is None or min(a) <= 0 or min(b) <= 0:
            continue
        then = math.exp(sum(map(math.log, a)) / len(a) - sum(map(math.log, b)) / len(b))
        out.append(
            ReplicatedLevel(
                concurrency=c.concurrency,
                rate=c.rate,
                then=then,
                now=c.ratio,
                ci_low=c.ci_low,
                ci_high=c.ci_high,
            )
        )
    return out
