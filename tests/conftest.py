"""Shared fixtures: free ports, a simulator server owned by the test, orphan checks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass
class Sim:
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def start_sim(tmp_path: Path, *flags: str) -> Sim:
    port = free_port()
    log = tmp_path / f"sim-{port}.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reportgen.sim", "--port", str(port), *flags],
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sim exited: {log.read_text()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return Sim(port, proc, log)
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    stop_group(proc)
    raise RuntimeError(f"sim not ready: {log.read_text()}")


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    if group_alive(proc.pid):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Sim]:
    s = start_sim(tmp_path, "--ttft-ms", "20", "--itl-ms", "2")
    yield s
    stop_group(s.proc)
    assert not group_alive(s.proc.pid)
