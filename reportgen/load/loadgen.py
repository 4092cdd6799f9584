"""The load generator: OpenAI-compatible requests at a concurrency or a rate, one record each.

Closed loop (``rate=None``): ``concurrency`` clients each send their next request as soon as
the previous one ends, until ``requests`` have been sent or ``duration_s`` has passed (requests
in flight then finish). With ``stagger_s``, client k (0-based) sends its first request
k x ``stagger_s`` after t0 instead of at t0: clients that all start together stay in lockstep
(they are batched together, finish together and send again together), and a level of a few
such waves measures their timing more than the server. Open loop (``rate`` requests/s):
requests are sent at seeded Poisson or constant arrival times, whatever is in flight;
``concurrency`` > 0 caps requests in flight, and a request that has to wait records its
``scheduled`` time before its actual ``start``.

Every record keeps the time of each chunk that carried output, so any latency metric can be
recomputed from raw data. Times are seconds on ``time.perf_counter`` (CLOCK_MONOTONIC on Linux,
shared by every process on the host) relative to the level's ``t0``; the level also records
the wall-clock time of ``t0``. Prompts are ``prompts[i % len(prompts)]`` for request index ``i``.

Before ``t0``, every event loop opens about as many connections as it will have requests in
flight (``sizing.preopen_connections``) and keeps them in its pool, so TCP connection setup is not
part of any request's latency; ``LevelRun.preopen_s`` says how long that took.

One event loop (in this process) is enough at moderate load; beyond that, worker processes
each run their own loop and connections over a share of the clients or arrivals, and
stream their records back (see ``reportgen.load.worker``). ``sizing.auto_workers`` says when.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import multiprocessing as mp
import random
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

import numpy as np

from reportgen.errors import LoadError
from reportgen.load import client, worker
from reportgen.load.records import LevelRun, RequestRecord, RequestSpec
from reportgen.load.sizing import auto_workers, preopen_connections
from reportgen.load.worker import Share

__all__ = ["LevelRun", "RequestRecord", "RequestSpec", "arrival_times", "run_load"]

START_MARGIN_S = 0.05  # workers get "go" this long before t0, so all start together
READY_TIMEOUT_S = 60.0  # a worker imports its modules and pre-opens (<= 30 s)
STOP_TIMEOUT_S = 5.0  # terminated workers get this long before SIGKILL
LOCAL_START_MARGIN_S = 0.01  # in this thread: from pre-opened connections to t0
# How often a level asks its ``stop_when`` (whether its server died; a warm-up's, whether it
# is steady) and ``drain_when``: a warm-up ends within this of being steady (0.5 s before
# made every level's warm-up a whole number of half seconds, 1.5 s for a steady simulator).
STOP_POLL_S = 0.1


def arrival_times(
    rate: float,
    arrival: str = "poisson",
    seed: int = 0,
    *,
    requests: int | None = None,
    duration_s: float | None = None,
    burstiness: float = 1.0,
) -> list[float]:
    """Send times in seconds after t0: the first at 0, then exponential (Poisson process,
    ``random.Random(seed)``, the same for a seed on every platform) or constant gaps of mean
    ``1 / rate``. ``requests`` of them, or as many as fall before ``duration_s``. A rate of
    ``inf`` sends all ``requests`` at once (the concurrency cap then paces them).
    ``burstiness`` other than 1 (a Poisson arrival's): gamma-distributed gaps of that shape
    and the same mean, as vLLM's ``--burstiness``: below 1 burstier, above 1 more even."""
    if not rate > 0 or math.isnan(rate):
        raise ValueError(f"rate must be a positive number of requests/s, got {rate!r}")
    if math.isinf(rate):
        if requests is None:
            raise ValueError("an infinite rate needs a number of requests, not a duration")
        return [0.0] * requests
    if arrival not in ("poisson", "constant"):
        raise ValueError(f'arrival must be "poisson" or "constant", got {arrival!r}')
    if (requests is None) == (duration_s is None):
        raise ValueError("give exactly one of requests or duration_s")
    rng = random.Random(seed)
    out: list[float] = []
    t = 0.0
    while (len(out) < requests) if requests is not None else (t < (duration_s or 0.0)):
        out.append(t)
        if arrival != "poisson":
            t = len(out) / rate
        elif burstiness == 1.0:
            t += rng.expovariate(rate)
        else:
            t += rng.gammavariate(burstiness, 1.0 / (rate * burstiness))
    return out


def run_load(
    base_url: str,
    spec: RequestSpec,
    prompts: Sequence[str],
    concurrency: int,
    *,
    requests: int | None = None,
    duration_s: float | None = None,
    rate: float | None = None,
    arrival: str = "poisson",
    seed: int = 0,
    burstiness: float = 1.0,
    timeout_s: float = 600.0,
    workers: int | None = None,
    on_request: Callable[[RequestRecord], None] | None = None,
    stop_when: Callable[[], str | None] | None = None,
    stagger_s: float = 0.0,
    outputs: list[int] | None = None,
    schedule: list[float] | None = None,
    turns: int = 1,
    think_s: float = 0.0,
    drain_when: Callable[[], bool] | None = None,
) -> LevelRun:
    """Run one level and return every request's record, sorted by index.

    ``concurrency``: closed loop, the number of clients; open loop, the most requests in
    flight (0 = no limit). ``stagger_s``: closed loop, seconds between consecutive clients'
    first requests (0: all at t0; ignored by an open loop). ``workers``: None chooses
    (``auto_workers``); 1 runs in this thread; more runs that many processes. ``outputs``:
    each request's output tokens, by index as ``prompts`` (None: ``spec``'s). ``schedule``:
    an open loop whose send times (seconds after t0, one per request: a trace replayed) are
    given, not drawn from ``rate``; ``concurrency`` caps what is in flight. ``turns`` (a
    closed loop): each client holds conversations of that many turns, request
    ``c * turns + t`` being turn t of conversation c, sent with the turns before it and
    their answers, ``think_s`` after the answer before it. ``on_request``
    is called in this thread for every finished request, in any order (from worker
    processes, in batches every 0.1 s).
    A failed request is a record with ``status="error"``; this raises ``LoadError`` only when
    the level itself cannot run (a worker process that dies). ``stop_when`` is asked every
    STOP_POLL_S in this thread: a reason (the server died) cuts the level short, requests in
    flight abandoned; ``LevelRun.aborted`` says why. ``drain_when`` (a closed loop's, asked as
    often) ends it gracefully once true: no client sends again, the requests in flight finish.

    ``client_cpu_s`` counts this thread (including ``on_request``) and, with workers, each
    worker process from the start signal on (not its ~0.5 s of interpreter start-up). Worker
    processes are started with "spawn", which imports the caller's main module again: a
    script that calls this with workers > 1 needs the usual ``if __name__ == "__main__":``.
    Runs its own event loop, so call it from a thread without a running one.
    """
    if schedule is not None:
        if rate is not None or any(not (t >= 0 and math.isfinite(t)) for t in schedule):
            raise ValueError("a schedule is given instead of a rate, as finite times >= 0")
        requests, duration_s = len(schedule), None
    if (requests is None) == (duration_s is None):
        raise ValueError("give exactly one of requests or duration_s")
    if turns > 1 and (rate is not None or schedule is not None):
        raise ValueError("conversations of several turns run in a closed loop only")
    if turns < 1 or not (think_s >= 0 and math.isfinite(think_s)):
        raise ValueError(f"turns must be >= 1 and think_s >= 0, got {turns}, {think_s}")
    if not prompts:
        raise ValueError("prompts must not be empty")
    if rate is None and schedule is None and concurrency < 1:
        raise ValueError(f"a closed loop needs concurrency >= 1, got {concurrency}")
    if not (stagger_s >= 0 and math.isfinite(stagger_s)):
        raise ValueError(f"stagger_s must be a number of seconds >= 0, got {stagger_s!r}")
    if rate is not None or schedule is not None:
        stagger_s = 0.0  # an open loop's arrival times say when each request goes
    arrivals = None
    if schedule is not None:
        arrivals = list(enumerate(schedule))
    elif rate is not None:
        times = arrival_times(
            rate, arrival, seed, requests=requests, duration_s=duration_s, burstiness=burstiness
        )
        arrivals = list(enumerate(times))
    per_request = round(sum(outputs) / len(outputs)) if outputs else spec.output_tokens
    if schedule:  # the trace's mean rate, for the choice of workers
        span = max(schedule) - min(schedule)
        rate_seen = len(schedule) / span if span > 0 else math.inf
        n = workers if workers is not None else auto_workers(concurrency, rate_seen, per_request)
    elif rate == math.inf and concurrency < 1:  # all at once, no cap: every request in flight
        n = workers if workers is not None else auto_workers(requests or 1, None, per_request)
    else:
        n = workers if workers is not None else auto_workers(concurrency, rate, per_request)
    if n < 1:
        raise ValueError(f"workers must be >= 1, got {n}")
    if concurrency > 0:
        n = min(n, concurrency)  # every worker needs at least one client (or slot)
    if arrivals is not None:
        n = max(1, min(n, len(arrivals)))
    shares = [
        Share(
            base_url=base_url,
            spec=spec,
            prompts=prompts,
            outputs=outputs,
            turns=turns,
            think_s=think_s,
            clients=concurrency // n + (k < concurrency % n),
            timeout_s=timeout_s,
            requests=requests if arrivals is None else None,
            duration_s=duration_s if arrivals is None else None,
            arrivals=None if arrivals is None else arrivals[k::n],
            # client j of the level is client j // n of event loop j % n
            starts=tuple(j * stagger_s for j in range(k, concurrency, n)) if stagger_s else (),
        )
        for k in range(n)
    ]
    shares = [
        dataclasses.replace(
            sh,
            preopen=preopen_connections(
                sh.clients,
                concurrency,
                requests,
                None if sh.arrivals is None else len(sh.arrivals),
            ),
        )
        for sh in shares
    ]
    if arrivals is not None:
        drain_when = None  # an open loop's arrivals are its own
    if n == 1:
        lv = _in_this_thread(shares[0], concurrency, on_request, stop_when, drain_when)
    else:
        lv = _in_processes(shares, concurrency, on_request, stop_when, drain_when)
    lv.stagger_s = stagger_s
    return lv


def lag_summary(lags: list[float]) -> dict[str, float]:
    """p50, p99 and max of loop lag samples (seconds), in milliseconds."""
    if not lags:
        return {}
    p50, p99, top = np.percentile(np.asarray(lags) * 1e3, [50, 99, 100])
    return {"p50": float(p50), "p99": float(p99), "max": float(top)}


def _in_this_thread(
    share: Share,
    concurrency: int,
    on_request: Callable[[RequestRecord], None] | None,
    stop_when: Callable[[], str | None] | None = None,
    drain_when: Callable[[], bool] | None = None,
) -> LevelRun:
    worker.raise_fd_limit(share.clients or len(share.arrivals or ()))
    records: list[RequestRecord] = []

    def emit(rec: RequestRecord) -> None:
        records.append(rec)
        if on_request is not None:
            on_request(rec)

    begin: list[float] = []  # t0, its wall-clock time and this thread's CPU time then

    async def start(preopen_s: float) -> float:
        # this thread only: other threads here are not the client
        begin[:] = [time.perf_counter(), time.time(), time.thread_time()]
        return begin[0] + LOCAL_START_MARGIN_S

    aborted: list[str] = []

    take = worker.local_take()

    async def guarded() -> tuple[float, list[float], float]:
        share_run = asyncio.ensure_future(worker.run_share(share, start, take, emit))
        draining = drain_when
        while stop_when is not None or draining is not None:
            done, _ = await asyncio.wait({share_run}, timeout=STOP_POLL_S)
            if done:
                break
            if draining is not None and draining():
                take.drain()
                draining = None
                if stop_when is None:
                    break
            why = stop_when() if stop_when is not None else None
            if why is not None:
                aborted.append(why)
                share_run.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await share_run
                if not begin:  # stopped before t0
                    begin[:] = [time.perf_counter(), time.time(), time.thread_time()]
                return time.perf_counter() - begin[0] - LOCAL_START_MARGIN_S, [], 0.0
        return await share_run

    with asyncio.Runner(loop_factory=client.event_loop) as runner:
        end, lags, preopen_s = runner.run(guarded())
    cpu = time.thread_time() - begin[2]
    t0, started_unix = begin[0] + LOCAL_START_MARGIN_S, begin[1] + LOCAL_START_MARGIN_S
    records.sort(key=lambda r: r.index)
    return LevelRun(
        preopen_s=preopen_s,
        concurrency=concurrency,
        started_at_unix=started_unix,
        duration_s=end,
        records=records,
        workers=1,
        client_cpu_s=cpu,
        aborted=aborted[0] if aborted else None,
        t0_monotonic=t0,
        loop_lag_ms=lag_summary(lags),
    )


def _in_processes(
    shares: list[Share],
    concurrency: int,
    on_request: Callable[[RequestRecord], None] | None,
    stop_when: Callable[[], str | None] | None = None,
    drain_when: Callable[[], bool] | None = None,
) -> LevelRun:
    ctx = mp.get_context("spawn")  # a fresh interpreter: never fork a process with threads
    closed = shares[0].arrivals is None
    counter = ctx.Value("q", 0) if closed else None
    procs: dict[Connection, Any] = {}
    records: list[RequestRecord] = []
    finished = False
    try:
        for k, share in enumerate(shares):
            here, there = ctx.Pipe(duplex=True)
            proc = ctx.Process(
                target=worker.process_main,
                args=(share, there, counter),
                name=f"reportgen-load-{k}",
                daemon=True,  # never outlives this process, whatever happens here
            )
            proc.start()
            there.close()
            procs[here] = proc
        deadline = time.monotonic() + READY_TIMEOUT_S
        preopen_s = 0.0
        for conn, proc in procs.items():
            ready = _expect(conn, proc, "ready", deadline)
            preopen_s = max(preopen_s, float(ready[1]))
        cpu0 = time.thread_time()  # this thread's share: receiving and merging records
        t0 = time.perf_counter() + START_MARGIN_S
        started_unix = time.time() + START_MARGIN_S
        for conn, proc in procs.items():
            try:
                conn.send(("go", t0))
            except OSError:
                raise LoadError(f"load worker {proc.name} exited before the level began") from None
        drain = None
        if drain_when is not None and counter is not None:
            shared = counter

            def drain() -> bool:
                if not drain_when():
                    return False
                with shared.get_lock():
                    shared.value = max(int(shared.value), worker.DRAINED)
                return True

        end, worker_cpu, lags, aborted = _collect(procs, records, on_request, stop_when, drain)
        if aborted is not None:
            end = time.perf_counter() - t0
        cpu = time.thread_time() - cpu0 + worker_cpu
        finished = aborted is None
    finally:
        _stop(procs, finished)
    records.sort(key=lambda r: r.index)
    return LevelRun(
        preopen_s=preopen_s,
        concurrency=concurrency,
        started_at_unix=started_unix,
        duration_s=end,
        records=records,
        workers=len(shares),
        client_cpu_s=cpu,
        aborted=aborted,
        t0_monotonic=t0,
        loop_lag_ms=lag_summary(lags),
    )


def _expect(conn: Connection, proc: Any, kind: str, deadline: float) -> tuple[Any, ...]:
    left = deadline - time.monotonic()
    if not conn.poll(max(0.0, left)):
        raise LoadError(f"load worker {proc.name} did not start within {READY_TIMEOUT_S:g} s")
    msg = _recv(conn, proc)
    if msg[0] != kind:
        raise LoadError(f"load worker {proc.name}: expected {kind!r}, got {msg[0]!r}")
    return msg


def _recv(conn: Connection, proc: Any) -> tuple[Any, ...]:
    try:
        msg: tuple[Any, ...] = conn.recv()
    except (EOFError, OSError):
        proc.join(1.0)
        raise LoadError(
            f"load worker {proc.name} exited with code {proc.exitcode} before the level ended"
        ) from None
    except Exception as exc:  # a message cut or garbled: the worker broke mid-send
        raise LoadError(f"load worker {proc.name} sent an unreadable message: {exc}") from exc
    if msg[0] == "error":
        last = str(msg[1]).strip().splitlines()[-1:] or ["?"]
        raise LoadError(f"load worker {proc.name} failed: {last[0]}\n{msg[1]}")
    return msg


def _collect(
    procs: dict[Connection, Any],
    records: list[RequestRecord],
    on_request: Callable[[RequestRecord], None] | None,
    stop_when: Callable[[], str | None] | None = None,
    drain: Callable[[], bool] | None = None,
) -> tuple[float, float, list[float], str | None]:
    """Receive records until every worker is done, or ``stop_when`` gives a reason (then
    every worker is told to stop, its requests in flight abandoned); ``drain`` (asked as
    often, until it says it drained the loop) ends the level gracefully. Returns the latest
    end, the workers' CPU seconds, their loop lag samples and that reason."""
    live = dict(procs)
    end = cpu = 0.0
    lags: list[float] = []
    asked = time.monotonic()
    while live:
        why = None
        if time.monotonic() - asked >= STOP_POLL_S:
            if drain is not None and drain():
                drain = None
            if stop_when is not None:
                why = stop_when()
            asked = time.monotonic()
        if why is not None:
            for live_conn in live:  # a worker cancels its share when the parent writes
                with contextlib.suppress(OSError):
                    live_conn.send(("stop",))
            return end, cpu, lags, why
        # A connection is readable at EOF too, so a worker that dies wakes this up.
        for conn in wait(list(live), timeout=STOP_POLL_S):
            assert isinstance(conn, Connection)
            msg = _recv(conn, live[conn])
            if msg[0] == "records":
                batch: list[RequestRecord] = msg[1]
                records.extend(batch)
                if on_request is not None:
                    for rec in batch:
                        on_request(rec)
            elif msg[0] == "done":
                end, cpu = max(end, float(msg[1])), cpu + float(msg[2])
                lags.extend(msg[3])
                del live[conn]
    return end, cpu, lags, None


def _stop(procs: dict[Connection, Any], finished: bool) -> None:
    """Finished workers exit on their own (given a moment); others are terminated, then
    killed. Either way none is left when this returns."""
    if finished:
        for proc in procs.values():
            proc.join(STOP_TIMEOUT_S)
    for proc in procs.values():
        if proc.is_alive():
            proc.terminate()
    for proc in procs.values():
        proc.join(STOP_TIMEOUT_S)
        if proc.is_alive():
            proc.kill()
            proc.join()
    for conn in procs:
        conn.close()
