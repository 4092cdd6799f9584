"""The server process: start it in its own process group, wait until it really serves, stop it.

Ready means two things, both within the deadline: the health endpoint answers 200 and a
one-token generation succeeds (an engine can report healthy while it still compiles). We stop
waiting at once if the process exits. Stopping is staged and group-wide: SIGINT, SIGTERM, then
SIGKILL, and we check that the group is gone and the port is free before returning.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from reportgen import tls, tracebacks
from reportgen.engines import Engine
from reportgen.errors import ServerError
from reportgen.redact import redact_text
from reportgen.run import reaper
from reportgen.run.serverlog import MESSAGE_CHARS, ServerLog

FATAL_HEADING = "The server's log from its fatal line"
# The first error and its traceback, distilled: the engine's own frames, the message whole.
DISTILLED_HEADING = tracebacks.DISTILLED_HEADING
CAUSE_HEADING = "The server's log from its first error"
# How long a server may outlive a reportgen killed without stopping it: SIGTERM, then SIGKILL
REAPER_GRACE_S = 5.0


def port_is_free(host: str, port: int) -> bool:
    """True when nothing listens on host:port (we could bind it ourselves)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the kernel's pick), for servers we start ourselves."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


_CLAIMS: list[int] = []  # lock files held for as long as this process runs


