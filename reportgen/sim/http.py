"""The simulator's HTTP/1.1 server: requests parsed by httptools (llhttp, as the load
generator's ``wire`` parses responses), each handled in a task of its own, answers written
whole (``Response``) or streamed in chunks (``Request.stream``). Keep-alive, pipelined
requests answered in order, flow control, and a clean close of every connection on shutdown.

Why not aiohttp's server, as before: importing it cost every simulator start about 0.2 CPU-s
(its client, cookie jar and TLS contexts come with it), several times what this module and
asyncio take, and a campaign or a test run starts hundreds of simulators.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import traceback
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import httptools

MAX_BODY = 64 * 1024 * 1024  # long prompts: up to 64 MiB bodies


@dataclass
class Response:
    """A whole answer: status, headers and body."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(status, json.dumps(data).encode(), "application/json", dict(headers or {}))


def text_response(text: str, content_type: str = "text/plain") -> Response:
    return Response(200, text.encode(), f"{content_type}; charset=utf-8")


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", "Server: reportgen-sim"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class Stream:
    """A streamed answer (chunked transfer encoding), its head already sent."""

    def __init__(self, conn: _Connection) -> None:
        self._conn = conn
        self.ended = False

    async def write(self, data: bytes) -> None:
        """Send one chunk; ConnectionResetError once the client has gone."""
        await self._conn.send(b"%x\r\n%b\r\n" % (len(data), data))

    async def end(self) -> None:
        if not self.ended:
            self.ended = True
            await self._conn.send(b"0\r\n\r\n")

    def abort(self) -> None:
        """Drop the connection as a crashed server would: no end, no close handshake."""
        self.ended = True
        self._conn.abort()


class Request:
    """One request as it arrived: method, path (no query), headers (lower-case names), body."""

    def __init__(self, conn: _Connection, method: str, url: bytes, headers: dict[str, str],
                 body: bytes, keep_alive: bool) -> None:  # fmt: skip
        self._conn = conn
        self.method = method
        self.path = httptools.parse_url(url).path.decode("latin-1")
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive
        self.streamed: Stream | None = None

    def json(self) -> Any:
        """The body as JSON (json.JSONDecodeError or UnicodeDecodeError if it is not)."""
        return json.loads(self.body.decode("utf-8"))

    async def stream(self, headers: dict[str, str], status: int = 200) -> Stream:
        """Send the head of a streamed answer; ConnectionResetError if the client has gone."""
        if not self.keep_alive:
            headers = {**headers, "Connection": "close"}
        await self._conn.send(_head(status, {**headers, "Transfer-Encoding": "chunked"}))
        self.streamed = Stream(self._conn)
        return self.streamed


Handler = Callable[[Request], Coroutine[Any, Any, Response | None]]


class _Connection(asyncio.Protocol):
    """One client connection: parses what arrives, answers its requests one at a time."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.pending: asyncio.Queue[Request | None] = asyncio.Queue()
        self.worker: asyncio.Task[None] | None = None
        self.writable = asyncio.Event()
        self.writable.set()
        self.closed = False
        self._url = b""
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._size = 0

    # -- asyncio.Protocol --
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # each token goes now
        self.server.connections.add(self)
        self.worker = asyncio.get_running_loop().create_task(self._answer())

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse(400, "upgrades are not supported")
        except httptools.HttpParserError as exc:
            self._refuse(400, f"malformed HTTP request: {exc}")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.writable.set()  # a writer waiting to drain learns that the client has gone
        self.server.connections.discard(self)
        self.pending.put_nowait(None)

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    # -- httptools callbacks --
    def on_message_begin(self) -> None:
        self._url, self._headers, self._body, self._size = b"", {}, [], 0

    def on_headers_complete(self) -> None:
        if self._headers.get("expect", "").lower() == "100-continue" and self.transport:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # (curl waits 1 s for it)

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > MAX_BODY:
            self._refuse(413, f"request body over {MAX_BODY} bytes")
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self.closed:
            return
        method = self.parser.get_method().decode("latin-1")
        keep = self.parser.should_keep_alive()
        self.pending.put_nowait(
            Request(self, method, self._url, self._headers, b"".join(self._body), keep)
        )

    # -- writing --
    async def send(self, data: bytes) -> None:
        if self.closed or self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("the client closed the connection")
        self.transport.write(data)
        if not self.writable.is_set():
            await self.writable.wait()
            if self.closed:
                raise ConnectionResetError("the client closed the connection")

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _refuse(self, status: int, message: str) -> None:
        if self.transport is not None and not self.closed:
            body = json.dumps({"error": {"message": message, "code": status}}).encode()
            self.transport.write(_head(status, {"Content-Type": "application/json",
                                                "Content-Length": str(len(body)),
                                                "Connection": "close"}) + body)  # fmt: skip
        self.close()

    async def _answer(self) -> None:
        """Answer the connection's requests in the order they came, until it closes."""
        while (request := await self.pending.get()) is not None:
            task = asyncio.get_running_loop().create_task(self.server.handler(request))
            self.server.handlers.add(task)
            try:
                response = await task
            except asyncio.CancelledError:  # shutdown, or the handler's own cancellation
                self.abort()
                raise
            except ConnectionResetError:
                response = None
            except Exception:  # noqa: BLE001 (a handler's bug: a 500 and its traceback)
                traceback.print_exc(file=sys.stdout)
                sys.stdout.flush()
                if request.streamed is not None:
                    self.abort()
                    return
                response = json_response({"error": {"message": "internal error", "code": 500}},
                                         status=500)  # fmt: skip
            finally:
                self.server.handlers.discard(task)
            try:
                await self._finish(request, response)
            except ConnectionResetError:
                return
            if not request.keep_alive:
                self.close()
                return

    async def _finish(self, request: Request, response: Response | None) -> None:
        if request.streamed is not None:
            if not request.streamed.ended:
                await request.streamed.end()
            return
        response = response or Response(500, b"", "text/plain")
        headers = {"Content-Type": response.content_type,
                   "Content-Length": str(len(response.body)), **response.headers}  # fmt: skip
        if not request.keep_alive:
            headers["Connection"] = "close"
        await self.send(_head(response.status, headers) + response.body)


class Server:
    """Listens on host:port and hands every request to ``handler``."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections: set[_Connection] = set()
        self.handlers: set[asyncio.Task[Response | None]] = set()
        self._server: asyncio.Server | None = None

    async def listen(self, host: str, port: int, backlog: int = 4096) -> None:
        """Start listening (OSError if the address cannot be had)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self), host, port, backlog=backlog
        )

    async def close(self) -> None:
        """Stop listening, abort the requests in flight, close every connection."""
        if self._server is not None:
            self._server.close()
        handlers = list(self.handlers)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        workers = [c.worker for c in self.connections if c.worker is not None]
        for conn in list(self.connections):
            conn.close()
        await asyncio.gather(*workers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
