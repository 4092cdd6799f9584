"""How often is a verdict right? Simulated campaigns with known effects and known noise.

    python benchmarks/verdicts.py                    # the grid below, 400 campaigns a cell
    python benchmarks/verdicts.py --trials 1000 --reps 2 3
    python benchmarks/verdicts.py --goodput          # goodput_req_s, 200 campaigns a cell

Each trial is one campaign: a baseline and five experiments with a known true ratio of the
objective (output tok/s) to the baseline's at every level, 0.75, 0.90, 1.00, 1.10 and 1.25,
each decided against the baseline at C=1, 16 and 64 by the runner's own code
(``analysis.verdict.Comparer`` and ``analysis.adopt.decide``). A level run's value is
log-normal around 100 x the true ratio with two kinds of noise, as on a GPU:

- within a server session, ``noise`` (the relative spread of repetitions on one server;
  twice that at C=64, where batches form in waves);
- between server starts, ``starts`` (one draw per server start, shared by its levels).

Three methods, on the same campaigns:

- ``today``: what reportgen did before the noise model: each experiment on one server, the
  baseline too, Welch's t on each comparison's own repetitions;
- ``pooled``: the noise model (``analysis.noise``), every experiment's repetitions split over
  two server starts (``campaign.starts = 2``, the default), the spread pooled over the run;
- ``adaptive``: pooled, with ``repetitions = { min = n, max = 8 }``: the levels still open get
  one more repetition each, on a fresh server (one start per round, so the spread between
  starts averages down too, and is measured on the experiment itself), the parent once more
  beside it (grown), and are looked at again, at Pocock's level, as the runner does; a level
  whose repetitions that would decide it are beyond the maximum stops (futility).
  ``--adaptive`` compares that with the parent fixed and without the futility stop.

A row prints, per true ratio, how often a level was called "better" or "worse" (the right
call for 1.10 and 1.25 is better, for 0.90 and 0.75 worse; for 1.00 either is a false alarm),
how often an identical configuration's decision over its three levels was "adopted" or
"rejected" (a false alarm that changes the campaign), and the repetitions spent per
experiment. The seed is fixed, so two runs print the same table. At 200 campaigns a cell, each
repetition count's twelve rows took 3-4 minutes on one core (2026-12-01), so the default grid
takes about 12 at ``--trials 200`` and twice that at the default 400.

``--goodput``: the objective goodput_req_s (requests that met every SLO per second). A level
run is N requests (``--requests``, 64 16 8) in a window of about 10 s that the throughput noise
above stretches or shrinks (5% within a session, 3% between starts), each meeting the SLO with
probability p (Binomial); goodput = met / window. The true effects are of p: a baseline at 0.9
against children at 0, 0.05, 0.45, 0.81, 0.9 and 0.99, one at 0.1 against 0, 0.1 and 0.2, each
child in a campaign of its own with its baseline (``--together``: a baseline's children in one
campaign, in that order), at 2 and 3 repetitions, decided by the pooled method (``--method``).
Every cell is decided twice on the same draws: as the code is (``summary.compared_value``
compares a goodput of 0 as half a request in the window) and without that continuity
correction (``compared_value`` replaced by the raw value, so a zero is dropped). A row prints,
for the correction on / off, how often a level was called better, worse or neither, how often
it was not compared at all, and how often the child was adopted or rejected. 200 campaigns a
cell take about 35 s on one core (2026-12-01).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's reportgen

from reportgen.analysis import adopt, decide, drift, online, selection, sides, tails, verdict  # noqa: E402
from reportgen.analysis import noise as noise_mod  # noqa: E402
from reportgen.results.levels import Level, Summary
from reportgen.results.model import CampaignFile, EngineRecord, Experiment, Run, Session
from reportgen.results.verdicts import Comparison, Decision

RATIOS = (0.75, 0.90, 1.00, 1.10, 1.25)
LEVELS = (1, 16, 64)
NOISE = (0.02, 0.05)
STARTS = (0.0, 0.03)
MARGIN = 0.03
MAX_REPS = 8
SERVERS = 2  # as campaign.starts: servers each experiment's repetitions are split over


@dataclass(frozen=True)
class Truth:
    noise: float  # within a session, relative sd
    starts: float  # between server starts, relative sd (at C=64 where ``start_levels`` is set)
    # the spread between starts at each level as a share of ``starts`` (None: the same at
    # every level); one draw per start either way, so a slow start is slow at every level
    start_levels: tuple[float, ...] | None = None
    # ``--noisy-config``: the identical configuration's (true ratio 1.00) starts spread this
    # many times the others'
    noisy: float = 1.0


def _sigma(cv: float) -> float:
    return math.sqrt(math.log1p(cv**2))


class Campaign:
    """One simulated campaign's data source: draws level values as servers would give them."""

    def __init__(self, truth: Truth, rng: np.random.Generator) -> None:
        self.truth = truth
        self.rng = rng

    def start(self) -> float:
        """A server start's own draw (standard normal), shared by its levels."""
        return float(self.rng.normal()) if self.truth.starts else 0.0

    def value(self, ratio: float, level: int, start: float) -> float:
        s = _sigma(self.truth.noise * (2 if level == 64 else 1))
        share = self.truth.start_levels[LEVELS.index(level)] if self.truth.start_levels else 1.0
        b = _sigma(self.truth.starts * share)
        speed = b * start - b**2 / 2
        return 100 * ratio * math.exp(speed + self.rng.normal(-(s**2) / 2, s))


def _level(c: int, rep: int, session: int, value: float) -> Level:
    return Level(
        concurrency=c,
        repetition=rep,
        session=session,
        summary=Summary(requests=10, ok=10, output_tok_s=value),
    )


def _experiment(exp_id: str, index: int, ratio: float) -> Experiment:
    return Experiment(
        id=exp_id,
        status="ok",
        parent=None if index == 0 else "baseline",
        args={"change": index},  # every configuration its own, as real changes are
        workload={"repetitions": 1},
    )


def _run(experiments: list[Experiment], metric: str = "output_tok_s") -> Run:
    return Run(
        reportgen_version="bench",
        run_id="bench",
        started_at="",
        campaign={"campaign": {"margin": MARGIN, "objective": {"metric": metric}}},
        campaign_file=CampaignFile(path="bench.toml", sha256=""),
        engine=EngineRecord(name="sim"),
        experiments=experiments,
    )


Draw = Callable[[Campaign, float, int, int, int, float], Level]


