"""Where a run's decisions start from: the spread between server starts that earlier runs of
its campaign measured on the same host (``Run.start_prior``), instead of a stated one.

A campaign's verdicts on one or two starts an experiment rest on how much two starts of one
configuration differ. Before the run has measured that, the "anchored" method takes it as
stated (``campaign.start_spread``, weighed as three starts); where the history holds runs of
the same campaign on the same GPUs, engine version, model and baseline workload, their own
measured spread is used instead, per level, with the degrees of freedom they measured it
on. A campaign that states ``start_spread`` itself keeps its statement.
"""

from __future__ import annotations

from pathlib import Path

from reportgen.analysis import noise
from reportgen.history.record import RunRecord, engine_version, setup_of
from reportgen.history.store import open_store
from reportgen.results.model import PriorLevel, Run, StartPrior


def start_prior(run: Run, store: Path) -> StartPrior | None:
    """The spread between starts measured by the runs in ``store`` that ran ``run``'s
    campaign where ``run`` runs (``same_host``), pooled per level; None where there are none
    (or no such file)."""
    if not store.is_file() or not run.experiments:
        return None
    with open_store(store, create=False) as history:
        records = history.runs(str(run.info.get("name") or ""))
    found = [r for r in records if r.run_id != run.run_id and r.starts and same_host(r, run)]
    if not found:
        return None
    pooled = noise.pooled_spread({x.point: (x.spread, x.dof) for x in r.starts} for r in found)
    return StartPrior(
        metric=run.metric,
        source=str(store),
        runs=[r.run_id for r in found],
        levels=[
            PriorLevel(concurrency=p.concurrency, rate=p.rate, spread=sd, dof=dof)
            for p, (sd, dof) in sorted(pooled.items(), key=lambda kv: kv[0].order)
        ],
    )


def same_host(record: RunRecord, run: Run) -> bool:
    """Whether ``record`` measured what ``run`` measures: the same objective metric, engine
    and version, the same GPUs, and its baseline's model and workload as ``run``'s."""
    if record.metric != run.metric or record.engine != run.engine.name:
        return False
    if record.engine_version != engine_version(run):
        return False
    gate, _ = setup_of(run)
    base = run.experiments[0].id
    mine = {k: v for k, v in gate.items() if k == "GPUs" or k.startswith(_of(base))}
    return all(record.gate.get(k) == v for k, v in mine.items())


def _of(experiment: str) -> tuple[str, str]:
    return (f"model[{experiment}]", f"workload[{experiment}]")
