"""Whole campaigns on a drifting host: how often is each verdict right, and what does a decided
experiment cost in GPU time? Simulated campaigns with known effects through the runner's own
decision functions.

    python benchmarks/campaigns.py                  # the grid below, 200 campaigns a cell
    python benchmarks/campaigns.py --trials 50 --experiments 6 --drift 0.01

A campaign is a baseline and k experiments (``--experiments``, 4-10) whose true ratios of
output tok/s to the baseline's, at every level, cycle through ``TRUTHS`` (identical
configurations, +5%, +10%, +20%, -10%), each built on the baseline, decided at C=1, 16 and 64
in the order a run takes them: ``analysis.verdict.decide_experiment`` after each experiment,
``verdict.decide_nearer`` after each re-measurement of the baseline and after the bracket,
``drift.drift_check`` at the end, ``drift.best_after`` for the best (nothing here re-implements
a decision).

A level run's output tok/s is log-normal around 100 x the true ratio, and its TTFT's median and
p99 around a value that moves inversely (the p99 with twice the spread within a server), with:

- ``within``: the relative spread of repetitions on one server (``--within``, 0.5-3%);
- ``between``: one draw per server start, its sd at C=64 (``--between``, 1-5%), at C=1 and 16
  a share of it (``START_SHARES``: starts differ less at low load, as measured on an H100);
- drift: the host's speed changing by ``--drift`` per experiment's worth of GPU time (one
  experiment of the old design), and ``--step``: one change of that size at the campaign's
  middle;
- stalls: in ``--stalls`` of repetitions, one request stalls and the level reads 5-25% low,
  its TTFT p99 1.5-4x high, and its requests show it (``Summary.stall_s``; not with
  ``--blind-stalls``);
- ``--noisy``: every third experiment's starts that many times as far apart as the others'
  (a configuration whose start decides its speed), its confirmation's too.

Three designs, on the same kind of campaigns:

- ``old``: what reportgen did before 2026-12-07: every experiment on ``campaign.starts = 2``,
  the baseline measured again only at the end (the bracket, with its drift check), false
  alarms held per experiment, decided by the "levels" method;
- ``new-2``: the defaults now: every experiment on two starts, the baseline measured again
  after every two experiments on one start (``campaign.anchors = 2``), each experiment
  against the baseline as measured nearest in time, false alarms held for the campaign
  online (the fallback procedure), decided by the "anchored" method, and the best run again
  at the end against the bracket beside it (``campaign.confirm = "best"``; the best's gain
  is that run's); ``new``: the same with every experiment on one start
  (``campaign.starts = 1``); ``new-2-h1`` and ``new-h1``: each starting from the spread
  between starts one earlier campaign of its design on the same host measured
  (``reportgen run --history``: ``noise.campaign_spread``, ``Run.start_prior``; the earlier
  campaign's GPU time is not counted); ``new-2-m``: ``new-2`` with one more start of an
  experiment whose starts disagree with the other configurations' (``campaign.more_starts``
  as it was first); ``new-2-me``: also one more where it is still inconclusive with its
  ratio inside the margin (``verdict.equivalence_open``; ``campaign.more_starts`` now).

A row prints, for identical configurations, how often one was adopted or rejected when first
decided and at the end (per experiment) and how often a campaign held any such call at the
end; how often identical ones were called equivalent; the share of +5/+10/+20% changes adopted
(and -10% rejected); the best's reported gain over its truth (the winner's curse, for a true
winner and, where the best is identical to the baseline, its reported gain); how often the
objective's 95%-or-wider intervals held the true ratio, and TTFT p99's; and GPU-minutes per
decided experiment (adopted, rejected or equivalent at the end): server starts x
``--ready-s`` (75 s: 50-130 s on an H100 for an 8B model) + level runs x ``--level-s`` (20 s
with its warm-up).
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's reportgen

from reportgen.analysis import checks, drift, noise, verdict  # noqa: E402
from reportgen.campaign.schema import CampaignInfo  # noqa: E402
from reportgen.results.levels import Dist, Level, Summary  # noqa: E402
from reportgen.results.model import (  # noqa: E402
    CampaignFile,
    EngineRecord,
    Experiment,
    PriorLevel,
    Run,
    Session,
    StartPrior,
)
from reportgen.results.verdicts import Decision  # noqa: E402

LEVELS = (1, 16, 64)
START_SHARES = (0.2, 0.5, 1.0)  # the spread between starts at C=1, 16, 64, of --between's
TRUTHS = (1.00, 1.10, 1.00, 1.05, 0.90, 1.20, 1.00, 1.00, 1.10, 1.00)
MARGIN = 0.03
REPS = 3
REQUESTS = 1000  # a level run's requests: ten above its p99, so a side of three has an interval
START_SPREAD = CampaignInfo.model_fields["start_spread"].default  # --start-spread
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Host:
    within: float
    between: float
    drift: float  # per old-design experiment's GPU time
    step: float  # at the campaign's middle
    stalls: float  # share of repetitions with a stall
    ready_s: float
    level_s: float
    noisy: float = 1.0  # every third experiment's spread between starts, of the others'
    blind: bool = False  # stalls the requests do not show (no ``Summary.stall_s``)


@dataclass(frozen=True)
class Design:
    name: str
    starts: int  # every experiment's (the baseline's at least 2)
    anchors: int  # the baseline again after every this many experiments; 0: never
    scope: str  # alpha_scope
    method: str  # one of noise.METHODS
    confirm: bool = True  # the best run again at the end (campaign.confirm = "best")
    # earlier campaigns of the same design on the same host whose measured spread between
    # starts the campaign starts from (``history.prior``); 0: campaign.start_spread
    history: int = 0
    # one more start of an experiment whose starts disagree with the other configurations'
    # (``checks.starts_agree``'s F test at an objective level), before it is decided
    more_starts: bool = False
    # one more start of an experiment still inconclusive at an objective level whose ratio
    # lies inside the margin (equivalence still open), after which it is decided again
    more_open: bool = False


DESIGNS = {
    "old": Design("old", 2, 0, "experiment", "levels", confirm=False),
    "new": Design("new", 1, 2, "campaign", "anchored"),
    "new-2": Design("new-2", 2, 2, "campaign", "anchored"),
    "new-2-h1": Design("new-2-h1", 2, 2, "campaign", "anchored", history=1),
    "new-h1": Design("new-h1", 1, 2, "campaign", "anchored", history=1),
    "new-2-m": Design("new-2-m", 2, 2, "campaign", "anchored", more_starts=True),
    "new-2-me": Design("new-2-me", 2, 2, "campaign", "anchored", more_starts=True, more_open=True),
    "new-2-me-h1": Design(
        "new-2-me-h1", 2, 2, "campaign", "anchored", history=1, more_starts=True, more_open=True
    ),
}


def _sd(cv: float) -> float:
    return math.sqrt(math.log1p(cv * cv))


@dataclass
class Clock:
    """GPU time spent so far (s), and the host's speed as a function of it."""

    host: Host
    total_s: float  # the campaign's length, for the step at its middle
    exp_s: float  # one old-design experiment's GPU time: the drift's unit
    now: float = 0.0

    def speed(self) -> float:
        h = self.host
        step = math.log1p(h.step) if self.now > self.total_s / 2 else 0.0
        return h.drift * self.now / self.exp_s + step

    def start(self) -> None:
        self.now += self.host.ready_s

    def level(self) -> None:
        self.now += self.host.level_s