def _throughput(source: Campaign, x: float, c: int, rep: int, session: int, start: float) -> Level:
    """A level run of the objective output tok/s: ``x`` is the true ratio to the baseline."""
    return _level(c, rep, session, source.value(x, c, start))


NOISE_METHOD = noise_mod.METHODS[0]  # the noise model of "pooled" and "adaptive" (--noise-method)


def _timed(e: Experiment, hour: int) -> None:
    """An experiment's time on the host: the ``hour``-th hour of the campaign."""
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(hours=hour)
    e.started_at = start.isoformat()
    e.finished_at = (start + dt.timedelta(minutes=50)).isoformat()


def simulate(
    method: str,
    truth: Truth,
    reps: int,
    rng: np.random.Generator,
    children: Sequence[float] = RATIOS,
    *,
    base: float = 1.0,
    draw: Draw = _throughput,
    metric: str = "output_tok_s",
    noise_method: str | None = None,
    scope: str = "experiment",
    grow_parent: bool = True,
    futility: bool = True,
    bracket: float | None = None,
    keep: list[Run] | None = None,
) -> list[tuple[float, list[Comparison], str, int]]:
    """One campaign by ``method``: per experiment (its true value, ``children[k]``: a ratio
    to the baseline's ``base``, or a goodput mode's SLO attainment; its levels' comparisons
    with the baseline; its decision; repetitions spent). ``draw`` gives one level run;
    ``noise_method``: which of ``noise.METHODS`` (default: ``NOISE_METHOD``); ``scope``:
    ``campaign.alpha_scope``, over ``children``. Adaptive only: ``grow_parent``, each round
    after the first also runs the parent once more (on a fresh start, its open levels), and the
    child is compared with all of the parent's runs; ``futility``, a level whose
    ``reps_needed`` is beyond the maximum (or unknown) gets no more rounds. ``bracket``: the
    baseline's configuration measured again after the children, at this true ratio (a host
    that drifted), as ``campaign.bracket`` does (its entry last in the result); each
    experiment is timed an hour after the one before it, for ``drift.drift_check``;
    ``keep`` gets the run."""
    source = Campaign(truth, rng)
    pooled = method != "today"
    base_e = _experiment("baseline", 0, base)
    starts = min(max(SERVERS, 2), reps) if pooled else 1
    split = np.array_split(np.arange(reps), starts)
    base_e.sessions = [Session(index=i, config="baseline", log_file="") for i in range(starts)]
    for i, chunk in enumerate(split):
        speed = source.start()
        for c in LEVELS:
            for rep in chunk:
                base_e.levels.append(draw(source, base, c, int(rep), i, speed))
    base_e.decision = Decision(verdict="baseline", explanation="")
    run = _run([base_e], metric)
    info = {**run.campaign["campaign"], "alpha_scope": scope}
    run.campaign = {"campaign": info, "experiment": [{}] * (len(children) + 1)}
    out: list[tuple[float, list[Comparison], str, int]] = []
    _timed(base_e, 0)
    if keep is not None:
        keep.append(run)
    last = [*children, bracket] if bracket is not None else list(children)
    for k, ratio in enumerate(last, start=1):
        e = _experiment(f"x{k}", k, ratio)
        _timed(e, k)
        if bracket is not None and k == len(last):
            e.id, e.role = "baseline-end", "bracket"
        high = MAX_REPS if method == "adaptive" else reps
        e.workload = {"repetitions": {"min": reps, "max": high} if high > reps else reps}
        e.sessions = [Session(index=0, config=e.id, log_file="")]
        run.experiments.append(e)
        done = {c: 0 for c in LEVELS}
        parent_levels = list(base_e.levels)  # the parent's runs this child is compared with
        grown = {c: reps for c in LEVELS}
        want = list(LEVELS)
        session = 0
        later = False  # a round after the first: the parent grows beside it
        while want:
            # the first round on SERVERS servers, then one more for each round added
            first = [
                len(x) for x in np.array_split(np.arange(reps), SERVERS if pooled else 1) if len(x)
            ]
            for count in first if session == 0 else [1]:
                speed = source.start() * (truth.noisy if ratio == 1.0 else 1.0)
                if session:
                    e.sessions.append(Session(index=session, config=e.id, log_file=""))
                for c in want:
                    for _ in range(count):
                        e.levels.append(draw(source, ratio, c, done[c], session, speed))
                        done[c] += 1
                if later and grow_parent:  # the parent beside it, on a start of its own
                    speed = source.start()
                    for c in want:
                        parent_levels.append(draw(source, base, c, grown[c], 100 + session, speed))
                        grown[c] += 1
                session += 1
            later = True
            how = (noise_method or NOISE_METHOD) if pooled else None
            found = verdict.Comparer(run, e, how).objective(
                sides.Side("baseline", True, parent_levels, "baseline")
            )
            want = [
                x.concurrency
                for x in found
                if done[x.concurrency] < high
                and verdict.still_open(x)
                and not (futility and _futile(x, high))
            ]
        verdict_, _, _ = adopt.decide(e.id, "baseline", found, metric, MARGIN)
        e.decision = Decision(verdict=verdict_, explanation="", vs_parent=found, method=how)
        spent = sum(done.values()) + sum(grown.values()) - reps * len(LEVELS)
        out.append((ratio, found, verdict_, spent))
    return out


FUTILITY_DOF = float(verdict.FUTILITY_DOF)  # --futility-dof: none while a comparison's dof is below


def _futile(c: Comparison, high: int) -> bool:
    """The futility stop: the repetitions that would decide ``c`` are beyond ``high`` (or
    none would), once its interval has ``FUTILITY_DOF`` degrees of freedom."""
    if (c.dof or 0.0) < FUTILITY_DOF:
        return False
    return c.reps_needed is None or c.reps_needed > high


