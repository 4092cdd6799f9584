"""What a run knows about its own noise, and comparisons that use it.

Two or three repetitions a side give Welch's interval one or two degrees of freedom: true, but
useless (t = 12.7 at one). Every level of every experiment of a campaign repeats one
configuration, though, and on the log scale (relative spread) their noise is much alike. The
noise model pools it:

- **within a server session**: the spread of a configuration's repetitions at one level on one
  server, on log values. Each such group ("cell") gives a sample variance with n - 1 degrees
  of freedom. Their common variance and its weight come from the empirical Bayes estimator of
  Smyth (2004, the "moderated t" of limma): the cells' log variances give a prior variance
  s0^2 with d0 degrees of freedom (d0 large when the cells agree, small when they differ, so a
  configuration noisier than the rest is not judged by the rest's noise). A comparison's own
  cells are combined with it: s^2 = (d0 s0^2 + d s_own^2) / (d0 + d), with d0 + d degrees of
  freedom.
- **between server starts**: a configuration started more than once (the baseline, started
  twice by default; fresh servers; interleaved runs of a parent; two experiments with the same
  configuration) gives, at each level, the variance of its sessions' means, S_m^2; h is the
  mean of 1/n_j over those sessions (n_j repetitions each). Starts can differ more at one
  level than at another (on an H200 at its power limit, 2.9% at C=64 and 0.4% at C=1), so
  each level keeps its own S_m^2, moderated towards the levels' common value the same
  empirical Bayes way. Its degrees of freedom are one per extra start, not per level too: a
  start that runs slow is slow at every level. The spread between starts is
  s_b^2 = S_m^2 - h s^2. Repetitions on one server never average it away: two
  configurations that each ran on one server differ by it whatever their repetitions, so
  identical configurations started separately are not called different.

A mean over n repetitions from sessions of n_j repetitions each has variance
s^2 / n + s_b^2 x w, w = sum((n_j / n)^2) (1 for one server, 1/n for one per repetition); the
difference of two sides adds theirs. Where both sides ran on two or more starts, s_b^2 is
taken as max(0, S_m^2 - h s^2) and the degrees of freedom come from Welch-Satterthwaite over
the two terms. Where a side ran on one start, the variance is estimated as
W S_m^2 + (sum 1/n - W h) s^2 (W the sides' w together), which keeps the starts' own degrees
of freedom: a start spread that happens to come out small would otherwise borrow the
within-session part's many degrees of freedom, and identical configurations run on one start
each were called different in 6-13% of simulated campaigns at a nominal 5%. The interval is t
with those degrees of freedom on the difference of mean logs, so ratios are of geometric
means.

Interleaved comparisons (``campaign.interleave``) difference each repetition with its
neighbour in time, each on its own server; the model predicts those differences' variance,
twice a session's at one repetition, and their own spread is moderated with it the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from reportgen.analysis import moderated
from reportgen.analysis.summary import compared_value
from reportgen.results.levels import Level
from reportgen.results.model import Experiment, Point

SessionKey = tuple[str, str, int]  # (experiment id, role, session index)

METHODS = ("anchored", "levels", "pooled")  # newest first: how a run's noise model is
# estimated and used (``Decision.method``): "anchored", as "levels", with a tail whose runs all
# lie beyond the other side's decided by their order (``analysis.tails.ordered``) and the
# campaign's false alarms held online (``analysis.online``); "levels", the spread between
# starts per level and a start term with the starts' own degrees of freedom where a side ran
# on one start (runs decided before 2026-12-07); "pooled", that spread pooled over levels and
# Satterthwaite over both terms everywhere (runs decided before 2026-12-03). The older ones
# are kept so ``verify`` takes a run's decisions again as they were taken.

# "anchored": where the run's starts differ far less than stated (below this lower tail of
# chi-square for their degrees of freedom), the statement gives way to the largest spread
# they allow (their upper bound at 1 - BELOW); None or 0: it never does, as decided before
# 2026-12-07's night (``estimate``'s ``below``)
BELOW = 0.05


@dataclass(frozen=True)
class Run1:
    """One level run of one configuration: its log value and the server session it ran on."""

    config: str
    level: Point
    repetition: int
    session: SessionKey
    log: float
    floored: bool = False  # a goodput of none, taken as half a request (``compared_value``)
    held: bool = False  # a request in it stalled (``Summary.stall_s``)

    @property
    def key(self) -> tuple[SessionKey, Point, int]:
        """Which run it is: its session, level and repetition (``Stall.key`` names one)."""
        return (self.session, self.level, self.repetition)


@dataclass(frozen=True)
class Stall:
    """A level run far worse than its configuration's others at that level (``stalls``):
    its session, level and repetition, and how much worse (a share of the others' mean)."""

    session: SessionKey
    level: Point
    repetition: int
    worse: float
    request: bool = False  # found by a request that stalled in it (``request_stalls``)

    @property
    def key(self) -> tuple[SessionKey, Point, int]:
        return (self.session, self.level, self.repetition)


STALL_SDS = 8.0  # a stall: worse than its configuration's other runs by this many sds ...
STALL_FLOOR = 0.03  # ... and by at least 3%
STALL_PAIRS = 12  # pairs of runs a level needs before its spread is trusted to tell


def stalls(runs: Sequence[Run1], higher_is_better: bool) -> list[Stall]:
    """Level runs held by a stall ("anchored"): a request that stalls (a long gap mid-stream,
    a late close) drags one repetition's throughput down or its latency up, far beyond how
    much one measurement's runs at that level otherwise differ (an experiment's, or its
    control's: not its configuration's measured at other times, which drift apart). At each
    level, the typical difference of two runs of one measurement (all pairs, over every
    measurement: the median absolute difference over sqrt 2, times 1.4826, so a few stalls
    do not set it) is the yardstick; a run worse than the mean of its measurement's others by
    more than ``STALL_SDS`` such sds (sqrt(1 + 1/(n - 1)) of them) and ``STALL_FLOOR`` is a
    stall, at most one a measurement and level. Only the worse side is looked at: a stall never
    makes a server faster. A level with fewer than ``STALL_PAIRS`` pairs is left alone."""
    groups: dict[tuple[str, str, Point], list[Run1]] = {}
    for r in runs:  # one measurement's runs: its own, not those of its configuration's others
        groups.setdefault((r.session[0], r.session[1], r.level), []).append(r)
    pairs: dict[Point, list[float]] = {}
    for (_, _, level), g in groups.items():
        logs = [r.log for r in g]
        pairs.setdefault(level, []).extend(
            abs(a - b) / math.sqrt(2) for i, a in enumerate(logs) for b in logs[i + 1 :]
        )
    sign = 1.0 if higher_is_better else -1.0
    out = []
    for (_, _, level), g in groups.items():
        if len(g) < 2 or len(pairs.get(level, ())) < STALL_PAIRS:
            continue
        sd = 1.4826 * float(np.median(pairs[level]))
        total = sum(r.log for r in g)
        worst = max(g, key=lambda r: sign * ((total - r.log) / (len(g) - 1) - r.log))
        gap = sign * ((total - worst.log) / (len(g) - 1) - worst.log)
        bar = max(STALL_SDS * sd * math.sqrt(1 + 1 / (len(g) - 1)), math.log1p(STALL_FLOOR))
        if gap > bar:
            out.append(Stall(worst.session, level, worst.repetition, -math.expm1(-gap)))
    return out


def request_stalls(runs: Sequence[Run1], higher_is_better: bool) -> list[Stall]:
    """Level runs holding a request that stalled (``Run1.held``: a gap mid-stream or a late
    close many times its run's others, ``Summary.stall_s``), where their measurement keeps a
    run at that level without one: the host's hold-up, not the server's speed, so left out
    as ``stalls`` are, whatever it did to this metric (``worse``: against that measurement's
    runs without one; under 0 where it was no worse). Needs no pairs: the requests say it."""
    groups: dict[tuple[str, str, Point], list[Run1]] = {}
    for r in runs:
        groups.setdefault((r.session[0], r.session[1], r.level), []).append(r)
    sign = 1.0 if higher_is_better else -1.0
    out = []
    for g in groups.values():
        clean = [r.log for r in g if not r.held]
        if not clean or len(clean) == len(g):
            continue
        mean = float(np.mean(clean))
        for r in g:
            if r.held:
                gap = sign * (mean - r.log)
                out.append(Stall(r.session, r.level, r.repetition, -math.expm1(-gap), True))
    return out


def held_runs(runs: Sequence[Run1], higher_is_better: bool) -> list[Stall]:
    """Level runs left out as held by a stall ("anchored"): those ``stalls`` finds by their
    spread, and those holding a request that stalled (``request_stalls``)."""
    held = request_stalls(runs, higher_is_better)
    out = {x.key for x in held}
    # (sought among the others only: never both a level's runs, one of each kind)
    return [*held, *stalls([r for r in runs if r.key not in out], higher_is_better)]


@dataclass(frozen=True)
class Noise:
    """The run's noise model for one metric (log scale; sd 0.05 is about 5%)."""

    metric: str
    within_var: float | None  # s^2 (s0^2 of the prior): None where nothing repeated on a server
    within_dof: float  # d0 (capped at the cells' total degrees of freedom)
    within_cells: int
    within_total_dof: float  # the cells' own degrees of freedom, together
    session_var: float | None  # pooled variance of session means: None where none started twice
    session_dof: int
    session_h: float  # the mean of 1/n_j over those sessions (n_j: repetitions on each)
    between_cells: int  # configurations x levels with two or more server starts
    # per level: (S_m^2 moderated towards the levels' common value, h) where started twice
    levels: Mapping[Point, tuple[float, float]] = field(default_factory=dict)
    method: str = METHODS[0]  # which of METHODS estimated it, and how ``variance`` uses it
    # "anchored": the stated spread between starts (campaign.start_spread) where it was set
    # aside, the run's own starts differing far more (``_stated``); None: folded in, or none
    set_aside: float | None = None
    # "anchored": level runs left out as held by a stall (``stalls``)
    stalls: tuple[Stall, ...] = ()
    # "anchored", as decided before the statement's weight was kept where its size is set
    # aside (``estimate``'s ``aside_weight`` False): the degrees of freedom of a level whose
    # own spread set the statement aside, its starts' alone
    level_dof: Mapping[Point, int] = field(default_factory=dict)
    aside_kept: bool = True  # (``estimate``'s ``aside_weight``)
    below: float | None = None  # "anchored": the tail at which the statement gives way
    gave_way: tuple[Point, ...] = ()  # ... and the levels where it did

    def at(self, level: Point) -> Noise:
        """The model as it applies at ``level``: the spread between starts measured there
        (moderated), or the levels' pooled one where that level never ran on two starts."""
        if level not in self.levels:
            return self
        var, h = self.levels[level]
        dof = self.level_dof.get(level, self.session_dof)
        return replace(self, session_var=var, session_h=h, session_dof=dof, levels={})

    @property
    def within_sd(self) -> float | None:
        return None if self.within_var is None else math.sqrt(self.within_var)

    @property
    def between_var(self) -> float | None:
        """s_b^2: the spread of session means beyond what the within-session noise explains."""
        if self.session_var is None:
            return None
        return max(0.0, self.session_var - (self.within_var or 0.0) * self.session_h)

    @property
    def between_sd(self) -> float | None:
        v = self.between_var
        return None if v is None else math.sqrt(v)

    @property
    def between_dof(self) -> int:
        return self.session_dof

    def moderated(self, ss: float, dof: int) -> tuple[float | None, float]:
        """A comparison's own within-session sum of squares and degrees of freedom, combined
        with the prior: (variance, degrees of freedom); None without any estimate."""
        if self.within_var is None:
            if dof > 0:
                return ss / dof, float(dof)
            return None, 0.0
        d0 = self.within_dof
        return (d0 * self.within_var + ss) / (d0 + dof), d0 + dof

    def variance(
        self,
        within: float,
        within_dof: float,
        inverse_n: float,
        start_weight: float,
        one_start: bool = False,
    ) -> tuple[float, float | None]:
        """The variance of a sum of side means, and its degrees of freedom: ``inverse_n`` is
        the sum of the sides' 1/n, ``start_weight`` W of their sum((n_j / n)^2):
        inverse_n x s^2 + W x s_b^2.

        Where both sides ran on two or more starts (``one_start`` false), or by the "pooled"
        method everywhere, s_b^2 = max(0, S_m^2 - h s^2) and Satterthwaite weighs both terms.
        A start spread that happens to come out small then borrows the within part's many
        degrees of freedom, which misleads where a side ran on one start: with two starts of
        the baseline, one of the other side, starts 4% apart and repetitions 1%, 10% of
        identical levels were called different at a nominal 1.7%. There, the "levels" method
        estimates it as W x S_m^2 + (inverse_n - W h) x s^2: the session means' variance
        carries the starts' spread with the starts' degrees of freedom, whatever part of it
        the within-session noise explains; where the second coefficient is negative, the
        estimate never falls below the within part alone and then keeps the starts' degrees
        of freedom."""
        a = within * inverse_n
        # ("anchored": the spread between starts carries a stated prior's degrees of freedom)
        if self.method in ("pooled", "anchored") or not one_start:
            b = (self.between_var or 0.0) * start_weight
            if a + b <= 0:
                return 0.0, None
            return a + b, moderated.satterthwaite([(a, within_dof), (b, self.session_dof)])
        if self.session_var is None or start_weight <= 0 or self.session_dof <= 0:
            if a <= 0:
                return 0.0, None
            return a, within_dof if within_dof > 0 else None
        m = self.session_var * start_weight
        c = (inverse_n - start_weight * self.session_h) * within
        total = m + c
        if total <= a:  # the starts measured no spread beyond the within-session noise
            if a <= 0:
                return 0.0, None
            return a, float(self.session_dof)
        if c >= 0:
            return total, moderated.satterthwaite([(m, self.session_dof), (c, within_dof)])
        denom = m * m / self.session_dof + (c * c / within_dof if within_dof > 0 else 0.0)
        # a difference of estimates: Satterthwaite's formula, between one degree of freedom
        # and the starts' own
        return total, min(max(total * total / denom, 1.0), float(self.session_dof))


def config_key(e: Experiment) -> str:
    """What makes two experiments the same configuration: the server's exact command line,
    its environment and the workload (as recorded, so redacted values compare as their
    placeholders). Without a recorded command, only itself."""
    if not e.command:
        return f"id:{e.id}"
    return repr((e.command, sorted(e.env.items()), sorted((e.workload or {}).items())))


def same_config(a: Experiment | None, b: Experiment) -> bool:
    """Whether ``a`` (an experiment's parent, say) is ``b``'s configuration (``config_key``):
    an A/A copy, the bracket."""
    return a is not None and config_key(a) == config_key(b)


def level_runs(
    experiments: Iterable[Experiment], metric: str, stat: str = "p50", *, current: str = ""
) -> list[Run1]:
    """Every usable level run of ``experiments`` (finished without an error, or ``current``,
    the one being decided; not cut short; with a positive value): its configuration, level,
    session and log value. A parent's interleaved runs count as its configuration's."""
    exps = list(experiments)
    keys = {e.id: config_key(e) for e in exps}
    out: list[Run1] = []
    for e in exps:
        if e.status != "ok" and e.id != current:
            continue
        out += own_runs(e.levels, e.id, "experiment", metric, stat, keys[e.id])
        control = e.control
        if control is not None and not control.error:
            parent = keys.get(control.of, control.of)
            out += own_runs(control.levels, e.id, "control", metric, stat, parent)
    return out


def own_runs(
    levels: Iterable[Level], owner: str, role: str, metric: str, stat: str = "p50", config: str = ""
) -> list[Run1]:
    """The usable level runs of one side (an experiment's own levels, or its control's)."""
    out: list[Run1] = []
    for lv in levels:
        _add(out, config, lv, (owner, role, lv.session), metric, stat)
    return out


def _add(
    out: list[Run1], config: str, lv: Level, session: SessionKey, metric: str, stat: str
) -> None:
    if lv.aborted:
        return
    v = compared_value(lv.summary, metric, stat)
    if v is not None and math.isfinite(v) and v > 0:
        none = metric == "goodput_req_s" and lv.summary.value(metric, stat) == 0
        held = lv.summary.stall_s is not None
        out.append(Run1(config, lv.point, lv.repetition, session, math.log(v), none, held))


def within_cells(runs: Sequence[Run1]) -> list[np.ndarray]:
    """Log values of one configuration at one level on one server (two or more)."""
    groups: dict[tuple[str, Point, SessionKey], list[float]] = {}
    for r in runs:
        groups.setdefault((r.config, r.level, r.session), []).append(r.log)
    return [np.asarray(v) for v in groups.values() if len(v) >= 2]


def session_means(runs: Sequence[Run1]) -> list[tuple[Point, np.ndarray, np.ndarray]]:
    """Per configuration and level started on two or more servers: the level, each server's
    mean log value and its number of repetitions."""
    return [(level, means, counts) for _, level, means, counts in session_means_by_config(runs)]


def session_means_by_config(
    runs: Sequence[Run1],
) -> list[tuple[str, Point, np.ndarray, np.ndarray]]:
    """``session_means`` with each group's configuration first."""
    groups: dict[tuple[str, Point], dict[SessionKey, list[float]]] = {}
    for r in runs:
        groups.setdefault((r.config, r.level), {}).setdefault(r.session, []).append(r.log)
    out = []
    for (config, level), sessions in groups.items():
        if len(sessions) >= 2:
            means = np.asarray([np.mean(v) for v in sessions.values()])
            counts = np.asarray([len(v) for v in sessions.values()], dtype=float)
            out.append((config, level, means, counts))
    return out


def detrended(
    runs: Sequence[Run1], order: Mapping[str, int]
) -> list[tuple[Point, float, float, np.ndarray]]:
    """Per configuration and level started on two or more servers: the level, the sum of
    squares of its session means about a straight line in time (``order``: each experiment's
    place in the run; sessions of one experiment share it) and its degrees of freedom, and
    the sessions' repetitions. Where the sessions lie at two or more places in time, the line
    takes up the host's drift between them, which would otherwise read as starts that differ
    (the baseline measured again through a campaign, ``campaign.anchors``); at one place, the
    plain spread about their mean."""
    groups: dict[tuple[str, Point], dict[SessionKey, list[float]]] = {}
    for r in runs:
        groups.setdefault((r.config, r.level), {}).setdefault(r.session, []).append(r.log)
    out = []
    for (_, level), sessions in groups.items():
        if len(sessions) < 2:
            continue
        means = np.asarray([np.mean(v) for v in sessions.values()])
        counts = np.asarray([len(v) for v in sessions.values()], dtype=float)
        at = np.asarray([float(order.get(k[0], 0)) for k in sessions], dtype=float)
        if np.unique(at).size >= 2 and means.size >= 3:
            slope, icept = np.polyfit(at, means, 1)
            ss, dof = float(((means - (slope * at + icept)) ** 2).sum()), means.size - 2
        elif np.unique(at).size >= 2:
            continue  # two sessions at two times: drift and the starts cannot be told apart
        else:
            ss, dof = float(((means - means.mean()) ** 2).sum()), means.size - 1
        out.append((level, ss, float(dof), counts))
    return out


def _sums_by_level(
    spreads: Iterable[tuple[Point, float, float, np.ndarray]],
) -> dict[Point, tuple[float, float, float]]:
    """Per level, over the groups of ``spreads`` (``detrended``'s form) with a degree of
    freedom: the sum of squares of session means, its degrees of freedom, and the sum of
    dof x mean(1/n) (h times the dof)."""
    acc: dict[Point, list[float]] = {}
    for level, ss_g, dof_g, counts in spreads:
        if dof_g > 0:
            a = acc.setdefault(level, [0.0, 0.0, 0.0])
            a[0] += ss_g
            a[1] += dof_g
            a[2] += dof_g * float(np.mean(1 / counts))
    return {level: (a[0], a[1], a[2]) for level, a in acc.items()}


def _within(runs: Sequence[Run1]) -> tuple[int, np.ndarray, float | None, float]:
    """The spread of repetitions on one server: its cells' count and degrees of freedom, and
    their moderated variance with its weight (``moderated.prior``)."""
    cells = within_cells(runs)
    variances = np.asarray([c.var(ddof=1) for c in cells])
    dofs = np.asarray([c.size - 1 for c in cells], dtype=float)
    var, d0 = moderated.prior(variances, dofs)
    return len(cells), dofs, var, d0


def _between(
    groups: Sequence[tuple[Point, np.ndarray, np.ndarray]],
    restarts: int,
    per_level: bool,
    order: Mapping[str, int] | None = None,
    runs: Sequence[Run1] = (),
) -> tuple[float | None, float, dict[Point, tuple[float, float]]]:
    """The variance of session means pooled over every group, its h, and per level (where
    ``per_level``) the level's own, moderated towards the levels' common prior; with
    ``order``, about each group's line in time (``detrended``, from ``runs``)."""
    spreads = (
        detrended(runs, order)
        if order is not None
        else [
            (level, (m.size - 1) * float(m.var(ddof=1)), float(m.size - 1), counts)
            for level, m, counts in groups
        ]
    )
    by_level = _sums_by_level(spreads)
    if not by_level:
        return None, 0.0, {}
    ss = sum(a[0] for a in by_level.values())
    dof = sum(a[1] for a in by_level.values())
    pooled, h = ss / dof, sum(a[2] for a in by_level.values()) / dof
    if not per_level or len(by_level) < 2:
        return pooled, h, {}
    points = list(by_level)
    own = np.asarray([by_level[p][0] / by_level[p][1] for p in points])
    dofs = np.asarray([by_level[p][1] for p in points])
    if order is not None:
        # "anchored": each level's own, unmoderated: starts do not slow every level alike
        # (an H100 at its power limit at C=64 and not at C=1), and the spread stated or
        # measured before (``_stated``) is what each level's is folded with
        return (
            pooled,
            h,
            {p: (own[i], by_level[p][2] / by_level[p][1]) for i, p in enumerate(points)},
        )
    prior, d0 = moderated.prior(own, dofs)
    # a start slow at one level is slow at the others: the levels together know no more
    # about the prior than the starts they share
    d0 = min(d0, float(restarts))
    if prior is None:
        return pooled, h, {}
    levels = {
        p: ((d0 * prior + dofs[i] * own[i]) / (d0 + dofs[i]), by_level[p][2] / by_level[p][1])
        for i, p in enumerate(points)
    }
    return pooled, h, levels


PRIOR_DOF = 3  # the weight of the stated spread between starts, in starts ("anchored")
SPREAD_FLOOR = 0.001  # a spread between starts measured as none is taken as this (0.1%)
# per level: the spread between starts assumed before the run measures its own (relative sd)
# and its weight in starts (``campaign.start_spread`` at PRIOR_DOF, or earlier runs' own)
Prior = Mapping[Point, tuple[float, float]]


def measured_spread(
    runs: Sequence[Run1], order: Mapping[str, int]
) -> dict[Point, tuple[float, float]]:
    """Per level, the spread between server starts these runs measured (relative sd, floored
    at ``SPREAD_FLOOR``) and its degrees of freedom: their configurations' session means
    about a line in time (``detrended``) less what the spread within a session explains. What
    a later run of the campaign on the same host may start from instead of a stated spread
    (``history.prior``)."""
    _, _, within, _ = _within(runs)
    out = {}
    for level, (ss, dof, hd) in _sums_by_level(detrended(runs, order)).items():
        var = max(0.0, ss / dof - hd / dof * (within or 0.0))
        out[level] = (max(SPREAD_FLOOR, math.expm1(math.sqrt(var))), dof)
    return out


def estimate(
    runs: Sequence[Run1],
    metric: str = "",
    method: str = METHODS[0],
    start_prior: float | Prior | None = None,
    order: Mapping[str, int] | None = None,
    aside_weight: bool = True,
    below: float | None = None,
) -> Noise:
    """The noise model of these level runs (see the module's description), by ``method``
    (one of ``METHODS``); ``start_prior``: the "anchored" method's stated spread between
    starts (relative sd, ``campaign.start_spread``, weighed as ``PRIOR_DOF`` starts), or per
    level with its own weight (``Prior``: earlier runs' measured spread; a level it lacks
    takes the first level's); see ``_stated``. ``aside_weight`` False: where the statement
    is set aside, its weight goes with it (the run's own degrees of freedom alone), as
    "anchored" decisions recorded before 2026-12-07's evening were taken (``verify``).
    ``below``: the lower tail at which the statement gives way to the run's own starts
    (``BELOW``; see ``_stated``); None: it never does, as decided before 2026-12-07's night."""
    if method not in METHODS:
        raise ValueError(f"no noise method {method!r}: one of {', '.join(METHODS)}")
    set_aside: float | None = None
    gave_way: set[Point] = set()
    level_dof: dict[Point, int] = {}
    n_cells, dofs, within_var, d0 = _within(runs)
    between = session_means(runs)
    restarts = _restarts(runs)
    timed = order if method == "anchored" else None  # (older methods: as they decided)
    session_var, h, levels = _between(
        between, restarts, per_level=method != "pooled", order=timed, runs=runs
    )
    if timed is not None:
        restarts = max(0, restarts - _lines(runs, timed))
    points = sorted({r.level for r in runs}, key=lambda p: p.order)
    if method == "anchored" and start_prior and points:
        prior = _per_level(start_prior, points)
        folded = _stated(session_var, h, levels, restarts, within_var or 0.0, prior, points, below)
        # (set aside or not, the statement's weight stays: a spread from the run's own one
        # or two starts alone would be t of one or two degrees of freedom, intervals of
        # x0.00-4000 that decide nothing where the runs differ by 25%)
        own = restarts
        restarts += int(min(d for _, d in prior.values()))
        if folded is None:
            set_aside = _typical(prior)
            restarts = restarts if aside_weight else own
        else:
            session_var, h, levels, aside, gave_way = folded
            if not aside_weight:
                level_dof = {p: own for p in aside}
            if aside:
                set_aside = _typical({p: prior[p] for p in aside})
    return Noise(
        metric=metric,
        within_var=within_var,
        within_dof=d0,
        within_cells=n_cells,
        within_total_dof=float(dofs.sum()),
        session_var=session_var,
        session_dof=restarts,
        session_h=h,
        between_cells=len(between),
        levels=levels,
        method=method,
        set_aside=set_aside,
        level_dof=level_dof,
        aside_kept=aside_weight,
        below=below if method == "anchored" and start_prior and points else None,
        gave_way=tuple(sorted(gave_way, key=lambda p: p.order)),
    )


def campaign_spread(
    experiments: Sequence[Experiment], metric: str
) -> dict[Point, tuple[float, float]]:
    """``measured_spread`` of a run's experiments (finished ones) for ``metric``'s means,
    each experiment at its place in the run."""
    order = {e.id: i for i, e in enumerate(experiments)}
    return measured_spread(level_runs(experiments, metric), order)


def pooled_spread(
    spreads: Iterable[Mapping[Point, tuple[float, float]]],
) -> dict[Point, tuple[float, float]]:
    """Several runs' ``measured_spread`` together: per level, their variances on the log
    scale weighed by their degrees of freedom, which add up."""
    acc: dict[Point, list[float]] = {}
    for one in spreads:
        for level, (sd, dof) in one.items():
            a = acc.setdefault(level, [0.0, 0.0])
            a[0] += dof * math.log1p(sd) ** 2
            a[1] += dof
    return {
        level: (math.expm1(math.sqrt(ss / dof)), dof) for level, (ss, dof) in acc.items() if dof > 0
    }


def _per_level(
    start_prior: float | Prior, points: Sequence[Point]
) -> dict[Point, tuple[float, float]]:
    """The prior at each of ``points``: a stated spread at ``PRIOR_DOF`` everywhere, or a
    measured one per level (a level it lacks: its first level's)."""
    if isinstance(start_prior, float | int):
        return {p: (float(start_prior), float(PRIOR_DOF)) for p in points}
    fallback = next(iter(sorted(start_prior.items(), key=lambda kv: kv[0].order)))[1]
    return {p: start_prior.get(p, fallback) for p in points}


def _typical(prior: Mapping[Point, tuple[float, float]]) -> float:
    """One spread for the prior's levels: the root of their weighted mean square."""
    weight = sum(d for _, d in prior.values())
    return math.sqrt(sum(d * s * s for s, d in prior.values()) / weight)


def _stated(
    session_var: float | None,
    h: float,
    levels: Mapping[Point, tuple[float, float]],
    restarts: int,
    within: float,
    prior: Mapping[Point, tuple[float, float]],
    points: Sequence[Point],
    below: float | None = None,
) -> tuple[float, float, dict[Point, tuple[float, float]], set[Point], set[Point]] | None:
    """The variance of session means with a stated spread between starts folded in
    ("anchored"): ``spread`` (a relative sd) weighs as ``PRIOR_DOF`` starts beside the run's
    own ``restarts``, at every level of ``points`` (``prior``: per level, the spread and its
    weight d_f): S^2 = (d_f (sb0^2 + h s^2) + d S_m^2) / (d_f + d), the way a moderated
    variance takes its prior (Smyth 2004). So the spread
    between starts is never taken as nothing, nor from one degree of freedom (t of one is
    12.7): before the baseline is measured again it is the stated one; as the run measures
    starts, more and more its own, level by level. Where the run's starts differ far more than
    stated (beyond the 90th percentile of chi-square for their degrees of freedom), the
    statement's size is set aside and the run's own spread is taken: over every level (None
    is returned), or at one level whose starts alone differ so (a level at its power limit,
    say, where the others agree with the statement; the levels set aside, returned last).
    The statement's weight stays with it (the caller adds its degrees of freedom either
    way): the run's own one or two starts alone would give t of one or two degrees of
    freedom, intervals that decide nothing (0.00-4436 for a change of -26% on a fresh H100);
    in simulated campaigns, starts 5% apart against the stated 2%, keeping the weight
    adopted +10% in 72% of campaigns instead of 56% and called identical configurations
    different in 1.0% of experiments instead of 0.5% (``benchmarks/README.md``).

    With ``below``, where the run's starts differ far less than stated (below that lower tail
    of chi-square for their degrees of freedom), the statement gives way to the largest
    spread they allow: their own at its upper confidence bound (1 - ``below``), never more
    than the statement, weighed as the statement was. A host whose starts agree within 1%
    against the stated 2% then decides what its starts allow: in simulated campaigns
    (``benchmarks/campaigns.py``, starts 0.3-3% apart) +10% was adopted in 88-97% of
    campaigns instead of 80-93%, identical configurations were called equivalent at C=1 in
    17-26% instead of 1-3%, and a decided experiment cost 10.9-12.4 GPU-minutes instead of
    13.0-13.6, identical configurations adopted or rejected as often as before (0-0.8%; at
    5% apart 1.0% either way over 150 campaigns). The run's own spread itself, rather than
    its upper bound, is chosen where it happened to come out small (identical ones 0.8-3.3%
    at 1-5%)."""
    from scipy import stats

    b = {p: math.log1p(sd) ** 2 for p, (sd, _) in prior.items()}
    w = {p: d_p for p, (_, d_p) in prior.items()}
    prior_b = math.log1p(_typical(prior)) ** 2
    d_all = min(w.values())
    d = float(restarts)
    far = float(stats.chi2.ppf(0.9, d)) / d if d > 0 else math.inf
    near = float(stats.chi2.ppf(below, d)) / d if d > 0 and below else 0.0

    def beyond(var: float | None, h_l: float, b_l: float) -> bool:
        # the run's own starts differ far more than stated (one-sided chi-square at 10%):
        # the statement is wrong for this host: the run's own spread is taken (its weight kept)
        return var is not None and d > 0 and max(0.0, var - h_l * within) / b_l > far

    gave: set[Point] = set()

    def gives_way(var: float | None, h_l: float, b_l: float, p: Point | None = None) -> float:
        # the run's own starts differ far less than stated: the statement gives way to the
        # largest spread the run's starts allow (their session means' variance at its upper
        # bound at 1 - below, less the part the repetitions explain), b_l else; never nothing
        # where the repetitions vary, for the bound on the means' variance exceeds that part
        if var is None or d <= 0 or near <= 0:
            return b_l
        bound = max(0.0, var / near - h_l * within)
        if bound >= b_l:
            return b_l
        if p is not None:
            gave.add(p)
        return bound

    if beyond(session_var, h, prior_b):
        return None

    def fold(var: float | None, h_l: float, b_l: float, d_f: float) -> float:
        stated = b_l + h_l * within
        return stated if var is None or d <= 0 else (d_f * stated + d * var) / (d_f + d)

    out = {}
    aside = set()
    for p in points:
        var, h_l = levels.get(p, (session_var, h if session_var is not None else 1.0))
        if p in levels and var is not None and beyond(var, h_l, b[p]):
            out[p] = (var, h_l)
            aside.add(p)
        else:
            out[p] = (fold(var, h_l, gives_way(var, h_l, b[p], p), w[p]), h_l)
    h_all = h if session_var is not None else 1.0
    low = gives_way(session_var, h_all, prior_b)
    return fold(session_var, h_all, low, d_all), h_all, out, aside, gave


def _lines(runs: Sequence[Run1], order: Mapping[str, int]) -> int:
    """Degrees of freedom the lines in time take up (``detrended``): one per configuration
    whose starts lie at two or more places in time (its slope), counted once over its levels,
    as ``_restarts`` counts starts (two starts at two places: their one, and nothing is
    left)."""
    starts: dict[str, set[SessionKey]] = {}
    for r in runs:
        starts.setdefault(r.config, set()).add(r.session)
    taken = 0
    for sessions in starts.values():
        places = {order.get(k[0], 0) for k in sessions}
        if len(places) >= 2:
            taken += 1
    return taken


def _restarts(runs: Sequence[Run1]) -> int:
    """Degrees of freedom of the spread between starts: one per extra start of a
    configuration. Not one per level too: a start that runs slow is slow at every level,
    so its levels are not independent draws of it."""
    starts: dict[str, set[SessionKey]] = {}
    for r in runs:
        starts.setdefault(r.config, set()).add(r.session)
    return sum(len(s) - 1 for s in starts.values())


@dataclass(frozen=True)
class Side:
    """One side of a comparison at one level: its repetitions' log values and sessions."""

    logs: Sequence[float]
    sessions: Sequence[SessionKey]

    @property
    def n(self) -> int:
        return len(self.logs)

    @property
    def mean(self) -> float:
        return float(np.mean(self.logs))

    def ss(self) -> tuple[float, int]:
        """Sum of squares and degrees of freedom within its sessions."""
        groups: dict[SessionKey, list[float]] = {}
        for v, s in zip(self.logs, self.sessions, strict=True):
            groups.setdefault(s, []).append(v)
        ss = sum(float(((np.asarray(g) - np.mean(g)) ** 2).sum()) for g in groups.values())
        return ss, sum(len(g) - 1 for g in groups.values())

    def start_weight(self) -> float:
        """sum((n_j / n)^2) over its sessions: 1 for one server, 1/n for one per repetition."""
        counts: dict[SessionKey, int] = {}
        for s in self.sessions:
            counts[s] = counts.get(s, 0) + 1
        return sum((k / self.n) ** 2 for k in counts.values())


def side_of(runs: Sequence[Run1]) -> Side:
    return Side([r.log for r in runs], [r.session for r in runs])


@dataclass(frozen=True)
class Estimate:
    """A difference of mean logs with its standard error and degrees of freedom, and what
    went into its variance (for the repetitions that would decide)."""

    diff: float
    se: float | None
    dof: float | None
    within: float = 0.0  # the within-session variance used (s^2)
    within_dof: float = 0.0


def unpaired(parent: Side, child: Side, noise: Noise) -> Estimate:
    """child - parent mean log, with the run's noise model."""
    diff = child.mean - parent.mean
    ss_p, d_p = parent.ss()
    ss_c, d_c = child.ss()
    s2, d_w = noise.moderated(ss_p + ss_c, d_p + d_c)
    if s2 is None and noise.session_var is None:
        return Estimate(diff, None, None)
    var, dof = noise.variance(
        s2 or 0.0,
        d_w,
        1 / parent.n + 1 / child.n,
        parent.start_weight() + child.start_weight(),
        one_start=len(set(parent.sessions)) == 1 or len(set(child.sessions)) == 1,
    )
    if var <= 0 or dof is None:
        return Estimate(diff, 0.0, None, s2 or 0.0, d_w)
    return Estimate(diff, math.sqrt(var), dof, s2 or 0.0, d_w)


def paired(diffs: Sequence[float], noise: Noise) -> Estimate:
    """Mean of per-pair log ratios (each pair ran side by side in time, each on its own
    server), its spread moderated with what the noise model predicts for it: twice a
    session's variance at one repetition."""
    d = np.asarray(diffs, dtype=float)
    n = int(d.size)
    mean = float(d.mean())
    s2 = noise.within_var or 0.0
    prior, prior_dof = noise.variance(s2, noise.within_dof, 2.0, 2.0)
    own_ss = float(((d - mean) ** 2).sum()) if n >= 2 else 0.0
    own_dof = n - 1
    if prior_dof is None or prior <= 0:
        if own_dof < 1:
            return Estimate(mean, None, None)
        var, dof = own_ss / own_dof, float(own_dof)
    else:
        var = (prior_dof * prior + own_ss) / (prior_dof + own_dof)
        dof = prior_dof + own_dof
    return Estimate(mean, math.sqrt(var / n), dof if var > 0 else None, s2, noise.within_dof)


@dataclass(frozen=True)
class StartSpread:
    """One configuration's spread between its server starts at one level, against the other
    configurations' pooled there (variances of the starts' mean log values)."""

    level: Point
    starts: int
    own: float
    pooled: float
    dof_others: int
    p: float  # one-sided F test: its own spread no wider than the pool's


def start_spreads(runs: Sequence[Run1], config: str) -> list[StartSpread]:
    """Per level where ``config`` ran on two or more starts and the other configurations
    together give the pool a degree of freedom: its starts' spread against theirs."""
    from scipy import stats

    groups = session_means_by_config(runs)
    out = []
    for mine, level, means, _ in groups:
        if mine != config:
            continue
        others = [m for c, lv, m, _ in groups if c != config and lv == level]
        dof_others = sum(m.size - 1 for m in others)
        if dof_others < 1:
            continue
        own = float(means.var(ddof=1))
        pooled = sum(float(m.var(ddof=1)) * (m.size - 1) for m in others) / dof_others
        if own <= 0:
            p = 1.0
        else:
            p = float(stats.f.sf(own / pooled, means.size - 1, dof_others)) if pooled > 0 else 0.0
        out.append(StartSpread(level, int(means.size), own, pooled, dof_others, p))
    return out
