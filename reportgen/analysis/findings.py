"""A run's findings beyond each experiment's decision (``results.findings``): computed here,
from the run, saved with it (the runner, before each save), given to the report (which
formats them), and taken again by ``verify``."""

from __future__ import annotations

from reportgen import engines
from reportgen.analysis import costs, online, selection
from reportgen.analysis.allocation import allocation
from reportgen.analysis.bound import bounds
from reportgen.analysis.checks_engine import spec_length
from reportgen.analysis.graphs import uncovered
from reportgen.results.findings import (
    AllocationFinding,
    BestGain,
    ErrorRate,
    Findings,
    Speculation,
)
from reportgen.results.model import Experiment, Run


def speculation(e: Experiment, engine: str) -> list[Speculation]:
    """Speculative decoding in each of ``e``'s level runs where the engine's counters or
    gauge said it (``spec_length``)."""
    eng = engines.ENGINES.get(engine)
    counters = dict(eng.counters) if eng else {}
    out = []
    for lv in e.levels:
        length, rate = spec_length(lv, counters)
        if length is not None or rate is not None:
            out.append(
                Speculation(
                    concurrency=lv.concurrency,
                    rate=lv.rate,
                    repetition=lv.repetition,
                    length=length,
                    acceptance=rate,
                )
            )
    return out


def best_gain(run: Run) -> BestGain | None:
    """The best's score and its shrunk one (``selection.best_shrunk``); None where there is
    no best beyond the baseline or too few compared experiments."""
    found = selection.best_shrunk(run)
    if found is None:
        return None
    best, shrunk = found
    return BestGain(
        best=best.id,
        score=best.score,
        shrunk=shrunk.score,
        tau=shrunk.tau,
        experiments=shrunk.experiments,
    )


def error_rate(run: Run) -> ErrorRate | None:
    """The rate the verdicts hold and its cost in power (``online``); None where nothing was
    compared with the baseline."""
    compared = [e for e in run.experiments if e.role == "experiment"][1:]
    if not compared:
        return None
    cost = online.power_cost(run)
    return ErrorRate(
        compared=online.compared(run),
        fallback=any(e.decision and e.decision.method == online.SINCE for e in compared),
        mde=None if cost is None else cost.mde,
        mde_each=None if cost is None else cost.mde_each,
    )


def findings(run: Run) -> Findings:
    """What ``run`` (its decisions as they stand) finds beyond them."""
    a = allocation(run)
    return Findings(
        bounds={e.id: got for e in run.experiments if (got := bounds(e))},
        graphs={e.id: cut for e in run.experiments if (cut := uncovered(e, run.engine.name))},
        best_gain=best_gain(run),
        costs=costs.costs(run),
        error=error_rate(run),
        speculation={
            e.id: spec for e in run.experiments if (spec := speculation(e, run.engine.name))
        },
        allocation=None
        if a is None
        else AllocationFinding(
            start_s=a.start_s,
            repetition_s=a.repetition_s,
            within_sd=a.within_sd,
            between_sd=a.between_sd,
            repetitions=a.repetitions,
            starts=a.starts,
            per_start=a.per_start,
            suggested_starts=a.suggested_starts,
            narrower=a.narrower,
        ),
    )


def attach(run: Run) -> Run:
    """``run`` with its findings taken now (a run recorded before them gets them here, in
    memory: its results file is not rewritten)."""
    run.findings = findings(run)
    return run
