"""The highest concurrency (or request rate) that still meets latency bounds
(``workload.find_max``).

Bounds are written as ``metric.stat<value`` joined by commas, ``ttft_ms.p99<500,itl_ms.p99<50``
(a throughput without a stat: ``output_tok_s>1000``). A level passes when every bound holds
and at most ``MAX_ERROR_SHARE`` of its requests failed.

A latency bound is about requests: ``ttft_ms.p99<300`` means 99 of 100 requests see their first
token within 300 ms at that load. So it is judged on the requests of all the level's runs
together (``Search.pooled``): their 99th percentile, not the mean of each run's own. Stalls
come in runs: on an H100 at 64 req/s one run of four held a stall that put 27 of its 256
requests over a 200 ms bound, 2.6% of the level's, while the mean of the four runs' p99s
read 174 ms and passed it. Its 95% interval resamples whole runs (a percentile
bootstrap over them: a stall's requests stay together). A throughput bound is judged on the
mean over the repetitions, with its 95% t interval (on one server: the spread between server
starts is not in it); so is every bound of a search recorded before it pooled. A probe whose
interval holds a bound's value is *near*:
its pass or fail could go either way, and the search runs its repetitions once more
(``find_max.repeat_near``) before it decides on the mean of them all; one still near after
that is said to be so with the answer.

The search doubles the concurrency (or, ``over = "request_rate"``, the rate of an open loop)
from ``start`` while levels pass, up to ``max``; after the first failure it bisects between the
highest pass and the lowest failure, until they are within ``tolerance`` of each other (or
adjacent concurrencies), or ``probes`` levels have run. What it
reports is the highest level that passed (none, if the first failed), each probe with its
numbers, and whether the search converged.

Before it answers, the boundary is probed again (``find_max.confirm``): the lowest failure and
the highest pass each run their repetitions once more, after every other probe, and are
decided on all their runs. One stall failed a level in a sweep that passed far above it, so a
failure is not believed on one look; a verdict that changes moves the search on from there.
The answer comes with an interval (``Search.interval``): from the highest pass whose
intervals clear every bound to the lowest failure that is not within noise either.

Load is monotone enough in practice for this
(latency grows with concurrency); a non-monotone server shows as a pass above a failure in
the probes, which the report lists.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from reportgen.analysis.summary import latency_samples
from reportgen.campaign.bounds import Bound, parse
from reportgen.load.records import RequestRecord
from reportgen.results.levels import Level, SearchProbe, Summary
from reportgen.results.model import Point

__all__ = ["MAX_ERROR_SHARE", "Bound", "Ran", "SearchProbe", "Search", "parse", "search_runs"]

MAX_ERROR_SHARE = 0.01
# how many times the boundary is probed again and the search goes on from a verdict that
# changed (a server whose boundary flaps is answered after these, as it then stands)
CONFIRM_ROUNDS = 3


BOOTSTRAP_DRAWS = 1000  # resamples of a level's runs for a pooled percentile's interval


@dataclass(frozen=True)
class Ran:
    """One level run as a search decides on it: its summary and, where its requests are at
    hand, their latencies by metric (``analysis.summary.latency_samples``)."""

    summary: Summary
    latencies: Mapping[str, np.ndarray] | None = None


def search_runs(levels: Sequence[Level], rows: Sequence[RequestRecord]) -> list[Ran]:
    """A level's runs (``levels``, all at one point) with their requests' latencies, from
    ``rows``: that point's request records, each level run's found by its repetition."""
    by_rep: dict[int, list[RequestRecord]] = {}
    for r in rows:
        if r.status == "ok":
            by_rep.setdefault(int(r.repetition), []).append(r)
    return [Ran(lv.summary, latency_samples(by_rep.get(lv.repetition, []))) for lv in levels]


def _stat(values: np.ndarray, stat: str, axis: int | None = None) -> Any:
    """A latency statistic of ``values`` (along ``axis``, for many at once): ``mean``, or
    ``pNN`` (numpy's linear interpolation, as the level summaries take them)."""
    if stat == "mean":
        return values.mean(axis=axis)
    return np.percentile(values, float(stat.removeprefix("p")), axis=axis)


def pooled_interval(
    per_run: Sequence[np.ndarray], stat: str, confidence: float = 0.95
) -> tuple[float, float] | None:
    """The percentile bootstrap interval of ``stat`` over the requests of all runs together,
    resampling whole runs (None with fewer than two runs). Seeded: the same runs give the
    same interval, so ``verify`` takes it again."""
    if len(per_run) < 2:
        return None
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(per_run), size=(BOOTSTRAP_DRAWS, len(per_run)))
    if not any(v.size for v in per_run):
        return None
    if len({len(v) for v in per_run}) == 1:  # in bulk: runs alike in size
        seen = _stat(np.stack(per_run)[picks].reshape(BOOTSTRAP_DRAWS, -1), stat, axis=1)
    else:
        drawn = (np.concatenate([per_run[i] for i in row]) for row in picks)
        seen = np.asarray([_stat(d, stat) for d in drawn if d.size], dtype=float)
        if seen.size == 0:
            return None
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(seen, [tail, 100 - tail])
    return float(lo), float(hi)


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
    # latency bounds judged on the requests of a level's runs together (given their latencies:
    # ``Ran``); False: on the mean of the runs' own values, as searches recorded before did
    pooled: bool = True

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

    def record(
        self,
        x: float,
        runs: Sequence[Summary | Ran],
        *,
        repeated: bool = False,
        confirmed: bool = False,
    ) -> SearchProbe:
        """A probe at ``x`` from its repetitions' summaries; ``repeated``: it ran its
        repetitions once more because it was near a bound (the probe it replaces is
        dropped); ``confirmed``: it was run again at the end, as a boundary's probe."""
        if repeated and self.done and self.at(self.done[-1]) == x:
            self.done.pop()
        probe = self._probe(x, runs, repeated=repeated, confirmed=confirmed)
        self.done.append(probe)
        return probe

    def unconfirmed(self) -> list[float]:
        """The boundary's probes not yet run again: the lowest failure, then the highest
        pass (a stall that failed one level, or luck that passed one, is found out before the
        answer is given)."""
        edges = [self.lowest_failure, self.best]
        return [
            x for x in edges
            if x is not None and not any(p.confirmed for p in self.done if self.at(p) == x)
        ]  # fmt: skip

    def confirm(self, x: float, runs: Sequence[Summary | Ran]) -> bool:
        """The probe at ``x`` decided again on ``runs``, its first repetitions and those of
        its confirmation, in its place among the probes; whether its pass or fail changed
        (the search then goes on from the new boundary)."""
        i = next(i for i, p in enumerate(self.done) if self.at(p) == x)
        before = self.done[i]
        self.done[i] = self._probe(x, runs, repeated=before.repeated, confirmed=True)
        return self.done[i].passed != before.passed

    def _probe(
        self, x: float, runs: Sequence[Summary | Ran], *, repeated: bool, confirmed: bool
    ) -> SearchProbe:
        ran = [r if isinstance(r, Ran) else Ran(r) for r in runs]
        summaries = [r.summary for r in ran]
        values: dict[str, float | None] = {}
        intervals: dict[str, list[float]] = {}
        passed, near = bool(summaries), False
        for b in self.bounds:
            lat = [r.latencies.get(b.metric) if r.latencies is not None else None for r in ran]
            mean: float | None
            if self.pooled and b.stat is not None and ran and all(v is not None for v in lat):
                per_run = [np.asarray(v, dtype=float) for v in lat if v is not None]
                pooled = np.concatenate(per_run)
                mean = float(_stat(pooled, b.stat)) if pooled.size else None
                ci = pooled_interval(per_run, b.stat)
            else:
                seen = [
                    v for s in summaries if (v := s.value(b.metric, b.stat or "p50")) is not None
                ]  # fmt: skip
                mean = sum(seen) / len(seen) if seen else None
                ci = interval(seen)
            values[str(b)] = mean
            passed = passed and mean is not None and b.holds(mean)
            if ci is not None:
                intervals[str(b)] = [ci[0], ci[1]]
                near = near or b.holds(ci[0]) != b.holds(ci[1])
        sent = sum(s.requests for s in summaries)
        errors = sum(s.requests - s.ok for s in summaries)
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
            confirmed=confirmed,
            runs=len(summaries),
        )
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
    def interval(self) -> list[float | None] | None:
        """Where the highest level meeting the bounds lies once noise is allowed for: from
        the highest pass below the lowest failure whose intervals all sit on the passing side
        (not ``near``) to the lowest failure above it that is not near a bound either. An end
        the probes do not pin is None; no probe at all, None."""
        if not self.done:
            return None
        low, high = self.best, self.lowest_failure
        sure = [p for p in self.done if not p.near]
        passes = [self.at(p) for p in sure if p.passed and (high is None or self.at(p) < high)]
        fails = [
            self.at(p) for p in sure if not p.passed and (low is None or self.at(p) > low)
        ]  # fmt: skip
        return [max(passes) if passes else None, min(fails) if fails else None]

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


