"""How often is a verdict right? Simulated campaigns with known effects and known noise.

    python benchmarks/verdicts.py                    # the grid below, 400 campaigns a cell
    python benchmarks/verdicts.py --trials 1000 --reps 2 3

Each trial is one campaign: a baseline and five experiments with a known true ratio of the
objective (output tok/s) to the baseline's at every level, 0.75, 0.90, 1.00, 1.10 and 1.25,
each decided against the baseline at C=1, 16 and 64 by the runner's own code
(``analysis.verdict.Comparer`` and ``analysis.decide.decide``). A level run's value is
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
  starts averages down too, and is measured on the experiment itself), and are looked at
  again, at Pocock's level.

A row prints, per true ratio, how often a level was called "better" or "worse" (the right
call for 1.10 and 1.25 is better, for 0.90 and 0.75 worse; for 1.00 either is a false alarm),
how often an identical configuration's decision over its three levels was "adopted" or
"rejected" (a false alarm that changes the campaign), and the repetitions spent per
experiment. The seed is fixed, so two runs print the same table. At 200 campaigns a cell, each
repetition count's twelve rows took 3-4 minutes on one core (2026-12-01), so the default grid
takes about 12 at ``--trials 200`` and twice that at the default 400.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's reportgen

from reportgen.analysis import decide, verdict  # noqa: E402
from reportgen.results.model import (  # noqa: E402
    CampaignFile,
    Decision,
    EngineRecord,
    Experiment,
    Level,
    Run,
    Session,
    Summary,
)

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
    starts: float  # between server starts, relative sd


def _sigma(cv: float) -> float:
    return math.sqrt(math.log1p(cv**2))


class Campaign:
    """One simulated campaign's data source: draws level values as servers would give them."""

    def __init__(self, truth: Truth, rng: np.random.Generator) -> None:
        self.truth = truth
        self.rng = rng

    def start(self) -> float:
        """A server start's own speed (log), shared by its levels."""
        s = _sigma(self.truth.starts)
        return float(self.rng.normal(-(s**2) / 2, s)) if s else 0.0

    def value(self, ratio: float, level: int, start: float) -> float:
        s = _sigma(self.truth.noise * (2 if level == 64 else 1))
        return 100 * ratio * math.exp(start + self.rng.normal(-(s**2) / 2, s))


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


def _run(experiments: list[Experiment]) -> Run:
    return Run(
        reportgen_version="bench",
        run_id="bench",
        started_at="",
        campaign={"campaign": {"margin": MARGIN, "objective": {"metric": "output_tok_s"}}},
        campaign_file=CampaignFile(path="bench.toml", sha256=""),
        engine=EngineRecord(name="sim"),
        experiments=experiments,
    )


def simulate(
    method: str, truth: Truth, reps: int, rng: np.random.Generator
) -> list[tuple[float, list[str], str, int]]:
    """One campaign by ``method``: per experiment (true ratio, its levels' verdicts against
    the baseline, its decision, repetitions spent)."""
    source = Campaign(truth, rng)
    pooled = method != "today"
    base = _experiment("baseline", 0, 1.0)
    starts = min(max(SERVERS, 2), reps) if pooled else 1
    split = np.array_split(np.arange(reps), starts)
    base.sessions = [Session(index=i, config="baseline", log_file="") for i in range(starts)]
    for i, chunk in enumerate(split):
        speed = source.start()
        for c in LEVELS:
            for rep in chunk:
                base.levels.append(_level(c, int(rep), i, source.value(1.0, c, speed)))
    base.decision = Decision(verdict="baseline", explanation="")
    run = _run([base])
    out = []
    for k, ratio in enumerate(RATIOS, start=1):
        e = _experiment(f"x{k}", k, ratio)
        high = MAX_REPS if method == "adaptive" else reps
        e.workload = {"repetitions": {"min": reps, "max": high} if high > reps else reps}
        e.sessions = [Session(index=0, config=e.id, log_file="")]
        run.experiments.append(e)
        done = {c: 0 for c in LEVELS}
        want = list(LEVELS)
        session = 0
        while want:
            # the first round on SERVERS servers, then one more for each round added
            first = [
                len(x) for x in np.array_split(np.arange(reps), SERVERS if pooled else 1) if len(x)
            ]
            for count in first if session == 0 else [1]:
                speed = source.start()
                if session:
                    e.sessions.append(Session(index=session, config=e.id, log_file=""))
                for c in want:
                    for _ in range(count):
                        e.levels.append(_level(c, done[c], session, source.value(ratio, c, speed)))
                        done[c] += 1
                session += 1
            found = verdict.Comparer(run, e, pooled=pooled).objective(
                verdict.Side("baseline", True, base.levels, "baseline")
            )
            want = [
                x.concurrency
                for x in found
                if x.verdict == "inconclusive"
                and done[x.concurrency] < high
                and x.limit != "starts"
            ]
        verdict_, _ = decide.decide(e.id, "baseline", found, "output_tok_s", MARGIN)
        e.decision = Decision(verdict=verdict_, explanation="")
        out.append((ratio, [x.verdict for x in found], verdict_, sum(done.values())))
    return out


def cell(method: str, truth: Truth, reps: int, trials: int, seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    calls = {r: {"better": 0, "worse": 0} for r in RATIOS}
    decided = {r: {"adopted": 0, "rejected": 0} for r in RATIOS}
    spent = {r: 0 for r in RATIOS}
    for _ in range(trials):
        for ratio, levels, dec, used in simulate(method, truth, reps, rng):
            for v in levels:
                if v in calls[ratio]:
                    calls[ratio][v] += 1
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=400, help="campaigns a cell (400)")
    parser.add_argument("--reps", type=int, nargs="+", default=[2, 3, 5], help="repetitions")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
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
                for method in ("today", "pooled", "adaptive"):
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
