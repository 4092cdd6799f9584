"""One OpenAI-compatible request, streamed or not, into one ``RequestRecord``.

A request never raises: every failure (HTTP status, connection refused or reset, a stream cut
short, an error object or garbage inside a 200 stream, a timeout) becomes ``status="error"``
with a message whose text before the first colon names the kind, and the chunks received
before the failure are kept.

Two ways out, one record format (``Session`` picks):

- http:// (every engine on its host): ``reportgen.load.wire``, keep-alive connections read
  with ``recvmsg``: a request starts just before its one ``send``, and a chunk arrives when
  the kernel received it, so the client's own work never shows up as latency.
- https://: aiohttp. A request starts when its body goes to the socket (aiohttp's
  request-chunk-sent signal); a chunk arrives when the event loop's poll reported its socket
  readable (``ReadyTimes``, the loop's selector, notes the time for every ready socket),
  not when its task got round to reading it. On an event loop not made by ``event_loop()``
  that falls back to the time the task runs.

The streamed body goes through ``answer.Events`` on both (SSE lines, orjson, one time and length
appended per output chunk). Output text is kept only up to ``RequestSpec.keep_text_chars``.
"""

from __future__ import annotations

import asyncio
import contextlib
import selectors
import time
import weakref
from collections.abc import Sequence
from typing import Any

import aiohttp
import orjson

from reportgen.load import wire
from reportgen.load.answer import Events, fail, http_error, whole_answer
from reportgen.load.records import RequestRecord, RequestSpec

# identity: a compressing server or proxy would hold chunks back to fill its buffer.
HEADERS = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
CONNECT_TIMEOUT_S = 30.0
KEEPALIVE_S = 60.0  # idle pooled connections are kept this long (aiohttp's default is 15 s)
PREOPEN_TIMEOUT_S = 30.0  # pre-opening gives up after this long (or the request timeout)


class ReadyTimes(selectors.DefaultSelector):
    """The platform's selector, noting when each socket was last reported readable.

    ``ready[fd]`` is the ``time.perf_counter()`` reading taken as the poll returned: a chunk
    read from ``fd`` arrived no later than that, whatever the loop did before reading it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ready: dict[int, float] = {}

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = super().select(timeout)
        if events:
            now = time.perf_counter()
            ready = self.ready
            for key, mask in events:
                if mask & selectors.EVENT_READ:
                    ready[key.fd] = now
        return events


_READY: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, float]] = (
    weakref.WeakKeyDictionary()
)


def event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop whose selector notes readiness times (``asyncio.Runner``'s
    ``loop_factory``): chunks read on it are timed by when they arrived."""
    selector = ReadyTimes()
    loop = asyncio.SelectorEventLoop(selector)
    _READY[loop] = selector.ready
    loop.set_exception_handler(_interrupts_said_once)
    return loop