def _session(
    e: Experiment,
    index: int,
    reps: Sequence[int],
    ratio: float,
    clock: Clock,
    rng: np.random.Generator,
    spread: float = 1.0,
) -> None:
    """One server start of ``e``: its repetitions ``reps`` at every level."""
    h = clock.host
    clock.start()
    e.sessions.append(Session(index=index, config=e.id, log_file=""))
    start = rng.normal(size=len(LEVELS))[0]  # one draw a start, slow at every level alike
    for rep in reps:
        for k, c in enumerate(LEVELS):
            clock.level()
            b = _sd(h.between * START_SHARES[k] * spread)
            w = _sd(h.within * (2 if c == 64 else 1))
            log = math.log(100 * c * ratio) + clock.speed() + b * start + rng.normal(0, w)
            # TTFT: its median moves as the throughput does (inversely), its p99 by twice
            # the spread within a server; a stall slows the level and lifts its p99 1.5-4x
            ttft = math.log(20.0 * (1 + c / 16) / ratio) - clock.speed() - b * start
            p99 = ttft + math.log(2.0) + rng.normal(0, 2 * w)
            ttft += rng.normal(0, w)
            held = None
            if rng.random() < h.stalls:
                log += math.log1p(-rng.uniform(0.05, 0.25))
                p99 += math.log(rng.uniform(1.5, 4.0))
                # what its requests show (``Summary.stall_s``), unless --blind-stalls
                held = None if h.blind else float(rng.uniform(0.2, 0.8))
            summary = Summary(
                requests=REQUESTS,
                ok=REQUESTS,
                output_tok_s=math.exp(log),
                ttft_ms=Dist(p50=math.exp(ttft), p99=math.exp(p99)),
                stall_s=held,
            )
            e.levels.append(Level(concurrency=c, repetition=rep, session=index, summary=summary))


