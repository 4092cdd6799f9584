"""Shared fixtures: free ports, simulator servers owned by the test, orphan checks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from reportgen import sim as simulator
from reportgen.run.server import free_port

__all__ = ["free_port"]

ROOT = Path(__file__).resolve().parent.parent
START_DEADLINE_S = 15.0  # generous: a cold interpreter importing aiohttp on a busy CI box


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass
class Sim:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def stop_sim(proc: subprocess.Popen[bytes]) -> int:
    """SIGTERM the process group, SIGKILL if it lingers; returns the exit code."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
    assert not group_alive(proc.pid), "something in the simulator's process group survived"
    return proc.returncode


def start_sim_process(tmp_path: Path, *flags: str, wait_ready: bool = True) -> Sim:
    """Start `reportgen.sim` on a free port in its own process group; wait for /health."""
    port = free_port()
    log = tmp_path / f"sim-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*simulator.command(port), *flags],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    sim = Sim(proc, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + START_DEADLINE_S
    while True:
        if proc.poll() is not None:
            pytest.fail(f"sim exited with {proc.returncode}:\n{sim.log_text()}")
        if time.monotonic() > deadline:
            stop_sim(proc)
            pytest.fail(f"sim not healthy after {START_DEADLINE_S} s:\n{sim.log_text()}")
        try:
            status = httpx.get(sim.url + "/health", timeout=1.0).status_code
            if status == 200 or not wait_ready:
                return sim
        except httpx.TransportError:
            pass  # not listening yet
        time.sleep(0.05)


@pytest.fixture
def start_sim(tmp_path: Path) -> Iterator[Callable[..., Sim]]:
    """Start simulators with the given flags; all are stopped (by group) after the test."""
    started: list[Sim] = []

    def start(*flags: str, wait_ready: bool = True) -> Sim:
        started.append(start_sim_process(tmp_path, *flags, wait_ready=wait_ready))
        return started[-1]

    yield start
    for sim in started:
        stop_sim(sim.proc)


@pytest.fixture
def sim(start_sim: Callable[..., Sim]) -> Sim:
    """A simulator with TTFT 20 ms and inter-token latency 2 ms."""
    return start_sim("--ttft-ms", "20", "--itl-ms", "2")


@pytest.fixture(scope="session")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An XDG cache folder holding a client ceiling measured once for the session
    (calibration is cached per host), for runs started as subprocesses."""
    folder = tmp_path_factory.mktemp("cache")
    res = subprocess.run(
        [sys.executable, "-m", "reportgen", "calibrate", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={"XDG_CACHE_HOME": str(folder), "PATH": "/usr/bin:/bin"},
    )
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    assert result["chunks_per_cpu_s"] > 1000 and result["requests"] == 400
    assert list((folder / "reportgen").glob("calibration-*.json"))
    return folder


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/ from the current output instead of comparing with it",
    )
