"""The server process owner, against real processes: ready, early exit, deadline, clean stop."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest

from reportgen import engines
from reportgen.errors import ServerError
from reportgen.run.server import ServerProcess, port_is_free
from tests.conftest import free_port, group_alive

SIM = [sys.executable, "-m", "reportgen.sim"]


def make(
    tmp_path: Path,
    argv: list[str],
    port: int,
    engine: str = "sim",
    env: dict[str, str] | None = None,
) -> ServerProcess:
    return ServerProcess(
        argv,
        env=env or {},
        log_path=tmp_path / "server.log",
        host="127.0.0.1",
        port=port,
        engine=engines.get(engine),
        stop_timeout_s=4,
    )


def test_ready_means_health_and_a_one_token_generation(tmp_path: Path) -> None:
    port = free_port()
    srv = make(tmp_path, [*SIM, "--port", str(port), "--startup-s", "0.5", "--model", "m1"], port)
    srv.start()
    try:
        ready = srv.wait_ready(20, "chat")
        assert ready.ready_s >= 0.5  # the simulated model load is waited out
        assert ready.health_checks >= 2 and ready.generation_checks >= 1
        assert ready.model == "m1"
    finally:
        report = srv.stop()
    assert report.group_gone and report.port_free
    assert report.signals[0] == "SIGINT"
    assert "sim: ready on" in (tmp_path / "server.log").read_text()


def test_early_exit_is_reported_at_once_with_the_log(tmp_path: Path) -> None:
    port = free_port()
    srv = make(tmp_path, [*SIM, "--port", str(port), "--no-such-flag"], port)
    srv.start()
    t0 = time.monotonic()
    with pytest.raises(ServerError) as info:
        srv.wait_ready(60, "chat")
    assert time.monotonic() - t0 < 10  # did not wait for the 60 s deadline
    assert "exited with code 2 before it was ready" in str(info.value)
    assert "unrecognized arguments: --no-such-flag" in info.value.log_tail
    srv.stop()


def test_deadline(tmp_path: Path) -> None:
    port = free_port()
    srv = make(tmp_path, [*SIM, "--port", str(port), "--startup-s", "60"], port)
    srv.start()
    t0 = time.monotonic()
    with pytest.raises(ServerError, match="not ready after 1.5 s"):
        srv.wait_ready(1.5, "completions")
    assert time.monotonic() - t0 < 5
    report = srv.stop()
    assert report.group_gone and report.port_free


def test_deadline_says_what_the_generation_last_answered(tmp_path: Path) -> None:
    """No health endpoint to wait for (the generic engine): the deadline message says what
    the one-token request kept answering (the simulator's 503 while it loads)."""
    port = free_port()
    srv = make(tmp_path, [*SIM, "--port", str(port), "--startup-s", "60"], port, "generic")
    srv.start()
    with pytest.raises(ServerError, match=r"one-token generation, which last answered HTTP 503"):
        srv.wait_ready(1.5, "completions")
    report = srv.stop()
    assert report.group_gone and report.port_free


def test_stop_reaches_the_whole_group_even_children_that_ignore_sigint(tmp_path: Path) -> None:
    port = free_port()
    script = tmp_path / "server.sh"
    # A parent that ignores SIGINT/SIGTERM, with a child holding the port: only the staged
    # stop (ending in SIGKILL to the group) gets rid of both.
    script.write_text(
        "trap '' INT TERM\n"
        f'{sys.executable} -c "import signal,socket,time; '
        "signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGTERM, "
        f"signal.SIG_IGN); s=socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); "
        'time.sleep(600)" &\n'
        "wait\n"
    )
    srv = make(tmp_path, ["bash", str(script)], port, engine="generic")
    srv.start()
    deadline = time.monotonic() + 10
    while port_is_free("127.0.0.1", port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not port_is_free("127.0.0.1", port)
    assert srv.proc is not None
    pgid = srv.proc.pid
    report = srv.stop()
    assert report.signals == ["SIGINT", "SIGTERM", "SIGKILL"]
    assert report.group_gone and not group_alive(pgid)
    assert report.port_free


def test_port_in_use_and_missing_command_are_clear_errors(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ServerError, match=f"port {port} on 127.0.0.1 is already in use"):
            make(tmp_path, [*SIM, "--port", str(port)], port).start()
    with pytest.raises(ServerError, match="command not found: 'no-such-engine-binary'"):
        make(tmp_path, ["no-such-engine-binary"], free_port()).start()


def test_log_tail_is_redacted(tmp_path: Path) -> None:
    port = free_port()
    srv = make(
        tmp_path,
        ["bash", "-c", "echo using token hf_abcdefghijklmnopqrstuvwx; exit 3"],
        port,
        engine="generic",
    )
    srv.start()
    with pytest.raises(ServerError) as info:
        srv.wait_ready(10, "chat")
    srv.stop()
    assert "hf_abc" not in info.value.log_tail and "***" in info.value.log_tail
