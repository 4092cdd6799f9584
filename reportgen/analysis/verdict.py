"""The verdict on one experiment, and which configuration is best so far.

Pure: a run's results and the request rows of the tables compared in, a ``Decision`` out. The
runner calls it after each experiment; ``reportgen verify`` calls it again on the numbers it
recomputed from the raw tables, so the two can never disagree on how a verdict is reached.

- ``failed``: the experiment did not run to its end, or an assumption check that invalidates
  its numbers failed (``checks.invalidated``);
- ``baseline``: the first experiment, the reference of every other;
- otherwise the objective against the parent (its interleaved runs where there are some,
  compared pair by pair), ``decide.decide``: adopted, rejected, equivalent or inconclusive;
  and every headline metric against the parent and the baseline (``decide``'s run-level
  comparisons for throughputs and medians, the two-level bootstrap for p99).

The best configuration is the adopted one with the highest objective score against the
baseline: the geometric mean of its ratios at the objective's levels (inverted when lower is
better).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reportgen.analysis import decide
from reportgen.analysis.checks import invalidated
from reportgen.load.records import RequestRecord
from reportgen.results.model import Comparison, Decision, Experiment, Level, Run

Rows = Mapping[str, Sequence[RequestRecord]]  # a request table's name -> its rows


@dataclass(frozen=True)
class Side:
    """What an experiment is compared with: its levels, the request table they came from,
    and whether the two ran pair by pair (interleaved)."""

    id: str
    ok: bool
    levels: Sequence[Level]
    table: str
    paired: bool = False


def sides(run: Run, entry: Experiment) -> tuple[Side | None, Side | None]:
    """The parent's side (its interleaved runs where they succeeded, else its own) and the
    baseline's; None where there is none."""
    base, parent = run.baseline, run.experiment(entry.parent)
    control = entry.control
    paired = bool(control and control.levels) and not (control and control.error)
    parent_side: Side | None = None
    if paired and control is not None:
        parent_side = Side(control.of, True, control.levels, entry.control_table, paired=True)
    elif parent is not None:
        parent_side = Side(parent.id, parent.ok, parent.levels, parent.table)
    base_side = None if base is None else Side(base.id, base.ok, base.levels, base.table)
    return parent_side, base_side


def decide_experiment(run: Run, entry: Experiment, rows: Rows) -> Decision:
    """The decision on ``entry`` (an experiment of ``run`` whose checks are done), from its
    levels, its parent's and the baseline's, and the request rows of their tables."""
    broken = invalidated(entry.checks, evidence=True)
    if entry.ok and broken:
        return Decision(
            verdict="failed",
            explanation=f"{entry.id}'s numbers cannot be trusted, whatever they say: failed "
            + "; ".join(broken)
            + ". See the assumptions checked.",
        )
    if not entry.ok:
        return Decision(verdict="failed", explanation=f"{entry.id} failed: {entry.reason}")
    if run.baseline is None or entry.id == run.baseline.id:
        return Decision(
            verdict="baseline", explanation="The reference every other experiment is compared with."
        )
    parent_side, base_side = sides(run, entry)
    parent_id = entry.parent or (parent_side.id if parent_side else "")

    def objective(side: Side | None) -> list[Comparison]:
        if side is None or not side.ok:
            return []
        return decide.compare_experiments(
            side.levels,
            entry.levels,
            run.metric,
            margin=run.margin,
            higher_is_better=run.higher_is_better,
            concurrency=run.objective_levels,
            paired=side.paired,
        )

    vs_parent, vs_base = objective(parent_side), objective(base_side)
    paired = bool(parent_side and parent_side.paired)
    if parent_side is None or not parent_side.ok:
        verdict: decide.ObjectiveVerdict = "inconclusive"
        why = f"its parent {parent_id} failed, so there is nothing to compare with."
    else:
        verdict, why = decide.decide(entry.id, parent_id, vs_parent, run.metric, run.margin)
        why = decide.what_changed(parent_id, entry.flag_diff) + why
        if paired:
            why += (
                f" Compared pair by pair with {parent_id}'s configuration run "
                "alternately with it (interleaved)."
            )
        elif entry.control is not None and entry.control.error:
            why += (
                f" The interleaved runs of {parent_id} failed ({entry.control.error}), "
                "so its earlier runs were used."
            )
    return Decision(
        verdict=verdict,
        explanation=why,
        vs_parent=vs_parent,
        vs_baseline=vs_base,
        paired=paired,
        metrics=every_metric(
            run, entry, rows, [("vs_parent", parent_side), ("vs_baseline", base_side)]
        ),
    )


def every_metric(
    run: Run, entry: Experiment, rows: Rows, against: Sequence[tuple[str, Side | None]]
) -> dict[str, list[Comparison]]:
    """Every headline metric against each side, at every common level: run-level
    comparisons for throughputs and medians, the two-level bootstrap for p99."""
    out: dict[str, list[Comparison]] = {}
    done: dict[tuple[str, bool], list[Comparison]] = {}  # the parent is often the baseline
    mine = rows.get(entry.table, ())
    for name, side in against:
        if side is None or not side.ok:
            continue
        key = (side.table, side.paired)
        if key not in done:
            found = decide.headline_comparisons(
                side.levels, entry.levels, margin=run.margin, paired=side.paired
            )
            found += decide.tail_comparisons(rows.get(side.table, ()), mine, margin=run.margin)
            done[key] = found
        out[name] = done[key]
    return out


def score(run: Run, entry: Experiment) -> float:
    """The objective score against the baseline (0 for the baseline itself, -inf without
    a ratio): the mean log ratio, its sign turned when lower is better."""
    if run.baseline is not None and entry.id == run.baseline.id:
        return 0.0
    decision = entry.decision
    ratios = [c.ratio for c in (decision.vs_baseline if decision else []) if c.ratio]
    if not ratios:
        return -math.inf
    s = sum(math.log(x) for x in ratios) / len(ratios)
    return s if run.higher_is_better else -s


def best_after(run: Run, entry: Experiment) -> str | None:
    """Which experiment is best once ``entry`` is decided: the baseline to begin with, then
    an adopted experiment whose score beats the best so far."""
    decision = entry.decision
    if decision is None:
        return run.best
    if decision.verdict == "baseline":
        return entry.id
    if decision.verdict != "adopted":
        return run.best
    current = run.experiment(run.best)
    if current is None or score(run, entry) > score(run, current):
        return entry.id
    return run.best
