"""Plain HTTP/1.1 connections for the load generator, timed by the kernel.

Why not aiohttp for these: a chunk's time should be when it reached this host, not when a
busy event loop got round to reading it. Every read here is a ``recvmsg`` that also returns
the kernel's receive timestamp of the data (``SO_TIMESTAMPNS``), so the client's own work
(another stream's chunks, a burst of new requests, a preempted process) never shows up as
latency. A request's start is taken just before its single ``send``. Responses are parsed
by httptools (llhttp, the parser Node.js uses); each piece of body goes, with its arrival
time, straight to the request's ``Sink`` from the socket's reader callback, with no task
switch per chunk, which is also why this path costs less CPU per chunk than aiohttp's.

HTTPS is not handled here: ``client`` uses aiohttp for https:// URLs.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
from typing import Protocol
from urllib.parse import urlsplit

import httptools

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux's value; SCM_ has the same
_TIMESPEC = struct.Struct("@ll")
_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size)
READ_SIZE = 256 * 1024


class ConnectFailed(OSError):
    """No connection to the server (refused, unreachable, timed out)."""


class Sink(Protocol):
    """Receives one response. Times are ``time.perf_counter()`` readings."""

    def headers(self, status: int) -> None: ...
    def body(self, data: bytes, t: float) -> bool: ...  # False: stop reading, close
    def end(self, t: float) -> None: ...
    def lost(self, message: str, t: float, answered: bool) -> None: ...


class Target:
    """Where requests go: host, port and the bytes every request's head starts with."""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"not a plain http:// URL: {base_url}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/")
        host = parts.netloc.rsplit("@", 1)[-1]
        self.common = "".join(f"{k}: {v}\r\n" for k, v in {"Host": host, **headers}.items())

    def request(self, method: str, path: str, body: bytes = b"") -> bytes:
        length = f"Content-Length: {len(body)}\r\n" if body or method == "POST" else ""
        head = f"{method} {self.prefix}{path} HTTP/1.1\r\n{self.common}{length}\r\n"
        return head.encode("latin-1") + body


