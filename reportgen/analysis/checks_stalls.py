"""The check that names a request held up far beyond its level's others (``request_stalls``):
a gap mid-stream, or a response kept open after its last token, many times what the level's
requests show, with when it happened, what the host samples showed over that repetition and
what it did to the level's numbers.

One such request can make a repetition's tail latencies, and through the tokens it did not
deliver its throughput, the host's rather than the server's: on an H100, one request of a C=1
repetition closed 0.69 s after its last token with a 214 ms gap mid-stream, while the host
samples showed 8.7 busy cores, and made the baseline's spread across repetitions 3.5%.

A request stalls where its longest gap between chunks, or the time from its last chunk to the
end of its response, is over ``STALL_TIMES`` times the median of the same quantity over its
level run's requests (its repetition at that level) and over ``STALL_FLOOR_S``. Imports the
results model and the request records only.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from reportgen.load.records import RequestRecord
from reportgen.results.levels import Level
from reportgen.results.model import Experiment, Point, point_of
from reportgen.results.verdicts import Check

STALL_TIMES = 10.0  # a request's gap or close delay over this many times its level's median
STALL_FLOOR_S = 0.1  # ... and over this (s): a few decode steps' jitter is no stall
SHOWN = 3  # stalls said in the evidence, the worst first

TITLE = "No request stalled far beyond its level's others"


@dataclass(frozen=True)
class Stall:
    """One request held up: where, when, how long, and against its level's medians."""

    point: Point
    repetition: int
    index: int
    at_s: float  # when it was sent, from the level's start
    gap_s: float  # its longest gap between chunks
    close_s: float  # its last chunk to the end of its response
    median_gap_s: float
    median_close_s: float
    e2e_s: float
    gap_over: bool  # its gap is beyond the level's (``STALL_TIMES``, ``STALL_FLOOR_S``)
    close_over: bool  # ... its close delay is

    @property
    def size(self) -> float:
        """How far beyond its level it lies (the larger of the two, in medians)."""
        return max(
            self.gap_s / max(self.median_gap_s, 1e-6), self.close_s / max(self.median_close_s, 1e-6)
        )


def _gap(r: RequestRecord) -> float:
    times = r.chunk_times
    return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)


def _close(r: RequestRecord) -> float:
    return max(0.0, r.end - r.chunk_times[-1]) if r.chunk_times else 0.0


def longest_stall(rows: Sequence[RequestRecord]) -> float | None:
    """One level run's longest hold-up of a request that stalled (s; ``Summary.stall_s``;
    the requests ``stalls`` names in it): the longest such gap or close delay; None where
    no request did."""
    held = [max(s.gap_s if s.gap_over else 0.0, s.close_s if s.close_over else 0.0)
            for s in stalls(rows)]  # fmt: skip
    return max(held) if held else None


def stalls(rows: Sequence[RequestRecord]) -> list[Stall]:
    """The requests that stalled (see the module's description), the worst first; each
    against the medians of its own level run (one repetition at one level), so that the
    check and the decisions (``longest_stall``) name the same runs."""
    by: dict[tuple[Point, int], list[RequestRecord]] = {}
    for r in rows:
        if r.status == "ok" and len(r.chunk_times) >= 2:
            by.setdefault((point_of(r), r.repetition), []).append(r)
    out = []
    for (point, _), recs in by.items():
        if len(recs) < 2:
            continue
        gaps, closes = [_gap(r) for r in recs], [_close(r) for r in recs]
        mg, mc = statistics.median(gaps), statistics.median(closes)
        gap_bound = max(STALL_FLOOR_S, STALL_TIMES * mg)
        close_bound = max(STALL_FLOOR_S, STALL_TIMES * mc)
        for r, g, c in zip(recs, gaps, closes, strict=True):
            if g > gap_bound or c > close_bound:
                e2e = r.end - r.start
                over = (g > gap_bound, c > close_bound)
                out.append(Stall(point, r.repetition, r.index, r.start, g, c, mg, mc, e2e, *over))
    return sorted(out, key=lambda s: -s.size)


def request_stalls(entry: Experiment, rows: Sequence[RequestRecord]) -> Check:
    """``request_stalls``: warn where a request stalled (``stalls``), each with its time, its
    gaps against its level run's, the host over that repetition and the level's throughput with
    and without that repetition."""
    if not rows:
        return Check(id="request_stalls", title=TITLE, status="skip", evidence="no request records")
    found = stalls(rows)
    if not found:
        return Check(
            id="request_stalls",
            title=TITLE,
            status="pass",
            evidence=f"no request's longest gap or close delay over {STALL_TIMES:g} times its "
            f"level run's median (and {STALL_FLOOR_S * 1000:.0f} ms)",
        )
    said = [_said(s, entry.levels) for s in found[:SHOWN]]
    more = f"; and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    return Check(
        id="request_stalls",
        title=TITLE,
        status="warn",
        evidence="; ".join(said) + more,
        hint="that repetition's tail latencies (and its throughput, by the difference shown) "
        "are the host's, not the server's: find what held it (the busiest processes then), "
        "or measure the level again",
    )


def _said(s: Stall, levels: Sequence[Level]) -> str:
    what = []
    if s.gap_over:
        what.append(
            f"a {s.gap_s * 1000:.0f} ms gap mid-stream (that repetition's requests: "
            f"{s.median_gap_s * 1000:.0f} ms at the median)"
        )
    if s.close_over:
        what.append(
            f"closed {s.close_s:.2f} s after its last token (median {s.median_close_s * 1000:.0f}"
            " ms)"
        )
    text = (
        f"{s.point.label} repetition {s.repetition + 1}: request {s.index}, sent "
        f"{s.at_s:.1f} s into the level, {' and '.join(what)}, {s.e2e_s:.2f} s end to end"
    )
    here = [lv for lv in levels if lv.point == s.point]
    mine = next((lv for lv in here if lv.repetition == s.repetition), None)
    host = mine.host if mine is not None else None
    if host is not None and host.busy_cores is not None:
        text += f"; the host over that repetition: {host.busy_cores:.1f} cores busy"
        top = host.processes[0] if host.processes else None
        if top:
            text += f", busiest {top.get('name', '?')} at {float(top.get('cores') or 0):.1f} cores"
    values = {lv.repetition: lv.summary.output_tok_s for lv in here if lv.summary.output_tok_s}
    if s.repetition in values and len(values) >= 2:
        rest = [v for k, v in values.items() if k != s.repetition]
        text += (
            f"; the level's output tok/s {statistics.fmean(values.values()):,.1f} with that "
            f"repetition, {statistics.fmean(rest):,.1f} without"
        )
    return text
