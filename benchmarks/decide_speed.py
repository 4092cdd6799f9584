"""How long a verdict's tail interval takes (``tails.bootstrap_ratio``, 2,000 resamples):
the loop as it first was (``np.percentile`` on each resample), the loop with its own
percentile (``bootstrap.percentile``), and the draws in bulk (``bootstrap.ratio``, what
verdicts use), on runs shaped like the demo's (3 runs a side, 16 and 32 requests each), a
larger campaign's (3 runs of 256) and runs of uneven length (5 of 20-120); and that all three
give the same interval to the last bit.

    .venv/bin/python benchmarks/decide_speed.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial
from unittest import mock

import numpy as np

from reportgen.analysis import bootstrap, tails


def _runs(rng: np.random.Generator, sizes: list[int], scale: float) -> list[list[float]]:
    return [list(rng.lognormal(np.log(scale), 0.3, size=n)) for n in sizes]


def _numpy_percentile(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q))


def _timed(call: Callable[[], object], repeat: int) -> tuple[float, object]:
    took, got = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        got = call()
        took.append(time.perf_counter() - t0)
    return statistics.median(took), got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="timed calls per case (median shown)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    cases = {
        "3 runs x 16 requests": [16] * 3,
        "3 runs x 32 requests": [32] * 3,
        "3 runs x 256 requests": [256] * 3,
        "5 runs x 20-120 requests": [20, 45, 70, 95, 120],
    }
    print(f"{'case':<26}{'np.percentile':>14}{'own percentile':>16}{'bulk':>9}"
          f"{'vs first':>10}{'vs own':>8}  same")  # fmt: skip
    for name, sizes in cases.items():
        parent, child = _runs(rng, sizes, 100), _runs(rng, sizes, 104)
        bulk = partial(tails.bootstrap_ratio, parent, child, 99)
        t_first, a = _timed(partial(_looped, parent, child, _numpy_percentile), args.repeat)
        t_own, b = _timed(partial(_looped, parent, child, bootstrap.percentile), args.repeat)
        t_bulk, c = _timed(bulk, args.repeat)
        same = a == b == c
        print(f"{name:<26}{t_first * 1e3:>11.0f} ms{t_own * 1e3:>13.0f} ms{t_bulk * 1e3:>6.0f} ms"
              f"{t_first / t_bulk:>9.1f}x{t_own / t_bulk:>7.1f}x  {same}")  # fmt: skip


Runs = list[list[float]]


def _looped(parent: Runs, child: Runs, pct: Callable[..., float]) -> object:
    """The interval by the loop, with ``pct`` as each resample's percentile."""
    with (
        mock.patch.object(bootstrap, "_bulk_works", lambda: False),
        mock.patch.object(bootstrap, "percentile", pct),
    ):
        return tails.bootstrap_ratio(parent, child, 99)


if __name__ == "__main__":
    main()
