"""How long a verdict's tail intervals take: ``decide.bootstrap_ratio`` with its own
percentile (``decide.percentile``) against the same bootstrap with ``np.percentile``, on runs
shaped like the demo's (3 runs a side, 32 requests each) and like a larger campaign's (3 runs
of 256), and that both give the same interval to the last bit.

    .venv/bin/python benchmarks/decide_speed.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from unittest import mock

import numpy as np

from reportgen.analysis import decide


def _runs(rng: np.random.Generator, runs: int, requests: int, scale: float) -> list[list[float]]:
    return [list(rng.lognormal(np.log(scale), 0.3, size=requests)) for _ in range(runs)]


def _numpy_percentile(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="timed calls per case (median shown)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'case':<26}{'np.percentile':>15}{'decide.percentile':>19}{'ratio':>8}  same")
    for runs, requests in ((3, 32), (3, 256)):
        parent, child = _runs(rng, runs, requests, 100), _runs(rng, runs, requests, 104)
        times = {}
        answers = {}
        for name, pct in (("numpy", _numpy_percentile), ("own", decide.percentile)):
            with mock.patch.object(decide, "percentile", pct):
                took = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    answers[name] = decide.bootstrap_ratio(parent, child, 99)
                    took.append(time.perf_counter() - t0)
            times[name] = statistics.median(took)
        ratio = times["numpy"] / times["own"]
        same = answers["numpy"] == answers["own"]
        print(f"{f'{runs} runs x {requests} requests':<26}{times['numpy'] * 1e3:>12.0f} ms"
              f"{times['own'] * 1e3:>16.0f} ms{ratio:>7.1f}x  {same}")  # fmt: skip


if __name__ == "__main__":
    main()
