"""How often does the history find a change where it happened, and how often does it raise one
that is not there? Simulated series of runs with known change points and noise.

    python benchmarks/history_changes.py                  # the grid below, 500 series a cell
    python benchmarks/history_changes.py --series 2000 --runs 5 10

Each simulated run of a series measures one level three times (repetitions). A run's level
mean is the series' true value times a run-to-run factor (log-normal, sigma ``between``: what
another day, server start or host brings) and each repetition adds its own (sigma ``within``:
the spread on one server). The defaults are what the committed H100 campaigns showed: their
baselines' repetitions varied 0.2-2.6% (CV), so within 1%, between 2%.

Scenarios:

- ``none``: no change: every change point found is a false alarm;
- ``-10%`` and ``-5%``: one step down at a random run (not the first two nor the last), the
  size a user of the engines' regression reports would care about and half of it;
- ``-10% last``: the step at the newest run, the case ``history check`` judges in CI.

Two methods, on the same series:

- ``history``: ``reportgen.history.changes.find`` (binary segmentation, Student's t on run
  means with the noise pooled over the segments found, Bonferroni over the splits, alpha 5%);
- ``neighbours``: what comparing each run with the one before by its repetitions alone does
  (``reportgen diff`` run on every pair, Welch's t at 5%): a change wherever a pair differs.

A row prints, per method: the share of series with a false change point (none at the true
place: for ``none``, any change point at all), the share where the change was found at its run
(``found``), or within one run of it (``±1``), and the median size found over the true one.
A second table is ``history check --fail-on-regression 5%`` on the newest run of each series
(``changes.check``): how often it answers regressed, not regressed and cannot tell, for series
without a change and for a step of -10% or -3% at the newest run.

The seed is fixed: two runs print the same tables.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reportgen.history import changes  # noqa: E402

REPS = 3


@dataclass(frozen=True)
class Scenario:
    name: str
    size: float  # the step: after / before (1.0: none)
    last: bool = False  # the step at the newest run


SCENARIOS = (
    Scenario("none", 1.0),
    Scenario("-5%", 0.95),
    Scenario("-10%", 0.90),
    Scenario("-10% last", 0.90, last=True),
)


def simulate(
    rng: random.Random, n: int, sc: Scenario, between: float, within: float
) -> tuple[list[changes.Obs], int | None]:
    at = None
    if sc.size != 1.0:
        at = n - 1 if sc.last else rng.randrange(2, n - 1)
    out = []
    for i in range(n):
        true = 1000.0 * (sc.size if at is not None and i >= at else 1.0)
        run = true * math.exp(rng.gauss(0, between))
        reps = tuple(run * math.exp(rng.gauss(0, within)) for _ in range(REPS))
        out.append(changes.Obs(i, reps))
    return out, at


def neighbours(obs: Sequence[changes.Obs]) -> list[tuple[int, float]]:
    """Welch's t between each run's repetitions and the run before's, at 5%."""
    found = []
    for a, b in zip(obs, obs[1:], strict=False):
        t = stats.ttest_ind(b.logs, a.logs, equal_var=False)
        if t.pvalue < 0.05:
            found.append((b.index, math.exp(b.mean_log - a.mean_log)))
    return found


def history(obs: Sequence[changes.Obs]) -> list[tuple[int, float]]:
    return [(c.at, c.ratio) for c in changes.find(obs)]


METHODS = {"history": history, "neighbours": neighbours}


def cell(n: int, sc: Scenario, count: int, between: float, within: float, seed: int) -> dict:
    rng = random.Random(seed)
    tallies = {m: {"false": 0, "found": 0, "near": 0, "sizes": []} for m in METHODS}
    for _ in range(count):
        obs, at = simulate(rng, n, sc, between, within)
        for name, method in METHODS.items():
            got = method(obs)
            t = tallies[name]
            wrong = [x for x, _ in got if at is None or abs(x - at) > 1]
            t["false"] += bool(wrong)
            if at is not None:
                hit = [r for x, r in got if x == at]
                t["found"] += bool(hit)
                t["near"] += any(abs(x - at) <= 1 for x, _ in got)
                if hit:
                    t["sizes"].append(hit[0] / sc.size)
    return tallies


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--series", type=int, default=500, help="simulated series a cell")
    ap.add_argument("--runs", type=int, nargs="+", default=[5, 10, 30])
    ap.add_argument("--between", type=float, default=0.02, help="run-to-run sigma (log)")
    ap.add_argument("--within", type=float, default=0.01, help="repetition sigma (log)")
    args = ap.parse_args(argv)
    print(
        f"{args.series} series a cell; {REPS} repetitions a run; run-to-run sigma "
        f"{args.between:.0%}, repetitions {args.within:.0%}; alpha 5%"
    )
    print()
    print(
        "| runs | change | method | false alarm | found at its run | within ±1 "
        "| size found / true |"
    )
    print("|---|---|---|---|---|---|---|")
    for n in args.runs:
        for k, sc in enumerate(SCENARIOS):
            got = cell(n, sc, args.series, args.between, args.within, seed=1000 * n + k)
            for name, t in got.items():
                share = lambda x: f"{100 * x / args.series:.1f}%"  # noqa: E731
                sized = f"{statistics.median(t['sizes']):.2f}" if t["sizes"] else "–"
                found = share(t["found"]) if sc.size != 1.0 else "–"
                near = share(t["near"]) if sc.size != 1.0 else "–"
                print(f"| {n} | {sc.name} | {name} | {share(t['false'])} | {found} | {near} | "
                      f"{sized if sc.size != 1.0 else '–'} |")  # fmt: skip
    print()
    print("| runs | newest run | regressed | not regressed | cannot tell |")
    print("|---|---|---|---|---|")
    for n in args.runs:
        for k, sc in enumerate((Scenario("no change", 1.0), Scenario("-3%", 0.97, last=True),
                                Scenario("-10%", 0.90, last=True))):  # fmt: skip
            rng = random.Random(7000 + 100 * n + k)
            answers = {"regressed": 0, "not regressed": 0, "cannot tell": 0}
            for _ in range(args.series):
                obs, _ = simulate(rng, n, sc, args.between, args.within)
                answers[changes.check(obs, changes.find(obs), 0.05, True).answer] += 1
            shares = " | ".join(f"{100 * v / args.series:.1f}%" for v in answers.values())
            print(f"| {n} | {sc.name} | {shares} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