class Conn:
    """One keep-alive connection; one request at a time."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, buffer: memoryview
    ) -> None:
        self.loop = loop
        self.buffer = buffer  # shared by the pool's connections: a read is copied out at once
        self.sock = sock
        self.fd = sock.fileno()
        self.parser = httptools.HttpResponseParser(self)
        self.sink: Sink | None = None
        self.open = True
        self.answered = False  # the current response's headers have arrived
        self.complete = False  # ... and all of it
        self.eof_body = False  # its body ends when the server closes (no length, not chunked)
        self.keep_alive = True
        self.offset = 0.0  # time.time() - time.perf_counter(), taken at the request's send
        self.t_data = 0.0  # arrival (perf_counter) of the data being parsed
        self._header_names: list[bytes] = []
        self._out = b""
        loop.add_reader(self.fd, self._readable)

    # -- sending ----------------------------------------------------------------------------
    def send(self, data: bytes, sink: Sink) -> float:
        """Send a request; returns when it went out (perf_counter, just before ``send``)."""
        self.sink, self.answered, self.complete, self.eof_body = sink, False, False, False
        self._header_names = []
        self.offset = time.time() - time.perf_counter()
        now = time.perf_counter()
        try:
            sent = self.sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            self._lose(f"{type(exc).__name__}: {exc}")
            return now
        if sent < len(data):  # the socket buffer is full: the rest when it has room
            self._out = data[sent:]
            self.loop.add_writer(self.fd, self._writable)
        return now

    def _writable(self) -> None:
        try:
            sent = self.sock.send(self._out)
        except BlockingIOError:
            return
        except OSError as exc:
            self._lose(f"{type(exc).__name__}: {exc}")
            return
        self._out = self._out[sent:]
        if not self._out:
            self.loop.remove_writer(self.fd)

    # -- receiving --------------------------------------------------------------------------
    def _readable(self) -> None:
        try:
            size, ancillary, _, _ = self.sock.recvmsg_into([self.buffer], _ANCILLARY)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lose(f"{type(exc).__name__}: {exc}")
            return
        now = time.perf_counter()
        t = now
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = _TIMESPEC.unpack_from(raw)
                t = min(sec + nsec * 1e-9 - self.offset, now)
        if not size:
            if self.answered and self.eof_body and not self.complete:
                self.complete = True
                self.keep_alive = False
                self._finish(t)
            self._lose("the server closed the connection" + self._where())
            return
        data = self.buffer[:size].tobytes()
        self.t_data = t
        if self.sink is None:  # nothing asked: a stray byte, or the server's goodbye
            self._lose("unexpected data from the server between requests")
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._lose("the server switched protocols")
        except httptools.HttpParserError as exc:
            self._lose(f"malformed HTTP response: {exc}")

    def _where(self) -> str:
        return " mid-body" if self.answered else " before answering"

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_names.append(name.lower())

    def on_headers_complete(self) -> None:
        self.answered = True
        names = self._header_names
        self.eof_body = b"content-length" not in names and b"transfer-encoding" not in names
        if self.sink is not None:
            self.sink.headers(self.parser.get_status_code())

    def on_body(self, body: bytes) -> None:
        sink = self.sink
        if sink is not None and not sink.body(body, self.t_data):
            self.sink = None  # it has what it wanted (or gave up): this connection is done
            self.close()

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()
        self._finish(self.t_data)

    def _finish(self, t: float) -> None:
        sink, self.sink = self.sink, None
        if sink is not None:
            sink.end(t)
        if not self.keep_alive:
            self.close()

    def _lose(self, message: str) -> None:
        sink, self.sink = self.sink, None
        self.close()
        if sink is not None:
            sink.lost(message, time.perf_counter(), self.answered)

    @property
    def reusable(self) -> bool:
        return self.open and self.complete and self.keep_alive and self.sink is None

    def close(self) -> None:
        if self.open:
            self.open = False
            self.loop.remove_reader(self.fd)
            if self._out:
                self.loop.remove_writer(self.fd)
            self.sock.close()


class Pool:
    """Idle keep-alive connections to one target; a request takes one or opens one."""

    def __init__(self, target: Target, connect_timeout_s: float) -> None:
        self.target = target
        self.connect_timeout_s = connect_timeout_s
        self.idle: list[Conn] = []
        # One read buffer for all: a fresh 256 KiB one per read costs more than the read.
        self.buffer = memoryview(bytearray(READ_SIZE))
        self.all: set[Conn] = set()
        self._family = socket.AF_INET
        self._address: tuple[str, int] | None = None

    async def acquire(self) -> Conn:
        while self.idle:
            conn = self.idle.pop()
            if conn.open:
                return conn
        return await self.connect()

    def release(self, conn: Conn) -> None:
        if conn.reusable:
            self.idle.append(conn)
        else:
            conn.close()
            self.all.discard(conn)

    async def connect(self) -> Conn:
        loop = asyncio.get_running_loop()
        if self._address is None:
            infos = await loop.getaddrinfo(
                self.target.host, self.target.port, type=socket.SOCK_STREAM
            )
            self._family, _, _, _, sockaddr = infos[0]
            self._address = (str(sockaddr[0]), int(sockaddr[1]))
        addr = self._address
        sock = socket.socket(self._family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with contextlib.suppress(OSError):  # no timestamps: arrival = when read
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            deadline = asyncio.timeout(self.connect_timeout_s)
            async with deadline:
                await loop.sock_connect(sock, addr)
        except TimeoutError:
            sock.close()
            if deadline.expired():  # (not the request's own timeout, around this one)
                raise ConnectFailed(f"no connection within {self.connect_timeout_s:g} s") from None
            raise
        except OSError as exc:
            sock.close()
            raise ConnectFailed(f"{type(exc).__name__}: {exc}") from None
        except BaseException:
            sock.close()
            raise
        conn = Conn(loop, sock, self.buffer)
        self.all.add(conn)
        return conn

    def close(self) -> None:
        for conn in self.all:
            conn.close()
        self.all.clear()
        self.idle.clear()


class Collect:
    """A sink that keeps a whole response (status, body) and resolves a future."""

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.done = done
        self.status = 0
        self.data = bytearray()
        self.error: str | None = None

    def headers(self, status: int) -> None:
        self.status = status

    def body(self, data: bytes, t: float) -> bool:
        self.data += data
        return True

    def end(self, t: float) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def lost(self, message: str, t: float, answered: bool) -> None:
        self.error = message
        if not self.done.done():
            self.done.set_result(None)
