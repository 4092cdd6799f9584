"""A lean paced OpenAI-compatible streaming server: the benchmark's timing truth.

Every response streams `max_tokens` one-token chunks: the first `--ttft-ms` after the request
arrived, then one every `--itl-ms`. The server logs, per request, when the request arrived and
when each chunk had been written to the socket; the benchmark measures each client against
that log, so the server's own lateness is never blamed on the client.

Why not `reportgen sim`: at 64 streams x 100 chunks/s its aiohttp stack spends most of a core,
and on a 2-core host that CPU is taken from the client being measured; the requests also wait
in its event loop before a handler timestamps them. This server is one thread, one epoll loop
and one timer heap (a few microseconds per chunk), and it takes the request's arrival time from
the kernel (SO_TIMESTAMPNS: when the bytes reached the socket), not from when it got round to
reading them, so any delay on the server side counts as server time.

Text is the same as `reportgen sim`'s for the same prompt and seed, so clients that export only
the generated text can be matched. Endpoints: GET /health, GET /v1/models, POST
/v1/chat/completions and /v1/completions (streaming, or one JSON body when `stream` is false).
Send log (--record-sends): one JSON line per request: request_id, prompt (first 64
characters), t_recv (kernel arrival, wall clock), t_read (when read), sends (wall clock).

    python benchmarks/lgbench/paced_server.py --port 8123 --ttft-ms 50 --itl-ms 10 \\
        --record-sends sends.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import heapq
import itertools
import json
import select
import signal
import socket
import struct
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from reportgen.sim import request_prompt, token_stream

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; the SCM type has the same value
_TIMESPEC = struct.Struct("@ll")
_MAX_HEAD = 64 * 1024


@dataclass
class Stream:
    """One response being streamed on a connection."""

    conn: Conn
    request_id: str
    prompt: str
    t_recv: float
    t_read: float
    n: int  # paced chunks to send
    make: Callable[[int], bytes]  # paced chunk k (0-based), framed, built when it is due
    sends: list[float] = field(default_factory=list)
    next: int = 0


@dataclass
class Conn:
    sock: socket.socket
    inbuf: bytearray = field(default_factory=bytearray)
    outbuf: bytearray = field(default_factory=bytearray)
    t_first: float | None = None  # kernel arrival of the first byte of the pending request
    t_read: float = 0.0
    busy: bool = False  # a response is streaming; further requests wait (no pipelining)


def _frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _chunks(
    tokens: Iterator[str], pieces: dict[str | None, tuple[bytes, bytes]], n: int, end: bytes
) -> Callable[[int], bytes]:
    """Chunk k's bytes, framed; the last one carries ``end`` (usage, [DONE], last frame)."""

    def make(k: int) -> bytes:
        before, after = pieces["length" if k == n - 1 else None]
        data = _frame(before + next(tokens).encode() + after)
        return data + end if k == n - 1 else data

    return make


def _head(status: str, ctype: str, extra: str = "", length: int | None = None) -> bytes:
    size = (
        f"Content-Length: {length}\r\n" if length is not None else "Transfer-Encoding: chunked\r\n"
    )
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n{size}"
        f"Cache-Control: no-cache\r\n{extra}\r\n"
    ).encode()


