"""One OpenAI-compatible request over aiohttp, streamed or not, into one ``RequestRecord``.

A request never raises: every failure (HTTP status, connection refused or reset, a stream cut
short, an error object or garbage inside a 200 stream, a timeout) becomes ``status="error"``
with a message whose text before the first colon names the kind, and the chunks received
before the failure are kept.

Where the times come from, so that the client's own work never shows up as latency:

- A request starts when its bytes are handed to the kernel (aiohttp's request-chunk-sent
  signal, just before the one write of headers and body), not when the client began building
  it: in a burst of new requests the last one would otherwise carry the cost of the others.
- A chunk arrives when the event loop's poll reported its connection readable
  (``ReadyTimes``, the loop's selector, notes the time for every ready socket as the poll
  returns), not when its task got round to reading: with 64 streams ticking together the
  last task runs about a millisecond after the first.
Both fall back to the time the task runs, on an event loop not made by ``event_loop()``.

The streaming loop is the hot path (one pass per socket read, up to hundreds of thousands a
second across a level), so it does little: look up the time, split SSE lines, parse JSON
with orjson, append a time and a length. Output text is kept only up to
``RequestSpec.keep_text_chars``.
"""

from __future__ import annotations

import asyncio
import contextlib
import selectors
import time
import weakref
from typing import Any

import aiohttp
import orjson

from reportgen.load.records import RequestRecord, RequestSpec
from reportgen.sse import SSEDecoder

# identity: a compressing server or proxy would hold chunks back to fill its buffer.
HEADERS = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
CONNECT_TIMEOUT_S = 30.0
KEEPALIVE_S = 60.0  # idle pooled connections are kept this long (aiohttp's default is 15 s)
PREOPEN_PATHS = ("/v1/models", "/health")  # cheap GETs that open connections before t0
PREOPEN_TIMEOUT_S = 30.0  # pre-opening gives up after this long (or the request timeout)
ERROR_TEXT = 300  # characters of an error message kept


class ReadyTimes(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
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
    return loop


def _sent_signal() -> aiohttp.TraceConfig:
    """Notes, in the request's ``trace_request_ctx`` list, when its body went to the kernel."""

    async def chunk_sent(session: Any, ctx: Any, params: Any) -> None:
        sent = ctx.trace_request_ctx
        if sent is not None and not sent:
            sent.append(time.perf_counter())

    config = aiohttp.TraceConfig()
    config.on_request_chunk_sent.append(chunk_sent)
    return config


def new_session(connections: int, timeout_s: float) -> aiohttp.ClientSession:
    """A session whose pool holds ``connections`` (0 = no limit), so requests never queue
    for a connection inside aiohttp: waiting is the load generator's decision, not the pool's.
    Idle connections stay pooled for KEEPALIVE_S, so those ``preopen`` opened before the
    level are still there when its requests start. The whole-request timeout is applied per
    request by ``send``."""
    connector = aiohttp.TCPConnector(
        limit=connections, limit_per_host=0, keepalive_timeout=KEEPALIVE_S
    )
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S)
    return aiohttp.ClientSession(
        connector=connector, timeout=timeout, headers=HEADERS, trace_configs=[_sent_signal()]
    )


async def preopen(
    session: aiohttp.ClientSession, base_url: str, connections: int, timeout_s: float
) -> None:
    """Open ``connections`` connections and leave them idle in ``session``'s pool, so the
    level's first requests do not pay for TCP connection setup: as many concurrent GETs of
    ``{base_url}/v1/models`` (then ``/health`` if that fails with an HTTP error), each body
    read so its connection returns to the pool. Statuses and failures are ignored (a server
    that cannot be reached fails the level's requests, which record it); gives up after
    PREOPEN_TIMEOUT_S (or ``timeout_s``, if shorter)."""
    if connections < 1:
        return
    base = base_url.rstrip("/")

    async def one() -> None:
        for path in PREOPEN_PATHS:
            try:
                async with session.get(base + path) as resp:
                    await resp.read()
                    if resp.status < 400:
                        return
            except Exception:  # not a request of the level: nothing to record
                return

    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(min(timeout_s, PREOPEN_TIMEOUT_S)):
            await asyncio.gather(*(one() for _ in range(connections)))


def endpoint(base_url: str, spec: RequestSpec) -> str:
    """The full URL of ``spec``'s endpoint."""
    path, _ = spec.body("")
    return base_url.rstrip("/") + path


async def send(
    session: aiohttp.ClientSession,
    url: str,
    spec: RequestSpec,
    prompt: str,
    index: int,
    t0: float,
    timeout_s: float,
    scheduled: float | None = None,
) -> RequestRecord:
    """Send one request and time it from ``t0`` (a ``time.perf_counter()`` reading).

    ``start`` is when the request went to the kernel (when the client began, if it never
    did: a failed connection)."""
    payload = orjson.dumps(spec.body(prompt)[1])
    parts: list[str] = []
    rec = RequestRecord(
        index=index,
        start=time.perf_counter() - t0,
        requested_output_tokens=spec.output_tokens,
        scheduled=scheduled,
    )
    sent: list[float] = []
    try:
        async with asyncio.timeout(timeout_s):
            if spec.stream:
                await _stream(session, url, payload, rec, parts, spec.keep_text_chars, t0, sent)
            else:
                await _whole(session, url, payload, rec, parts, t0, sent)
    except TimeoutError:
        _fail(rec, f"timeout: no complete response within {timeout_s:g} s")
    except aiohttp.ClientConnectorError as exc:
        _fail(rec, f"connect error: {exc}")
    except (aiohttp.ClientError, OSError) as exc:
        _fail(rec, f"connection error: {type(exc).__name__}: {exc}")
    except Exception as exc:  # a request must never take the level down
        _fail(rec, f"client error: {type(exc).__name__}: {exc}")
    rec.end = time.perf_counter() - t0
    if sent:
        rec.start = sent[0] - t0
    rec.output_text = "".join(parts)[: spec.keep_text_chars]
    if rec.output_tokens_source != "usage":
        rec.output_tokens = len(rec.chunk_times)
    return rec


