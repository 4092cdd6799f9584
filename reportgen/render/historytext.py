"""The history's words (``reportgen.history``), one home for the terminal (``history
show``/``check``) and the history report (``historypage``): each run's line, a series' rows,
its breaks and change points, the gate."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence

from reportgen.analysis.search import interval as t_interval
from reportgen.history import series
from reportgen.history.changes import Change, Gate
from reportgen.history.record import RunRecord
from reportgen.metrics import REGISTRY
from reportgen.render.fmt import fmt_num

SUSPECTS_SHOWN = 4  # per change point on the terminal; the report lists them all


def metric_label(metric: str) -> str:
    known = REGISTRY.get(metric)
    return known.labelled(unit=True) if known else metric


def heading(runs: Sequence[RunRecord], by: str) -> str:
    newest = runs[-1]
    return (
        f"{newest.title or newest.campaign}: {len(runs)} run(s), ordered by "
        f"{'time' if by == 'time' else 'version'}; objective {metric_label(newest.metric)}"
    )


def run_name(r: RunRecord) -> str:
    """``20261206T1026Z-35b790 (sglang 0.5.17)``: the run and its version."""
    version = series.version_of(r)
    return f"{r.run_id} ({r.engine}{' ' + version if version else ''})"


def run_lines(runs: Sequence[RunRecord]) -> list[str]:
    return [
        f"{run_name(r)}, started {r.started_at}, {r.status}"
        + (f", GPUs {r.gate.get('GPUs')}" if r.gate.get("GPUs") else "")
        for r in runs
    ]


def interval(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean of a run's repetitions and its 95% t interval (``search.interval``; NaN for one)."""
    low, high = t_interval(values) or (math.nan, math.nan)
    return statistics.fmean(values), low, high


def table(group: Sequence[series.Series], runs: Sequence[RunRecord]) -> list[list[str]]:
    """One experiment's series side by side: per run that measured any, its place, each
    level's mean with its 95% interval (and repetitions), and where the series breaks or
    changes there."""
    exp = group[0].experiment
    measured = sorted({i for s in group for i in s.runs})
    breaks = {b.at for s in group for b in s.breaks}
    cps = {c.at: c for s in group for c in s.changes}
    out = []
    prev: int | None = None
    for i in measured:
        row = [str(i + 1)]
        for s in group:
            if i not in s.values:
                row.append("–")
                continue
            m, low, high = interval(s.values[i])
            ci = "" if math.isnan(low) else f" ({fmt_num(low)}-{fmt_num(high)})"
            row.append(f"{fmt_num(m)}{ci} n={len(s.values[i])}")
        note = []
        if prev is not None and i in breaks:
            moved = series.incomparable(runs[prev], runs[i], exp)
            note.append("break: " + ", ".join(dict.fromkeys(f.area for f in moved)))
        elif i in cps:
            note.append(f"{direction(cps[i].change, group[0].higher_is_better)} "
                        f"{change_said(cps[i].change)}")  # fmt: skip
        row.append(" | ".join(note))
        out.append(row)
        prev = i
    return out


def areas(fields: Sequence[series.Field], shown: int = 2) -> str:
    """``GPUs: 1 x H200 -> 1 x H100; workload (4 fields: input_tokens 256 -> 128, ...)``:
    differences grouped by area, a lone one said whole, a few of each group shown."""
    groups: dict[str, list[series.Field]] = {}
    seen = set()
    for f in fields:
        # the same difference in every experiment said once, without the experiment
        key = re.sub(r"\[[^\]]*\]", "", f.key)
        if (key, f.before, f.after) in seen:
            continue
        seen.add((key, f.before, f.after))
        groups.setdefault(f.area, []).append(series.Field(key, f.before, f.after))
    parts = []
    for area, group in groups.items():
        if len(group) == 1:
            parts.append(group[0].said())
            continue
        head = "; ".join(f.said() for f in group[:shown])
        more = f"; +{len(group) - shown} more" if len(group) > shown else ""
        parts.append(f"{area} ({len(group)} fields: {head}{more})")
    return "; ".join(parts)


