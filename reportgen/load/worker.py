"""One event loop's share of a level: its clients (closed loop) or its arrivals (open loop).

``run_share`` runs in the caller's process when the level has one worker. With several, each
worker process runs ``process_main``, which talks to the parent over one duplex pipe:

    worker -> parent   ("ready", preopen_s)            connections open, waiting for the start
    parent -> worker   ("go", t0)                      t0 (perf_counter) slightly in the future
    worker -> parent   ("records", [RequestRecord])    every FLUSH_S while requests finish
    worker -> parent   ("done", end_s, cpu_s, lags)    its last request ended at t0 + end_s
    worker -> parent   ("error", text)                 it failed (a bug, not a request error)

Anything else arriving from the parent, or the pipe closing (the parent died), stops the
worker at once. Workers ignore SIGINT and SIGHUP: the parent owns Ctrl-C and a closed terminal,
and terminates them.

Before its start, every event loop opens its share's connections (``Share.preopen``, see
``client.preopen``) and keeps them in its session's pool, so no request of the level waits
for TCP connection setup; that time (``preopen_s``) is outside the level.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import queue
import resource
import signal
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from reportgen.load import client
from reportgen.load.records import RequestRecord, RequestSpec

FLUSH_S = 0.1  # records reach the parent (and its progress display) at least this often
FLUSH_MAX = 512  # ... or in batches of at most this many
PROBE_S = 0.01  # the event loop's lag is sampled this often


@dataclass(frozen=True)
class Share:
    """What one event loop runs. Closed loop when ``arrivals`` is None."""

    base_url: str
    spec: RequestSpec
    prompts: Sequence[str]
    clients: int  # closed loop: clients; open loop: in-flight cap (0 = none)
    timeout_s: float
    requests: int | None  # closed loop: the level's total, shared by every worker
    duration_s: float | None  # closed loop: stop sending after this long
    arrivals: list[tuple[int, float]] | None = None  # open loop: (index, seconds after t0)
    # each request's output tokens, by index as ``prompts`` (None: the spec's, for all)
    outputs: list[int] | None = None
    # Closed loop: conversations of this many turns, each client holding one at a time
    # (request ``c * turns + t`` is turn t of conversation c, sent with its earlier turns),
    # ``think_s`` seconds between a turn's answer and the next turn
    turns: int = 1
    think_s: float = 0.0
    preopen: int = 0  # connections opened before t0 (about as many as will be in flight)
    # Closed loop: each client's first send, seconds after t0 (empty: every client at t0).
    starts: tuple[float, ...] = ()


Take = Callable[[], int]  # the next request index (shared between workers in a closed loop)
# A closed loop's counter set to this or beyond: its clients send nothing more and the level
# ends once the requests in flight have (``run_load``'s drain_when: a graceful early end)
DRAINED = 1 << 62
# Called once the connections are open, with the seconds that took; returns t0.
Start = Callable[[float], Awaitable[float]]


async def run_share(
    share: Share, start: Start, take: Take, emit: Callable[[RequestRecord], None]
) -> tuple[float, list[float], float]:
    """Open the share's connections, get ``t0`` from ``start`` and run the share from then
    (waiting until ``t0``). Returns when its last request ended (seconds after ``t0``), the
    event loop's lag samples (seconds, see ``_probe``) and the seconds spent pre-opening."""
    url = client.endpoint(share.spec)
    lags: list[float] = []
    with no_full_collections():
        async with client.new_session(
            share.base_url, share.clients, share.timeout_s, headers=share.spec.headers
        ) as session:
            began = time.perf_counter()
            await client.preopen(session, share.preopen, share.timeout_s, share.spec.preopen_paths)
            preopen_s = time.perf_counter() - began
            t0 = await start(preopen_s)
            delay = t0 - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            probe = asyncio.create_task(_probe(lags))
            try:
                if share.arrivals is None:
                    await _closed(share, session, url, t0, take, emit)
                else:
                    await _open(share, session, url, t0, emit)
            finally:
                probe.cancel()
            return time.perf_counter() - t0, lags, preopen_s


