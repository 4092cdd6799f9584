"""How large a level's client is: how many event loops (worker processes) its chunk rate needs
(``auto_workers``) and how many connections each opens before the level starts
(``preopen_connections``)."""

from __future__ import annotations

import math
import os

PREOPEN_UNCAPPED = 64  # an open loop with no in-flight cap pre-opens at most this many
# Auto mode (see auto_workers)
CHUNKS_PER_WORKER = 8_000  # chunks/s one event loop is given: ~25% of a core (~30 us each)
STREAM_CHUNK_S = 50  # chunks/s one stream is assumed to deliver (one every 20 ms)
MAX_AUTO_WORKERS = 8


def auto_workers(concurrency: int, rate: float | None = None, output_tokens: int = 0) -> int:
    """Event loops for a level, from the chunk rate it may reach: one loop per
    CHUNKS_PER_WORKER chunks/s, never more than the host's cores nor MAX_AUTO_WORKERS.

    The chunk rate is estimated as STREAM_CHUNK_S per stream in flight (``concurrency``: a
    closed loop's clients, an open loop's cap), and for an open loop at most ``rate`` x
    ``output_tokens`` (one token per chunk at worst). So a closed loop gets 1 loop up to 160
    clients, 2 up to 320, 7 at 1024.

    Why: the client spends ~30 us of CPU per chunk when each chunk is a read of its own (a
    real engine's pace; the event loop's poll and the read are most of it). With kernel
    receive times a busy loop does not make a chunk late, but two chunks of one stream read
    together share the later one's time, so the loop must keep up with every stream.
    At a quarter of a core its lag stays small (``LevelRun.loop_lag_ms`` reports it). A
    process costs ~0.5 s to start and each splits the in-flight cap, so fewer is better
    while one is enough.
    """
    limits: list[float] = []
    if concurrency > 0:
        limits.append(concurrency * STREAM_CHUNK_S)
    if rate is not None:
        limits.append(rate * max(output_tokens, 1))
    chunk_s = min(limits) if limits else 0.0
    if not math.isfinite(chunk_s):  # no cap and no rate to bound it: as many as allowed
        chunk_s = MAX_AUTO_WORKERS * CHUNKS_PER_WORKER
    cores = os.cpu_count() or 1
    want = math.ceil(chunk_s / CHUNKS_PER_WORKER)
    return max(1, min(want, cores, MAX_AUTO_WORKERS))


def preopen_connections(
    clients: int, concurrency: int, requests: int | None, arrivals: int | None
) -> int:
    """Connections an event loop opens before t0: about as many as it will have requests in
    flight. Closed loop (``arrivals`` None): its ``clients``, or fewer when its share of the
    level's ``requests`` (in proportion to its clients out of ``concurrency``) is smaller.
    Open loop: its cap ``clients`` (PREOPEN_UNCAPPED when 0 = none), or fewer when it has
    fewer ``arrivals``."""
    if arrivals is not None:
        return min(clients or PREOPEN_UNCAPPED, arrivals)
    if requests is None:
        return clients
    return min(clients, math.ceil(requests * clients / max(concurrency, 1)))
