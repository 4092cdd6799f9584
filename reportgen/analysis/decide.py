"""Comparisons and decisions: is an experiment better than its parent, and by how much?

The unit of replication is one repetition's summary at a level. For throughputs the number is
the level's tok/s; for latencies its p50. The ratio child/parent gets a 95% confidence interval
from Welch's t on the log values (so the interval is multiplicative and asymmetric). Verdicts
against the campaign's margin m:

- ``equivalent``: the whole interval lies inside [1/(1+m), 1+m];
- ``better`` / ``worse``: the interval excludes 1 and the estimate is beyond the margin, in the
  good / bad direction for the metric;
- ``inconclusive``: anything else (too few repetitions or too much noise to tell).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
from scipy import stats

Verdict = Literal["better", "worse", "equivalent", "inconclusive"]


@dataclass(frozen=True)
class Comparison:
    metric: str
    concurrency: int
    ratio: float | None  # child / parent of the means (geometric)
    ci_low: float | None
    ci_high: float | None
    n_parent: int
    n_child: int
    verdict: Verdict

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def compare_runs(
    parent: Sequence[float],
    child: Sequence[float],
    *,
    margin: float,
    higher_is_better: bool,
    metric: str = "",
    concurrency: int = 0,
    confidence: float = 0.95,
) -> Comparison:
    """Ratio child/parent with a Welch confidence interval on log values, and a verdict."""
    p = np.log(np.asarray([v for v in parent if v and v > 0], dtype=float))
    c = np.log(np.asarray([v for v in child if v and v > 0], dtype=float))
    if p.size == 0 or c.size == 0:
        return Comparison(
            metric, concurrency, None, None, None, int(p.size), int(c.size), "inconclusive"
        )
    diff = float(c.mean() - p.mean())
    ratio = math.exp(diff)
    lo = hi = None
    if p.size >= 2 and c.size >= 2:
        vp, vc = p.var(ddof=1) / p.size, c.var(ddof=1) / c.size
        se = math.sqrt(vp + vc)
        if se == 0:
            lo = hi = ratio
        else:
            dof = (vp + vc) ** 2 / (vp**2 / (p.size - 1) + vc**2 / (c.size - 1))
            t = float(stats.t.ppf(0.5 + confidence / 2, dof))
            lo, hi = math.exp(diff - t * se), math.exp(diff + t * se)
    verdict = _verdict(ratio, lo, hi, margin, higher_is_better)
    return Comparison(metric, concurrency, ratio, lo, hi, int(p.size), int(c.size), verdict)


def _verdict(
    ratio: float, lo: float | None, hi: float | None, margin: float, higher_is_better: bool
) -> Verdict:
    if lo is None or hi is None:
        return "inconclusive"
    upper, lower = 1 + margin, 1 / (1 + margin)
    if lower <= lo and hi <= upper:
        return "equivalent"
    if lo > 1 and ratio > upper:
        return "better" if higher_is_better else "worse"
    if hi < 1 and ratio < lower:
        return "worse" if higher_is_better else "better"
    return "inconclusive"


@dataclass
class Decision:
    """What the campaign concluded about one experiment against its parent."""

    verdict: str  # adopted | rejected | equivalent | inconclusive | failed | baseline
    explanation: str
    vs_parent: list[Comparison] = field(default_factory=list)
    vs_baseline: list[Comparison] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "explanation": self.explanation,
            "vs_parent": [c.as_dict() for c in self.vs_parent],
            "vs_baseline": [c.as_dict() for c in self.vs_baseline],
        }


def runs_by_level(levels: Sequence[Mapping[str, Any]], metric: str) -> dict[int, list[float]]:
    """Per concurrency level, the metric's value in each repetition (p50 for latencies)."""
    from reportgen.analysis.summary import metric_value

    out: dict[int, list[float]] = {}
    for lv in levels:
        v = metric_value(lv["summary"], metric, "p50")
        if v is not None and math.isfinite(v):
            out.setdefault(int(lv["concurrency"]), []).append(v)
    return out


def compare_experiments(
    parent_levels: Sequence[Mapping[str, Any]],
    child_levels: Sequence[Mapping[str, Any]],
    metric: str,
    *,
    margin: float,
    higher_is_better: bool,
    concurrency: Sequence[int] | None = None,
) -> list[Comparison]:
    """Compare two experiments' level runs at their common (or the given) levels."""
    p, c = runs_by_level(parent_levels, metric), runs_by_level(child_levels, metric)
    wanted = (
        sorted(set(p) & set(c))
        if not concurrency
        else [x for x in concurrency if x in p and x in c]
    )
    return [
        compare_runs(
            p[x],
            c[x],
            margin=margin,
            higher_is_better=higher_is_better,
            metric=metric,
            concurrency=x,
        )
        for x in wanted
    ]


def _fmt(c: Comparison) -> str:
    if c.ratio is None:
        return f"C={c.concurrency}: no data"
    ci = "" if c.ci_low is None else f" (95% CI {c.ci_low:.2f}-{c.ci_high:.2f})"
    return f"C={c.concurrency}: x{c.ratio:.2f}{ci}, {c.verdict}"


def decide(
    exp_id: str,
    parent_id: str,
    comparisons: Sequence[Comparison],
    metric: str,
    margin: float,
) -> tuple[str, str]:
    """Adopt when better at some objective level and worse at none. Returns (verdict, why)."""
    if not comparisons:
        return "inconclusive", (
            f"{exp_id} shares no objective concurrency level with {parent_id}; nothing to compare."
        )
    verdicts = [c.verdict for c in comparisons]
    detail = "; ".join(_fmt(c) for c in comparisons)
    head = f"{metric} vs {parent_id}: {detail}."
    if "worse" in verdicts:
        levels = ", ".join(f"C={c.concurrency}" for c in comparisons if c.verdict == "worse")
        return (
            "rejected",
            f"{head} Worse at {levels}, so {parent_id} stays the configuration to build on.",
        )
    if "better" in verdicts:
        return (
            "adopted",
            f"{head} Better beyond the {margin:.0%} margin and worse nowhere: "
            f'later experiments based on "best" build on {exp_id}.',
        )
    if all(v == "equivalent" for v in verdicts):
        return (
            "equivalent",
            f"{head} Within the {margin:.0%} margin everywhere: no gain, so "
            f"{parent_id} (the simpler configuration) is kept.",
        )
    missing = [c for c in comparisons if c.ci_low is None]
    more = (
        " Only one repetition per level: raise workload.repetitions to at least 2 for an interval."
        if missing
        else " More repetitions would narrow the interval."
    )
    return "inconclusive", f"{head} The noise is too large to tell.{more}"