def claim(port: int) -> bool:
    """Whether this process now holds the host's claim on ``port`` (a lock file: two jobs
    on one host may look at one free port at once, before either server binds it)."""
    fd = os.open(
        Path(tempfile.gettempdir()) / f"reportgen-port-{port}.lock", os.O_CREAT | os.O_RDWR
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _CLAIMS.append(fd)
    return True


def claimed_port(host: str, wanted: int) -> int:
    """``wanted`` where it is free on ``host`` and claimed here, else a free port that is."""
    if port_is_free(host, wanted) and claim(wanted):
        return wanted
    while not claim(port := free_port(host)):
        pass
    return port


# The line ``run.nodes`` writes when a rank of a server across nodes exits.
NODE_ERROR = re.compile(r"^reportgen nodes: error: (.*)$", re.MULTILINE)


@dataclass
class Readiness:
    ready_s: float
    model: str | None
    health_checks: int
    generation_checks: int


@dataclass
class StopReport:
    signals: list[str] = field(default_factory=list)
    exit_code: int | None = None
    stop_s: float = 0.0
    group_gone: bool = False
    port_free: bool = False


class ServerProcess:
    """One server launch. Use as a context manager so it is always stopped."""

    def __init__(
        self,
        argv: list[str],
        *,
        env: dict[str, str],
        log_path: Path,
        host: str,
        port: int,
        engine: Engine,
        stop_timeout_s: float = 30.0,
        headers: dict[str, str] | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        self.argv = argv
        self.env = env
        self.log_path = log_path
        self.host = host
        self.port = port
        self.engine = engine
        self.stop_timeout_s = stop_timeout_s
        self.headers = headers or {}  # with every readiness request (an API key)
        self.secrets = list(secrets)  # values hidden in every log text we read or keep
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = ServerLog(log_path, self.secrets, engine)
        self.started_at = 0.0
        self._reaper: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> None:
        if not port_is_free(self.host, self.port):
            raise ServerError(
                f"port {self.port} on {self.host} is already in use by another process; "
                "stop that process or set another port in the campaign's server args",
                kind="start",
            )
        handle = self.log.open()
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
                start_new_session=True,  # own session and process group: we stop the group
            )
        except FileNotFoundError:
            self.log.close()
            raise ServerError(
                f"command not found: {self.argv[0]!r}; install the engine or fix server.command",
                kind="start",
            ) from None
        except PermissionError:
            self.log.close()
            raise ServerError(f"command not executable: {self.argv[0]!r}", kind="start") from None
        except (OSError, ValueError) as exc:  # E2BIG: arguments and environment too long
            self.log.close()
            raise ServerError(
                f"cannot start {self.argv[0]!r}: {exc}; shorten the server's flags and "
                "environment (server.args, server.env)",
                kind="start",
            ) from None
        self.started_at = time.monotonic()
        pgid = self.proc.pid  # start_new_session makes the child its group's leader
        # a watchdog that stops the group if reportgen dies without stopping it (SIGKILL)
        self._reaper = reaper.start(pgid, min(REAPER_GRACE_S, self.stop_timeout_s))
        reaper.ServerRecord(
            pgid,
            self.host,
            self.port,
            list(self.argv),
            self.log_path.name,
            reaper.start_time(pgid) or 0,
        ).save(self.record_path)

    @property
    def record_path(self) -> Path:
        """Where the run directory records this server while it runs (for --resume)."""
        return self.log_path.with_suffix(".json")

    def log_tail(self, lines: int = 40) -> str:
        return self.log.tail(lines)

    def log_text(self, limit: int = 8 * 1024 * 1024) -> str:
        return self.log.text(limit)

    def log_bytes(self) -> int:
        return self.log.size()

    def log_split(self, at: int, limit: int = 8 * 1024 * 1024) -> tuple[str, str]:
        return self.log.split(at, limit)

    def log_slice(self, start: int, end: int) -> str:
        return self.log.slice(start, end)

    def fatal_line(self) -> str | None:
        return self.log.fatal_line()

    def fatal_excerpt(self, lines: int = 40) -> str:
        return self.log.fatal_excerpt(lines)

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def failure(self, when: str = "") -> ServerError | None:
        """What to raise if the server can no longer serve: it exited (with the log's end),
        or it logged a line its engine calls fatal (with the log from that line); None while
        it lives. ``when`` ("during C=4 repetition 1") goes into the message."""
        at = f" {when}" if when else ""
        code = self.exited()
        if code is not None:
            text = self.log_text()
            # a server across nodes: which ranks went comes first, the traceback after
            lost = NODE_ERROR.search(text)
            went = f"{lost.group(1)[:MESSAGE_CHARS]}; " if lost else ""
            cause = tracebacks.root_cause(text)
            if cause is not None:  # the traceback's own words, and the log from them on
                what, offset = cause
                said = f"{went}{what}"[: MESSAGE_CHARS + len(went)]
                start = tracebacks.traceback_before(text, offset)
                distilled = tracebacks.distill(text, start) if start is not None else None
                if distilled is not None:
                    return ServerError(
                        f"server exited with code {code}{at}: {said}",
                        redact_text(distilled, self.secrets),
                        DISTILLED_HEADING,
                        kind="exited",
                        exit_code=code,
                    )
                excerpt = "".join(text[offset:].splitlines(keepends=True)[:40])
                return ServerError(
                    f"server exited with code {code}{at}: {said}",
                    excerpt,
                    CAUSE_HEADING,
                    kind="exited",
                    exit_code=code,
                )
            said = f": {went.removesuffix('; ')}" if lost else ""
            return ServerError(
                f"server exited with code {code}{at}{said}",
                self.log_tail(),
                kind="exited",
                exit_code=code,
            )
        fatal = self.fatal_line()
        if fatal is not None:
            excerpt, heading = self.fatal_excerpt(), FATAL_HEADING
            head = self.log.read(self.log.fatal_at, 1024 * 1024).decode("utf-8", errors="replace")
            distilled = tracebacks.distill(head)
            if distilled is not None:  # the traceback that follows the fatal line
                excerpt = redact_text(head.splitlines()[0] + "\n" + distilled, self.secrets)
                heading = DISTILLED_HEADING
            return ServerError(
                f"server reported a fatal error{at}: {fatal}", excerpt, heading, kind="fatal"
            )
        return None

    running_before = False  # a server reportgen did not start (``external.ExternalServer``)

    def wait_ready(self, timeout_s: float, api: str, model: str | None = None) -> Readiness:
        """Block until the server serves a one-token generation, or raise ServerError;
        ``model``: the one to ask for (default: the first /v1/models lists)."""
        assert self.started_at, "start() first"
        deadline = self.started_at + timeout_s
        health_ok = self.engine.health_path is None
        health_checks = generation_checks = 0
        models_asked = False  # /v1/models answered (transformers serve answers 500: once)
        last_answer = ""  # the last one-token attempt's HTTP status, for the timeout message
        delay = 0.05
        with httpx.Client(
            base_url=self.base_url, timeout=10.0, headers=self.headers, verify=tls.context()
        ) as client:
            while True:
                failed = self.failure("before it was ready")
                if failed is not None:
                    raise failed
                now = time.monotonic()
                if now > deadline:
                    stage = "a one-token generation" if health_ok else "its health endpoint"
                    if last_answer:
                        stage += f", which last answered {last_answer}"
                    raise ServerError(
                        f"server was not ready after {timeout_s:g} s (waiting for {stage}); "
                        "raise server.ready_timeout_s if it needs longer",
                        self.log_tail(),
                        kind="not ready",
                    )
                try:
                    if not health_ok:
                        health_checks += 1
                        assert self.engine.health_path is not None
                        resp = client.get(self.engine.health_path)
                        health_ok = resp.status_code == 200
                    if health_ok:
                        if not models_asked:
                            models_asked, listed = self._served_model(client)
                            model = model or listed
                        generation_checks += 1
                        status = self._one_token(client, api, model)
                        last_answer = f"HTTP {status}"
                        if status == 404 and self.running_before:
                            # a server that was already up: no such model or endpoint, for good
                            raise ServerError(
                                f"server answered a one-token generation of model {model!r} "
                                f"with HTTP 404: it serves no such model (or no such endpoint "
                                f"at {self.base_url}); name one it serves (server.model, "
                                "bench --model), or check the address",
                                self.log_tail(),
                                kind="not ready",
                            )
                        if status in (401, 403):  # it will not answer by waiting longer
                            sent = "a key it refused" if self.headers else "no key"
                            raise ServerError(
                                f"server refused a one-token generation with HTTP {status} "
                                f"({sent}): it wants an API key; set OPENAI_API_KEY to its "
                                "key (sent as a bearer token, never recorded)",
                                self.log_tail(),
                                kind="not ready",
                            )
                        if status == 200:
                            return Readiness(
                                ready_s=time.monotonic() - self.started_at,
                                model=model,
                                health_checks=health_checks,
                                generation_checks=generation_checks,
                            )
                except httpx.HTTPError:
                    pass  # not listening yet, or reset while loading: keep polling
                time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                delay = min(delay * 1.5, 1.0)

    @staticmethod
    def _served_model(client: httpx.Client) -> tuple[bool, str | None]:
        """(whether the server has answered for good, the model it serves). Not yet while it
        is unreachable or still loading (503); an error or an odd body is its answer."""
        try:
            resp = client.get("/v1/models")
        except httpx.HTTPError:
            return False, None
        if resp.status_code == 503:
            return False, None
        try:
            data = resp.json().get("data") or []
            return True, str(data[0]["id"]) if data else None
        except (ValueError, KeyError, TypeError, AttributeError, IndexError):
            return True, None

    @staticmethod
    def _one_token(client: httpx.Client, api: str, model: str | None) -> int:
        body: dict[str, Any] = {"max_tokens": 1, "temperature": 0.0, "stream": False}
        if model:
            body["model"] = model
        if api == "chat":
            body["messages"] = [{"role": "user", "content": "Say hi."}]
            path = "/v1/chat/completions"
        else:
            body["prompt"] = "Say hi."
            path = "/v1/completions"
        resp = client.post(path, json=body, timeout=60.0)
        return resp.status_code

    def stop(self) -> StopReport:
        """Stop the whole process group: SIGINT, then SIGTERM, then SIGKILL."""
        report = StopReport()
        if self.proc is None:
            report.group_gone = report.port_free = True
            return report
        t0 = time.monotonic()
        pgid = self.proc.pid  # start_new_session makes the child its group's leader
        grace = self.stop_timeout_s
        for sig, wait_s in (
            (signal.SIGINT, grace * 0.5),
            (signal.SIGTERM, grace * 0.5),
            (signal.SIGKILL, 10.0),
        ):
            if not reaper.group_alive(pgid):
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
                report.signals.append(sig.name)
            _wait_group(self.proc, pgid, wait_s)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=1.0)
        report.exit_code = self.proc.poll()
        report.group_gone = not reaper.group_alive(pgid)
        port_deadline = time.monotonic() + 5.0
        report.port_free = port_is_free(self.host, self.port)
        while not report.port_free and time.monotonic() < port_deadline:
            time.sleep(0.05)
            report.port_free = port_is_free(self.host, self.port)
        report.stop_s = time.monotonic() - t0
        if report.group_gone:
            reaper.release(self._reaper)  # stopped: its watchdog has nothing left to do
            with contextlib.suppress(OSError):
                self.record_path.unlink()
        self.log.close()
        self.log.redact()  # an engine may print its own arguments, API key included
        return report

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _wait_group(proc: subprocess.Popen[bytes], pgid: int, timeout_s: float) -> None:
    """Wait until every process of the group has exited (reaping our direct child)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader so it does not linger as a zombie
        if not reaper.group_alive(pgid):
            return
        time.sleep(0.02)