@contextlib.contextmanager
def no_full_collections() -> Iterator[None]:
    """No full garbage collections while the level runs: one walks every object the process
    holds (every record so far, and the caller's data), which takes 0.2 s at 50,000 records
    and stalls the loop, so chunk times come late in bursts. Young collections still run,
    and a request leaves ~0.2 objects of cyclic garbage, so the level holds little extra."""
    young, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, 2**31 - 1)
    try:
        yield
    finally:
        gc.set_threshold(young, middle, old)


async def _probe(lags: list[float]) -> None:
    """How late the loop wakes a task that asked to sleep PROBE_S: while it is busy, the
    time of every chunk is taken late by about as much, so this bounds the client's own
    timing error. (An idle loop still wakes up to ~1 ms late: epoll counts milliseconds.)"""
    clock = time.perf_counter
    while True:
        due = clock() + PROBE_S
        await asyncio.sleep(PROBE_S)
        lags.append(max(0.0, clock() - due))


async def _closed(
    share: Share,
    session: client.Session,
    url: str,
    t0: float,
    take: Take,
    emit: Callable[[RequestRecord], None],
) -> None:
    prompts, spec, n, outputs = share.prompts, share.spec, len(share.prompts), share.outputs
    stop_at = None if share.duration_s is None else t0 + share.duration_s
    limit = share.requests

    async def one_client(offset: float) -> None:
        if offset > 0:  # a staggered start (``Share.starts``)
            await asyncio.sleep(max(0.0, t0 + offset - time.perf_counter()))
        while True:
            if stop_at is not None and time.perf_counter() >= stop_at:
                return
            i = take()
            if i >= DRAINED or (limit is not None and i >= limit):
                return
            out = outputs[i % len(outputs)] if outputs else None
            emit(
                await client.send(
                    session, url, spec, prompts[i % n], i, t0, share.timeout_s, None, out
                )
            )

    async def one_talker(offset: float) -> None:
        """A client holding conversations: each turn re-sends the ones before it."""
        turns = share.turns
        if offset > 0:
            await asyncio.sleep(max(0.0, t0 + offset - time.perf_counter()))
        while True:
            c = take()  # a conversation
            if c >= DRAINED:
                return
            history: list[tuple[str, str]] = []
            for t in range(turns):
                i = c * turns + t
                if limit is not None and i >= limit:
                    return
                if t and share.think_s:
                    await asyncio.sleep(share.think_s)
                if stop_at is not None and time.perf_counter() >= stop_at:
                    return
                out = outputs[i % len(outputs)] if outputs else None
                answer: list[str] = []
                rec = await client.send(
                    session, url, spec, prompts[i % n], i, t0, share.timeout_s, None, out,
                    history, answer,
                )  # fmt: skip
                rec.turn = t
                emit(rec)
                if rec.status != "ok":
                    break  # a conversation cannot go on without its answer
                history += [("user", prompts[i % n]), ("assistant", answer[0])]

    starts = [share.starts[k] if k < len(share.starts) else 0.0 for k in range(share.clients)]
    each = one_talker if share.turns > 1 else one_client
    await asyncio.gather(*(each(at) for at in starts))


async def _open(
    share: Share,
    session: client.Session,
    url: str,
    t0: float,
    emit: Callable[[RequestRecord], None],
) -> None:
    """Send each arrival at its time, whatever is in flight; a full cap delays the sending
    (recorded: ``scheduled`` < ``start``) and every arrival after it, in order."""
    prompts, spec, n, outputs = share.prompts, share.spec, len(share.prompts), share.outputs
    slots = asyncio.Semaphore(share.clients) if share.clients > 0 else None
    tasks: set[asyncio.Task[None]] = set()

    async def one(i: int, at: float) -> None:
        try:
            out = outputs[i % len(outputs)] if outputs else None
            emit(
                await client.send(
                    session, url, spec, prompts[i % n], i, t0, share.timeout_s, at, out
                )
            )
        finally:
            if slots is not None:
                slots.release()

    for i, at in share.arrivals or []:
        delay = t0 + at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if slots is not None:
            await slots.acquire()
        task = asyncio.create_task(one(i, at))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks)


