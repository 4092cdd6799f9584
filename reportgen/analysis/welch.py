"""Comparisons by each comparison's own two sides only (``Comparison.method`` "welch"):
Welch's t on the log values of two experiments' repetitions (``compare_runs``), a one-sample t
on paired log ratios (``compare_pairs``), and both over two experiments' levels
(``compare_experiments``). How results were decided before the run's noise model; ``verify``
recomputes such runs this way. The verdict rules are ``analysis.decide``'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from reportgen.analysis import decide
from reportgen.analysis.summary import compared_value
from reportgen.results.levels import Level
from reportgen.results.model import Point
from reportgen.results.verdicts import Comparison


def compare_runs(
    parent: Sequence[float],
    child: Sequence[float],
    *,
    margin: float,
    higher_is_better: bool,
    metric: str = "",
    level: Point = decide.NO_LEVEL,
    confidence: float = 0.95,
) -> Comparison:
    """Ratio child/parent with a Welch confidence interval on log values, and a verdict."""
    p = np.log(np.asarray([v for v in parent if v and v > 0], dtype=float))
    c = np.log(np.asarray([v for v in child if v and v > 0], dtype=float))
    if p.size == 0 or c.size == 0:
        return decide.no_data(metric, level, int(p.size), int(c.size))
    diff = float(c.mean() - p.mean())
    se = dof = None
    if p.size >= 2 and c.size >= 2:
        vp, vc = p.var(ddof=1) / p.size, c.var(ddof=1) / c.size
        se = math.sqrt(vp + vc)
        if se > 0:
            dof = (vp + vc) ** 2 / (vp**2 / (p.size - 1) + vc**2 / (c.size - 1))
    # per-run sd of log values, pooled: what more repetitions would average down
    sd = math.sqrt((p.var(ddof=1) + c.var(ddof=1)) / 2) if se else 0.0
    return decide.judge(
        diff,
        se,
        dof,
        (int(p.size), int(c.size)),
        lambda: _reps_needed(abs(diff), sd, math.log1p(margin), confidence),
        margin=margin,
        higher_is_better=higher_is_better,
        metric=metric,
        level=level,
        confidence=confidence,
    )


def compare_pairs(
    pairs: Sequence[tuple[float, float]],
    *,
    margin: float,
    higher_is_better: bool,
    metric: str = "",
    level: Point = decide.NO_LEVEL,
    confidence: float = 0.95,
) -> Comparison:
    """Paired ratio: each (parent, child) pair ran next to each other in time. The estimate
    is the geometric mean of the pairs' ratios; its interval a one-sample t interval on the
    log ratios."""
    from scipy import stats

    d = np.asarray(
        [math.log(c) - math.log(p) for p, c in pairs if p and c and p > 0 and c > 0], dtype=float
    )
    n = int(d.size)
    if n == 0:
        return decide.no_data(metric, level, 0, 0, paired=True)
    mean = float(d.mean())
    sd = float(d.std(ddof=1)) if n >= 2 else 0.0
    gap = abs(abs(mean) - math.log1p(margin))

    def reps() -> int | None:
        t = stats.t.ppf
        fits = (k for k in range(2, 10_000) if t(0.5 + confidence / 2, k - 1) * sd / k**0.5 < gap)
        return next(fits, None)

    return decide.judge(
        mean,
        sd / math.sqrt(n) if n >= 2 else None,
        float(n - 1) if n >= 2 else None,
        (n, n),
        reps,
        margin=margin,
        higher_is_better=higher_is_better,
        metric=metric,
        level=level,
        confidence=confidence,
        paired=True,
    )


def _reps_needed(effect: float, sd: float, margin: float, confidence: float) -> int | None:
    """Repetitions per side for the interval's half-width (t x sd x sqrt(2/n)) to fit in the
    gap between |log ratio| and log(1 + margin); None when there is no gap."""
    from scipy import special

    gap = abs(effect - margin)
    if gap <= 0 or sd <= 0:
        return None
    n = np.arange(2, 10_000)
    half = special.stdtrit(2 * n - 2, 0.5 + confidence / 2) * sd * np.sqrt(2 / n)
    return decide.first_true(n, half < gap)


def values_by_level(levels: Sequence[Level], metric: str) -> dict[Point, list[float]]:
    """Per level, the metric's value in each repetition (p50 for latencies)."""
    out: dict[Point, list[float]] = {}
    for (c, _), v in _by_run(levels, metric).items():
        out.setdefault(c, []).append(v)
    return out


def _by_run(levels: Sequence[Level], metric: str) -> dict[tuple[Point, int], float]:
    """The metric (p50 for latencies) of each (level, repetition) run, in run order."""
    out: dict[tuple[Point, int], float] = {}
    for lv in levels:
        v = compared_value(lv.summary, metric, "p50")
        if v is not None and math.isfinite(v):
            out[lv.key] = v
    return out


def compare_experiments(
    parent_levels: Sequence[Level],
    child_levels: Sequence[Level],
    metric: str,
    *,
    margin: float,
    higher_is_better: bool,
    levels: Sequence[Point] | None = None,
    paired: bool = False,
) -> list[Comparison]:
    """Compare two experiments' level runs at their common (or the given) levels; with
    ``paired``, repetition k of one with repetition k of the other (interleaved runs)."""
    p, c = values_by_level(parent_levels, metric), values_by_level(child_levels, metric)
    wanted = decide.common_levels(set(p), set(c), levels)
    none = _no_goodput(metric, [*parent_levels, *child_levels], wanted)
    pr, cr = (_by_run(parent_levels, metric), _by_run(child_levels, metric)) if paired else ({}, {})

    def one(x: Point) -> Comparison:
        if x in none:
            return decide.none_met(metric, x, len(p[x]), len(c[x]))
        if paired:
            pairs = [(pr[k], cr[k]) for k in pr if k in cr and k[0] == x]
            return compare_pairs(
                pairs, margin=margin, higher_is_better=higher_is_better, metric=metric, level=x
            )
        return compare_runs(
            p[x], c[x], margin=margin, higher_is_better=higher_is_better, metric=metric, level=x
        )

    return [one(x) for x in wanted]


def _no_goodput(metric: str, levels: Sequence[Level], wanted: Sequence[Point]) -> set[Point]:
    """The levels where no run of either side had a request meeting the SLO (goodput)."""
    if metric != "goodput_req_s":
        return set()
    return {
        x
        for x in wanted
        if all(lv.summary.value(metric) == 0 for lv in levels
               if lv.point == x and lv.summary.value(metric) is not None)
    }  # fmt: skip
