"""A watchdog beside each server: it stops the server's process group when reportgen dies.

reportgen stops every server it starts, by its process group, on every way out it can see:
the end of an experiment, an error, Ctrl-C, SIGTERM. SIGKILL (or a crash of the interpreter)
leaves no way out to see, and the server, in a session of its own, would run on holding its
GPU and port. So each server gets a reaper: a small process in a session of its own too, whose
stdin is a pipe from reportgen. It blocks reading it.

- reportgen stops the server itself: it writes ``done`` and closes the pipe; the reaper exits.
- reportgen dies: the kernel closes the pipe (end of file without ``done``); the reaper sends
  the group SIGTERM, then SIGKILL after its grace, and exits. The server outlives reportgen
  by at most that grace.

A process group's id is not reused while any process of the group lives, so the group it stops
is the server's. The run directory also keeps a record of each running server
(``ServerRecord``), so that ``--resume`` can recognise and stop one whose reaper could not.

Run as ``python -m reportgen.run.reaper PGID GRACE_S``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

DONE = b"done"


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(pgid: int, grace_s: float) -> bool:
    """SIGTERM to the group, SIGKILL after ``grace_s``; True once it is gone."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        if not group_alive(pgid):
            return True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and group_alive(pgid):
            time.sleep(0.05)
    return not group_alive(pgid)


def start(pgid: int, grace_s: float) -> subprocess.Popen[bytes]:
    """A reaper for the group ``pgid``, in a session of its own (Ctrl-C at the terminal is
    for reportgen, which stops the server itself). Keep the returned process: closing its
    stdin without :func:`release` stops the group."""
    return subprocess.Popen(
        [sys.executable, "-m", "reportgen.run.reaper", str(pgid), f"{grace_s:g}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def release(reaper: subprocess.Popen[bytes] | None) -> None:
    """The server was stopped by reportgen: the reaper exits without touching anything."""
    if reaper is None or reaper.stdin is None:
        return
    with contextlib.suppress(OSError, ValueError):
        reaper.stdin.write(DONE)
        reaper.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        reaper.wait(timeout=5.0)


# -- the record of a running server, for --resume ---------------------------------------------


@dataclass(frozen=True)
class ServerRecord:
    """A server reportgen started and has not yet stopped: enough to recognise it later (its
    process group, port and command line) and stop it by its id."""

    pgid: int
    host: str
    port: int
    argv: list[str]
    log: str  # its log file
    started: int = 0  # its leader's start time (clock ticks after boot, /proc/PID/stat)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self)), encoding="utf-8")

    @staticmethod
    def load(path: Path) -> ServerRecord | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return ServerRecord(
                int(data["pgid"]),
                str(data["host"]),
                int(data["port"]),
                [str(x) for x in data["argv"]],
                str(data.get("log") or ""),
                int(data.get("started") or 0),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def running(self) -> bool:
        """Whether this server's group still lives: its leader the same process (its start
        time, which a renamed process keeps), or the leader gone and its group living on (a
        group's id is never reused while it lives)."""
        if not group_alive(self.pgid):
            return False
        now = start_time(self.pgid)
        return now is None or not self.started or now == self.started


def start_time(pid: int) -> int | None:
    """A process's start time in clock ticks after boot (``/proc/PID/stat``), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:  # after the command's closing bracket: state is field 3, starttime field 22
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


def leftovers(paths: Iterable[Path]) -> list[tuple[Path, ServerRecord]]:
    """The records of servers an earlier reportgen run left, read from their files
    (``RunDir.server_records()``; each is removed when its server stops)."""
    out = []
    for path in paths:
        record = ServerRecord.load(path)
        if record is not None:
            out.append((path, record))
    return out


def main(argv: list[str]) -> int:
    pgid, grace_s = int(argv[0]), float(argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C and hangup are the
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # parent's: it stops the servers itself
    got = b""
    with contextlib.suppress(OSError):
        while chunk := sys.stdin.buffer.read(64):
            got += chunk
    if got.startswith(DONE):
        return 0
    stop_group(pgid, grace_s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