def _interrupts_said_once(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler: as asyncio's, except for a Ctrl-C (or exit) that reached
    one of its tasks, such as a second Ctrl-C while the first one's cancellation ran them. The
    run stops on it already, with its own message; asyncio would also print the task's
    traceback ("Task exception was never retrieved") when the task is collected."""
    if isinstance(context.get("exception"), KeyboardInterrupt | SystemExit):
        return
    loop.default_exception_handler(context)


def _sent_signal() -> aiohttp.TraceConfig:
    """Notes, in the request's ``trace_request_ctx`` list, when its body went to the kernel."""

    async def chunk_sent(session: Any, ctx: Any, params: Any) -> None:
        sent = ctx.trace_request_ctx
        if sent is not None and not sent:
            sent.append(time.perf_counter())

    config = aiohttp.TraceConfig()
    config.on_request_chunk_sent.append(chunk_sent)
    return config


class Session:
    """Where a share's requests go out: kernel-timed plain HTTP connections (``wire``) for
    http:// URLs, aiohttp for https:// (or when ``transport="aiohttp"``). Use as an async
    context manager; it closes every connection it opened."""

    def __init__(
        self,
        base_url: str,
        connections: int,
        timeout_s: float,
        transport: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        sent = {**HEADERS, **(headers or {})}
        kind = transport or TRANSPORT
        if kind == "wire" and not self.base_url.startswith("http://"):
            kind = "aiohttp"
        self.kind = kind
        self.pool: wire.Pool | None = None
        self.http: aiohttp.ClientSession | None = None
        if kind == "wire":
            self.pool = wire.Pool(wire.Target(self.base_url, sent), CONNECT_TIMEOUT_S)
        else:
            self.http = _aiohttp_session(connections, sent)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.close()
        if self.http is not None:
            await self.http.close()


TRANSPORT = "wire"  # the default for http:// URLs ("aiohttp" to use aiohttp everywhere)


def new_session(
    base_url: str,
    connections: int,
    timeout_s: float,
    transport: str | None = None,
    headers: dict[str, str] | None = None,
) -> Session:
    """A ``Session`` for ``connections`` requests in flight (0 = no limit): requests never
    queue for a connection inside it, since waiting is the load generator's decision.
    ``headers`` go with every request, besides the usual ones."""
    return Session(base_url, connections, timeout_s, transport, headers)


def _aiohttp_session(connections: int, headers: dict[str, str]) -> aiohttp.ClientSession:
    """Idle connections stay pooled for KEEPALIVE_S, so those ``preopen`` opened before the
    level are still there when its requests start. The whole-request timeout is applied per
    request by ``send``."""
    connector = aiohttp.TCPConnector(
        limit=connections, limit_per_host=0, keepalive_timeout=KEEPALIVE_S
    )
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S)
    return aiohttp.ClientSession(
        connector=connector, timeout=timeout, headers=headers, trace_configs=[_sent_signal()]
    )


async def preopen(
    session: Session, connections: int, timeout_s: float, paths: tuple[str, ...]
) -> None:
    """Open ``connections`` connections and leave them idle in ``session``'s pool, so the
    level's first requests do not pay for TCP connection setup: as many concurrent GETs of
    ``paths[0]`` (then the next path if that fails with an HTTP error), each body read so
    its connection returns to the pool and the server has surely accepted it. Statuses and
    failures are ignored (a server that cannot be reached fails the level's requests, which
    record it); gives up after PREOPEN_TIMEOUT_S (or ``timeout_s``, if shorter)."""
    if connections < 1:
        return
    base = session.base_url

    async def one_wire(pool: wire.Pool) -> None:
        conn = await pool.connect()
        loop = asyncio.get_running_loop()
        for path in paths:
            got = wire.Collect(loop.create_future())
            conn.send(pool.target.request("GET", path), got)
            await got.done
            if got.error is not None or not conn.reusable:
                conn.close()
                return
            if got.status < 400:
                break
        pool.release(conn)

    async def one_aiohttp(http: aiohttp.ClientSession) -> None:
        for path in paths:
            async with http.get(base + path) as resp:
                await resp.read()
                if resp.status < 400:
                    return

    async def one() -> None:
        try:
            if session.pool is not None:
                await one_wire(session.pool)
            elif session.http is not None:
                await one_aiohttp(session.http)
        except Exception:  # not a request of the level: nothing to record
            return

    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(min(timeout_s, PREOPEN_TIMEOUT_S)):
            await asyncio.gather(*(one() for _ in range(connections)))


def endpoint(spec: RequestSpec) -> str:
    """The path of ``spec``'s endpoint."""
    path, _ = spec.body("")
    return path


async def send(
    session: Session,
    path: str,
    spec: RequestSpec,
    prompt: str,
    index: int,
    t0: float,
    timeout_s: float,
    scheduled: float | None = None,
    output_tokens: int | None = None,
    history: Sequence[tuple[str, str]] = (),
    answer: list[str] | None = None,
) -> RequestRecord:
    """Send one request and time it from ``t0`` (a ``time.perf_counter()`` reading);
    ``output_tokens``: this request's own, where the workload's vary; ``history``: its
    conversation's earlier turns; ``answer``: gets the whole answer text appended (the next
    turn's history), not only the record's first ``keep_text_chars``.

    ``start`` is when the request went to the kernel (when the client began, if it never
    did: a failed connection)."""
    payload = orjson.dumps(spec.body(prompt, output_tokens, history)[1])
    parts: list[str] = []
    rec = RequestRecord(
        index=index,
        start=time.perf_counter() - t0,
        requested_output_tokens=output_tokens or spec.output_tokens,
        scheduled=scheduled,
    )
    sent: list[float] = []
    # (a conversation's next turn carries the whole answer: collect it all, keep the first)
    keep = spec.keep_text_chars if answer is None else 1 << 30
    try:
        async with asyncio.timeout(timeout_s):
            if session.pool is not None:
                await _wire(session.pool, path, payload, spec.stream, rec, parts, keep, t0, sent)
            elif spec.stream:
                assert session.http is not None
                url = session.base_url + path
                await _stream(session.http, url, payload, rec, parts, keep, t0, sent)
            else:
                assert session.http is not None
                url = session.base_url + path
                await _whole(session.http, url, payload, rec, parts, t0, sent)
    except TimeoutError:
        fail(rec, f"timeout: no complete response within {timeout_s:g} s")
    except aiohttp.ClientConnectorError as exc:
        fail(rec, f"connect error: {exc}")
    except wire.ConnectFailed as exc:
        fail(rec, f"connect error: {exc}")
    except (aiohttp.ClientError, OSError) as exc:
        fail(rec, f"connection error: {type(exc).__name__}: {exc}")
    except Exception as exc:  # a request must never take the level down
        fail(rec, f"client error: {type(exc).__name__}: {exc}")
    rec.end = time.perf_counter() - t0
    if sent:
        rec.start = sent[0] - t0
    text = "".join(parts)
    rec.output_text = text[: spec.keep_text_chars]
    if answer is not None:
        answer.append(text)
    if rec.output_tokens_source != "usage":
        rec.output_tokens = len(rec.chunk_times)
    return rec


class _WireSink:
    """One wire request's response into its record (``wire.Sink``)."""

    __slots__ = ("rec", "parts", "t0", "events", "status", "raw", "done", "stream")

    def __init__(
        self,
        rec: RequestRecord,
        parts: list[str],
        keep: int,
        t0: float,
        stream: bool,
        done: asyncio.Future[None],
    ) -> None:
        self.rec, self.parts, self.t0, self.stream, self.done = rec, parts, t0, stream, done
        self.events = Events(rec, parts, keep)
        self.status = 0
        self.raw = bytearray()  # the body of an error or of a non-streamed answer

    def headers(self, status: int) -> None:
        self.status = self.rec.http_status = status

    def body(self, data: bytes, t: float) -> bool:
        if self.status != 200 or not self.stream:
            self.raw += data
            return True
        if self.events.feed(data, t - self.t0):
            return True
        self._resolve()
        return False

    def end(self, t: float) -> None:
        if self.status != 200:
            fail(self.rec, http_error(self.status, bytes(self.raw)))
        elif self.stream:
            self.events.close(t - self.t0)
        else:
            whole_answer(self.rec, self.parts, bytes(self.raw), t - self.t0)
        self._resolve()

    def lost(self, message: str, t: float, answered: bool) -> None:
        if not answered:
            fail(self.rec, f"connection error: {message}")
        elif self.status == 200 and self.stream:
            self.events.close(t - self.t0, message)
        else:
            fail(self.rec, f"connection error: {message}")
        self._resolve()

    def _resolve(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _wire(
    pool: wire.Pool,
    path: str,
    payload: bytes,
    stream: bool,
    rec: RequestRecord,
    parts: list[str],
    keep: int,
    t0: float,
    sent: list[float],
) -> None:
    conn = await pool.acquire()
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    sink = _WireSink(rec, parts, keep, t0, stream, done)
    try:
        sent.append(conn.send(pool.target.request("POST", path, payload), sink))
        await done
    finally:
        if not done.done():  # timed out or cancelled: the connection is in an unknown state
            conn.close()
        pool.release(conn)


async def _stream(
    http: aiohttp.ClientSession,
    url: str,
    payload: bytes,
    rec: RequestRecord,
    parts: list[str],
    keep: int,
    t0: float,
    sent: list[float],
) -> None:
    async with http.post(url, data=payload, trace_request_ctx=sent) as resp:
        rec.http_status = resp.status
        if resp.status != 200:
            fail(rec, http_error(resp.status, await resp.read()))
            return
        read = resp.content.readany
        clock = _arrival_clock(resp)
        events = Events(rec, parts, keep)
        while True:
            try:
                chunk = await read()
            except aiohttp.ClientPayloadError as exc:  # connection closed mid-body
                events.close(clock() - t0, f"{type(exc).__name__}: {exc}")
                return
            if not chunk:
                events.close(clock() - t0)
                return
            if not events.feed(chunk, clock() - t0):
                return


async def _whole(
    http: aiohttp.ClientSession,
    url: str,
    payload: bytes,
    rec: RequestRecord,
    parts: list[str],
    t0: float,
    sent: list[float],
) -> None:
    """Non-streaming: the whole answer is its one chunk, and no first token is seen apart
    from the rest: its TTFT (and ITL) are not measured."""
    async with http.post(url, data=payload, trace_request_ctx=sent) as resp:
        rec.http_status = resp.status
        clock = _arrival_clock(resp)
        raw = await resp.read()
        now = clock() - t0
        if resp.status != 200:
            fail(rec, http_error(resp.status, raw))
            return
    whole_answer(rec, parts, raw, now)


def _arrival_clock(resp: aiohttp.ClientResponse) -> Any:
    """A function giving when the data just read from ``resp`` arrived (perf_counter): the
    last time the loop's poll saw its socket readable, or now when that is not known."""
    clock = time.perf_counter
    ready = _READY.get(asyncio.get_running_loop())
    conn = resp.connection
    transport = conn.transport if conn is not None else None
    sock = transport.get_extra_info("socket") if transport is not None else None
    if ready is None or sock is None:
        return clock
    fd = sock.fileno()
    get = ready.get

    def arrived() -> float:
        now = clock()
        return min(get(fd, now), now)

    return arrived
