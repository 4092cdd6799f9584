"""Whether a level's own warm-up has reached the server's steady state at that load.

An engine is not steady when it first meets a load: kernels are compiled per batch shape on
first use, allocators grow, schedulers fill. So before a level is measured, the same load runs
until the server delivers the same in consecutive windows:

- a window is ``window_s`` seconds of the warm-up's clock, from the end of its first request
  (by then a staggered closed loop has all its clients in flight); its **output tok/s** counts
  output tokens by the arrival time of the chunk that carried them (not whole requests by
  their end: at high concurrency requests end in waves, and counting them in short windows
  measures the waves), and its **time per output token** is the gaps between a request's
  chunks arriving in it, summed, over the tokens those chunks carried (ms per token as each
  stream sees it);
- a window counts once it is closed: it ended at least one and a half median request times
  ago, so requests still in flight then have (nearly always) finished and been counted;
- the level is **steady** when the last ``windows`` closed windows agree on both numbers:
  (max - min) / mean within ``tolerance``, and at least ``min_requests`` requests finished;
  where fewer than ``MIN_ENDS`` requests end in a window (a low concurrency), its token
  count swings with where the first-token gaps fall, and time per output token alone is
  judged.

``Watch`` follows a warm-up as its requests finish (``add``) and says when to stop
(``check``); ``windows`` is the pure computation, for tests and for the record.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from reportgen.analysis.summary import chunk_tokens
from reportgen.load.records import RequestRecord
from reportgen.results.levels import EngineEvent

MIN_WINDOW_S = 0.25  # a window is at least this long, whatever the request time
LAG_REQUESTS = 1.5  # a window is closed this many median request times after it ended
MIN_LAG_S = 0.2
ARRIVALS_PER_WINDOW = 4  # an open loop's window is at least this many mean arrival gaps
MIN_ENDS = 16  # a window's output tok/s is judged only when at least this many requests end in it
ERRORS_ALONE = 8  # the last this many finished requests, none ok: it cannot become steady


@dataclass(frozen=True)
class Windows:
    """Closed windows of a warm-up: their length, output tok/s and time per output token
    (ms; None in a window whose chunks had no gap: responses not streamed), and the spread
    of the last ones (None until there are enough)."""

    window_s: float
    tok_s: list[float]
    tpot_ms: list[float | None]
    spread: float | None


def spread(values: Sequence[float]) -> float:
    """(max - min) / mean: how far apart a few windows are, relative to their level."""
    mean = float(np.mean(values))
    return (max(values) - min(values)) / mean if mean > 0 else math.inf


def windows(
    records: Sequence[RequestRecord],
    now_s: float,
    *,
    window_s: float | None = None,
    last: int = 3,
    open_loop: bool = False,
) -> Windows:
    """The closed windows of a warm-up whose successful ``records`` finished by ``now_s``
    (seconds on their clock); ``window_s`` None: the median request time, at least
    MIN_WINDOW_S. The spread is of both numbers; of time per output token alone for an
    ``open_loop`` (its throughput is its arrivals'), of tok/s alone where no window has a
    time per token (responses not streamed)."""
    ok = [r for r in records if r.status == "ok" and r.chunk_times]
    if not ok:
        return Windows(window_s or MIN_WINDOW_S, [], [], None)
    durations = np.array([r.end - r.start for r in ok])
    median = float(np.median(durations))
    width = window_s if window_s is not None else max(MIN_WINDOW_S, median)
    if window_s is None and open_loop and len(ok) > 1:
        # an open loop's windows hold a few arrivals each, however slow its rate
        starts = sorted(r.start for r in ok)
        width = max(width, ARRIVALS_PER_WINDOW * (starts[-1] - starts[0]) / (len(starts) - 1))
    anchor = min(r.end for r in ok)
    closed_by = now_s - max(MIN_LAG_S, LAG_REQUESTS * median)
    count = int(max(0.0, closed_by - anchor) // width)
    if count == 0:
        return Windows(width, [], [], None)
    times = np.concatenate([np.asarray(r.chunk_times, dtype=float) for r in ok])
    tokens = np.concatenate([chunk_tokens(r) for r in ok])
    # a chunk's gap from the request's previous chunk (the first chunk of each has none)
    gaps = np.concatenate(
        [np.diff(np.asarray(r.chunk_times, dtype=float), prepend=np.nan) for r in ok]
    )
    index = np.floor((times - anchor) / width)
    inside = (index >= 0) & (index < count)
    slot = index[inside].astype(int)
    tok = np.bincount(slot, weights=tokens[inside], minlength=count)
    later = inside & ~np.isnan(gaps)
    gap_sum = np.bincount(index[later].astype(int), weights=gaps[later], minlength=count)
    gap_tok = np.bincount(index[later].astype(int), weights=tokens[later], minlength=count)
    tok_s = [float(x) / width for x in tok]
    tpot: list[float | None] = [
        float(g / n * 1e3) if n > 0 else None for g, n in zip(gap_sum, gap_tok, strict=True)
    ]
    ends = np.floor((np.array([r.end for r in ok]) - anchor) / width)
    ended = np.bincount(ends[(ends >= 0) & (ends < count)].astype(int), minlength=count)
    # Few requests ending in a window (a low concurrency): its token count swings with where
    # the requests' first-token gaps fall, not with the server's speed, so the window is
    # judged on its time per output token alone (where the responses were streamed).
    # An open loop's throughput is its arrivals'; nothing streamed leaves throughput alone.
    counted = bool(ended[-last:].min() >= MIN_ENDS) or all(x is None for x in tpot)
    judge_tok = not open_loop and counted
    return Windows(width, tok_s, tpot, _spread_of(tok_s[-last:], tpot, last, judge_tok))


def _spread_of(
    tail_tok: list[float], tpot: list[float | None], last: int, judge_tok: bool
) -> float | None:
    """The last windows' spread (``windows``), or None while it cannot be judged yet; of
    time per output token, and of output tok/s where ``judge_tok``."""
    if len(tail_tok) < last:
        return None
    tail_tpot = tpot[-last:]
    timed = [x for x in tail_tpot if x is not None]
    parts = [spread(tail_tok)] if judge_tok else []
    if len(timed) == len(tail_tpot):
        parts.append(spread(timed))
    elif not judge_tok or any(x is not None for x in tpot):
        return None  # a window without a time per token among the last: not yet
    return max(parts) if parts else None


MIN_WINDOWS = 4  # a level's interval needs this many closed windows


def interval_width(records: Sequence[RequestRecord], now_s: float) -> float | None:
    """How well a running level knows its output tok/s: the width of the 95% interval of its
    closed windows' mean (t over the windows, as batch means), relative to that mean; None
    with fewer than MIN_WINDOWS. Windows at least a request time long are nearly independent
    (each holds other requests' tokens), so the interval is about right, and a little narrow
    where the server runs in waves."""
    from scipy import stats

    tok = windows(records, now_s, last=2).tok_s
    k = len(tok)
    if k < MIN_WINDOWS:
        return None
    x = np.asarray(tok)
    mean = float(x.mean())
    if mean <= 0:
        return None
    half = float(stats.t.ppf(0.975, k - 1)) * float(x.std(ddof=1)) / math.sqrt(k)
    return 2 * half / mean


CHECK_SHARE = 0.05  # a running check takes at most this share of the load generator's thread


class Paced:
    """Paces a check whose cost grows with the records it reads (every window again): once
    run, it is due again only after 1 / CHECK_SHARE times what it took, so a long warm-up at
    a high load never spends more than that share of the client's time on it, and a short
    one is checked as often as the load generator asks (every ``loadgen.STOP_POLL_S``)."""

    def __init__(self) -> None:
        self.next = 0.0

    def due(self) -> bool:
        return time.perf_counter() >= self.next

    def ran(self, since: float) -> None:
        """The check began at ``since`` (``time.perf_counter()``) and has just ended."""
        now = time.perf_counter()
        self.next = now + (now - since) / CHECK_SHARE


class Watch:
    """Follows a running warm-up: ``add`` each finished request (the load generator's
    ``on_request``), ``check`` (its ``stop_when``) says "steady" once it is, or "errors" when
    only failures come back (the last ``ERRORS_ALONE`` to finish). The records' clock starts
    at the level's t0, which the caller does not see: it is bounded from each arrival (t0 <=
    the time of ``add`` - the record's end), so "now" on that clock is never overestimated."""

    def __init__(
        self,
        *,
        tolerance: float,
        windows: int,
        window_s: float | None = None,
        min_requests: int = 0,
        open_loop: bool = False,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.tolerance = tolerance
        self.last = windows
        self.window_s = window_s
        self.min_requests = min_requests
        self.open_loop = open_loop
        self.clock = clock
        self.records: list[RequestRecord] = []
        self.t0: float | None = None
        self.result: Windows | None = None
        self.pace = Paced()

    def add(self, record: RequestRecord) -> None:
        self.records.append(record)
        bound = self.clock() - record.end
        self.t0 = bound if self.t0 is None else min(self.t0, bound)

    def now_s(self) -> float:
        return 0.0 if self.t0 is None else self.clock() - self.t0

    def check(self) -> str | None:
        done = self.records
        # a server that answered at first and then fails (or hangs) every request ends it too
        if len(done) >= ERRORS_ALONE and not any(r.status == "ok" for r in done[-ERRORS_ALONE:]):
            return "errors"
        if len(done) < self.min_requests or not self.pace.due():
            return None
        began = time.perf_counter()
        got = windows(
            done, self.now_s(), window_s=self.window_s, last=self.last, open_loop=self.open_loop
        )
        self.pace.ran(began)
        self.result = got
        if got.spread is not None and got.spread <= self.tolerance:
            return "steady"
        return None

    def request_s(self) -> float | None:
        """The median time of the requests that ended in the last windows (the warm ones),
        else of all that succeeded."""
        ok = [r for r in self.records if r.status == "ok"]
        if not ok:
            return None
        got = self.result
        if got is not None and got.tok_s:
            anchor = (
                min(r.end for r in ok if r.chunk_times) if any(r.chunk_times for r in ok) else 0.0
            )
            lo = anchor + (len(got.tok_s) - self.last) * got.window_s
            warm = [r for r in ok if r.end >= lo]
            ok = warm or ok
        return float(np.median([r.end - r.start for r in ok]))


# A slump: the server delivering far less for seconds inside a measured window while the load
# stays on it (a stall on the host side, a collection, a neighbour): not its steady state, and
# the server's log says nothing of it, so the window's own token arrivals are read.
SLUMP_BLOCK_S = 1.0  # the window is read in blocks this long
SLUMP_BLOCKS = 6  # a window shorter than this many blocks is not judged
SLUMP_DROP = 0.25  # a block under (1 - this) x the window's median block is slow
SLUMP_S = 2.0  # ... and slow blocks in a row this long make a slump
SLUMP_HELD = 0.9  # ... while at least this share of the level's C was in flight


def slump(
    records: Sequence[RequestRecord], window_s: Sequence[float] | None, concurrency: int
) -> EngineEvent | None:
    """The longest slump inside a closed loop's measured window (``window_s``: its start and
    end on the records' clock), as an event timed from the level's start; None where the
    window held none or is too short to tell. Output tokens are counted by the arrival of
    the chunks that carried them, per block of SLUMP_BLOCK_S; a slump is SLUMP_S or more of
    consecutive blocks under (1 - SLUMP_DROP) x the median block, with the load held (at
    least SLUMP_HELD x C requests in flight at each block's middle), so that a level whose
    clients stopped sending (its end, a client limit) is not taken for a slow server."""
    if not window_s or concurrency < 1:
        return None
    start, end = float(window_s[0]), float(window_s[1])
    count = int((end - start) // SLUMP_BLOCK_S)
    ok = [r for r in records if r.status == "ok" and r.chunk_times]
    if count < SLUMP_BLOCKS or not ok:
        return None
    times = np.concatenate([np.asarray(r.chunk_times, dtype=float) for r in ok])
    tokens = np.concatenate([chunk_tokens(r) for r in ok])
    index = np.floor((times - start) / SLUMP_BLOCK_S)
    inside = (index >= 0) & (index < count)
    tok = np.bincount(index[inside].astype(int), weights=tokens[inside], minlength=count)
    tok_s = tok.astype(float) / SLUMP_BLOCK_S
    median = float(np.median(tok_s))
    if median <= 0:
        return None
    begun = np.array([r.start for r in records])
    ended = np.array([r.end for r in records])
    middles = start + (np.arange(count) + 0.5) * SLUMP_BLOCK_S
    held = np.array([int(((begun <= t) & (ended > t)).sum()) for t in middles])
    slow = (tok_s < (1 - SLUMP_DROP) * median) & (held >= SLUMP_HELD * concurrency)
    best, first, run = 0, 0, 0
    for i, s in enumerate(slow):
        run = run + 1 if s else 0
        if run > best:
            best, first = run, i - run + 1
    if best * SLUMP_BLOCK_S < SLUMP_S:
        return None
    low = float(tok_s[first : first + best].mean()) / median
    at = start + first * SLUMP_BLOCK_S
    line = (
        f"output {low:.2f}x the window's median ({median:,.0f} tok/s) for {best * SLUMP_BLOCK_S:g} "
        f"s from {at:.1f} s, with at least {int(held[first : first + best].min())} of "
        f"{concurrency} requests in flight"
    )
    return EngineEvent(kind="slump", line=line, at_s=at)
