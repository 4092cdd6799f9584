"""Processes the benchmark owns: each in its own process group, its CPU time measured, and
always stopped by group (SIGINT, SIGTERM, then SIGKILL), on success, failure and Ctrl-C.

CPU of a client is measured two ways, both user+sys seconds of its whole process tree:
- `cpu_total_s`: `os.wait4` on the client's top process gives the rusage of it and every
  descendant it (or its descendants) waited for: the whole run, start-up and exit included.
- `cpu_window_s`: a sampler reads /proc every 50 ms for every process in the client's process
  group (utime+stime+cutime+cstime of the live ones), and the difference between two moments
  (interpolated) gives the CPU spent between them; used for the measured window only.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
_OWNED: list[subprocess.Popen[bytes]] = []  # every group we started, for the Ctrl-C sweep


def _groups_cpu_s(pgids: Sequence[int]) -> list[float]:
    """User+sys seconds of the live processes of each group, their reaped children included
    (one pass over /proc for all groups)."""
    totals = dict.fromkeys(pgids, 0)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        fields = raw[raw.rindex(b")") + 2 :].split()
        # fields[0] is field 3 (state); pgrp is field 5, utime..cstime are fields 14..17
        pgrp = int(fields[2])
        if pgrp in totals:
            totals[pgrp] += sum(int(x) for x in fields[11:15])
    return [totals[g] / TICK for g in pgids]


@dataclass
class CpuSampler:
    """Samples process groups' CPU seconds in a thread; `between(a, b)` for a window.

    The first group is the main one; others (the server) ride along in the same pass, so
    sampling costs one /proc scan per period (a few ms) whatever the number of groups."""

    pgids: list[int]
    period_s: float = 0.05
    times: list[float] = field(default_factory=list)  # time.time()
    cpu: list[list[float]] = field(default_factory=list)  # per sample, one value per group
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            before = time.time()
            values = _groups_cpu_s(self.pgids)
            self.times.append((before + time.time()) / 2)  # a scan takes a few ms
            self.cpu.append(values)
            self._stop.wait(self.period_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def at(self, t: float, group: int = 0) -> float | None:
        """CPU seconds of group number `group` at wall time `t`, linearly interpolated;
        None outside the samples."""
        i = bisect.bisect_left(self.times, t)
        if i == 0 or i >= len(self.times):
            return None
        t0, t1 = self.times[i - 1], self.times[i]
        c0, c1 = self.cpu[i - 1][group], self.cpu[i][group]
        return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c1

    def between(self, start: float, end: float, group: int = 0) -> float | None:
        a, b = self.at(start, group), self.at(end, group)
        return None if a is None or b is None else max(b - a, 0.0)


@dataclass
class Finished:
    returncode: int
    cpu_total_s: float  # user+sys of the process and every descendant reaped inside its tree
    wall_s: float
    sampler: CpuSampler
    leftovers: int  # processes still in the group after the top one exited (killed)


# CPU sets for `--pin`: servers on one set, clients on the other, so they stop competing.
# Empty: no pinning (the default; every process may use every core).
CPUS: dict[str, set[int]] = {"server": set(), "client": set()}


def start(
    cmd: Sequence[str],
    log: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    role: str = "server",
) -> subprocess.Popen[bytes]:
    """Start `cmd` in a new session (its own process group), output to `log`; pinned to the
    role's CPUs when `--pin` set them (children inherit the affinity)."""
    cpus = CPUS.get(role) or None
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            ["taskset", "-c", ",".join(map(str, sorted(cpus))), *cmd] if cpus else list(cmd),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
            cwd=cwd,
        )
    _OWNED.append(proc)
    return proc


def run_measured(
    cmd: Sequence[str],
    log: Path,
    timeout_s: float,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    also_sample: Sequence[int] = (),
) -> Finished:
    """Run `cmd` to completion (or `timeout_s`), measuring its process tree's CPU (and that
    of the groups `also_sample`, as groups 1, 2, ... of the returned sampler)."""
    t0 = time.time()
    proc = start(cmd, log, env, cwd, role="client")
    sampler = CpuSampler([proc.pid, *also_sample])
    sampler.start()
    deadline = time.monotonic() + timeout_s
    status, usage = 0, None
    signals = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]  # sent 3 s apart past the limit
    try:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            if time.monotonic() > deadline and signals:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signals.pop(0))
                deadline = time.monotonic() + 3.0
            time.sleep(0.02)
    finally:
        sampler.stop()
    proc.returncode = os.waitstatus_to_exitcode(status)
    leftovers = _group_members(proc.pid)
    if leftovers:
        stop_group(proc, grace_s=2.0)
    _forget(proc)
    cpu = usage.ru_utime + usage.ru_stime if usage is not None else float("nan")
    return Finished(proc.returncode, cpu, time.time() - t0, sampler, len(leftovers))


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    raw = f.read()
            except OSError:
                continue
            fields = raw[raw.rindex(b")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] != b"Z":
                members.append(int(entry.name))
    return members


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGINT, then SIGTERM, then SIGKILL to the process group; wait until it is gone."""
    pgid = proc.pid  # start_new_session: the group id is the leader's pid
    for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGTERM, grace_s), (signal.SIGKILL, 5)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        end = time.monotonic() + wait_s
        while time.monotonic() < end:
            with contextlib.suppress(ChildProcessError):
                proc.poll()
            if not _group_members(pgid):
                break
            time.sleep(0.05)
        else:
            continue
        break
    with contextlib.suppress(ChildProcessError, subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    _forget(proc)


def _forget(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ValueError):
        _OWNED.remove(proc)


def stop_all() -> None:
    """Stop every group still owned (the Ctrl-C and error path)."""
    for proc in list(_OWNED):
        stop_group(proc, grace_s=2.0)