def _disagrees(run: Run, e: Experiment) -> bool:
    """Whether ``e``'s starts spread more than the other configurations' at some level, as
    the runner asks before it starts one more (``checks.starts_apart``)."""
    return bool(checks.starts_apart(e, run.experiments, "output_tok_s"))


def _entry(exp_id: str, role: str = "experiment", same_as: str | None = None) -> Experiment:
    return Experiment(
        id=exp_id,
        status="running",
        parent=None,
        command=["serve", same_as or exp_id],
        workload={"repetitions": REPS},
        role=role,  # type: ignore[arg-type]
    )


def _run(design: Design, k: int) -> Run:
    info = {
        "margin": MARGIN,
        "objective": {"metric": "output_tok_s"},
        "alpha": 0.05,
        "alpha_scope": design.scope,
        "anchors": design.anchors,
        "bracket": True,
        "start_spread": START_SPREAD,
    }
    return Run(
        reportgen_version="bench",
        run_id="bench",
        started_at="",
        campaign={"campaign": info, "experiment": [{}] * (k + 1)},
        campaign_file=CampaignFile(path="bench.toml", sha256=""),
        engine=EngineRecord(name="sim"),
        experiments=[],
    )


@dataclass
class Outcome:
    truths: list[float]
    first: list[str]  # each experiment's verdict when first decided
    final: list[str]
    best_truth: float | None  # None: the baseline
    best_gain: float | None  # the reported score of the best against the baseline
    covered: int = 0
    intervals: int = 0
    tail_covered: int = 0  # TTFT p99's intervals that held its true ratio
    tail_intervals: int = 0
    gpu_s: float = 0.0
    run: Run | None = None
    # identical configurations' objective levels at the end: (concurrency, called equivalent)
    level_equiv: list[tuple[int, bool]] = field(default_factory=list)


