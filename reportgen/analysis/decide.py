"""Comparisons and decisions: is an experiment better than its parent, and by how much?

The unit of replication is one repetition's summary at a level. For throughputs the number is
the level's tok/s; for latencies its p50. The ratio child/parent gets a 95% confidence interval
from Welch's t on the log values (so the interval is multiplicative and asymmetric). Verdicts
against the campaign's margin m:

- ``equivalent``: the whole interval lies inside [1/(1+m), 1+m];
- ``better`` / ``worse``: the interval excludes 1 and the estimate is beyond the margin, in the
  good / bad direction for the metric;
- ``inconclusive``: anything else (too few repetitions or too much noise to tell).

With each comparison come two numbers that say what the noise allowed:

- ``mde``: the smallest effect this comparison could detect, as a ratio: a true change
  beyond x``mde`` (or below 1/``mde``) would make the 95% interval exclude 1 four times in
  five (80% power): exp((t_0.975 + t_0.8) x the standard error of the log ratio).
- ``reps_needed``: for an inconclusive comparison, about how many repetitions per side would
  decide it with the same noise: enough for the interval's half-width to fit between the
  estimate and the margin (to show a change), or between the estimate and the margin's edge
  (to show equivalence), whichever is nearer; None when the estimate sits on the margin.

With ``campaign.interleave``, an experiment's repetitions alternate with fresh runs of its
parent, and the comparison with the parent is paired (``compare_pairs``): the ratio of each
repetition to its neighbour in time, with a t interval on the mean of those log ratios
(n - 1 degrees of freedom), so drift of the host between them cancels out.

Tail latencies (p99) compare the pooled requests of each side with a two-level bootstrap
(``bootstrap_ratio``): resample the runs, then the requests within each run, and take the
2.5th and 97.5th percentiles of the ratio, so run-to-run noise counts as well as request
noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
from scipy import stats

from reportgen.load.records import RequestRecord
from reportgen.results.model import Comparison, FlagChange, Level, Verdict

ObjectiveVerdict = Literal["adopted", "rejected", "equivalent", "inconclusive"]


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
        return _no_data(metric, concurrency, int(p.size), int(c.size))
    diff = float(c.mean() - p.mean())
    se = dof = None
    if p.size >= 2 and c.size >= 2:
        vp, vc = p.var(ddof=1) / p.size, c.var(ddof=1) / c.size
        se = math.sqrt(vp + vc)
        if se > 0:
            dof = (vp + vc) ** 2 / (vp**2 / (p.size - 1) + vc**2 / (c.size - 1))
    # per-run sd of log values, pooled: what more repetitions would average down
    sd = math.sqrt((p.var(ddof=1) + c.var(ddof=1)) / 2) if se else 0.0
    return _judge(
        diff,
        se,
        dof,
        (int(p.size), int(c.size)),
        lambda: _reps_needed(abs(diff), sd, math.log1p(margin), confidence),
        margin=margin,
        higher_is_better=higher_is_better,
        metric=metric,
        concurrency=concurrency,
        confidence=confidence,
    )


POWER = 0.8


def _judge(
    diff: float,
    se: float | None,
    dof: float | None,
    n: tuple[int, int],
    reps: Callable[[], int | None],
    *,
    margin: float,
    higher_is_better: bool,
    metric: str,
    concurrency: int,
    confidence: float,
    paired: bool = False,
) -> Comparison:
    """A comparison from the mean log ratio ``diff`` and its standard error (None: too few
    runs for one): the interval, the smallest detectable change, the verdict, and for an
    inconclusive one the repetitions that would decide it (``reps``)."""
    ratio = math.exp(diff)
    lo = hi = mde = None
    needed: int | None = None
    if se is not None and (se == 0 or dof is None):
        lo = hi = ratio
        mde = 1.0
    elif se is not None and dof is not None:
        t = float(stats.t.ppf(0.5 + confidence / 2, dof))
        lo, hi = math.exp(diff - t * se), math.exp(diff + t * se)
        mde = math.exp((t + float(stats.t.ppf(POWER, dof))) * se)
        needed = reps()
    verdict = _verdict(ratio, lo, hi, margin, higher_is_better)
    return Comparison(
        metric=metric,
        concurrency=concurrency,
        ratio=ratio,
        ci_low=lo,
        ci_high=hi,
        n_parent=n[0],
        n_child=n[1],
        verdict=verdict,
        mde=mde,
        reps_needed=needed if verdict == "inconclusive" else None,
        paired=paired,
    )


def _no_data(
    metric: str, concurrency: int, n_parent: int, n_child: int, paired: bool = False
) -> Comparison:
    return Comparison(
        metric=metric,
        concurrency=concurrency,
        ratio=None,
        ci_low=None,
        ci_high=None,
        n_parent=n_parent,
        n_child=n_child,
        verdict="inconclusive",
        paired=paired,
    )


def compare_pairs(
    pairs: Sequence[tuple[float, float]],
    *,
    margin: float,
    higher_is_better: bool,
    metric: str = "",
    concurrency: int = 0,
    confidence: float = 0.95,
) -> Comparison:
    """Paired ratio: each (parent, child) pair ran next to each other in time. The estimate
    is the geometric mean of the pairs' ratios; its interval a one-sample t interval on the
    log ratios."""
    d = np.asarray(
        [math.log(c) - math.log(p) for p, c in pairs if p and c and p > 0 and c > 0], dtype=float
    )
    n = int(d.size)
    if n == 0:
        return _no_data(metric, concurrency, 0, 0, paired=True)
    mean = float(d.mean())
    sd = float(d.std(ddof=1)) if n >= 2 else 0.0
    gap = abs(abs(mean) - math.log1p(margin))

    def reps() -> int | None:
        t = stats.t.ppf
        fits = (k for k in range(2, 10_000) if t(0.5 + confidence / 2, k - 1) * sd / k**0.5 < gap)
        return next(fits, None)

    return _judge(
        mean,
        sd / math.sqrt(n) if n >= 2 else None,
        float(n - 1) if n >= 2 else None,
        (n, n),
        reps,
        margin=margin,
        higher_is_better=higher_is_better,
        metric=metric,
        concurrency=concurrency,
        confidence=confidence,
        paired=True,
    )


def _reps_needed(effect: float, sd: float, margin: float, confidence: float) -> int | None:
    """Repetitions per side for the interval's half-width (t x sd x sqrt(2/n)) to fit in the
    gap between |log ratio| and log(1 + margin); None when there is no gap."""
    gap = abs(effect - margin)
    if gap <= 0 or sd <= 0:
        return None
    n = 2
    while n < 10_000:
        t = float(stats.t.ppf(0.5 + confidence / 2, 2 * n - 2))
        if t * sd * math.sqrt(2 / n) < gap:
            return n
        n += 1
    return None


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

    def pooled(runs: list[np.ndarray]) -> float:
        return float(np.percentile(np.concatenate(runs), q))

    ratio = pooled(c) / pooled(p)
    rng = np.random.default_rng(seed)

    def resample(runs: list[np.ndarray]) -> float:
        picked = rng.integers(0, len(runs), size=len(runs))
        values = [runs[i][rng.integers(0, len(runs[i]), size=len(runs[i]))] for i in picked]
        return pooled(values)

    draws = np.array([resample(c) / resample(p) for _ in range(resamples)])
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(draws, [tail, 100 - tail])
    return ratio, float(lo), float(hi)


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


def runs_by_level(levels: Sequence[Level], metric: str) -> dict[int, list[float]]:
    """Per concurrency level, the metric's value in each repetition (p50 for latencies)."""
    out: dict[int, list[float]] = {}
    for (c, _), v in _by_run(levels, metric).items():
        out.setdefault(c, []).append(v)
    return out


