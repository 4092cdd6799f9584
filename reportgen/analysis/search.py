"""The highest concurrency (or request rate) that still meets latency bounds
(``workload.find_max``).

Bounds are written as ``metric.stat<value`` joined by commas, ``ttft_ms.p99<500,itl_ms.p99<50``
(a throughput without a stat: ``output_tok_s>1000``). A level passes when every bound holds
for the mean over its repetitions and at most ``MAX_ERROR_SHARE`` of its requests failed.

Each bound's mean comes with a 95% t interval over the repetitions (on one server: the spread
between server starts is not in it). A probe whose interval holds a bound's value is *near*:
its pass or fail could go either way, and the search runs its repetitions once more
(``find_max.repeat_near``) before it decides on the mean of them all; one still near after
that is said to be so with the answer.

The search doubles the concurrency (or, ``over = "request_rate"``, the rate of an open loop)
from ``start`` while levels pass, up to ``max``; after the first failure it bisects between the
highest pass and the lowest failure, until they are within ``tolerance`` of each other (or
adjacent concurrencies), or ``probes`` levels have run. What it
reports is the highest level that passed (none, if the first failed), each probe with its
numbers, and whether the search converged. Load is monotone enough in practice for this
(latency grows with concurrency); a non-monotone server shows as a pass above a failure in
the probes, which the report lists.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from reportgen.campaign.bounds import Bound, parse
from reportgen.results.levels import SearchProbe, Summary
from reportgen.results.model import Point

__all__ = ["MAX_ERROR_SHARE", "Bound", "SearchProbe", "Search", "parse"]

MAX_ERROR_SHARE = 0.01


def interval(seen: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """The t interval of the mean of ``seen`` (None with fewer than two values)."""
    from scipy import stats

    if len(seen) < 2:
        return None
    mean, sd = statistics.fmean(seen), statistics.stdev(seen)
    half = float(stats.t.ppf(0.5 + confidence / 2, len(seen) - 1)) * sd / math.sqrt(len(seen))
    return mean - half, mean + half


@dataclass
class Search:
    """Which level to run next (``next``), told each level's summaries (``record``);
    ``done``: the probes so far (a run's ``SearchRecord.probes``, filled in place).
    ``cap``: a search over request rates (``over``) runs each at this concurrency cap."""

    bounds: list[Bound]
    start: float = 1
    most: float = 1024
    probes: int = 8
    tolerance: float = 0.1
    done: list[SearchProbe] = field(default_factory=list)
    over: str = "concurrency"
    cap: int = 0

    @property
    def whole(self) -> bool:
        """Whether it searches concurrency (whole numbers), not request rates."""
        return self.over == "concurrency"

    @property
    def floor(self) -> float:
        """The lowest it probes when the first level fails: a concurrency of 1, or a
        sixteenth of the first rate (no server worth a search fails at that)."""
        return 1 if self.whole else self.start / 16

    def at(self, p: SearchProbe) -> float:
        """Where a probe sat: its concurrency, or its rate."""
        return float(p.concurrency) if self.whole or p.rate is None else p.rate

    def point(self, x: float) -> Point:
        """The level to run for ``x`` (a concurrency, or a rate at the cap)."""
        return Point(int(x)) if self.whole else Point(self.cap, x)

    def _nice(self, x: float) -> float:
        return float(int(x)) if self.whole else float(f"{x:.3g}")

    def next(self) -> float | None:
        """The next concurrency (or rate) to probe, or None when the search is over."""
        if len(self.done) >= self.probes:
            return None
        if not self.done:
            return self.start
        low, high = self.best, self.lowest_failure
        if high is None:  # every level passed so far: double, up to the most allowed
            top = max(self.at(p) for p in self.done)
            return None if top >= self.most else min(top * 2, self.most)
        if low is None:  # the first level failed: halve, down to the floor
            return None if high <= self.floor else self._nice(max(self.floor, high / 2))
        if self._close(low, high):
            return None
        mid = self._nice((low + high) / 2)
        return None if mid in (low, high) else mid

    def _close(self, low: float, high: float) -> bool:
        return high - low <= (max(1, self.tolerance * low) if self.whole else self.tolerance * low)

    def record(self, x: float, runs: Sequence[Summary], *, repeated: bool = False) -> SearchProbe:
        """A probe at ``x`` from its repetitions' summaries; ``repeated``: it ran its
        repetitions once more because it was near a bound (the probe it replaces is
        dropped)."""
        if repeated and self.done and self.at(self.done[-1]) == x:
            self.done.pop()
        values: dict[str, float | None] = {}
        intervals: dict[str, list[float]] = {}
        passed, near = bool(runs), False
        for b in self.bounds:
            seen = [v for s in runs if (v := s.value(b.metric, b.stat or "p50")) is not None]
            mean = sum(seen) / len(seen) if seen else None
            values[str(b)] = mean
            passed = passed and mean is not None and b.holds(mean)
            ci = interval(seen)
            if ci is not None:
                intervals[str(b)] = [ci[0], ci[1]]
                near = near or b.holds(ci[0]) != b.holds(ci[1])
        sent = sum(s.requests for s in runs)
        errors = sum(s.requests - s.ok for s in runs)
        share = errors / sent if sent else 1.0
        where = self.point(x)
        probe = SearchProbe(
            concurrency=where.concurrency,
            rate=where.rate,
            passed=passed and share <= MAX_ERROR_SHARE,
            values=values,
            error_share=share,
            intervals=intervals,
            near=near,
            repeated=repeated,
        )
        self.done.append(probe)
        return probe

    @property
    def best(self) -> float | None:
        """The highest concurrency (or rate) that passed below the lowest that failed."""
        cap = self.lowest_failure
        ok = [self.at(p) for p in self.done if p.passed and (cap is None or self.at(p) < cap)]
        return max(ok) if ok else None

    @property
    def lowest_failure(self) -> float | None:
        failed = [self.at(p) for p in self.done if not p.passed]
        return min(failed) if failed else None

    @property
    def converged(self) -> bool:
        """Whether the answer is pinned down: a pass next to a failure (within the
        tolerance), or a pass at the most allowed, or the first level failing at the floor."""
        low, high = self.best, self.lowest_failure
        if high is None:
            return low is not None and low >= self.most
        if low is None:
            return high <= self.floor
        return self._close(low, high)
