"""The highest concurrency that still meets latency bounds (``workload.find_max``).

Bounds are written as ``metric.stat<value`` joined by commas, ``ttft_ms.p99<500,itl_ms.p99<50``
(a throughput without a stat: ``output_tok_s>1000``). A level passes when every bound holds
for the mean over its repetitions and at most ``MAX_ERROR_SHARE`` of its requests failed.

The search doubles the concurrency from ``start`` while levels pass, up to ``max``; after the
first failure it bisects between the highest pass and the lowest failure, until they are
within ``tolerance`` of each other (or adjacent), or ``probes`` levels have run. What it
reports is the highest level that passed (none, if the first failed), each probe with its
numbers, and whether the search converged. Load is monotone enough in practice for this
(latency grows with concurrency); a non-monotone server shows as a pass above a failure in
the probes, which the report lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from reportgen.campaign.bounds import Bound, parse
from reportgen.results.model import Probe, Summary

__all__ = ["MAX_ERROR_SHARE", "Bound", "Probe", "Search", "parse"]

MAX_ERROR_SHARE = 0.01


@dataclass
class Search:
    """Which level to run next (``next``), told each level's summaries (``record``);
    ``done``: the probes so far (a run's ``SearchRecord.probes``, filled in place)."""

    bounds: list[Bound]
    start: int = 1
    most: int = 1024
    probes: int = 8
    tolerance: float = 0.1
    done: list[Probe] = field(default_factory=list)

    def next(self) -> int | None:
        """The next concurrency to probe, or None when the search is over."""
        if len(self.done) >= self.probes:
            return None
        if not self.done:
            return self.start
        low, high = self.best, self.lowest_failure
        if high is None:  # every level passed so far: double, up to the most allowed
            top = max(p.concurrency for p in self.done)
            return None if top >= self.most else min(top * 2, self.most)
        if low is None:  # the first level failed: nothing lower to try than 1
            return None if high <= 1 else max(1, high // 2)
        if high - low <= max(1, self.tolerance * low):
            return None
        return (low + high) // 2

    def record(self, concurrency: int, runs: Sequence[Summary]) -> Probe:
        values: dict[str, float | None] = {}
        passed = bool(runs)
        for b in self.bounds:
            seen = [v for s in runs if (v := s.value(b.metric, b.stat or "p50")) is not None]
            mean = sum(seen) / len(seen) if seen else None
            values[str(b)] = mean
            passed = passed and mean is not None and b.holds(mean)
        sent = sum(s.requests for s in runs)
        errors = sum(s.requests - s.ok for s in runs)
        share = errors / sent if sent else 1.0
        probe = Probe(
            concurrency=concurrency,
            passed=passed and share <= MAX_ERROR_SHARE,
            values=values,
            error_share=share,
        )
        self.done.append(probe)
        return probe

    @property
    def best(self) -> int | None:
        """The highest concurrency that passed below the lowest that failed."""
        cap = self.lowest_failure
        ok = [p.concurrency for p in self.done if p.passed and (cap is None or p.concurrency < cap)]
        return max(ok) if ok else None

    @property
    def lowest_failure(self) -> int | None:
        failed = [p.concurrency for p in self.done if not p.passed]
        return min(failed) if failed else None

    @property
    def converged(self) -> bool:
        """Whether the answer is pinned down: a pass next to a failure (within the
        tolerance), or a pass at the most allowed, or the first level failing at 1."""
        low, high = self.best, self.lowest_failure
        if high is None:
            return low is not None and low >= self.most
        if low is None:
            return high <= 1
        return high - low <= max(1, self.tolerance * low)