def campaign(design: Design, host: Host, k: int, rng: np.random.Generator) -> Outcome:
    truths = [TRUTHS[i % len(TRUTHS)] for i in range(k)]
    per_exp = REPS * len(LEVELS) * host.level_s
    exp_s = 2 * host.ready_s + per_exp  # an old-design experiment
    total = exp_s * (k + 2)
    clock = Clock(host, total, exp_s)
    run = _run(design, k)
    if design.history:  # earlier campaigns on this host, through the same functions
        earlier = replace(design, history=0)
        spreads = []
        for _ in range(design.history):
            before = campaign(earlier, host, k, rng)
            assert before.run is not None
            spreads.append(noise.campaign_spread(before.run.experiments, "output_tok_s"))
        pooled = noise.pooled_spread(spreads)
        run.start_prior = StartPrior(
            metric="output_tok_s",
            source="simulated",
            levels=[
                PriorLevel(concurrency=p.concurrency, spread=sd, dof=dof)
                for p, (sd, dof) in pooled.items()
            ],
        )
    first: list[str] = []

    def measure(e: Experiment, ratio: float, starts: int, spread: float = 1.0) -> None:
        run.experiments.append(e)
        t0 = clock.now
        chunks = np.array_split(np.arange(REPS), min(starts, REPS))
        for i, chunk in enumerate(chunks):
            _session(e, i, [int(x) for x in chunk], ratio, clock, rng, spread)
        e.started_at = (T0 + dt.timedelta(seconds=t0)).isoformat()
        e.finished_at = (T0 + dt.timedelta(seconds=clock.now)).isoformat()
        e.status = "ok"

    def decide(e: Experiment) -> None:
        e.decision = verdict.decide_experiment(run, e, {}, design.method)
        run.best = drift.best_after(run, e)

    base = _entry("baseline")
    measure(base, 1.0, 2)  # the baseline on two starts, as every design starts it
    base.decision = Decision(verdict="baseline", explanation="")
    run.best = "baseline"
    anchors = 0
    for i, truth in enumerate(truths, start=1):
        e = _entry(f"x{i}")
        e.parent = "baseline"
        spread = host.noisy if i % 3 == 0 else 1.0
        measure(e, truth, design.starts, spread)
        if design.more_starts and _disagrees(run, e):  # one start more, repetition REPS + 1
            _session(e, len(e.sessions), [REPS], truth, clock, rng, spread)
        decide(e)
        assert e.decision is not None
        if design.more_open and verdict.equivalence_open(run, e):  # the runner's question
            _session(e, len(e.sessions), [len(e.sessions) + REPS - 2], truth, clock, rng, spread)
            decide(e)
            assert e.decision is not None
        first.append(e.decision.verdict)
        if design.anchors and i % design.anchors == 0 and i < k:
            anchors += 1
            a = _entry(f"baseline-again-{anchors}", "anchor", "baseline")
            a.parent = "baseline"
            measure(a, 1.0, 1)
            decide(a)
            verdict.decide_nearer(run, lambda _e: {})
    end = _entry("baseline-end", "bracket", "baseline")
    end.parent = "baseline"
    measure(end, 1.0, design.starts)
    decide(end)
    verdict.decide_nearer(run, lambda _e: {})
    drift.drift_check(run)
    mine = [e for e in run.experiments if e.role == "experiment" and e.id != "baseline"]
    final = [e.decision.verdict if e.decision else "?" for e in mine]
    best = run.experiment(run.best)
    gain = None
    if best is not None and best.id != "baseline" and design.confirm:
        again = _entry("confirm-best", "confirm", best.id)
        again.parent = best.id
        noisy = host.noisy if (mine.index(best) + 1) % 3 == 0 else 1.0
        measure(again, truths[mine.index(best)], design.starts, noisy)
        decide(again)
        gain = math.exp(drift.score(run, again))  # against the bracket beside it
    out = Outcome(truths, first, final, None, None, gpu_s=clock.now, run=run)
    if best is not None and best.id != "baseline":
        out.best_truth = truths[mine.index(best)]
        out.best_gain = gain if gain is not None else math.exp(drift.score(run, best))
    for e, truth in zip(mine, truths, strict=True):
        for c in e.decision.vs_parent if e.decision else []:
            if truth == 1.0:
                out.level_equiv.append((c.concurrency, c.verdict == "equivalent"))
            if c.ci_low is not None and c.ci_high is not None:
                out.intervals += 1
                out.covered += c.ci_low <= truth <= c.ci_high
        for cs in (e.decision.metrics or {}).values() if e.decision else []:
            for c in cs:
                if c.metric == "ttft_ms_p99" and c.ci_low is not None and c.ci_high is not None:
                    out.tail_intervals += 1
                    out.tail_covered += c.ci_low <= 1 / truth <= c.ci_high
    return out


@dataclass
class Tally:
    n: int = 0
    same: int = 0
    same_first: int = 0
    same_final: int = 0
    same_equivalent: int = 0
    campaigns_wrong: int = 0
    found: dict[float, list[int]] = field(default_factory=dict)  # truth -> [right, of]
    curse: list[float] = field(default_factory=list)  # reported best gain / true, true winners
    false_best: list[float] = field(default_factory=list)
    covered: int = 0
    intervals: int = 0
    tail_covered: int = 0
    tail_intervals: int = 0
    gpu_s: float = 0.0
    decided: int = 0
    level_equiv: dict[int, list[int]] = field(default_factory=dict)  # C -> [equivalent, of]

    def add(self, o: Outcome) -> None:
        self.n += 1
        wrong = False
        for t, f1, f2 in zip(o.truths, o.first, o.final, strict=True):
            if t == 1.0:
                self.same += 1
                self.same_first += f1 in ("adopted", "rejected")
                self.same_final += f2 in ("adopted", "rejected")
                self.same_equivalent += f2 == "equivalent"
                wrong = wrong or f2 in ("adopted", "rejected")
            else:
                right = "adopted" if t > 1 else "rejected"
                got = self.found.setdefault(t, [0, 0])
                got[0] += f2 == right
                got[1] += 1
            self.decided += f2 in ("adopted", "rejected", "equivalent")
        self.campaigns_wrong += wrong
        if o.best_truth is not None and o.best_gain is not None:
            if o.best_truth > 1:
                self.curse.append(o.best_gain / o.best_truth - 1)
            elif o.best_truth == 1.0:
                self.false_best.append(o.best_gain - 1)
        self.covered += o.covered
        self.intervals += o.intervals
        self.tail_covered += o.tail_covered
        self.tail_intervals += o.tail_intervals
        self.gpu_s += o.gpu_s
        for c, eq in o.level_equiv:
            got = self.level_equiv.setdefault(c, [0, 0])
            got[0] += eq
            got[1] += 1

    def row(self) -> list[str]:
        def share(a: int, b: int) -> str:
            return f"{a / b:.1%}" if b else "-"

        power = [share(*self.found.get(t, [0, 0])) for t in (1.05, 1.10, 1.20, 0.90)]
        curse = f"{np.mean(self.curse):+.1%}" if self.curse else "-"
        false_best = f"{np.mean(self.false_best):+.1%}" if self.false_best else "-"
        per = self.gpu_s / 60 / self.decided if self.decided else math.inf
        return [
            share(self.same_first, self.same),
            share(self.same_final, self.same),
            share(self.campaigns_wrong, self.n),
            share(self.same_equivalent, self.same),
            " / ".join(share(*self.level_equiv.get(c, [0, 0])) for c in LEVELS),
            *power,
            curse,
            false_best,
            share(self.covered, self.intervals),
            share(self.tail_covered, self.tail_intervals),
            f"{per:.1f}",
        ]