def _by_run(levels: Sequence[Level], metric: str) -> dict[tuple[int, int], float]:
    """The metric (p50 for latencies) of each (concurrency, repetition) run, in run order."""
    out: dict[tuple[int, int], float] = {}
    for lv in levels:
        v = lv.summary.value(metric, "p50")
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
    concurrency: Sequence[int] | None = None,
    paired: bool = False,
) -> list[Comparison]:
    """Compare two experiments' level runs at their common (or the given) levels; with
    ``paired``, repetition k of one with repetition k of the other (interleaved runs)."""
    p, c = runs_by_level(parent_levels, metric), runs_by_level(child_levels, metric)
    wanted = (
        sorted(set(p) & set(c))
        if not concurrency
        else [x for x in concurrency if x in p and x in c]
    )
    if paired:
        pr, cr = _by_run(parent_levels, metric), _by_run(child_levels, metric)
        return [
            compare_pairs(
                [(pr[k], cr[k]) for k in sorted(set(pr) & set(cr)) if k[0] == x],
                margin=margin,
                higher_is_better=higher_is_better,
                metric=metric,
                concurrency=x,
            )
            for x in wanted
        ]
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
    more = ""
    if c.verdict == "inconclusive" and c.reps_needed:
        more = f" (about {c.reps_needed} repetitions a side would decide)"
    return f"C={c.concurrency}: x{c.ratio:.2f}{ci}, {c.verdict}{more}"