class LocalTake:
    """Indices 0, 1, 2, ... for a level run by one event loop; ``drain`` ends them."""

    def __init__(self) -> None:
        self.next = 0

    def __call__(self) -> int:
        i = self.next
        self.next += 1
        return i

    def drain(self) -> None:
        self.next = max(self.next, DRAINED)


def local_take() -> LocalTake:
    return LocalTake()


def raise_fd_limit(connections: int) -> None:
    """Each connection is a file descriptor; a common soft limit (1024) is below C=1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = connections + 256
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(hard, want)
        if new > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))


# -- worker processes ------------------------------------------------------------------------


class _Sender:
    """Pickles and sends record batches from a thread, so a slow parent never stalls the loop."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._queue: queue.SimpleQueue[list[RequestRecord] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="records-sender", daemon=True)
        self._thread.start()

    def put(self, batch: list[RequestRecord]) -> None:
        self._queue.put(batch)

    def _run(self) -> None:
        try:
            while (batch := self._queue.get()) is not None:
                self._conn.send(("records", batch))
        except OSError:
            pass  # the parent is gone; the loop sees the pipe close and stops

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()


class _Batcher:
    def __init__(self, sender: _Sender) -> None:
        self.sender = sender
        self.batch: list[RequestRecord] = []
        self.last = time.perf_counter()

    def emit(self, rec: RequestRecord) -> None:
        self.batch.append(rec)
        now = time.perf_counter()
        if now - self.last >= FLUSH_S or len(self.batch) >= FLUSH_MAX:
            self.flush()
            self.last = now

    def flush(self) -> None:
        if self.batch:
            self.sender.put(self.batch)
            self.batch = []


def shared_take(counter: Any) -> Take:
    """Indices from a counter in shared memory (``multiprocessing.Value``) for every worker."""

    def take() -> int:
        with counter.get_lock():
            i = int(counter.value)
            counter.value = i + 1
        return i

    return take


class _Stopped(Exception):
    """The parent sent something other than "go": stop without a word."""


def process_main(share: Share, conn: Connection, counter: Any) -> None:
    """A worker process's entry point (see the module docstring for the protocol)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent's to handle (a terminal sends
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # both to the whole process group)
    sender: _Sender | None = None
    try:
        raise_fd_limit(share.clients or len(share.arrivals or ()))
        sender = _Sender(conn)  # sends nothing before the level's first records
        batcher = _Batcher(sender)
        take = shared_take(counter) if counter is not None else local_take()
        cpu0 = [0.0]
        with asyncio.Runner(loop_factory=client.event_loop) as runner:
            end, lags, _ = runner.run(_watched(share, conn, take, batcher.emit, cpu0))
        batcher.flush()
        sender.close()
        conn.send(("done", end, time.process_time() - cpu0[0], lags))
    except (EOFError, BrokenPipeError, asyncio.CancelledError, _Stopped):
        pass  # the parent is gone or stopped us: nobody to report to
    except BaseException:
        if sender is not None:
            sender.close()  # one writer at a time on the pipe
        with contextlib.suppress(OSError):
            conn.send(("error", traceback.format_exc()))
        raise


async def _watched(
    share: Share,
    conn: Connection,
    take: Take,
    emit: Callable[[RequestRecord], None],
    cpu0: list[float],
) -> tuple[float, list[float], float]:
    """Run the share: "ready" once its connections are open, then wait for "go"; from then
    on, cancel it if the parent writes anything or closes the pipe. ``cpu0`` gets the
    process's CPU time at "go"."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    fd = conn.fileno()

    async def start(preopen_s: float) -> float:
        conn.send(("ready", preopen_s))
        readable: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not readable.done():
                readable.set_result(None)

        loop.add_reader(fd, wake)
        try:
            await readable
        finally:
            loop.remove_reader(fd)
        msg = conn.recv()
        if msg[0] != "go":
            raise _Stopped
        cpu0[0] = time.process_time()
        loop.add_reader(fd, task.cancel)
        return float(msg[1])

    try:
        return await run_share(share, start, take, emit)
    finally:
        loop.remove_reader(fd)