def drive(
    look: Search,
    measure: Callable[[float], Sequence[Summary | Ran]],
    *,
    repeat_near: bool = True,
    confirm: bool = True,
    progress: Callable[[str], None] = lambda said: None,
    answered: Callable[[], None] = lambda: None,
) -> None:
    """Run ``look`` to its answer. ``measure(x)`` runs the level at ``x`` (its repetitions,
    once more where it ran before) and gives all its runs so far (``Ran``: with their
    latencies, for the pooled percentiles);
    ``progress`` is told what runs next, ``answered`` after every probe (the answer so far
    can be saved). A probe near a bound runs again at once (``repeat_near``); at the end the
    boundary's probes run again (``confirm``), and where one's verdict changes the search
    goes on from there, at most ``CONFIRM_ROUNDS`` times."""
    for _ in range(CONFIRM_ROUNDS):
        while (x := look.next()) is not None:
            label = look.point(x).label
            progress(f"probing {label}")
            if look.record(x, measure(x)).near and repeat_near:
                progress(f"{label} is near a bound, again")
                look.record(x, measure(x), repeated=True)
            answered()
        moved = False
        for x in look.unconfirmed() if confirm else []:
            progress(f"{look.point(x).label} again, to confirm the boundary")
            moved = look.confirm(x, measure(x)) or moved
            answered()
        if not moved:
            return