async def _stream(
    session: aiohttp.ClientSession,
    url: str,
    payload: bytes,
    rec: RequestRecord,
    parts: list[str],
    keep: int,
    t0: float,
    sent: list[float],
) -> None:
    async with session.post(url, data=payload, trace_request_ctx=sent) as resp:
        rec.http_status = resp.status
        if resp.status != 200:
            _fail(rec, _http_error(resp.status, await resp.read()))
            return
        decoder = SSEDecoder()
        read = resp.content.readany
        clock = _arrival_clock(resp)
        loads = orjson.loads
        times, chars = rec.chunk_times, rec.chunk_chars
        kept = 0
        done = False
        cut = ""
        eof = False
        while not eof:
            try:
                chunk = await read()
            except aiohttp.ClientPayloadError as exc:  # connection closed mid-body
                chunk, cut = b"", f"{type(exc).__name__}: {exc}"
            now = clock() - t0
            if chunk:
                events = decoder.feed(chunk)
            else:
                eof = True
                events = decoder.close()
            for data in events:
                if data == b"[DONE]":
                    done = True
                    continue
                try:
                    obj = loads(data)
                except orjson.JSONDecodeError:
                    if eof:  # the last event of a stream cut short, itself cut: not usable
                        break
                    _fail(rec, f"invalid JSON in stream: {data[:100]!r}")
                    return
                if type(obj) is not dict:
                    _fail(rec, f"invalid JSON in stream: not an object: {data[:100]!r}")
                    return
                choices = obj.get("choices")
                if choices:
                    choice = choices[0]
                    delta = choice.get("delta")
                    if delta is not None:
                        piece = delta.get("content") or ""
                        # reasoning models: vLLM and SGLang name the field one way or the other
                        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                        if reasoning:
                            piece = reasoning + piece
                    else:
                        piece = choice.get("text") or ""
                    if piece:
                        if rec.first_token is None:
                            rec.first_token = now
                        times.append(now)
                        chars.append(len(piece))
                        if kept < keep:
                            parts.append(piece)
                            kept += len(piece)
                elif "error" in obj or obj.get("object") == "error":
                    msg = _error_message(obj) or data[:200].decode(errors="replace")
                    _fail(rec, f"error in stream: {msg}")
                    return
                usage = obj.get("usage")
                if usage:
                    _take_usage(rec, usage)
        if not done:
            _fail(rec, "stream ended without [DONE]" + (f": {cut}" if cut else ""))


async def _whole(
    session: aiohttp.ClientSession,
    url: str,
    payload: bytes,
    rec: RequestRecord,
    parts: list[str],
    t0: float,
    sent: list[float],
) -> None:
    """Non-streaming: the whole answer is its one chunk, so TTFT equals end-to-end latency."""
    async with session.post(url, data=payload, trace_request_ctx=sent) as resp:
        rec.http_status = resp.status
        clock = _arrival_clock(resp)
        raw = await resp.read()
        now = clock() - t0
        if resp.status != 200:
            _fail(rec, _http_error(resp.status, raw))
            return
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        _fail(rec, f"invalid JSON response: {raw[:100]!r}")
        return
    if not isinstance(obj, dict):
        _fail(rec, f"invalid JSON response: not an object: {raw[:100]!r}")
        return
    if "error" in obj:
        _fail(rec, f"error in response: {_error_message(obj)}")
        return
    choices = obj.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    msg = choice.get("message")
    if isinstance(msg, dict):
        reasoning = msg.get("reasoning_content") or msg.get("reasoning") or ""
        text = str(reasoning) + str(msg.get("content") or "")
    else:
        text = str(choice.get("text") or "")
    if text:
        rec.first_token = now
        rec.chunk_times.append(now)
        rec.chunk_chars.append(len(text))
        parts.append(text)
    _take_usage(rec, obj.get("usage"))


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


def _fail(rec: RequestRecord, message: str) -> None:
    rec.status = "error"
    rec.error = message[:ERROR_TEXT]


def _take_usage(rec: RequestRecord, usage: Any) -> None:
    if isinstance(usage, dict):
        prompt = usage.get("prompt_tokens")
        if isinstance(prompt, int):
            rec.input_tokens = prompt
        completion = usage.get("completion_tokens")
        if isinstance(completion, int):
            rec.output_tokens = completion
            rec.output_tokens_source = "usage"


def _error_message(obj: Any) -> str:
    """The message of an OpenAI-style error (``{"error": {"message": ...}}``), or of the
    ``{"object": "error", "message": ...}`` and FastAPI ``{"detail": ...}`` shapes."""
    if not isinstance(obj, dict):
        return ""
    err = obj.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err)
    if err:
        return str(err)
    return str(obj.get("message") or obj.get("detail") or "")


def _http_error(status: int, raw: bytes) -> str:
    try:
        msg = _error_message(orjson.loads(raw))
    except orjson.JSONDecodeError:
        msg = ""
    return f"HTTP {status}: {msg or raw[:200].decode('utf-8', errors='replace').strip()}"
