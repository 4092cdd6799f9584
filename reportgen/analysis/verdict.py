"""The verdict on one experiment, and which configuration is best so far.

Pure: a run's results and the request rows of the tables compared in, a ``Decision`` out. The
runner calls it after each experiment; ``reportgen verify`` calls it again on the numbers it
recomputed from the raw tables, so the two can never disagree on how a verdict is reached.

- ``failed``: the experiment did not run to its end, or an assumption check that invalidates
  its numbers failed (``checks.invalidated``);
- ``baseline``: the first experiment, the reference of every other;
- otherwise the objective against the parent (its interleaved runs where there are some,
  compared pair by pair), ``adopt.decide``: adopted, rejected, equivalent or inconclusive;
  and every headline metric against the parent and the baseline (``decide``'s run-level
  comparisons for throughputs and medians, the two-level bootstrap for p99).

The run-level comparisons use the run's noise model (``analysis.noise``) as it stood when the
experiment was decided: from the experiments up to it, never later ones, so ``verify`` gets
the same answer from the finished run, by the method the run recorded (``Decision.method``):
one of ``noise.METHODS``, or, without one, each comparison's own runs (Welch), as an earlier
reportgen took it.

The best configuration is the adopted one with the highest objective score against the
baseline: the geometric mean of its ratios at the objective's levels (inverted when lower is
better).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from reportgen import metrics
from reportgen.analysis import adopt, decide, online, sequential, tails, unjudged, welch
from reportgen.analysis import noise as noise_mod
from reportgen.analysis import sides as sides_mod
from reportgen.analysis.checks import invalidated, starts_apart
from reportgen.analysis.drift import best_after, choose_best, drift_check
from reportgen.analysis.explain import explain
from reportgen.analysis.noise import Noise
from reportgen.analysis.sides import Side, sides
from reportgen.analysis.sides import against as sides_against
from reportgen.campaign.workload import repetitions_bounds
from reportgen.load.records import RequestRecord
from reportgen.results.findings import METHOD
from reportgen.results.levels import Level
from reportgen.results.model import Experiment, Point, Run
from reportgen.results.verdicts import Comparison, Decision, NoiseRecord, Unjudged

Rows = Mapping[str, Sequence[RequestRecord]]  # a request table's name -> its rows


def experiment_alpha(run: Run, entry: Experiment | None = None) -> float:
    """The false-alarm rate ``entry`` is decided at: ``campaign.alpha`` (5%); where
    ``alpha_scope = "campaign"``, the fallback procedure's rate from the verdicts before it
    (``analysis.online``; without ``entry``, alpha divided by the campaign's compared
    experiments, Bonferroni's, as every experiment was decided before 2026-12-07)."""
    alpha = run.settings.alpha
    if run.settings.alpha_scope == "campaign":
        if entry is not None:
            return online.rate_for(run, entry)
        alpha /= online.compared(run)
    return alpha


CURRENT = noise_mod.METHODS[0]  # how decisions are taken now (``Decision.method``; None: "welch")


def oldest(methods: Iterable[str | None]) -> str:
    """The oldest of decisions' methods ("welch" for a decision without one)."""
    order = [*noise_mod.METHODS, "welch"]
    said = [m or "welch" for m in methods]
    return max(said, key=lambda m: order.index(m) if m in order else len(order), default=CURRENT)


def decide_experiment(
    run: Run,
    entry: Experiment,
    rows: Rows,
    method: str | None = CURRENT,
    *,
    before_failure: bool = True,
    alpha: float | None = None,
    unjudged_rule: bool = True,
    aside_weight: bool = True,
    gives_way: bool = True,
) -> Decision:
    """The decision on ``entry`` (an experiment of ``run`` whose checks are done), from its
    levels, its parent's and the baseline's, and the request rows of their tables. ``method``:
    one of ``noise.METHODS`` (the run's noise model, from the experiments up to ``entry``), or
    None or "welch" (each comparison's own runs; how decisions were taken before, kept to
    verify such runs).
    ``before_failure``: a failed experiment's finished levels are compared (False: as
    reportgen did before, kept to verify such runs). ``alpha``: the false-alarm rate it is
    decided at (default ``experiment_alpha``; ``verify`` gives the one recorded).
    ``unjudged_rule``: an experiment whose numbers are no verdict on a server change (another
    load, an expected failure that ran, speculation over degenerate answers, another machine
    or model build: ``analysis.unjudged``) is not judged; False: judged, as reportgen did
    before, kept to verify such runs. ``aside_weight`` False: a stated spread between starts
    set aside takes its weight with it (``noise.estimate``), as decisions recorded before
    2026-12-07's evening were taken, kept to verify such runs. ``gives_way`` False: the
    stated spread never gives way to starts that differ far less (``noise.BELOW``), as
    decisions recorded before 2026-12-07's night were taken, kept to verify such runs."""
    if entry.ok and invalidated(entry.checks):
        return _said(run, entry, Decision(verdict="failed", explanation=""))
    if not entry.ok:
        failed = _failed(run, entry, rows, method, before_failure, alpha, aside_weight, gives_way)
        return _said(run, entry, failed)
    if run.baseline is None or entry.id == run.baseline.id:
        return _said(run, entry, Decision(verdict="baseline", explanation=""))
    compare = Comparer(run, entry, method, alpha, aside_weight, gives_way)
    parent_side, base_side = sides(run, entry, stand_ins=unjudged_rule)
    vs_parent = compare.objective(parent_side)
    noise = compare.noise(run.metric) if compare.pooled else None
    why = why_unjudged(run, entry, parent_side, rows) if unjudged_rule else None
    verdict: decide.ObjectiveVerdict = "inconclusive"
    if parent_side is not None and parent_side.ok and not why:
        verdict, _, _ = adopt.decide(
            entry.id,
            parent_side.id,
            vs_parent,
            run.metric,
            run.margin,
            between_sd=noise.between_sd if noise else None,
            legacy=not compare.pooled,
        )
    decision = Decision(
        verdict=verdict,
        explanation="",
        vs_parent=vs_parent,
        vs_baseline=compare.objective(base_side),
        paired=bool(parent_side and parent_side.paired),
        method=compare.method,
        alpha=compare.alpha if compare.pooled else None,
        noise=None if noise is None else noise_summary(noise),
        metrics=every_metric(
            compare, entry, rows, [("vs_parent", parent_side), ("vs_baseline", base_side)]
        ),
        unjudged=why,
        stand_in=parent_side.id if parent_side and parent_side.stands_for else None,
        measured_against=list(parent_side.against)
        if parent_side is not None and parent_side.parts
        else None,
        baseline_against=list(base_side.against)
        if base_side is not None and base_side.parts and base_side is not parent_side
        else None,
    )
    return _said(run, entry, decision)


def energy_vs_parent(run: Run, entry: Experiment) -> list[Comparison]:
    """Output tokens per joule against the parent at the objective's levels, by the method
    and false-alarm rate its decision used (the run's noise model for this metric): the cost
    and efficiency table's comparison where tokens per joule are not the objective (where they
    are, the decision's own). Empty without a decision, a parent, or energy on both sides."""
    d = entry.decision
    if d is None or not entry.ok or run.baseline is None or entry.id == run.baseline.id:
        return []
    parent_side, _ = sides(run, entry)
    if parent_side is None or not parent_side.ok:
        return []
    if run.metric == "output_tok_per_j":
        return list(d.vs_parent)
    compare = Comparer(run, entry, d.method, d.alpha, aside_weight(d), gives_way(d))
    return compare.objective_like(parent_side, "output_tok_per_j", higher_is_better=True)


def aside_weight(d: Decision) -> bool:
    """Whether ``d`` was taken with a set-aside stated spread's weight kept
    (``noise.estimate``): True unless it set one aside and recorded no weight (before
    2026-12-07's evening)."""
    noise = d.noise
    return not (
        noise is not None
        and noise.start_spread_set_aside is not None
        and noise.set_aside_weight is None
    )


def gives_way(d: Decision) -> bool:
    """Whether ``d`` was taken with the stated spread giving way to starts that differ far
    less (``noise.BELOW``): True unless it was decided by the "anchored" method and recorded
    no tail (before 2026-12-07's night)."""
    noise = d.noise
    return not (d.method == "anchored" and noise is not None and noise.gives_way is None)


def why_unjudged(
    run: Run, entry: Experiment, parent_side: Side | None, rows: Rows
) -> list[Unjudged]:
    """Why ``entry`` is not judged against ``parent_side`` (its parent's, from ``sides``:
    ``analysis.unjudged``; [] where it is), from the request records of ``rows`` (by table)
    that are there: the answers of a side whose table is missing are not looked at."""
    if parent_side is None:
        parent = run.experiment(entry.parent)
        theirs = None
    else:  # (a stand-in for the parent, where there is one, is what the verdict compares)
        parent = run.experiment(parent_side.id)
        theirs = rows.get(parent_side.table)
    # interleaved, the parent's configuration ran beside it: on its machine
    beside = parent_side is not None and parent_side.paired
    machines = (
        unjudged.gpus_of(run, entry),
        None if beside or parent is None else unjudged.gpus_of(run, parent),
    )
    return unjudged.unjudged(entry, parent, rows.get(entry.table), theirs, machines)


def _said(run: Run, entry: Experiment, decision: Decision) -> Decision:
    """``decision`` with its words (``explain``), made from what it records."""
    return decision.model_copy(update={"explanation": explain(run, entry, decision).text})


def _failed(
    run: Run,
    entry: Experiment,
    rows: Rows,
    method: str | None,
    before_failure: bool,
    alpha: float | None = None,
    aside_weight: bool = True,
    gives_way: bool = True,
) -> Decision:
    """A failed experiment's decision: failed, with the levels it finished before its server
    failed compared as a successful experiment's are (its verdict cannot rest on them: the
    configuration did not survive the campaign's load). ``aside_weight``, ``gives_way``: as
    ``decide_experiment``'s."""
    keep = entry.finished_before_failure() if before_failure else []
    if not keep or run.baseline is None or entry.id == run.baseline.id:
        return Decision(verdict="failed", explanation="")
    done = entry.model_copy(update={"levels": [lv for lv in entry.levels if lv.point in keep]})
    rows = {
        **rows,
        entry.table: [r for r in rows.get(entry.table, ()) if decide.point_of(r) in keep],
    }
    compare = Comparer(run, done, method, alpha, aside_weight, gives_way)
    parent_side, base_side = sides(run, done)
    noise = compare.noise(run.metric) if compare.pooled else None
    return Decision(
        verdict="failed",
        explanation="",
        vs_parent=compare.objective(parent_side),
        vs_baseline=compare.objective(base_side),
        paired=bool(parent_side and parent_side.paired),
        method=compare.method,
        alpha=compare.alpha if compare.pooled else None,
        noise=None if noise is None else noise_summary(noise),
        metrics=every_metric(
            compare, done, rows, [("vs_parent", parent_side), ("vs_baseline", base_side)]
        ),
        before_failure=keep,
    )


def _so_far(run: Run, entry: Experiment, rows: Rows | None) -> list[Comparison]:
    """``entry``'s objective comparisons with its parent from its levels so far (none where
    it cannot be judged: more of it would not make a verdict)."""
    parent_side, _ = sides(run, entry)
    if why_unjudged(run, entry, parent_side, rows or {}):
        return []
    return Comparer(run, entry, CURRENT).objective(parent_side)


def open_levels(run: Run, entry: Experiment, rows: Rows | None = None) -> list[Point]:
    """The objective's levels where ``entry`` (still running, its levels so far) cannot yet
    be told from its parent, and more repetitions could tell (``still_open``). ``rows``: the
    request records measured so far by table, its own and those of what it is compared with
    where the caller has them (their answers say whether they are degenerate)."""
    found = _so_far(run, entry, rows)
    _, high = repetitions_bounds(entry.repetitions_asked)
    return [c.point for c in found if still_open(c, high)]


def equivalence_open(run: Run, entry: Experiment, rows: Rows | None = None) -> list[str]:
    """The objective levels where ``entry`` (its levels so far), better and worse nowhere, is
    still inconclusive with its ratio inside the campaign's margin, each with its ratio and
    the change its interval leaves possible: where one more start could show it equivalent
    (``campaign.more_starts``). Empty where it is decided, or cannot be judged."""
    found = _so_far(run, entry, rows)
    if any(c.verdict in ("better", "worse") for c in found):
        return []
    inside = math.log1p(run.margin)
    return [
        f"{c.point.label}: x{c.ratio:.3f}"
        + (f", no change beyond {c.bound:.1%} shown" if c.bound is not None else "")
        for c in found
        if c.verdict == "inconclusive" and c.ratio and abs(math.log(c.ratio)) < inside
    ]


@dataclass(frozen=True)
class Judge:
    """What a running experiment asks of the run's decisions so far: which objective levels
    are still open (``open_levels``), where its starts disagree with the other
    configurations' (``starts_apart``) and where it could still be shown equivalent
    (``equivalence_open``). ``tables``: adds to the experiment's request records
    so far the saved ones it is compared with (the runner's; None: its own alone)."""

    run: Run
    entry: Experiment
    tables: Callable[[Rows], Rows] | None = None

    def open_levels(self, mine: Rows) -> list[Point]:
        return open_levels(self.run, self.entry, self.tables(mine) if self.tables else mine)

    def starts_apart(self) -> list[str]:
        return starts_apart(self.entry, self.run.known_at(self.entry.id), self.run.metric)

    def equivalence_open(self, mine: Rows) -> list[str]:
        return equivalence_open(self.run, self.entry, self.tables(mine) if self.tables else mine)


FUTILITY_DOF = METHOD.futility_dof  # no futility stop before an interval has this many dof


def still_open(c: Comparison, high: int | None = None) -> bool:
    """Whether one more repetition of a comparison's level could tell: inconclusive, with a
    ratio, and not held back by the spread between server starts alone or by a side on one
    start. With ``high`` (the most repetitions a side), a futility stop: not where the
    repetitions a side that would decide it are beyond ``high`` (or none would), once its
    interval has ``FUTILITY_DOF`` degrees of freedom (before that the count is pessimistic:
    benchmarks/verdicts.py --adaptive measured it, with the parent grown beside the child)."""
    if c.verdict != "inconclusive" or c.ratio is None:
        return False
    if c.limit in ("starts", decide.ONE_START):
        return False
    futile = c.reps_needed is None or c.reps_needed > high if high is not None else False
    return not (futile and (c.dof or 0.0) >= FUTILITY_DOF)


def noise_summary(noise: Noise) -> NoiseRecord:
    """What a decision records of the noise model it used."""
    record = NoiseRecord(
        within_sd=noise.within_sd,
        within_dof=noise.within_dof,
        within_cells=noise.within_cells,
        within_total_dof=noise.within_total_dof,
        between_sd=noise.between_sd,
        between_dof=noise.between_dof,
        between_cells=noise.between_cells,
    )
    if noise.levels:  # the spread between starts at each level ("levels")
        record.between_sd_by_level = {
            p.label: noise.at(p).between_sd for p in sorted(noise.levels, key=lambda p: p.order)
        }
    if noise.set_aside is not None:
        record.start_spread_set_aside = noise.set_aside
        if noise.aside_kept:
            record.set_aside_weight = noise_mod.PRIOR_DOF  # its weight kept (``estimate``)
    if noise.below:
        record.gives_way = noise.below
        if noise.gave_way:
            record.gave_way_at = [p.label for p in noise.gave_way]
    if noise.stalls:
        record.stalls = [
            f"{x.session[0]}{' (its control)' if x.session[1] == 'control' else ''} "
            f"{x.level.label} repetition {x.repetition + 1}: "
            + ("a request in it stalled; " if x.request else "")
            + (
                f"{x.worse:.0%} worse than its configuration's other runs there"
                if x.worse > 0 or not x.request
                else "no worse than its configuration's other runs there"
            )
            for x in noise.stalls
        ]
    return record


class Comparer:
    """Comparisons of one experiment with a side, by the method asked for: the run's noise
    model from the experiments up to it (one per metric, estimated once), or each
    comparison's own runs."""

    def __init__(
        self,
        run: Run,
        entry: Experiment,
        method: str | None,
        alpha: float | None = None,
        aside_weight: bool = True,
        gives_way: bool = True,
    ) -> None:
        self.run = run
        self.aside_weight = aside_weight
        self.gives_way = gives_way
        self.entry = entry
        self.method = method if method in noise_mod.METHODS else None
        self.pooled = self.method is not None
        self.known = run.known_at(entry.id)  # what the run knew when deciding it
        reps = entry.repetitions_asked
        # one verdict over several objective levels: their intervals share its 5% (Bonferroni)
        levels = run.objective_count({lv.point for lv in entry.levels})
        self.alpha = alpha if alpha is not None else experiment_alpha(run, entry)
        self.confidence = sequential.confidence_for(reps, 1 - self.alpha / max(1, levels))
        # "equivalent" by the two one-sided tests at alpha each, per level: an experiment
        # equivalent only where every level is (an intersection-union test) needs no share;
        # by the "anchored" method at the campaign's alpha, not the experiment's online share
        # of it: that share bounds changes adopted or rejected wrongly, and a wrong
        # "equivalent" (a real change within the margin) is another error, held per experiment
        tost = run.settings.alpha if self.method == "anchored" else self.alpha
        self.equivalence = (
            sequential.confidence_for(reps, 1 - 2 * tost)
            if self.method not in (None, "pooled")
            else None
        )
        low, high = repetitions_bounds(reps)
        self.fresh_rounds = high > low  # adaptive: each repetition added starts a server
        self._noise: dict[str, Noise] = {}
        self._pool: dict[str, list[noise_mod.Run1]] = {}  # the runs each model was made of

    def noise(self, metric: str, stat: str = "p50") -> Noise:
        key = metric if stat == "p50" else f"{metric}.{stat}"
        if key not in self._noise:
            runs = noise_mod.level_runs(self.known, metric, stat, current=self.entry.id)
            self._pool[key] = runs
            order = {e.id: i for i, e in enumerate(self.run.experiments)}
            held: list[noise_mod.Stall] = []
            if self.method == "anchored":  # runs held by a stall are left out
                held = noise_mod.held_runs(runs, metrics.is_throughput(metric))
                out = {x.key for x in held}
                runs = [r for r in runs if r.key not in out]
            found = noise_mod.estimate(
                runs,
                metric,
                self.method or CURRENT,
                start_prior=self.run.prior_for(metric, stat),
                order=order,
                aside_weight=self.aside_weight,
                below=noise_mod.BELOW if self.gives_way else None,
            )
            self._noise[key] = replace(found, stalls=tuple(held))
        return self._noise[key]

    def _with_stalls_of(self, runs: list[noise_mod.Run1], metric: str, stat: str) -> Noise:
        """The noise model of ``metric``, its stalls sought among ``runs`` too where they are
        not among what it was made of (a side measured after this experiment: the bracket,
        a re-measurement of the baseline), so that a side's stall is left out as its own."""
        noise = self.noise(metric, stat)
        if self.method != "anchored":
            return noise
        key = metric if stat == "p50" else f"{metric}.{stat}"
        pool = self._pool[key]
        known = {r.key for r in pool}
        extra = [r for r in runs if r.key not in known]
        if not extra:
            return noise
        found = noise_mod.held_runs([*pool, *extra], metrics.is_throughput(metric))
        merged = {x.key: x for x in (*noise.stalls, *found)}
        noise = replace(noise, stalls=tuple(merged.values()))
        self._noise[key] = noise
        return noise

    def objective(self, side: Side | None) -> list[Comparison]:
        if side is None or not side.ok:
            return []
        run = self.run
        points = {lv.point for lv in (*side.levels, *side.grown, *self.entry.levels)}
        levels = run.objective_points(points)
        return self.compare(side, run.metric, run.higher_is_better, levels=levels)

    def objective_like(self, side: Side, metric: str, higher_is_better: bool) -> list[Comparison]:
        """``metric`` compared as the objective is: at the levels that decide, with its
        intervals."""
        points = {lv.point for lv in (*side.levels, *side.grown, *self.entry.levels)}
        levels = self.run.objective_points(points)
        return self.compare(side, metric, higher_is_better, levels=levels)

    def compare(
        self,
        side: Side,
        metric: str,
        higher_is_better: bool,
        levels: Sequence[Point] | None = None,
        stat: str = "p50",
    ) -> list[Comparison]:
        """``side`` against the experiment on ``metric`` (latencies at ``stat``) at every
        common level, by the method asked for."""
        run, entry = self.run, self.entry
        if not self.pooled:
            return welch.compare_experiments(
                [*side.levels, *side.grown],
                entry.levels,
                metric,
                margin=run.margin,
                higher_is_better=higher_is_better,
                levels=levels,
                paired=side.paired,
            )
        owner, role = (entry.id, "control") if side.paired else (side.id, "experiment")
        grown = noise_mod.own_runs(side.grown, entry.id, "control", metric, stat)
        parts = side.parts or ((owner, side.levels),)  # each measurement its own sessions
        theirs = [
            r for who, levels in parts for r in noise_mod.own_runs(levels, who, role, metric, stat)
        ]
        noise = self._with_stalls_of(theirs + grown, metric, stat)
        out = {x.key for x in noise.stalls}

        def kept(runs: list[noise_mod.Run1]) -> list[noise_mod.Run1]:
            return [r for r in runs if r.key not in out]

        return decide.compare_sides(
            kept(theirs + grown),
            kept(noise_mod.own_runs(entry.levels, entry.id, "experiment", metric, stat)),
            noise,
            margin=run.margin,
            higher_is_better=higher_is_better,
            metric=metric if stat == "p50" else f"{metric}_{stat}",
            levels=levels,
            paired=side.paired,
            confidence=self.confidence,
            fresh_rounds=self.fresh_rounds,
            equivalence=self.equivalence,
        )


def every_metric(
    compare: Comparer, entry: Experiment, rows: Rows, against: Sequence[tuple[str, Side | None]]
) -> dict[str, list[Comparison]]:
    """Every headline metric against each side, at every common level: run-level
    comparisons for throughputs and medians; for p99 too by the "levels" method (each run's
    p99 an observation of the same start-aware model, none with fewer than
    ``tails.TAIL_MIN`` requests above it a side), the two-level bootstrap before it."""
    out: dict[str, list[Comparison]] = {}
    # the parent's side is often the baseline's: compared once
    done: dict[tuple[str, bool, bool, tuple[str, ...]], list[Comparison]] = {}
    mine = rows.get(entry.table, ())
    margin = compare.run.margin
    for name, side in against:
        if side is None or not side.ok:
            continue
        key = (side.table, side.paired, bool(side.grown), side.against)
        if key not in done:
            found = [
                c
                for metric, higher in metrics.HEADLINE
                for c in compare.compare(side, metric, higher)
            ]
            if compare.method in (None, "pooled"):
                found += tails.tail_comparisons(rows.get(side.table, ()), mine, margin=margin)
            else:
                found += _tails(compare, side, entry)
            done[key] = found
        out[name] = done[key]
    return out


def _tails(compare: Comparer, side: Side, entry: Experiment, q: float = 99) -> list[Comparison]:
    """p``q`` of TTFT and end-to-end latency, each run's an observation of the noise model;
    without an interval where a side has fewer than ``tails.TAIL_MIN`` requests above it,
    then by the "anchored" method decided by its runs' order where that can tell
    (``tails.ordered``)."""
    stat = f"p{q:g}"
    out = []
    theirs_all = [*side.levels, *side.grown]
    for metric in metrics.TAILS:
        for c in compare.compare(side, metric, False, stat=stat):
            above = min(_above(theirs_all, c.point, q), _above(entry.levels, c.point, q))
            if above >= tails.TAIL_MIN:
                out.append(c)
            elif compare.method == ORDERED_TAILS:
                parent = _values(theirs_all, c.point, metric, stat)
                child = _values(entry.levels, c.point, metric, stat)
                alpha = 1 - compare.confidence
                out.append(tails.ordered(c, parent, child, alpha=alpha, margin=compare.run.margin))
            else:
                out.append(tails.too_few_above(c))
    return out


ORDERED_TAILS = "anchored"  # the method from which a tail without an interval is decided by order


def _values(levels: Sequence[Level], point: Point, metric: str, stat: str) -> list[float]:
    """``metric`` at ``stat`` of each usable run at ``point``."""
    got = (lv.summary.value(metric, stat) for lv in levels if lv.point == point and not lv.aborted)
    return [v for v in got if v is not None and math.isfinite(v) and v > 0]


def _above(levels: Sequence[Level], point: Point, q: float) -> float:
    """Requests above the ``q``th percentile at ``point``, over the usable runs."""
    ok = sum(lv.summary.ok for lv in levels if lv.point == point and not lv.aborted)
    return ok * (1 - q / 100)


def with_sides(
    run: Run, entry: Experiment, rows: Rows, rows_of: Callable[[str], Sequence[RequestRecord]]
) -> dict[str, Sequence[RequestRecord]]:
    """``rows`` (request records by table) with ``entry``'s own table and those of the sides it
    is compared with (``sides``), each read by ``rows_of(table)`` where ``rows`` lacks it."""
    tables = dict(rows)
    theirs = [s for s in sides(run, entry) if s is not None]
    parts = [e.table for s in theirs for i in s.against if (e := run.experiment(i))]
    for table in (entry.table, *(s.table for s in theirs), *parts):
        if table not in tables:
            tables[table] = rows_of(table)
    return tables


def decide_nearer(run: Run, rows_for: Callable[[Experiment], Rows]) -> bool:
    """``campaign.anchors``: every decided experiment whose parent side, the baseline as
    measured nearest in time (``sides.nearest``), is now another measurement than its decision
    used (one measured since, nearer): decided again, in order (``rows_for(e)``: the request
    rows of ``e``'s tables), and the best chosen again. Returns whether any was."""
    if not run.settings.anchors:
        return False
    changed = False
    for e in run.experiments:
        d = e.decision
        if d is None or d.verdict in ("baseline", "failed") or e.role != "experiment":
            continue
        # once a verdict before it changed, the rate it is decided at may have too
        # (``online.rate_for``): taken again whatever it is compared with
        if (
            changed
            or tuple(d.measured_against or ()) != sides_against(run, e)
            # (None: recorded before reportgen kept it, or its baseline side is its parent's)
            or (
                d.baseline_against is not None
                and tuple(d.baseline_against) != sides_mod.baseline_against(run, e)
            )
        ):
            e.decision = decide_experiment(run, e, rows_for(e))
            changed = True
    if changed:
        choose_best(run)
    return changed


def redecide(run: Run, rows_of: Callable[[str], Sequence[RequestRecord]]) -> dict[str, str]:
    """Every decision of ``run`` taken again, in order, by the current method, and the best
    configuration chosen again; ``rows_of(table)`` reads a request table. Returns what the
    verdicts were before (experiment id -> verdict)."""
    before: dict[str, str] = {}
    run.best = None
    for e in run.experiments:
        if e.decision is None:
            continue  # not decided: pending, running or interrupted
        before[e.id] = e.decision.verdict
        e.decision = decide_experiment(run, e, with_sides(run, e, {}, rows_of))
        run.best = best_after(run, e)
    drift_check(run)
    return before
