"""Tail latencies compared from the requests themselves: p99 of TTFT and end-to-end latency,
child over parent at every common level, with a two-level bootstrap interval (the runs, then
the requests within each run), judged by the same rules as every other comparison. A side with
fewer than ``TAIL_MIN`` requests above the percentile gets no interval; by the "anchored"
method it is still decided where every run's percentile of one side lies beyond every run's of
the other and that order is rare enough by chance (``ordered``), and otherwise says how many
requests a side would give an interval."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from reportgen import metrics
from reportgen.analysis import bootstrap
from reportgen.analysis.decide import judge_interval
from reportgen.load.records import RequestRecord
from reportgen.results.model import Point, point_of, sorted_points
from reportgen.results.verdicts import Comparison, Verdict

TAIL_MIN = 20  # requests above a percentile, a side, for an interval on it
TOO_FEW = "too few above"  # ``Comparison.limit``: fewer than TAIL_MIN above it
ORDERED = "every run beyond"  # ``Comparison.limit``: decided by the runs' order, no interval


def requests_for(q: float) -> int:
    """Requests a side for ``TAIL_MIN`` of them above the ``q``th percentile (2,000 at p99)."""
    return math.ceil(TAIL_MIN / (1 - q / 100) - 1e-9)


def order_p(n_parent: int, n_child: int) -> float:
    """The chance that every run of one side lies beyond every run of the other (either way)
    when both sides' runs are draws of one law: 2 / C(n_parent + n_child, n_child)."""
    return min(1.0, 2 / math.comb(n_parent + n_child, n_child))


def runs_for_order(alpha: float, n_parent: int) -> int | None:
    """The fewest runs of the child (beside ``n_parent`` of the parent's) whose complete order
    could be told from chance at ``alpha``; None beyond 64."""
    return next((n for n in range(1, 65) if order_p(n_parent, n) <= alpha), None)


def ordered(
    c: Comparison,
    parent: Sequence[float],
    child: Sequence[float],
    *,
    alpha: float,
    margin: float,
    q: float = 99,
) -> Comparison:
    """A tail comparison with too few requests above the percentile for an interval
    (``too_few_above``), decided by the order of its runs where that can tell: worse (or
    better) where every child run's percentile (``child``, ms) lies above (below) every parent
    run's, the chance of that order when nothing changed (``order_p``, exact whatever the
    latencies' law) is at most ``alpha``, and the ratio of the runs' geometric means is beyond
    the margin. Otherwise it stays inconclusive, saying the requests a side an interval needs
    (``requests_for``) and the child's runs an order test would (``runs_for_order``)."""
    few = too_few_above(c).model_copy(
        update={
            "requests_needed": requests_for(q),
            "runs_needed": runs_for_order(alpha, len(parent)),
        }
    )
    if not parent or not child or c.ratio is None:
        return few
    above, below = min(child) > max(parent), max(child) < min(parent)
    p = order_p(len(parent), len(child))
    if not (above or below) or p > alpha:
        return few
    verdict = judge_interval(c.ratio, c.ratio, c.ratio, margin, higher_is_better=False)
    if verdict not in ("better", "worse"):
        return few
    return few.model_copy(
        update={"verdict": verdict, "limit": ORDERED, "order_p": p, "runs_needed": None}
    )


def too_few_above(c: Comparison) -> Comparison:
    """A tail comparison without its interval: a side has fewer than ``TAIL_MIN`` requests
    above the percentile, too few for its spread to say anything."""
    return c.model_copy(
        update={
            "ci_low": None,
            "ci_high": None,
            "verdict": "inconclusive",
            "mde": None,
            "reps_needed": None,
            "bound": None,
            "dof": None,
            "limit": TOO_FEW,
        }
    )


def bootstrap_ratio(
    parent_runs: Sequence[Sequence[float]],
    child_runs: Sequence[Sequence[float]],
    q: float = 99,
    *,
    resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float | None, float | None, float | None]:
    """The ratio of the ``q``th percentile of the child's pooled requests to the parent's,
    with a two-level bootstrap interval (runs, then requests within each run). Each side is
    a list of runs, each a list of per-request values. Returns (ratio, low, high); None
    where a side has no data."""
    p = [np.asarray(r, dtype=float) for r in parent_runs if len(r)]
    c = [np.asarray(r, dtype=float) for r in child_runs if len(r)]
    if not p or not c:
        return None, None, None

    ratio = bootstrap.percentile(np.concatenate(c), q) / bootstrap.percentile(np.concatenate(p), q)
    draws = bootstrap.ratio(p, c, q, resamples, seed)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(draws, [tail, 100 - tail])
    return ratio, float(lo), float(hi)


def request_latencies(
    rows: Sequence[RequestRecord],
) -> dict[str, dict[Point, list[list[float]]]]:
    """Per latency metric and level, each run's per-request values in ms (successful
    requests): ``{"ttft_ms": {level: [[run 1 values], [run 2 values]]}, "e2e_ms": ...}``."""
    runs: dict[tuple[str, Point, int], list[float]] = {}
    for r in rows:
        start, first, end = _time(r.start), _time(r.first_token), _time(r.end)
        if r.status != "ok" or start is None:
            continue
        key_c, key_r = point_of(r), r.repetition
        if first is not None:  # none where no text was streamed
            runs.setdefault(("ttft_ms", key_c, key_r), []).append((first - start) * 1e3)
        if end is not None:
            runs.setdefault(("e2e_ms", key_c, key_r), []).append((end - start) * 1e3)
    out: dict[str, dict[Point, list[list[float]]]] = {}
    for (metric, c, _), values in sorted(
        runs.items(), key=lambda x: (x[0][0], x[0][1].order, x[0][2])
    ):
        out.setdefault(metric, {}).setdefault(c, []).append(values)
    return out


def _time(value: float | None) -> float | None:
    """A timestamp of a request record, None when absent (None, or NaN from a table)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def tail_comparisons(
    parent_rows: Sequence[RequestRecord],
    child_rows: Sequence[RequestRecord],
    *,
    margin: float,
    q: float = 99,
    seed: int = 0,
) -> list[Comparison]:
    """p``q`` of TTFT and end-to-end latency, child / parent, at every common level, with the
    two-level bootstrap interval (``bootstrap_ratio``); the verdict rules are the same."""
    p, c = request_latencies(parent_rows), request_latencies(child_rows)
    out = []
    for metric in metrics.TAILS:
        for level in sorted_points(set(p.get(metric, {})) & set(c.get(metric, {}))):
            pr, cr = p[metric][level], c[metric][level]
            ratio, lo, hi = bootstrap_ratio(pr, cr, q, seed=seed)
            verdict: Verdict = (
                "inconclusive"
                if ratio is None
                else judge_interval(ratio, lo, hi, margin, higher_is_better=False)
            )
            out.append(
                Comparison(
                    metric=f"{metric}_p{q:g}",
                    concurrency=level.concurrency,
                    rate=level.rate,
                    ratio=ratio,
                    ci_low=lo,
                    ci_high=hi,
                    n_parent=len(pr),
                    n_child=len(cr),
                    verdict=verdict,
                )
            )
    return out