def what_changed(parent: str, flag_diff: Sequence[FlagChange]) -> str:
    """The flag changes from the parent in a sentence (values already redacted)."""
    parts = []
    for f in flag_diff:
        if f.kind == "added":
            parts.append(f"--{f.key} {f.after} added")
        elif f.kind == "removed":
            parts.append(f"--{f.key} removed")
        else:
            parts.append(f"--{f.key} {f.before} -> {f.after}")
    what = ", ".join(parts) or "no server flag, only its environment or workload"
    return f"Changed from {parent}: {what}. "


def decide(
    exp_id: str,
    parent_id: str,
    comparisons: Sequence[Comparison],
    metric: str,
    margin: float,
) -> tuple[ObjectiveVerdict, str]:
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


# Headline metrics compared beyond the objective: (metric, higher is better). Latencies at p50
# from the runs' summaries; their p99 from the pooled requests (``tail_comparisons``).
HEADLINE = (
    ("output_tok_s", True),
    ("req_s", True),
    ("ttft_ms", False),
    ("itl_ms", False),
    ("e2e_ms", False),
)
TAILS = ("ttft_ms", "e2e_ms")


def headline_comparisons(
    parent_levels: Sequence[Level],
    child_levels: Sequence[Level],
    *,
    margin: float,
    paired: bool = False,
) -> list[Comparison]:
    """Every headline metric (p50 for latencies) at every level both experiments ran."""
    out: list[Comparison] = []
    for metric, higher in HEADLINE:
        out += compare_experiments(
            parent_levels,
            child_levels,
            metric,
            margin=margin,
            higher_is_better=higher,
            paired=paired,
        )
    return out


def request_latencies(rows: Sequence[RequestRecord]) -> dict[str, dict[int, list[list[float]]]]:
    """Per latency metric and level, each run's per-request values in ms (successful
    requests): ``{"ttft_ms": {C: [[run 1 values], [run 2 values]]}, "e2e_ms": ...}``."""
    runs: dict[tuple[str, int, int], list[float]] = {}
    for r in rows:
        start, first, end = _time(r.start), _time(r.first_token), _time(r.end)
        if r.status != "ok" or start is None:
            continue
        key_c, key_r = r.concurrency, r.repetition
        if first is not None:  # none where no text was streamed
            runs.setdefault(("ttft_ms", key_c, key_r), []).append((first - start) * 1e3)
        if end is not None:
            runs.setdefault(("e2e_ms", key_c, key_r), []).append((end - start) * 1e3)
    out: dict[str, dict[int, list[list[float]]]] = {}
    for (metric, c, _), values in sorted(runs.items()):
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
    for metric in TAILS:
        for level in sorted(set(p.get(metric, {})) & set(c.get(metric, {}))):
            pr, cr = p[metric][level], c[metric][level]
            ratio, lo, hi = bootstrap_ratio(pr, cr, q, seed=seed)
            verdict: Verdict = (
                "inconclusive"
                if ratio is None
                else _verdict(ratio, lo, hi, margin, higher_is_better=False)
            )
            out.append(
                Comparison(
                    metric=f"{metric}_p{q:g}",
                    concurrency=level,
                    ratio=ratio,
                    ci_low=lo,
                    ci_high=hi,
                    n_parent=len(pr),
                    n_child=len(cr),
                    verdict=verdict,
                )
            )
    return out
