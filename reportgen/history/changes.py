"""Change points in a series of runs, and the gate on the newest run.

A *series* is one experiment's metric at one level across a campaign's runs, oldest first.
Each run contributes its repetitions; the statistics work on their logarithms, so that a
change is a ratio and its interval is a ratio's.

**Segments.** Neighbours whose ``gate`` differs (another GPU model or count, model checkpoint or
workload) are not compared: the series breaks there, and change points are looked for within
each comparable stretch only.

**Change points** (``find``): binary segmentation, as E-divisive means and Apache Otava locate
changes, with Student's t as the test between the two sides (Otava's t-test variant). In a
stretch of n runs every split into runs 1..k and k+1..n is tried; at each, t compares the two
sides' means of run means, with the variance of a run mean taken from the spread of run means
around their side's mean (n - 2 degrees of freedom), never below what the runs' own
repetitions show (their pooled within-run variance over the repetitions a run has). The split
with the largest |t| is a change point when its p-value times the number of splits tried
(Bonferroni) is below ``alpha``: so in a stretch without a change the chance of a false one is
at most ``alpha`` (0.05 by default; ``benchmarks/history_changes.py`` measures it). Each side is
then searched the same way. Why not a permutation test: with 5 runs, a split into 2 and 3
has only 10 distinct arrangements, so no permutation p-value can fall below 0.1.

**The gate** (``check``): the newest run against the runs before it in its stretch, since the
last change point among them: the ratio newest / before with its 95% interval, and one of
Pinpoint's three answers for a threshold: regressed (the whole interval beyond it: certain, as
``reportgen diff --fail-on-regression`` decides), not regressed (the whole interval short of
it), or cannot tell (with how many more repetitions of the newest run would tell, where more
repetitions can).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

ALPHA = 0.05
LEVEL = 0.95  # the intervals' confidence
MAX_MORE = 50  # more repetitions than this are not suggested: another run is


@dataclass(frozen=True)
class Obs:
    """One run's repetitions of the series' metric (their logs are what is compared)."""

    index: int  # its place in the series (0 = oldest)
    values: tuple[float, ...]

    @property
    def logs(self) -> list[float]:
        return [math.log(v) for v in self.values]

    @property
    def mean_log(self) -> float:
        logs = self.logs
        return sum(logs) / len(logs)


@dataclass(frozen=True)
class Change:
    """A change point: runs from ``at`` on differ from the runs before, back to the previous
    change or break. ``ratio``: after / before (geometric means), with its interval."""

    at: int
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float  # the split's t-test, before the Bonferroni factor
    splits: int  # how many splits were tried (the Bonferroni factor)
    n_before: int
    n_after: int


@dataclass(frozen=True)
class Gate:
    """The newest run against the runs before it (``check``)."""

    answer: str  # "regressed" | "not regressed" | "cannot tell"
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    n_before: int
    more: int | None = None  # cannot tell: repetitions more of the newest that would tell
    why: str = ""


@dataclass
class _Noise:
    """The variance of one run's mean log, and its degrees of freedom."""

    var: float
    df: float
    within: float  # the pooled within-run variance (of one repetition's log)
    within_df: float


def _within(obs: Sequence[Obs]) -> tuple[float, float]:
    """Pooled variance of one repetition's log around its run's mean, and its df."""
    ss = 0.0
    df = 0
    for o in obs:
        logs = o.logs
        if len(logs) > 1:
            m = sum(logs) / len(logs)
            ss += sum((x - m) ** 2 for x in logs)
            df += len(logs) - 1
    return (ss / df if df else 0.0), float(df)


def _reps(obs: Sequence[Obs]) -> float:
    """The harmonic mean of the runs' repetition counts."""
    return len(obs) / sum(1 / len(o.values) for o in obs)


def _noise(sides: Sequence[Sequence[Obs]]) -> _Noise | None:
    """The variance of a run mean from the runs of these sides (each around its own mean),
    never below what their repetitions show; its degrees of freedom are the between-run
    estimate's (the within-run one's only where no side has two runs). None where neither
    says anything."""
    runs = [o for side in sides for o in side]
    within, within_df = _within(runs)
    floor = within / _reps(runs) if runs else 0.0
    ss = 0.0
    df = 0
    for side in sides:
        if len(side) > 1:
            means = [o.mean_log for o in side]
            m = sum(means) / len(means)
            ss += sum((x - m) ** 2 for x in means)
            df += len(side) - 1
    between = ss / df if df else 0.0
    var = max(between, floor)
    if var <= 0:
        return None
    if df:
        return _Noise(var, float(df), within, within_df)
    return _Noise(var, within_df, within, within_df) if within_df else None


def _mean(side: Sequence[Obs]) -> float:
    return sum(o.mean_log for o in side) / len(side)


