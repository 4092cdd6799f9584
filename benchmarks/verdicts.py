"""How often is a verdict right? Simulated comparisons with a known effect and known noise.

    python benchmarks/verdicts.py                 # the grid below, 200 trials a cell
    python benchmarks/verdicts.py --trials 500 --reps 2 3

About 4 minutes for the default grid on one core (500 trials a cell: about 10): an
inconclusive comparison's "repetitions that would decide" search is most of it.

Each trial draws a parent's and a child's repetitions of one level: log-normal around 100 and
100 x the true ratio, with the given run-to-run coefficient of variation, and compares them
with ``analysis.decide.compare_runs`` (what the runner and ``verify`` call, through
``analysis.verdict``) at the campaign's default margin. A cell prints how often the verdict
said "better", "equivalent", "worse" or "inconclusive", and the median width of the 95%
interval (high / low). Read it as:

- ratio 1.00: "better" or "worse" is a false alarm (crying wolf); "equivalent" is right;
- ratio beyond the margin: "better" is right, "worse" is a wrong call, "inconclusive" a miss.

The seed is fixed, so two runs print the same table.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's reportgen

from reportgen.analysis.decide import compare_runs  # noqa: E402
from reportgen.campaign import DEFAULT_MARGIN  # noqa: E402

RATIOS = (1.0, 1.02, 1.10, 1.30, 2.0, 7.0)
NOISE = (0.02, 0.05, 0.15)


def cell(ratio: float, cv: float, reps: int, trials: int, rng: np.random.Generator) -> str:
    sigma = math.sqrt(math.log1p(cv**2))
    counts = dict.fromkeys(("better", "equivalent", "worse", "inconclusive"), 0)
    widths = []
    for _ in range(trials):
        parent = 100 * np.exp(rng.normal(-(sigma**2) / 2, sigma, reps))
        child = 100 * ratio * np.exp(rng.normal(-(sigma**2) / 2, sigma, reps))
        c = compare_runs(parent, child, margin=DEFAULT_MARGIN, higher_is_better=True)
        counts[c.verdict] += 1
        if c.ci_low and c.ci_high:
            widths.append(c.ci_high / c.ci_low)
    share = {k: v / trials for k, v in counts.items()}
    width = f"{np.median(widths):7.2f}" if widths else "      -"
    return (
        f"| {ratio:5.2f} | {cv:4.0%} | {reps} | {share['better']:6.1%} | "
        f"{share['equivalent']:6.1%} | {share['worse']:6.1%} | {share['inconclusive']:6.1%} | "
        f"{width} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200, help="comparisons a cell (200)")
    parser.add_argument("--reps", type=int, nargs="+", default=[2, 3, 5], help="repetitions a side")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"margin {DEFAULT_MARGIN:.0%}; {args.trials} trials a cell; Welch on log values")
    print("| ratio | noise | n | better | equivalent | worse | inconclusive | CI hi/lo |")
    print("|---|---|---|---|---|---|---|---|")
    for reps in args.reps:
        for cv in NOISE:
            for ratio in RATIOS:
                print(cell(ratio, cv, reps, args.trials, rng))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