HEAD = (
    "| within | between | drift | step | k | design | identical adopted/rejected: first "
    "| end | campaigns | identical equivalent | at C=1 / 16 / 64 "
    "| +5% adopted | +10% | +20% | -10% rejected "
    "| best's gain over truth | false best's gain | coverage | p99 coverage | GPU-min / decided |"
)


def main() -> int:
    global START_SPREAD, MARGIN
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200, help="campaigns a cell")
    parser.add_argument("--within", type=float, nargs="+", default=[0.01])
    parser.add_argument("--between", type=float, nargs="+", default=[0.02])
    parser.add_argument("--drift", type=float, nargs="+", default=[0.0, 0.005, 0.01])
    parser.add_argument("--step", type=float, nargs="+", default=[0.0])
    parser.add_argument("--stalls", type=float, default=0.02)
    parser.add_argument(
        "--gives-way",
        type=float,
        default=noise.BELOW,
        help="the lower tail of chi-square below which the stated spread between starts gives "
        "way to the run's own (noise.BELOW); 0: never, as before 2026-12-07's night",
    )
    parser.add_argument(
        "--noisy",
        type=float,
        default=1.0,
        help="every third experiment's spread between starts (the third, the sixth, ...), as "
        "a multiple of the others': configurations whose starts disagree with the pool",
    )
    parser.add_argument(
        "--blind-stalls",
        action="store_true",
        help="stalls whose requests show nothing (no Summary.stall_s): found by their spread "
        "alone, as before reportgen read the requests",
    )
    parser.add_argument("--experiments", type=int, nargs="+", default=[6])
    parser.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    parser.add_argument("--ready-s", type=float, default=75.0)
    parser.add_argument("--level-s", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start-spread", type=float, default=START_SPREAD)
    parser.add_argument("--prior-dof", type=int, default=noise.PRIOR_DOF)
    parser.add_argument(
        "--margin", type=float, default=MARGIN, help="campaign.margin (default: %(default)s)"
    )
    args = parser.parse_args()
    START_SPREAD = args.start_spread
    MARGIN = args.margin
    noise.PRIOR_DOF = args.prior_dof
    noise.BELOW = args.gives_way
    print(
        f"margin {MARGIN:.0%}; {args.trials} campaigns a cell; {REPS} repetitions; stalls in "
        f"{args.stalls:.0%} of repetitions; a start {args.ready_s:g} s, a level run "
        f"{args.level_s:g} s; stated start spread {START_SPREAD:.1%} weighed as "
        f"{noise.PRIOR_DOF} starts; every third experiment's starts {args.noisy:g}x as far "
        "apart as the others'; true ratios cycle through " + ", ".join(f"{t:.2f}" for t in TRUTHS)
    )
    print(HEAD)
    print("|" + "---|" * (HEAD.count("|") - 1))
    grid = itertools.product(args.within, args.between, args.drift, args.step, args.experiments)
    for within, between, drift_, step, k in grid:
        host = Host(
            within,
            between,
            drift_,
            step,
            args.stalls,
            args.ready_s,
            args.level_s,
            args.noisy,
            args.blind_stalls,
        )
        for name in args.designs:
            rng = np.random.default_rng(args.seed)
            tally = Tally()
            for _ in range(args.trials):
                tally.add(campaign(DESIGNS[name], host, k, rng))
            cells = [f"{within:.1%}", f"{between:.1%}", f"{drift_:.1%}", f"{step:.0%}", str(k)]
            print("| " + " | ".join([*cells, name, *tally.row()]) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