def _test(
    obs: Sequence[Obs], cuts: Sequence[int], lo: int, k: int, hi: int
) -> tuple[float, float, float] | None:
    """(difference of mean logs after - before, its standard error, df) for splitting
    ``obs[lo:hi]`` before ``obs[k]``: the noise from the two sides and every other segment of
    the stretch (each around its own mean); None where it cannot be told."""
    bounds = [0, *sorted(cuts), len(obs)]
    others = [list(obs[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)
              if b > a and (b <= lo or a >= hi)]  # fmt: skip
    before, after = obs[lo:k], obs[k:hi]
    noise = _noise([*others, before, after])
    if noise is None:
        return None
    se = math.sqrt(noise.var * (1 / len(before) + 1 / len(after)))
    return _mean(after) - _mean(before), se, noise.df


def find(obs: Sequence[Obs], alpha: float = ALPHA) -> list[Change]:
    """The change points of one comparable stretch of runs, oldest first (module docstring):
    the whole stretch is split where |t| is largest if that is significant, then each part
    the same way, the noise always pooled over every segment found so far."""
    cuts: list[int] = []
    todo = [(0, len(obs))]
    while todo:
        lo, hi = todo.pop()
        if hi - lo < 2 or len(obs) < 3:
            continue
        best: tuple[float, int, float] | None = None  # (|t|, k, p)
        for k in range(lo + 1, hi):
            got = _test(obs, cuts, lo, k, hi)
            if got is None:
                continue
            d, se, df = got
            t = abs(d) / se if se > 0 else math.inf
            if best is None or t > best[0]:
                best = (t, k, float(2 * stats.t.sf(t, df)))
        if best is None or best[2] * (hi - lo - 1) >= alpha:
            continue
        cuts.append(best[1])
        todo += [(lo, best[1]), (best[1], hi)]
    cuts.sort()
    out = []
    bounds = [0, *cuts, len(obs)]
    for i, k in enumerate(cuts):
        lo, hi = bounds[i], bounds[i + 2]
        got = _test(obs, [c for c in cuts if c != k], lo, k, hi)
        if got is None:
            continue
        d, se, df = got
        t_crit = stats.t.ppf(0.5 + LEVEL / 2, df)
        out.append(
            Change(
                at=obs[k].index,
                ratio=math.exp(d),
                ci_low=math.exp(d - t_crit * se),
                ci_high=math.exp(d + t_crit * se),
                p_value=float(2 * stats.t.sf(abs(d / se), df)) if se > 0 else 0.0,
                splits=hi - lo - 1,
                n_before=k - lo,
                n_after=hi - k,
            )
        )
    return out


def check(
    obs: Sequence[Obs],
    changes: Sequence[Change],
    threshold: float,
    higher_is_better: bool,
) -> Gate:
    """The newest run (``obs[-1]``) against the runs before it since the last change point
    before it: regressed (the whole 95% interval beyond ``threshold``: a regression beyond it
    is certain, as ``diff --fail-on-regression`` decides), not regressed (the interval
    excludes a regression beyond it), or cannot tell. A change point found at the newest run
    itself does not shorten what it is compared with: it is what the gate judges."""
    newest = obs[-1]
    place = {o.index: i for i, o in enumerate(obs)}
    cuts = sorted({place[c.at] for c in changes if c.at < newest.index and c.at in place})
    bounds = [0, *cuts, len(obs) - 1]
    segments = [list(obs[a:b]) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    before = segments[-1] if segments and bounds[-2] < len(obs) - 1 else []
    if not before:
        return Gate("cannot tell", None, None, None, 0, None, "no earlier comparable run")
    # the spread of run means from every segment of the stretch, each around its own mean:
    # the runs before the last change point still say how far apart two runs fall
    noise = _noise([*segments, [newest]])
    if noise is None:
        return Gate(
            "cannot tell", None, None, None, len(before), None,
            "one repetition a run and one earlier run: no spread to judge by",
        )  # fmt: skip
    d = newest.mean_log - _mean(before)
    # what the newest run's repetitions can change: its within-run part; the rest (between
    # runs, and the earlier runs' own uncertainty) stays
    r_new = len(newest.values)
    between = max(noise.var - noise.within / _reps([*before, newest]), 0.0)

    def se_for(reps: int) -> float:
        return math.sqrt(between + noise.within / reps + noise.var / len(before))

    t_crit = stats.t.ppf(0.5 + LEVEL / 2, noise.df)
    se = se_for(r_new)
    low, high = math.exp(d - t_crit * se), math.exp(d + t_crit * se)
    ratio = math.exp(d)
    worse_edge = 1 - threshold if higher_is_better else 1 + threshold
    if higher_is_better:  # as ``diff --fail-on-regression``: certain, beyond the threshold
        regressed, clear = high < worse_edge, low > worse_edge
    else:
        regressed, clear = low > worse_edge, high < worse_edge
    if regressed:
        return Gate("regressed", ratio, low, high, len(before))
    if clear:
        return Gate("not regressed", ratio, low, high, len(before))
    # how many repetitions of the newest run would put the interval clear of the threshold,
    # on either side
    room = abs(d - math.log(worse_edge))
    more = None
    for reps in range(r_new + 1, r_new + MAX_MORE + 1):
        if t_crit * se_for(reps) < room:
            more = reps - r_new
            break
    if more is not None:
        why = f"{more} more repetition(s) of the newest run would tell"
    elif between > 0:
        why = (
            "more repetitions of the newest run alone would not tell (runs differ from one "
            "another by more than their repetitions do): run the campaign again"
        )
    else:
        why = (
            "more repetitions of the newest run alone would not tell (the earlier runs' own "
            "spread is as wide): run the campaign again"
        )
    if len(before) == 1 and noise.df == noise.within_df:
        why += "; with one earlier run, the interval knows only the runs' own repetitions"
    return Gate("cannot tell", ratio, low, high, len(before), more, why)
