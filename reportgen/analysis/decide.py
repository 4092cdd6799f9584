"""Comparisons and decisions: is an experiment better than its parent, and by how much?

The unit of replication is one repetition's summary at a level. For throughputs the number is
the level's tok/s; for latencies its p50. The ratio child/parent is of geometric means (the
difference of mean log values), and its confidence interval is multiplicative and asymmetric.
A goodput of none (no request met the SLO) counts as half a request in the level's time, the
usual continuity correction for a count of zero, so a configuration whose goodput collapses is
compared, not left out.

How the interval's noise is estimated (``Comparison.method``):

- ``levels`` (``compare_sides``, what campaigns use): the run's own noise model
  (``analysis.noise``): the spread of repetitions within a server session, pooled over every
  level and experiment decided so far with Smyth's moderated variance, plus the spread between
  server starts at the level; t on Welch-Satterthwaite degrees of freedom, or the starts' own
  where a side ran on one start. Interleaved runs are compared pair by pair, their spread
  moderated the same way. With adaptive repetitions the interval is at the Pocock level of
  its looks (``analysis.sequential``).
- ``pooled``: the same with the spread between starts pooled over levels and
  Welch-Satterthwaite everywhere: how runs were decided before 2026-12; ``verify`` recomputes
  such runs this way.
- ``welch`` (``compare_runs``, ``compare_pairs``): each comparison's own two sides only
  (Welch's t on log values; a one-sample t on paired log ratios). How results were decided
  before the noise model; ``verify`` recomputes such runs this way.

Verdicts against the campaign's margin m:

- ``equivalent``: the change is shown to lie within the margin by the two one-sided tests
  (Schuirmann 1987) at the campaign's alpha each: the interval at 1 - 2 alpha (90%) lies inside
  [1/(1+m), 1+m]. An experiment is equivalent only where every level is, which holds alpha
  without sharing it over levels. Each such comparison says the largest change its interval
  leaves possible ("no change beyond 2.1%"), inconclusive ones too. (Runs decided by the pooled
  method: the whole interval shown lies inside the margin.);
- ``better`` / ``worse``: the interval excludes 1 and the estimate is beyond the margin, in the
  good / bad direction for the metric;
- ``inconclusive``: anything else (too few repetitions or too much noise to tell).

With each comparison come two numbers that say what the noise allowed:

- ``mde``: the smallest effect this comparison could detect, as a ratio: a true change
  beyond x``mde`` (or below 1/``mde``) would make the interval exclude 1 four times in
  five (80% power): exp((t_conf + t_0.8) x the standard error of the log ratio).
- ``reps_needed``: for an inconclusive comparison, how many repetitions per side would decide
  it with the noise measured: enough for the interval's half-width to fit between the estimate
  and 1 (to show a change, when the estimate is beyond the margin) or between the estimate and
  the margin's edge (to show equivalence); always more than were run. None, with ``limit =
  "starts"``, when the spread between server starts alone is too large for repetitions on one
  server to decide: then only fresh servers (``workload.fresh_server``) or interleaving help.

Tail latencies (p99) are compared as the medians are, each run's p99 one observation of the
run's noise model (server starts included), with no interval where a side has fewer than
``TAIL_MIN`` (20) requests above p99. Runs decided by the pooled method compared the pooled
requests of each side with a two-level bootstrap (``bootstrap_ratio``): resample the runs,
then the requests within each run, and take the 2.5th and 97.5th percentiles of the ratio.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from reportgen.analysis import noise as noise_mod
from reportgen.analysis.noise import Noise, Run1, Side
from reportgen.results.findings import METHOD
from reportgen.results.model import Point, sorted_points
from reportgen.results.model import point_of as point_of
from reportgen.results.verdicts import Comparison, Verdict

NO_LEVEL = Point(0)  # a comparison not of one level (tests, simulations)
ObjectiveVerdict = Literal["adopted", "rejected", "equivalent", "inconclusive"]


def compare_sides(
    parent: Sequence[Run1],
    child: Sequence[Run1],
    noise: Noise,
    *,
    margin: float,
    higher_is_better: bool,
    metric: str = "",
    levels: Sequence[Point] | None = None,
    paired: bool = False,
    confidence: float = 0.95,
    fresh_rounds: bool = False,
    equivalence: float | None = None,
) -> list[Comparison]:
    """Child / parent at each common (or the given) level, with the run's noise model; with
    ``paired``, repetition k of one with repetition k of the other (interleaved runs).
    ``fresh_rounds``: more repetitions of the child would each start a fresh server
    (adaptive repetitions), so its own start's spread averages down with them.
    ``equivalence``: the two one-sided tests' interval (0.90 for 5%), which decides
    "equivalent" and gives ``Comparison.bound`` (None: the interval at ``confidence``, as
    runs decided by the "pooled" method did)."""
    levels_p = {r.level for r in parent}
    levels_c = {r.level for r in child}
    wanted = common_levels(levels_p, levels_c, levels)
    out = []
    for level in wanted:
        p = [r for r in parent if r.level == level]
        c = [r for r in child if r.level == level]
        if p and c and all(r.floored for r in (*p, *c)):
            out.append(none_met(metric, level, len(p), len(c)))
            continue
        out.append(
            _compare_level(
                p,
                c,
                noise.at(level),
                margin=margin,
                higher_is_better=higher_is_better,
                metric=metric,
                level=level,
                paired=paired,
                confidence=confidence,
                fresh_rounds=fresh_rounds,
                equivalence=equivalence,
            )
        )
    return out


def _compare_level(
    p: Sequence[Run1],
    c: Sequence[Run1],
    noise: Noise,
    *,
    margin: float,
    higher_is_better: bool,
    metric: str,
    level: Point,
    paired: bool,
    confidence: float,
    fresh_rounds: bool = False,
    equivalence: float | None = None,
) -> Comparison:
    if paired:
        mine = {r.repetition: r.log for r in c}
        diffs = [mine[r.repetition] - r.log for r in p if r.repetition in mine]
        if not diffs:
            return no_data(metric, level, 0, 0, paired=True)
        est = noise_mod.paired(diffs, noise)
        n = (len(diffs), len(diffs))
    else:
        if not p or not c:
            return no_data(metric, level, len(p), len(c))
        sp, sc = noise_mod.side_of(p), noise_mod.side_of(c)
        est = noise_mod.unpaired(sp, sc, noise)
        n = (sp.n, sc.n)
    needed: list[tuple[int | None, str | None]] = []

    def reps() -> int | None:
        got = _more_repetitions(est, noise, p, c, margin, confidence, paired, fresh_rounds)
        needed.append(got)
        return got[0]

    out = judge(
        est.diff,
        est.se,
        est.dof,
        n,
        reps,
        margin=margin,
        higher_is_better=higher_is_better,
        metric=metric,
        level=level,
        confidence=confidence,
        paired=paired,
        equivalence=equivalence,
    )
    limit = needed[0][1] if needed and out.verdict == "inconclusive" else None
    update: dict[str, object] = {
        "method": noise.method,
        "dof": est.dof,
        "confidence": confidence,
        "limit": limit,
    }
    if noise.method == "anchored" and equivalence is not None and est.se and est.dof:
        # the two one-sided tests' interval "equivalent" and the bound rest on, to print
        t_eq = float(stats_t(0.5 + equivalence / 2, est.dof))
        update |= {
            "eq_low": math.exp(est.diff - t_eq * est.se),
            "eq_high": math.exp(est.diff + t_eq * est.se),
            "eq_confidence": equivalence,
        }
    return out.model_copy(update=update)


def stats_t(q: float, dof: float) -> float:
    from scipy import special

    return float(special.stdtrit(dof, q))


def _more_repetitions(
    est: noise_mod.Estimate,
    noise: Noise,
    p: Sequence[Run1],
    c: Sequence[Run1],
    margin: float,
    confidence: float,
    paired: bool,
    fresh_rounds: bool = False,
) -> tuple[int | None, str | None]:
    """Repetitions per side that would decide, with the noise measured (more than now), or
    (None, "starts") when the spread between server starts alone forbids it, or (None,
    ``ONE_START``) where a side ran on one start that more repetitions would not add to (the
    "levels" method: its start term keeps the starts' degrees of freedom, which repetitions on
    one server never raise)."""
    from scipy import special, stats

    edge = math.log1p(margin)
    effect = abs(est.diff)
    gap = effect if effect > edge else edge - effect
    if gap <= 1e-12 or est.se is None or est.dof is None:
        return None, None
    q = 0.5 + confidence / 2
    if paired:
        per_pair = est.se**2 * len(p)
        pairs = np.arange(len(p) + 1, MAX_REPS)
        half = special.stdtrit(est.dof + pairs - len(p), q) * np.sqrt(per_pair / pairs)
        return first_true(pairs, half < gap), None
    sp, sc = noise_mod.side_of(p), noise_mod.side_of(c)
    between = noise.between_var or 0.0
    fixed = between * (_weight(sp, None) + _weight(sc, None, fresh_rounds))
    # more repetitions on the servers as they are add no degrees of freedom to this part
    fixed_q = special.stdtrit(noise.session_dof, q) if noise.session_dof else stats.norm.ppf(q)
    if fixed > 0 and float(fixed_q) * math.sqrt(fixed) >= gap:
        return None, "starts"
    if noise.method != "pooled" and (
        len(set(sp.sessions)) == 1 or (len(set(sc.sessions)) == 1 and not fresh_rounds)
    ):
        return None, ONE_START
    k = np.arange(max(sp.n, sc.n) + 1, MAX_REPS, dtype=float)
    a = est.within * 2 / k
    b = between * (_weight(sp, k) + _weight(sc, k, fresh_rounds))
    d_w = est.within_dof + 2 * (k - min(sp.n, sc.n))
    denom = a**2 / d_w + (b**2 / noise.session_dof if noise.session_dof else 0.0)
    dof = np.where(denom > 0, (a + b) ** 2 / np.where(denom > 0, denom, 1.0), np.inf)
    half = special.stdtrit(dof, q) * np.sqrt(a + b)
    return first_true(k.astype(int), half < gap), None


MAX_REPS = METHOD.max_reps  # beyond this, "about how many" is no longer an answer
ONE_START = "one start"  # ``Comparison.limit``: a side ran on one server start


def first_true(k: np.ndarray, ok: np.ndarray) -> int | None:
    hits = np.flatnonzero(ok)
    return int(k[hits[0]]) if hits.size else None


def _weight(side: Side, k: Any, fresh: bool = False) -> Any:
    """A side's weight of the between-start variance at k repetitions (an array; None: in
    the limit): one server per repetition falls as 1/k, and so do repetitions added each on
    a fresh server (``fresh``); otherwise its servers stay as they are."""
    one_each = len(set(side.sessions)) == side.n and side.n > 1
    if not (one_each or fresh):
        return side.start_weight()
    if k is None:
        return 0.0
    if one_each:
        return 1 / k
    return (side.start_weight() * side.n**2 + (k - side.n)) / k**2


POWER = METHOD.power


def judge(
    diff: float,
    se: float | None,
    dof: float | None,
    n: tuple[int, int],
    reps: Callable[[], int | None],
    *,
    margin: float,
    higher_is_better: bool,
    metric: str,
    level: Point,
    confidence: float,
    paired: bool = False,
    equivalence: float | None = None,
) -> Comparison:
    """A comparison from the mean log ratio ``diff`` and its standard error (None: too few
    runs for one): the interval, the smallest detectable change, the verdict, and for an
    inconclusive one the repetitions that would decide it (``reps``). With ``equivalence``
    (the two one-sided tests' interval, 0.90 for 5%), "equivalent" is decided on that
    interval, and ``bound`` is the largest change it leaves possible."""
    from scipy import stats

    ratio = math.exp(diff)
    lo = hi = mde = bound = None
    needed: int | None = None
    if se is not None and (se == 0 or dof is None):
        lo = hi = ratio
        mde = 1.0
        bound = abs(ratio - 1) if equivalence is not None else None
    elif se is not None and dof is not None:
        t = float(stats.t.ppf(0.5 + confidence / 2, dof))
        lo, hi = math.exp(diff - t * se), math.exp(diff + t * se)
        mde = math.exp((t + float(stats.t.ppf(POWER, dof))) * se)
        if equivalence is not None:
            t_eq = float(stats.t.ppf(0.5 + equivalence / 2, dof))
            bound = math.expm1(abs(diff) + t_eq * se)
        needed = reps()
    if bound is not None and lo is not None and hi is not None:
        verdict = _verdict(ratio, lo, hi, margin, higher_is_better, equivalent=bound <= margin)
    else:
        verdict = _verdict(ratio, lo, hi, margin, higher_is_better)
    return Comparison(
        metric=metric,
        concurrency=level.concurrency,
        rate=level.rate,
        ratio=ratio,
        ci_low=lo,
        ci_high=hi,
        n_parent=n[0],
        n_child=n[1],
        verdict=verdict,
        mde=mde,
        reps_needed=needed if verdict == "inconclusive" else None,
        paired=paired,
        bound=bound,
    )


def no_data(
    metric: str, level: Point, n_parent: int, n_child: int, paired: bool = False
) -> Comparison:
    return Comparison(
        metric=metric,
        concurrency=level.concurrency,
        rate=level.rate,
        ratio=None,
        ci_low=None,
        ci_high=None,
        n_parent=n_parent,
        n_child=n_child,
        verdict="inconclusive",
        paired=paired,
    )


# ``Comparison.limit`` where no request met the SLO on either side: goodput cannot tell them
NONE_MET = "none met"


def none_met(metric: str, level: Point, n_parent: int, n_child: int) -> Comparison:
    """Goodput of none on both sides: no ratio (that of two floors would only compare the
    levels' lengths), inconclusive, and said why."""
    return no_data(metric, level, n_parent, n_child).model_copy(update={"limit": NONE_MET})


def judge_interval(
    ratio: float, lo: float | None, hi: float | None, margin: float, higher_is_better: bool
) -> Verdict:
    """better, worse, equivalent or inconclusive from a ratio and its interval alone."""
    return _verdict(ratio, lo, hi, margin, higher_is_better)


def _verdict(
    ratio: float,
    lo: float | None,
    hi: float | None,
    margin: float,
    higher_is_better: bool,
    equivalent: bool | None = None,
) -> Verdict:
    """better, worse, equivalent or inconclusive; ``equivalent``: decided apart (the two
    one-sided tests), else the whole interval within the margin."""
    if lo is None or hi is None:
        return "inconclusive"
    upper, lower = 1 + margin, 1 / (1 + margin)
    if equivalent is None:
        equivalent = lower <= lo and hi <= upper
    if equivalent:  # never beside "better" or "worse": either puts the ratio past the margin
        return "equivalent"
    if lo > 1 and ratio > upper:
        return "better" if higher_is_better else "worse"
    if hi < 1 and ratio < lower:
        return "worse" if higher_is_better else "better"
    return "inconclusive"


def common_levels(a: set[Point], b: set[Point], wanted: Sequence[Point] | None) -> list[Point]:
    """The levels both sides ran, in order (of ``wanted``, where given)."""
    if wanted is not None:
        return [x for x in wanted if x in a and x in b]
    return sorted_points(a & b)