def cell(method: str, truth: Truth, reps: int, trials: int, seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    calls = {r: {"better": 0, "worse": 0} for r in RATIOS}
    decided = {r: {"adopted": 0, "rejected": 0} for r in RATIOS}
    spent = {r: 0 for r in RATIOS}
    for _ in range(trials):
        for ratio, levels, dec, used in simulate(method, truth, reps, rng):
            for x in levels:
                if x.verdict in calls[ratio]:
                    calls[ratio][x.verdict] += 1
            if dec in decided[ratio]:
                decided[ratio][dec] += 1
            spent[ratio] += used
    n_levels = trials * len(LEVELS)
    return {
        "right": {r: calls[r]["better" if r > 1 else "worse"] / n_levels for r in RATIOS if r != 1},
        "alarm_level": (calls[1.0]["better"] + calls[1.0]["worse"]) / n_levels,
        "alarm_decision": (decided[1.0]["adopted"] + decided[1.0]["rejected"]) / trials,
        "reps": sum(spent.values()) / (trials * len(RATIOS) * len(LEVELS)),
    }


def level_cell(truth: Truth, reps: int, trials: int, seed: int, method: str) -> dict[str, object]:
    """``--start-levels``: the run's noise model by one of ``noise.METHODS`` ("levels": the
    spread between starts per level, the starts' own degrees of freedom where a side ran on
    one start; "pooled": pooled over levels, Satterthwaite everywhere); each level's calls
    apart."""
    rng = np.random.default_rng(seed)
    calls = {(r, c): {"better": 0, "worse": 0} for r in RATIOS for c in LEVELS}
    decided = {"adopted": 0, "rejected": 0}
    for _ in range(trials):
        for ratio, levels, dec, _used in simulate("pooled", truth, reps, rng, noise_method=method):
            for x in levels:
                if x.verdict in calls[(ratio, x.concurrency)]:
                    calls[(ratio, x.concurrency)][x.verdict] += 1
            if ratio == 1.0 and dec in decided:
                decided[dec] += 1
    return {
        "alarm": {c: sum(calls[(1.0, c)].values()) / trials for c in LEVELS},
        "called": {
            (r, c): calls[(r, c)]["better" if r > 1 else "worse"] / trials
            for r in (0.90, 1.10)
            for c in LEVELS
        },
        "alarm_decision": (decided["adopted"] + decided["rejected"]) / trials,
    }


START_LEVELS = (None, (0.15, 0.3, 1.0))  # the same at every level; as the H200 showed (C=1 : 64)


def start_levels_main(args: argparse.Namespace) -> int:
    global SERVERS
    print(
        f"margin {MARGIN:.0%}; {args.trials} campaigns a cell; pooled method, the spread "
        "between starts pooled over levels (before) or per level, moderated (now); 'shares': "
        "the start spread at C=1, 16, 64 as shares of 'starts' (-: the same at each); "
        "'servers': starts per experiment (the baseline always at least 2); false alarm: an "
        "identical configuration called better or worse at that level / adopted or rejected; "
        "called: a 10% loss (0.90) or gain (1.10) called so at that level"
    )
    print(
        "| noise | starts | shares | servers | n | method | false alarm C=1 | C=16 | C=64 "
        "| (decision) | called 0.90 C=1 | C=16 | C=64 | 1.10 C=1 | C=16 | C=64 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for servers in args.servers:
        SERVERS = servers
        for reps in args.reps:
            for noise in args.within:
                for shares in START_LEVELS:
                    truth = Truth(noise, 0.03, shares)
                    for method in args.methods:
                        got = level_cell(truth, reps, args.trials, args.seed, method)
                        alarm, called = got["alarm"], got["called"]
                        assert isinstance(alarm, dict) and isinstance(called, dict)
                        label = "-" if shares is None else ":".join(f"{x:g}" for x in shares)
                        print(
                            f"| {noise:.0%} | 3% | {label} | {servers} | {reps} "
                            f"| {method} | "
                            + " | ".join(f"{alarm[c]:.1%}" for c in LEVELS)
                            + f" | {got['alarm_decision']:.1%} | "
                            + " | ".join(
                                f"{called[(r, c)]:.0%}" for r in (0.90, 1.10) for c in LEVELS
                            )
                            + " |",
                            flush=True,
                        )
    return 0


def equivalence_main(args: argparse.Namespace) -> int:
    """``--equivalence``: how often a level of a small true change is called equivalent
    (within the 3% margin), inconclusive or different, by the "levels" method (the two
    one-sided tests at 5%: the 90% interval inside the margin) and the "pooled" one (the whole
    98.3% interval inside), on the same campaigns."""
    children = (1.00, 0.99, 0.97, 0.95)
    print(
        f"margin {MARGIN:.0%}; {args.trials} campaigns a cell; true ratios "
        + ", ".join(f"{r:.2f}" for r in children)
        + "; each cell: the share of levels (C=1, 16, 64) called equivalent / inconclusive / "
        "better or worse; 'bound': the median largest change left possible ('levels' only)"
    )
    print(
        "| noise | starts | n | method | "
        + " | ".join(f"{r:.2f} eq / inc / diff" for r in children)
        + " | bound 1.00 |"
    )
    print("|---|---|---|---|" + "---|" * (len(children) + 1))
    for reps in args.reps:
        for noise, starts in itertools.product(args.within, (0.0, 0.01, 0.03)):
            truth = Truth(noise, starts)
            for method in args.methods:
                rng = np.random.default_rng(args.seed)
                said = {r: {"equivalent": 0, "inconclusive": 0, "diff": 0} for r in children}
                bounds: list[float] = []
                for _ in range(args.trials):
                    for ratio, levels, _d, _u in simulate(
                        "pooled", truth, reps, rng, children, noise_method=method
                    ):
                        for x in levels:
                            key = x.verdict if x.verdict in said[ratio] else "diff"
                            said[ratio][key] += 1
                            if ratio == 1.0 and x.bound is not None:
                                bounds.append(x.bound)
                n = args.trials * len(LEVELS)
                cells = [
                    "{:.0%} / {:.0%} / {:.0%}".format(
                        said[r]["equivalent"] / n, said[r]["inconclusive"] / n, said[r]["diff"] / n
                    )
                    for r in children
                ]
                bound = f"{float(np.median(bounds)):.1%}" if bounds else "-"
                head = f"| {noise:.0%} | {starts:.0%} | {reps} | {method} | "
                print(head + " | ".join(cells) + f" | {bound} |", flush=True)
    return 0


def winners_curse_main(args: argparse.Namespace) -> int:
    """``--winners-curse``: campaigns of eight changes whose true effects are drawn from
    N(0, 3%) (log scale), each compared with the baseline; the best adopted one's gain as
    reported (its own measurement, which chose it) and shrunk (``analysis.selection``),
    against its true gain."""
    print(
        f"margin {MARGIN:.0%}; {args.trials} campaigns a cell; eight changes a campaign, true "
        "effects N(0, 3%); of the campaigns with a best: its gain over the baseline as "
        "reported, shrunk, and true (means, points of percent; Monte-Carlo error in "
        "brackets); 'below margin': adoptions whose true gain is under the margin"
    )
    print(
        "| noise | starts | n | campaigns with a best | reported | shrunk | true "
        "| reported - true | shrunk - true | below margin |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for reps in args.reps:
        for noise in args.within:
            truth = Truth(noise, 0.03)
            rng = np.random.default_rng(args.seed)
            rows: list[tuple[float, float, float]] = []
            adopted = below = 0
            for _ in range(args.trials):
                children = tuple(float(x) for x in np.exp(rng.normal(0, 0.03, 8)))
                got = simulate("pooled", truth, reps, rng, children)
                scores, best = [], None
                for k, (ratio, found, dec, _u) in enumerate(got):
                    one = selection.score_of(f"x{k}", found, ["baseline"], True)
                    if one is None:
                        continue
                    if args.independent:  # as before: the shared baseline not allowed for
                        one = selection.Score(one.id, one.score, one.se)
                    scores.append(one)
                    if dec == "adopted":
                        adopted += 1
                        below += ratio < 1 + MARGIN
                        if best is None or one.score > best[0].score:
                            best = (one, ratio)
                if best is None:
                    continue
                shrunk = selection.shrink(best[0], scores)
                if shrunk is None:
                    continue
                rows.append((best[0].score, shrunk.score, math.log(best[1])))
            a = np.asarray(rows)
            pct = np.expm1(a) * 100
            bias_r, bias_s = pct[:, 0] - pct[:, 2], pct[:, 1] - pct[:, 2]

            def m(x: np.ndarray) -> str:
                return f"{x.mean():+.1f} (±{x.std(ddof=1) / math.sqrt(len(x)):.1f})"

            print(
                f"| {noise:.0%} | 3% | {reps} | {len(rows) / args.trials:.0%} | "
                f"{pct[:, 0].mean():+.1f}% | {pct[:, 1].mean():+.1f}% | {pct[:, 2].mean():+.1f}% "
                f"| {m(bias_r)} | {m(bias_s)} | {below / max(1, adopted):.0%} |",
                flush=True,
            )
    return 0


def tail_coverage_main(args: argparse.Namespace) -> int:
    """``--tail-coverage``: how often the 95% interval of a TTFT p99 ratio between two
    identical configurations holds 1, with the spread between server starts: the pooled
    requests' two-level bootstrap (before) against each run's p99 as an observation of the
    start-aware noise model (the "levels" method); each side's runs over two starts, 1,000
    requests a run with a lognormal spread of 30%, run-to-run noise 2%."""
    from reportgen.results.levels import Dist

    print(
        f"{args.trials} pairs a cell; identical configurations, each side's runs on two server "
        "starts, 1,000 requests a run; coverage of the 95% interval of the TTFT p99 ratio "
        "(nominal 95%), and its median width (high / low)"
    )
    print("| starts | runs a side | bootstrap | width | levels (run p99s) | width |")
    print("|---|---|---|---|---|---|")
    for starts in (0.0, 0.03, 0.06):
        for runs_a_side in (2, 4):
            rng = np.random.default_rng(args.seed)
            held = {"bootstrap": 0, "levels": 0}
            widths: dict[str, list[float]] = {"bootstrap": [], "levels": []}
            for trial in range(args.trials):
                sides, experiments = [], []
                for k in range(2):
                    e = _experiment(f"s{k}", k, 1.0)
                    e.args = {}  # the same configuration on both sides
                    e.sessions = [Session(index=i, config="x", log_file="") for i in range(2)]
                    speed = [math.exp(rng.normal(0, starts)) for _ in range(2)]
                    runs = []
                    for rep_ in range(runs_a_side):
                        session = rep_ % 2
                        scale = speed[session] * math.exp(rng.normal(0, 0.02))
                        values = 50 * scale * np.exp(rng.normal(0, 0.3, 1000))
                        runs.append(values)
                        lv = _level(1, rep_, session, 100.0)
                        p99 = float(np.percentile(values, 99))
                        lv.summary = Summary(
                            requests=1000, ok=1000, output_tok_s=100.0, ttft_ms=Dist(p99=p99)
                        )
                        e.levels.append(lv)
                    sides.append(runs)
                    experiments.append(e)
                _, lo, hi = tails.bootstrap_ratio(sides[0], sides[1], 99, resamples=400, seed=trial)
                if lo is not None and hi is not None:
                    held["bootstrap"] += lo <= 1 <= hi
                    widths["bootstrap"].append(hi / lo)
                base, child = experiments
                base.decision = Decision(verdict="baseline", explanation="")
                child.parent = base.id
                run = _run([base, child])
                side = sides.Side(base.id, True, base.levels, base.id)
                (c,) = verdict.Comparer(run, child, "levels").compare(
                    side, "ttft_ms", False, stat="p99"
                )
                if c.ci_low is not None and c.ci_high is not None:
                    held["levels"] += c.ci_low <= 1 <= c.ci_high
                    widths["levels"].append(c.ci_high / c.ci_low)
            cells = []
            for how in ("bootstrap", "levels"):
                cells += [
                    f"{held[how] / args.trials:.1%}",
                    f"{float(np.median(widths[how])):.2f}" if widths[how] else "-",
                ]
            print(f"| {starts:.0%} | {runs_a_side} | " + " | ".join(cells) + " |", flush=True)
    return 0


ADAPTIVE = {  # --adaptive: (grow_parent, futility)
    "parent fixed": (False, False),
    "parent fixed, futility": (False, True),
    "parent grown": (True, False),
    "parent grown, futility": (True, True),
}


def _tally(
    method: str, truth: Truth, reps: int, args: argparse.Namespace, **kw: Any
) -> tuple[dict[float, int], int, int, int]:
    """``args.trials`` campaigns by ``method`` (``simulate``'s keywords in ``kw``): per true
    ratio, the levels called right; the identical configuration's levels called better or
    worse, and its decisions adopted or rejected; the repetitions spent."""
    rng = np.random.default_rng(args.seed)
    calls = {r: 0 for r in RATIOS}
    alarms = decisions = used = 0
    for _ in range(args.trials):
        for ratio, levels, dec, spent in simulate(method, truth, reps, rng, **kw):
            used += spent
            if ratio == 1.0:
                alarms += sum(x.verdict in ("better", "worse") for x in levels)
                decisions += dec in ("adopted", "rejected")
            else:
                right = "better" if ratio > 1 else "worse"
                calls[ratio] += sum(x.verdict == right for x in levels)
    return calls, alarms, decisions, used


def adaptive_main(args: argparse.Namespace) -> int:
    """Adaptive repetitions (``min`` = n, ``max`` = 8) with the parent fixed or grown beside
    the child, with and without a futility stop, on the same campaigns."""
    print(
        f"adaptive repetitions from n to {MAX_REPS}; margin {MARGIN:.0%}; {args.trials} "
        "campaigns a cell; 'reps': repetitions per level and experiment, the parent's extra "
        "ones included; Monte-Carlo error of a 5% rate: "
        f"+-{math.sqrt(0.05 * 0.95 / args.trials):.1%}"
    )
    print(
        "| noise | starts | n | parent | called 0.75 | 0.90 | 1.10 | 1.25 "
        "| false alarm (level) | (decision) | reps |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for reps in args.reps:
        for noise, starts in itertools.product(args.within, args.start_spread):
            truth = Truth(noise, starts)
            for name, (grow, futile) in ADAPTIVE.items():
                if args.only and name not in args.only:
                    continue
                calls, alarms, decisions, used = _tally(
                    "adaptive", truth, reps, args, grow_parent=grow, futility=futile
                )
                n_levels = args.trials * len(LEVELS)
                print(
                    f"| {noise:.0%} | {starts:.0%} | {reps} | {name} | "
                    + " | ".join(f"{calls[r] / n_levels:.0%}" for r in RATIOS if r != 1)
                    + f" | {alarms / n_levels:.1%} | {decisions / args.trials:.1%} "
                    f"| {used / (args.trials * len(RATIOS) * len(LEVELS)):.1f} |",
                    flush=True,
                )
    return 0


def noisy_config_main(args: argparse.Namespace) -> int:
    """``--noisy-config``: the identical configuration's server starts spread ``--noisy``
    times the other configurations' (which set the pool): how often it is adopted or
    rejected, and how often the other experiments' levels are called right, by the "levels"
    method (the pool for every side). A "configs" method that checked each side's starts
    against the pool (an F test at 5%, its own spread used where wider) was measured with it
    at commit 50ae92b and not adopted: benchmarks/README.md."""
    print(
        f"margin {MARGIN:.0%}; {args.trials} campaigns a cell; true ratios "
        + ", ".join(f"{r:.2f}" for r in RATIOS)
        + "; the 1.00 configuration's starts spread 'x' times the others' (sd); 'false "
        "alarm': it was adopted or rejected (Monte-Carlo error of a 5% rate: "
        f"+-{math.sqrt(0.05 * 0.95 / args.trials):.1%}); 'called': a level of another "
        "experiment called right; 'reps': repetitions per level and experiment"
    )
    print(
        "| noise | starts | x | n | starts a side | repetitions | method | false alarm "
        "(decision) | (level) | called 0.75 | 0.90 | 1.10 | 1.25 | reps |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    global SERVERS
    for servers, reps in itertools.product(args.servers, args.reps):
        SERVERS = servers
        for noise, starts, x in itertools.product(args.within, args.start_spread, args.noisy):
            truth = Truth(noise, starts, noisy=x)
            for mode, method in itertools.product(args.modes, args.methods):
                calls, alarms, decisions, used = _tally(
                    mode, truth, reps, args, noise_method=method
                )
                n = args.trials * len(LEVELS)
                print(
                    f"| {noise:.0%} | {starts:.0%} | {x:g} | {reps} | {servers} | {mode} "
                    f"| {method} "
                    f"| {decisions / args.trials:.1%} | {alarms / n:.1%} | "
                    + " | ".join(f"{calls[r] / n:.0%}" for r in RATIOS if r != 1)
                    + f" | {used / (args.trials * len(RATIOS) * len(LEVELS)):.1f} |",
                    flush=True,
                )
    return 0


REAL_AT = 3  # --drift --effect: the experiment (from 0) that carries the real change


def after_drift_check(run: Run, n: int) -> list[str]:
    """A simulated campaign with its bracket (``simulate(bracket=...)``) ended as a real one
    ends, by ``drift.drift_check``: its first ``n`` experiments' verdicts then."""
    drift.drift_check(run)
    return [e.decision.verdict if e.decision else "" for e in run.experiments[1 : n + 1]]


def drift_main(args: argparse.Namespace) -> int:
    """``--drift``: campaigns of eight experiments identical to the baseline, each measured an
    hour after the one before, on a host whose speed changes by ``--rates`` per experiment
    (steadily in time), then the baseline's configuration again at the end (the bracket):
    how often one of the eight is adopted or rejected as decided, and after
    ``drift.drift_check`` took the drift the bracket measured out of every adoption and
    rejection. ``--effect R``: the fourth carries a real change of R (the others' rates are
    then of the seven), and how often it is called right is counted too."""
    k = 8
    same = k - 1 if args.effect else k  # the experiments identical to the baseline
    kinds = (
        f"{same} identical to the baseline and the {REAL_AT + 1}th a real x{args.effect:g}"
        if args.effect
        else f"{k} identical to the baseline"
    )
    print(
        f"margin {MARGIN:.0%}; {args.trials} campaigns a cell; {k} experiments, {kinds}, one "
        "an hour, on a host whose speed changes by 'drift' per experiment; the baseline "
        "measured again at the end; 'adopted', 'rejected': of the identical experiments "
        "(Monte-Carlo error of a 5% rate: "
        f"+-{math.sqrt(0.05 * 0.95 / (args.trials * same)):.1%}); 'at the last': the eighth "
        "alone; 'campaigns': those holding a wrong call"
    )
    effect = f" | x{args.effect:g} at the {REAL_AT + 1}th, called" if args.effect else ""
    print(
        "| noise | starts | n | drift | check | adopted | rejected | at the last | campaigns"
        + effect
        + " |"
    )
    print("|---|---|---|---|---|---|---|---|---|" + ("---|" if args.effect else ""))
    for reps, noise, rate in itertools.product(args.reps, args.within, args.rates):
        truth = Truth(noise, args.start_spread[0])
        children = [(1 + rate) ** i for i in range(1, k + 1)]
        real = REAL_AT if args.effect else None  # the one experiment with a real effect
        if real is not None:
            children[real] *= args.effect
        right = "adopted" if args.effect and args.effect > 1 else "rejected"
        tally = {when: [0, 0, 0, 0, 0] for when in ("as decided", "drift check")}
        rng = np.random.default_rng(args.seed)
        for _ in range(args.trials):
            kept: list[Run] = []
            got = simulate(
                "pooled", truth, reps, rng, children, bracket=(1 + rate) ** (k + 1), keep=kept
            )
            before = [d for _, _, d, _ in got[:k]]
            after = after_drift_check(kept[0], k)
            for when, said in (("as decided", before), ("drift check", after)):
                t = tally[when]
                if real is not None:
                    t[4] += said[real] == right
                    said = said[:real] + said[real + 1 :]
                t[0] += said.count("adopted")
                t[1] += said.count("rejected")
                t[2] += said[-1] in ("adopted", "rejected")
                t[3] += any(d in ("adopted", "rejected") for d in said)
        for when, (adopted, rejected, last, wrong, called) in tally.items():
            n = args.trials * (k - (real is not None))
            print(
                f"| {noise:.0%} | {args.start_spread[0]:.0%} | {reps} | {rate:+.1%} | {when} "
                f"| {adopted / n:.1%} | {rejected / n:.1%} | {last / args.trials:.1%} "
                f"| {wrong / args.trials:.1%} |"
                + (f" {called / args.trials:.0%} |" if real is not None else ""),
                flush=True,
            )
    return 0


@contextlib.contextmanager
def bonferroni(on: bool) -> Iterator[None]:
    """``alpha_scope = "campaign"`` as it was decided before 2026-12-07 (alpha / k for every
    experiment) where ``on``; else the fallback procedure (``analysis.online``)."""
    if not on:
        yield
        return
    kept = online.rate_for
    online.rate_for = lambda run, entry: run.settings.alpha / online.compared(run)  # type: ignore[assignment]
    try:
        yield
    finally:
        online.rate_for = kept  # type: ignore[assignment]


def campaign_wide_main(args: argparse.Namespace) -> int:
    """``--campaign-wide``: campaigns of eight experiments, decided with
    ``campaign.alpha_scope`` "experiment" and "campaign" (the fallback procedure;
    "bonferroni": alpha / k each, as before 2026-12-07), without the bracket and with it
    (``--bracket``: the baseline's configuration measured again at the end on a host that does
    not drift, then ``drift.drift_check``, as a campaign of a real engine ends by default).
    Two mixes: seven changing nothing and one a real 10% gain, last; and three real 10% gains
    (first, second and last) among five changing nothing. A row says how often a campaign
    holds a wrong call (one of the identical ones adopted or rejected), that per identical
    experiment, and the share of real gains adopted."""
    mixes = {"1 gain": (1.0,) * 7 + (1.10,), "3 gains": (1.10, 1.10) + (1.0,) * 5 + (1.10,)}
    print(
        f"margin {MARGIN:.0%}; {args.trials} campaigns a cell; eight experiments a campaign; "
        "'wrong': campaigns where an identical one was adopted or rejected (Monte-Carlo error "
        "in brackets); 'adopted': the share of 10% gains adopted"
    )
    print(
        "| noise | starts | n | mix | scope | bracket | wrong (campaign) | wrong (experiment) "
        "| adopted 1.10 |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for reps, noise, (mix, children) in itertools.product(args.reps, args.within, mixes.items()):
        truth = Truth(noise, 0.03)
        scopes = ("experiment", "bonferroni", "campaign")
        for scope, bracket in itertools.product(scopes, args.bracket):
            rng = np.random.default_rng(args.seed)
            wrong = wrong_each = adopted = 0
            for _ in range(args.trials):
                kept: list[Run] = []
                with bonferroni(scope == "bonferroni"):
                    got = simulate(
                        "pooled", truth, reps, rng, children,
                        scope="experiment" if scope == "experiment" else "campaign",
                        bracket=1.0 if bracket == "on" else None, keep=kept,
                    )  # fmt: skip
                said = [(r, d) for r, _, d, _ in got[: len(children)]]
                if bracket == "on":
                    after = after_drift_check(kept[0], len(children))
                    said = list(zip(children, after, strict=True))
                calls = [d in ("adopted", "rejected") for r, d in said if r == 1.0]
                wrong += any(calls)
                wrong_each += sum(calls)
                adopted += sum(d == "adopted" for r, d in said if r != 1.0)
            p = wrong / args.trials
            err = math.sqrt(p * (1 - p) / args.trials)
            same = sum(r == 1.0 for r in children)
            print(
                f"| {noise:.0%} | 3% | {reps} | {mix} | {scope} | {bracket} | {p:.1%} "
                f"(±{err:.1%}) | {wrong_each / (same * args.trials):.1%} "
                f"| {adopted / ((len(children) - same) * args.trials):.0%} |",
                flush=True,
            )
    return 0


# --goodput: the objective goodput_req_s, a count of requests that met every SLO over the
# level's time, compared with and without summary.compared_value's continuity correction.
GOODPUT = (  # (the baseline's SLO attainment, its children's)
    (0.9, (0.0, 0.05, 0.45, 0.81, 0.9, 0.99)),
    (0.1, (0.0, 0.1, 0.2)),
)
WINDOW_S = 10.0  # a level run's length at the baseline's speed


def _goodput_draw(n: int) -> Draw:
    """Level runs of ``n`` requests, each meeting the SLO with probability ``p`` (the true
    value), in a window as long as the throughput noise makes it (the same law as output
    tok/s: within a session and between starts)."""

    def draw(source: Campaign, p: float, c: int, rep: int, session: int, start: float) -> Level:
        speed = source.value(1.0, c, start) / 100
        window = WINDOW_S / speed
        met = int(source.rng.binomial(n, p))
        summary = Summary(
            requests=n,
            ok=n,
            duration_s=window,
            window_s=[0.0, window],
            req_s=n / window,
            goodput_req_s=met / window,
            slo_attainment=met / n,
        )
        return Level(concurrency=c, repetition=rep, session=session, summary=summary)

    return draw


def _raw_value(s: Summary, metric: str, stat: str = "p50") -> float | None:
    return s.value(metric, stat)


_USERS = (noise_mod, decide)  # the modules that import compared_value by name


@contextlib.contextmanager
def correction(on: bool) -> Iterator[None]:
    """With ``on`` False, level runs are compared as measured (a goodput of 0 is dropped, as
    before the continuity correction): ``compared_value`` replaced where it is used."""
    saved = [getattr(m, "compared_value") for m in _USERS]  # noqa: B009
    if not on:
        for m in _USERS:
            setattr(m, "compared_value", _raw_value)  # noqa: B010
    try:
        source = Campaign(Truth(0.0, 0.0), np.random.default_rng(0))
        zero = _goodput_draw(8)(source, 0.0, 1, 0, 0, 0.0)
        kept = noise_mod.own_runs([zero], "x", "experiment", "goodput_req_s")
        assert bool(kept) == on, "the correction is not where this benchmark expects it"
        yield
    finally:
        for m, f in zip(_USERS, saved, strict=True):
            setattr(m, "compared_value", f)  # noqa: B010


def goodput_cell(
    method: str,
    truth: Truth,
    reps: int,
    n: int,
    base: float,
    children: Sequence[float],
    trials: int,
    seed: int,
    corrected: bool,
    together: bool,
) -> dict[float, dict[str, int]]:
    """Per child's attainment: how often its levels were called better / worse / equivalent
    (``none``: no comparison at all, a side without a usable run) and how its decision went.
    Each child in a campaign of its own with the baseline, or (``together``) all of them in
    one campaign in order. The draws depend on the seed and the cell, not on ``corrected``."""
    groups = [tuple(children)] if together else [(c,) for c in children]
    out: dict[float, dict[str, int]] = {}
    with correction(corrected):
        for group in groups:
            key = [seed, reps, n, round(base * 1000)] + [round(c * 1000) for c in group]
            rng = np.random.default_rng(key)
            for _ in range(trials):
                got = simulate(
                    method,
                    truth,
                    reps,
                    rng,
                    group,
                    base=base,
                    draw=_goodput_draw(n),
                    metric="goodput_req_s",
                )
                for p, found, dec, used in got:
                    row = out.setdefault(p, {"trials": 0, "reps": 0})
                    row["trials"] += 1
                    row["reps"] += used
                    row[f"decision {dec}"] = row.get(f"decision {dec}", 0) + 1
                    for x in found:
                        v = "none" if x.ratio is None else x.verdict
                        row[v] = row.get(v, 0) + 1
                    row["none"] = row.get("none", 0) + len(LEVELS) - len(found)
    return out


def _shares(rows: Sequence[dict[str, int]], *keys: str, per_level: bool = True) -> str:
    """ "on / off": the share of levels (or campaigns) whose outcome is one of ``keys``."""
    out = []
    for row in rows:
        total = row["trials"] * (len(LEVELS) if per_level else 1)
        out.append(sum(row.get(k, 0) for k in keys) / total)
    return " / ".join(f"{x:.1%}" for x in out)


def goodput_main(args: argparse.Namespace) -> int:
    truth = Truth(args.noise, args.starts)
    print(
        f"goodput_req_s; margin {MARGIN:.0%}; {args.trials} campaigns a cell; method "
        f"{args.method}; throughput noise {truth.noise:.0%} within a session (twice at C=64), "
        f"{truth.starts:.0%} between starts; a level run: N requests in about {WINDOW_S:g} s, "
        "each meeting the SLO with probability p; levels C="
        + ", ".join(map(str, LEVELS))
        + (
            "; a parent's children in one campaign"
            if args.together
            else "; each child in a campaign of its own with its parent"
        )
        + f"; seed {args.seed}. on / off: with summary.compared_value's continuity "
        "correction (a goodput of 0 compared as half a request) / without (zeros dropped), "
        "on the same draws. Level calls as shares of levels (better, worse, neither: "
        "inconclusive, equivalent or not compared; 'none': not compared, a side without a "
        "usable run); "
        "decisions as shares of campaigns. Right call: worse below 1/(1+margin), better "
        "above 1+margin; for an identical configuration (*) any better/worse, adopted or "
        "rejected is a false alarm."
    )
    print(
        "| N | n | parent p | child p | true ratio | P(run = 0) child | better on / off "
        "| worse on / off | neither on / off | none on / off | adopted on / off "
        "| rejected on / off |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in args.requests:
        for reps in args.reps:
            for base, children in GOODPUT:
                if args.parent and base not in args.parent:
                    continue
                got = {
                    on: goodput_cell(
                        args.method,
                        truth,
                        reps,
                        n,
                        base,
                        children,
                        args.trials,
                        args.seed,
                        on,
                        args.together,
                    )
                    for on in (True, False)
                }
                for p in children:
                    rows = (got[True][p], got[False][p])
                    mark = " *" if p == base else ""
                    print(
                        f"| {n} | {reps} | {base:g} | {p:g}{mark} | {p / base:.2f} "
                        f"| {(1 - p) ** n:.3f} "
                        f"| {_shares(rows, 'better')} "
                        f"| {_shares(rows, 'worse')} "
                        f"| {_shares(rows, 'inconclusive', 'equivalent', 'none')} "
                        f"| {_shares(rows, 'none')} "
                        f"| {_shares(rows, 'decision adopted', per_level=False)} "
                        f"| {_shares(rows, 'decision rejected', per_level=False)} |",
                        flush=True,
                    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, help="campaigns a cell (400; with --goodput 200)")
    parser.add_argument(
        "--reps", type=int, nargs="+", help="repetitions (2 3 5; with --goodput 2 3)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--goodput",
        action="store_true",
        help="goodput_req_s objectives, with and without the continuity correction",
    )
    parser.add_argument(
        "--requests",
        type=int,
        nargs="+",
        default=[64, 16, 8],
        help="--goodput: N, requests a level run (64 16 8)",
    )
    parser.add_argument(
        "--parent",
        type=float,
        nargs="+",
        help="--goodput: only these baselines' attainment (0.9 0.1: both)",
    )
    parser.add_argument("--noise", type=float, default=0.05, help="--goodput: within (0.05)")
    parser.add_argument("--starts", type=float, default=0.03, help="--goodput: between (0.03)")
    parser.add_argument(
        "--method", choices=("today", "pooled", "adaptive"), default="pooled", help="--goodput"
    )
    parser.add_argument(
        "--together", action="store_true", help="--goodput: a parent's children in one campaign"
    )
    parser.add_argument(
        "--start-levels",
        action="store_true",
        help="the spread between starts per level against pooled over levels",
    )
    parser.add_argument(
        "--equivalence",
        action="store_true",
        help="small true changes: equivalent, inconclusive or different, levels against pooled",
    )
    parser.add_argument(
        "--winners-curse",
        action="store_true",
        help="the best's gain as reported and shrunk against its true gain",
    )
    parser.add_argument(
        "--independent",
        action="store_true",
        help="--winners-curse: shrink as if the scores' errors were independent (the shared "
        "baseline not allowed for), as reportgen did before",
    )
    parser.add_argument(
        "--tail-coverage",
        action="store_true",
        help="coverage of p99 intervals with start noise: bootstrap against run p99s",
    )
    parser.add_argument(
        "--campaign-wide",
        action="store_true",
        help="campaigns of eight experiments: wrong calls per campaign, alpha_scope "
        "experiment against campaign",
    )
    parser.add_argument(
        "--adaptive",
        action="store_true",
        help="adaptive repetitions: the parent fixed or grown, with and without a futility stop",
    )
    parser.add_argument(
        "--futility-dof",
        type=float,
        default=float(verdict.FUTILITY_DOF),
        help="--adaptive: no futility stop while a comparison's degrees of freedom are below "
        f"({verdict.FUTILITY_DOF}, as the runner)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=list(ADAPTIVE),
        help="--adaptive: only these variants",
    )
    parser.add_argument(
        "--start-spread",
        type=float,
        nargs="+",
        default=[0.03],
        help="--adaptive: between starts (0.03)",
    )
    parser.add_argument(
        "--servers", type=int, nargs="+", default=[2, 1], help="--start-levels: starts (2 1)"
    )
    parser.add_argument(
        "--grid",
        nargs="+",
        choices=("today", "pooled", "adaptive"),
        default=["today", "pooled", "adaptive"],
        help="the grid: only these methods' rows",
    )
    parser.add_argument(
        "--drift",
        action="store_true",
        help="a host that drifts over the campaign, the bracket's drift check off and on",
    )
    parser.add_argument(
        "--rates",
        type=float,
        nargs="+",
        default=[0.0, 0.005, -0.005, 0.01],
        help="--drift: the host's change of speed per experiment (0 0.005 -0.005 0.01)",
    )
    parser.add_argument(
        "--bracket",
        nargs="+",
        choices=("off", "on"),
        default=["off", "on"],
        help="--campaign-wide: without the bracket, and with it and its drift check (a host "
        "that does not drift)",
    )
    parser.add_argument(
        "--effect",
        type=float,
        help="--drift: the fourth experiment's true ratio to the baseline (none: all identical)",
    )
    parser.add_argument(
        "--noisy-config",
        action="store_true",
        help="one configuration's starts spread more than the others': levels against configs",
    )
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=("pooled", "adaptive"),
        default=["pooled"],
        help="--noisy-config: fixed repetitions (pooled) or adaptive ones",
    )
    parser.add_argument(
        "--noisy",
        type=float,
        nargs="+",
        default=[1.0, 3.0],
        help="--noisy-config: its starts' spread, times the others' (1 3)",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=noise_mod.METHODS,
        default=list(noise_mod.METHODS),
        help="--start-levels",
    )
    parser.add_argument(
        "--within", type=float, nargs="+", default=[0.01, 0.02], help="--start-levels: noise"
    )
    parser.add_argument(
        "--noise-method",
        choices=noise_mod.METHODS,
        help=f"the grid (and --goodput) with this noise method (default {noise_mod.METHODS[0]})",
    )
    args = parser.parse_args()
    if args.noise_method:
        global NOISE_METHOD
        NOISE_METHOD = args.noise_method
    if args.equivalence:
        args.trials = args.trials or 200
        args.reps = args.reps or [2, 3, 5]
        return equivalence_main(args)
    if args.winners_curse:
        args.trials = args.trials or 200
        args.reps = args.reps or [3]
        return winners_curse_main(args)
    if args.tail_coverage:
        args.trials = args.trials or 300
        return tail_coverage_main(args)
    if args.adaptive:
        global FUTILITY_DOF
        FUTILITY_DOF = args.futility_dof
        args.trials = args.trials or 200
        args.reps = args.reps or [2]
        if args.within == [0.01, 0.02]:  # --start-levels' default; here the grid's 5%
            args.within = [0.05]
        return adaptive_main(args)
    if args.drift:
        args.trials = args.trials or 200
        args.reps = args.reps or [3]
        args.within = args.within or [0.02]
        args.start_spread = args.start_spread or [0.03]
        return drift_main(args)
    if args.noisy_config:
        args.trials = args.trials or 400
        args.reps = args.reps or [3]
        if args.methods == list(noise_mod.METHODS):
            args.methods = [noise_mod.METHODS[0]]
        if args.servers == [2, 1]:  # --start-levels' default; here campaign.starts' 2
            args.servers = [2]
        return noisy_config_main(args)
    if args.campaign_wide:
        args.trials = args.trials or 200
        args.reps = args.reps or [2, 3]
        return campaign_wide_main(args)
    if args.start_levels:
        args.trials = args.trials or 400
        args.reps = args.reps or [2, 3, 5]
        return start_levels_main(args)
    if args.goodput:
        args.trials = args.trials or 200
        args.reps = args.reps or [2, 3]
        return goodput_main(args)
    args.reps = args.reps or [2, 3, 5]
    args.trials = args.trials or 400
    print(
        f"margin {MARGIN:.0%}; {args.trials} campaigns a cell; true ratios "
        + ", ".join(f"{r:.2f}" for r in RATIOS)
        + f" at C={', '.join(map(str, LEVELS))}; 'called': a level's verdict right (better for "
        "a gain, worse for a loss); 'false alarm': an identical configuration called better or "
        "worse at a level / adopted or rejected; 'reps': repetitions per level and experiment"
    )
    print(
        "| noise | starts | n | method | called 0.75 | 0.90 | 1.10 | 1.25 "
        "| false alarm (level) | (decision) | reps |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for reps in args.reps:
        for noise in NOISE:
            for starts in STARTS:
                truth = Truth(noise, starts)
                for method in args.grid:
                    got = cell(method, truth, reps, args.trials, args.seed)
                    right = got["right"]
                    assert isinstance(right, dict)
                    print(
                        f"| {noise:.0%} | {starts:.0%} | {reps} | {method} | "
                        + " | ".join(f"{right[r]:.0%}" for r in RATIOS if r != 1)
                        + f" | {got['alarm_level']:.1%} | {got['alarm_decision']:.1%} "
                        f"| {got['reps']:.1f} |"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