class PacedServer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.ttft_s = args.ttft_ms / 1000
        self.itl_s = args.itl_ms / 1000
        self.model = args.model
        self.log = open(args.record_sends, "a") if args.record_sends else None  # noqa: SIM115
        self.ep = select.epoll()
        self.conns: dict[int, Conn] = {}
        self.timers: list[tuple[float, int, Stream]] = []  # (time.time() deadline, seq, stream)
        self.seq = itertools.count()
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.lsock.bind((args.host, args.port))
        self.lsock.listen(4096)
        self.lsock.setblocking(False)
        self.ep.register(self.lsock.fileno(), select.EPOLLIN)

    # -- loop -------------------------------------------------------------------------------
    def serve(self) -> None:
        lfd = self.lsock.fileno()
        while True:
            timeout = -1.0
            if self.timers:
                timeout = max(0.0, self.timers[0][0] - time.time())
            for fd, ev in self.ep.poll(timeout):
                if fd == lfd:
                    self._accept()
                    continue
                conn = self.conns.get(fd)
                if conn is None:
                    continue
                if ev & select.EPOLLOUT:
                    self._flush(conn)
                if ev & (select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR):
                    self._read(conn)
            now = time.time()
            while self.timers and self.timers[0][0] <= now:
                _, _, stream = heapq.heappop(self.timers)
                self._send_next(stream)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.lsock.accept()
            except BlockingIOError:
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            self.conns[sock.fileno()] = Conn(sock)
            self.ep.register(sock.fileno(), select.EPOLLIN)

    def _close(self, conn: Conn) -> None:
        fd = conn.sock.fileno()
        self.conns.pop(fd, None)
        with contextlib.suppress(OSError, ValueError):
            self.ep.unregister(fd)
        conn.sock.close()

    def _read(self, conn: Conn) -> None:
        try:
            data, anc, _, _ = conn.sock.recvmsg(65536, socket.CMSG_SPACE(_TIMESPEC.size))
        except BlockingIOError:
            return
        except OSError:
            self._close(conn)
            return
        if not data:
            self._close(conn)
            return
        t_kernel = None
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = _TIMESPEC.unpack(payload[: _TIMESPEC.size])
                t_kernel = sec + nsec / 1e9
        if not conn.inbuf:
            conn.t_first = t_kernel if t_kernel is not None else time.time()
            conn.t_read = time.time()
        conn.inbuf += data
        if not conn.busy:
            self._handle(conn)

    # -- HTTP -------------------------------------------------------------------------------
    def _handle(self, conn: Conn) -> None:
        end = conn.inbuf.find(b"\r\n\r\n")
        if end < 0:
            if len(conn.inbuf) > _MAX_HEAD:
                self._close(conn)
            return
        head = bytes(conn.inbuf[:end]).decode("latin-1").split("\r\n")
        method, path, _ = (head[0].split(" ") + ["", ""])[:3]
        length = 0
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip() or 0)
        if len(conn.inbuf) < end + 4 + length:
            return  # body still coming
        body = bytes(conn.inbuf[end + 4 : end + 4 + length])
        del conn.inbuf[: end + 4 + length]
        t_recv, t_read = conn.t_first or time.time(), conn.t_read
        conn.t_first = None
        path = path.split("?", 1)[0]
        if method == "GET" and path == "/health":
            self._reply(conn, 200, {"status": "ok"})
        elif method == "GET" and path == "/v1/models":
            card = {"id": self.model, "object": "model", "created": 0, "owned_by": "reportgen"}
            self._reply(conn, 200, {"object": "list", "data": [card]})
        elif method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            self._generate(conn, body, path.endswith("chat/completions"), t_recv, t_read)
        else:
            self._reply(conn, 404, {"error": {"message": f"no route {method} {path}"}})
        if conn.inbuf and not conn.busy:
            conn.t_first = conn.t_read = time.time()
            self._handle(conn)

    def _reply(self, conn: Conn, status: int, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
        self._write(conn, _head(f"{status} {reason}", "application/json", "", len(data)) + data)

    def _generate(self, conn: Conn, raw: bytes, chat: bool, t_recv: float, t_read: float) -> None:
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("request body must be a JSON object")
            prompt = request_prompt(body, chat)
            n = body.get("max_completion_tokens") if chat else None
            n = body.get("max_tokens", 16) if n is None else n
            if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
                raise ValueError(f"max_tokens must be a positive integer, got {n!r}")
        except ValueError as exc:
            self._reply(conn, 400, {"error": {"message": str(exc), "type": "BadRequestError"}})
            return
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        tokens = token_stream(self.args.seed, prompt)
        prompt_tokens = len(prompt.split())
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n}
        usage["total_tokens"] = prompt_tokens + n
        common = {
            "id": rid,
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()),
            "model": self.model,
        }
        extra = f"x-sim-request-id: {rid}\r\n"
        if not body.get("stream"):  # one body after the whole schedule: its only "chunk"
            text = "".join(next(tokens) for _ in range(n))
            choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": "length"}
            choice.update(
                {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
            )
            common["object"] = "chat.completion" if chat else "text_completion"
            data = json.dumps({**common, "choices": [choice], "usage": usage}).encode()
            whole = _head("200 OK", "application/json", extra, len(data)) + data
            s = Stream(conn, rid, prompt, t_recv, t_read, 1, lambda k: whole)
            self._start(s, b"", delay=self.ttft_s + self.itl_s * (n - 1))
            return
        opts = body.get("stream_options")
        include_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
        null_usage = {"usage": None} if include_usage else {}

        def event(choices: list[dict[str, Any]], **more: Any) -> bytes:
            obj = {**common, "choices": choices, **null_usage, **more}
            return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

        first = _head("200 OK", "text/event-stream", extra)
        if chat:  # OpenAI opens every chat stream with an empty assistant-role delta
            role = {"role": "assistant", "content": ""}
            first += _frame(
                event([{"index": 0, "delta": role, "logprobs": None, "finish_reason": None}])
            )
        # Every content chunk is the same JSON but for its token (and the last one's
        # finish_reason): cut it around a marker once, and splice each token in when due.
        marker = "\x00"
        pieces = {}
        for done in (None, "length"):
            choice = {"index": 0, "logprobs": None, "finish_reason": done}
            choice.update({"delta": {"content": marker}} if chat else {"text": marker})
            before, _, after = event([choice]).partition(b"\\u0000")
            pieces[done] = (before, after)
        tail = event([], usage=usage) if include_usage else b""
        end = _frame(tail + b"data: [DONE]\n\n") + b"0\r\n\r\n"
        self._start(
            Stream(conn, rid, prompt, t_recv, t_read, n, _chunks(tokens, pieces, n, end)),
            first,
            delay=self.ttft_s,
        )

    # -- pacing -----------------------------------------------------------------------------
    def _start(self, s: Stream, first: bytes, delay: float) -> None:
        """Send ``first`` now; chunk k is due ``delay + k * itl`` after the request arrived."""
        s.conn.busy = True
        if first:
            self._write(s.conn, first)
        heapq.heappush(self.timers, (s.t_recv + delay, next(self.seq), s))

    def _send_next(self, s: Stream) -> None:
        if s.conn.sock.fileno() < 0:  # the client went away
            self._record(s)
            return
        self._write(s.conn, s.make(s.next))
        s.sends.append(time.time())
        s.next += 1
        if s.next < s.n:  # absolute schedule: lateness does not accumulate
            due = s.t_recv + self.ttft_s + self.itl_s * s.next
            heapq.heappush(self.timers, (due, next(self.seq), s))
            return
        self._record(s)
        s.conn.busy = False
        if s.conn.inbuf:
            self._handle(s.conn)

    def _record(self, s: Stream) -> None:
        if self.log is not None:
            line = {"request_id": s.request_id, "prompt": s.prompt[:64], "t_recv": s.t_recv}
            line.update(t_read=s.t_read, sends=s.sends)
            self.log.write(json.dumps(line) + "\n")

    def _write(self, conn: Conn, data: bytes) -> None:
        if conn.outbuf:
            conn.outbuf += data
            return
        try:
            sent = conn.sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            if exc.errno in (errno.EPIPE, errno.ECONNRESET, errno.EBADF):
                self._close(conn)
                return
            raise
        if sent < len(data):  # the client is not reading fast enough: wait for room
            conn.outbuf += data[sent:]
            self.ep.modify(conn.sock.fileno(), select.EPOLLIN | select.EPOLLOUT)

    def _flush(self, conn: Conn) -> None:
        try:
            sent = conn.sock.send(conn.outbuf)
        except BlockingIOError:
            return
        except OSError:
            self._close(conn)
            return
        del conn.outbuf[:sent]
        if not conn.outbuf:
            self.ep.modify(conn.sock.fileno(), select.EPOLLIN)

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
            self.log = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ttft-ms", type=float, default=50.0)
    parser.add_argument("--itl-ms", type=float, default=10.0)
    parser.add_argument("--model", default="sim-model")
    parser.add_argument("--seed", type=int, default=0, help="same meaning as reportgen sim's")
    parser.add_argument("--record-sends", metavar="PATH", help="append the send log here")
    args = parser.parse_args(argv)

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server = PacedServer(args)
    print(f"paced server on http://{args.host}:{args.port}", flush=True)
    try:
        server.serve()
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