def between(runs: Sequence[RunRecord]) -> list[str]:
    """Per run after the first: what differs from the run before, what makes them
    incomparable first."""
    out = []
    for i in range(1, len(runs)):
        gate = series.incomparable(runs[i - 1], runs[i])
        rest = series.suspects(runs[i - 1], runs[i])
        said = []
        if gate:
            said.append(f"NOT COMPARABLE: {areas(gate)}")
        if rest:
            said.append(areas(rest))
        out.append(f"{i} -> {i + 1}: " + (" | ".join(said) or "nothing recorded differs"))
    return out


def too_few(group: Sequence[series.Series]) -> str | None:
    """Where no series of an experiment has three comparable runs, why no change point is
    looked for; None otherwise."""
    longest = max((len(st) for s in group for st in s.stretches()), default=0)
    if longest >= 3:
        return None
    return (
        f"{group[0].experiment}: {longest} comparable run(s) in a row; a change point needs "
        "three at least (history check compares the newest with the runs before it)"
    )


def by_experiment(found: Sequence[series.Series]) -> list[list[series.Series]]:
    groups: dict[str, list[series.Series]] = {}
    for s in found:
        groups.setdefault(s.experiment, []).append(s)
    return list(groups.values())


def change_said(c: Change) -> str:
    """``x0.86 (95% CI 0.83-0.89)``: the change's size, after / before."""
    return f"x{c.ratio:.3f} (95% CI {c.ci_low:.3f}-{c.ci_high:.3f})"


def direction(c: Change, higher_is_better: bool) -> str:
    better = (c.ratio > 1) == higher_is_better
    return "improvement" if better else "regression"


def findings(s: series.Series, runs: Sequence[RunRecord]) -> list[str]:
    """The series' change points in words, each with every suspect (breaks are said once
    for the whole history: ``between``)."""
    out = []
    for cp in s.changes:
        c = cp.change
        who = "; ".join(f.said() for f in cp.suspects) or "nothing recorded differs"
        out.append(
            f"{s.label}: {direction(c, s.higher_is_better)} at run {c.at + 1} "
            f"({runs[c.at].run_id}): {change_said(c)} against the {c.n_before} run(s) "
            f"before; p = {c.p_value:.2g} over {c.splits} splits; suspects: {who}"
        )
    if not s.changes and max((len(st) for st in s.stretches()), default=0) >= 3:
        out.append(
            f"{s.label}: no change point (Student's t either side of each split, "
            "Bonferroni over the splits: a 5% false-alarm rate)"
        )
    return out


def gate_heading(runs: Sequence[RunRecord], threshold: float) -> str:
    newest = runs[-1]
    return (
        f"newest run {run_name(newest)} against the runs before it since the last change "
        f"point; regression threshold {threshold:.0%}:"
    )


def gate_said(g: Gate) -> str:
    if g.ratio is None:
        return f"{g.answer}: {g.why}"
    size = f"x{g.ratio:.3f} (95% CI {g.ci_low:.3f}-{g.ci_high:.3f}) against {g.n_before} run(s)"
    if g.answer != "cannot tell":
        alone = " (one earlier run: the interval knows only the runs' own repetitions)"
        return f"{g.answer}: {size}" + (alone if g.n_before == 1 else "")
    return f"cannot tell: {size}; {g.why}"


def gate_line(v: series.Verdict) -> str:
    return f"{v.series.label}: {gate_said(v.gate)}"


def gate_lines(verdicts: Sequence[series.Verdict]) -> list[dict[str, str]]:
    """Each series' answer (``answer``, ``said``), those with nothing to be judged against
    said once."""
    alone = [v for v in verdicts if v.gate.ratio is None]
    out = [
        {"answer": v.gate.answer, "said": gate_line(v)}
        for v in verdicts
        if v.gate.ratio is not None
    ]
    if alone:
        why = "; ".join(dict.fromkeys(v.gate.why for v in alone))
        where = (
            ", ".join(v.series.label for v in alone)
            if len(alone) < len(verdicts)
            else "every series"
        )
        out.append({"answer": "cannot tell", "said": f"{where}: cannot tell: {why}"})
    return out
