"""The host's CPU beside a run: how fast it runs a fixed piece of work, and how much of it the
hypervisor took.

An engine whose host side sets the pace (SGLang's scheduler and HTTP front end, vLLM's API
server at high concurrency: single Python processes that stream every token) slows with the
CPU it runs on. A cloud VM does not show its CPU's speed (no cpufreq) and accounts only part
of what its neighbours take as steal, so a level can run 10-20% slower with nothing on the GPU
side to show why. The canary shows it: the time a fixed piece of Python work takes (the
fastest of ``TRIES``), which grows when the CPU is slowed or shared.

``HostSampler`` runs the sampler in a process of its own (``python -m
reportgen.observe.host``), never a thread of reportgen's: a pure-Python loop holds the GIL
for milliseconds and would delay the load generator's event loop. The process reads
``/proc/stat`` (busy and stolen shares of all CPUs; None elsewhere) and times the canary
``HZ`` times a second, writing one JSON line per sample with ``t`` on ``time.perf_counter``'s
clock (CLOCK_MONOTONIC on Linux, the clock the level windows are placed on); it ends when
asked, or when the process that started it is gone. ``window(rows, start, end)`` summarises
one level's measured window.

Each sample also holds the CPU every process used since the one before (``/proc/<pid>/stat``:
its name, process group and jiffies), and reportgen's own process group: so a window says
which processes were busy (an engine's API server, tokenizer or scheduler near one core, the
client), ``procs`` as a JSON text ``{pid: [name, group, jiffies]}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

HZ = 4.0
LOOPS = 20_000  # about 1-2 ms of CPython on a current server core
TRIES = 5  # the fastest of these is the sample: a preemption in one try does not count
STOP_S = 2.0
Times = tuple[int, int, int]  # all CPUs' jiffies: total, busy, stolen
Procs = dict[int, tuple[str, int, int]]  # pid -> (name, process group, user + system jiffies)
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PROCESSES_KEPT = 8  # the busiest processes a window names
PROCESS_MIN_CORES = 0.02  # and none below this


def canary_ms(loops: int = LOOPS, tries: int = TRIES) -> float:
    """The fastest of ``tries`` runs of a fixed piece of Python work, in ms."""
    best = float("inf")
    for _ in range(tries):
        t = time.perf_counter()
        total = 0
        for i in range(loops):
            total += i * i
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def cpu_times() -> Times | None:
    """All CPUs' jiffies from /proc/stat: (total, busy, stolen); None where it is missing."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(x) for x in fh.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    if len(fields) < 8:
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    return sum(fields), user + nice + system + irq + softirq, steal


def proc_times() -> Procs:
    """Every process's name, process group and CPU jiffies (user + system) from
    ``/proc/<pid>/stat``; empty where there is no /proc."""
    out: Procs = {}
    me = os.getpid()  # the sampler's own reads are not the host's work
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit() and int(d) != me]
    except OSError:
        return out
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError:
            continue  # gone since listed
        # "pid (name) state ppid pgrp ...": the name may hold spaces and parentheses
        head, _, rest = text.rpartition(")")
        fields = rest.split()
        if len(fields) < 13:
            continue
        try:
            out[pid] = (head.partition("(")[2], int(fields[2]), int(fields[11]) + int(fields[12]))
        except ValueError:
            continue
    return out


def sample(
    before: Times | None, cpus: int, procs: Procs | None = None
) -> tuple[dict[str, Any], Times | None]:
    """One sample: the canary, the CPUs' shares since ``before`` (a ``cpu_times()``) and,
    given ``procs`` (a ``proc_times()``), each process's jiffies since then (updated in
    place)."""
    row: dict[str, Any] = {"canary_ms": round(canary_ms(), 4)}
    now = cpu_times()
    row["t"] = time.perf_counter()
    if before and now and now[0] > before[0]:
        total = now[0] - before[0]
        row["busy_cores"] = round((now[1] - before[1]) / total * cpus, 3)
        row["steal_share"] = round((now[2] - before[2]) / total, 4)
    if procs is not None:
        fresh = proc_times()
        used = {
            str(pid): [name, group, jiffies - procs[pid][2]]
            for pid, (name, group, jiffies) in fresh.items()
            if pid in procs and jiffies > procs[pid][2]
        }
        procs.clear()
        procs.update(fresh)
        row["procs"] = json.dumps(used, separators=(",", ":"))
    return row, now


def serve(hz: float, parent: int) -> None:
    """Write a sample a line to stdout ``hz`` times a second until ``parent`` is gone."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is reportgen's to handle
    cpus = os.cpu_count() or 1
    before = cpu_times()
    procs = proc_times()
    try:
        client = os.getpgid(parent)  # reportgen's process group: the client's processes
    except OSError:
        client = None
    due = time.perf_counter()
    while os.getppid() == parent:
        row, before = sample(before, cpus, procs)
        row["client_group"] = client
        try:
            sys.stdout.write(json.dumps(row) + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):
            return
        due += 1.0 / hz
        time.sleep(max(0.0, due - time.perf_counter()))


class HostSampler:
    """The sampler's process, started by ``start()`` and stopped by ``stop()`` (its rows)."""

    def __init__(self, hz: float | None = None) -> None:
        self.hz = HZ if hz is None else hz
        self.rows: list[dict[str, Any]] = []
        self.error: str | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> HostSampler:
        argv = [sys.executable, "-m", "reportgen.observe.host", "--hz", str(self.hz)]
        try:
            self._proc = subprocess.Popen(
                [*argv, "--parent", str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                start_new_session=True,  # stopped by its process group, never by a Ctrl-C
            )
        except OSError as exc:
            self.error = f"no host samples: the sampler did not start: {exc}"
            return self
        self._reader = threading.Thread(target=self._read, name="host-sampler", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                self.rows.append(json.loads(line))
            except ValueError:
                continue

    def stop(self) -> list[dict[str, Any]]:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            except ProcessLookupError:
                pass
        elif proc is not None and proc.returncode and not self.rows:
            self.error = f"no host samples: the sampler exited with status {proc.returncode}"
        if self._reader is not None:
            self._reader.join(timeout=STOP_S)
        return self.rows


def window(rows: Sequence[dict[str, Any]], start: float, end: float) -> dict[str, Any] | None:
    """The samples with ``start <= t <= end`` summarised: how many, the canary's median and
    range (ms), the mean busy cores and the mean and largest stolen share; None when no sample
    fell inside."""
    inside = [r for r in rows if start <= r["t"] <= end]
    if not inside:
        return None
    canary = [float(r["canary_ms"]) for r in inside]
    busy = [float(r["busy_cores"]) for r in inside if r.get("busy_cores") is not None]
    steal = [float(r["steal_share"]) for r in inside if r.get("steal_share") is not None]
    out: dict[str, Any] = {
        "samples": len(inside),
        "canary_ms": statistics.median(canary),
        "canary_min_ms": min(canary),
        "canary_max_ms": max(canary),
        "busy_cores": statistics.fmean(busy) if busy else None,
        "steal_share": statistics.fmean(steal) if steal else None,
        "steal_max": max(steal) if steal else None,
    }
    processes = busiest(inside)
    if processes is not None:
        out["processes"] = processes
    return out


def busiest(inside: Sequence[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The processes busiest over samples (``PROCESSES_KEPT``, each at least
    ``PROCESS_MIN_CORES``): name, pid, process group, cores (CPU seconds a second of the
    samples' span) and whether it is the client's (reportgen's process group); None where
    the samples hold no process times (samples taken before they did)."""
    marked = [r for r in inside if isinstance(r.get("procs"), str)]
    if len(marked) < 2:
        return None
    span = marked[-1]["t"] - marked[0]["t"]
    if span <= 0:
        return None
    used: dict[int, list[Any]] = {}
    for r in marked[1:]:  # the first sample's times fell before the span
        for pid, (name, group, jiffies) in json.loads(r["procs"]).items():
            seen = used.setdefault(int(pid), [name, group, 0])
            seen[2] += jiffies
    client = marked[-1].get("client_group")
    out = [
        {
            "name": name,
            "pid": pid,
            "group": group,
            "cores": round(jiffies / TICK / span, 3),
            "client": client is not None and group == client,
        }
        for pid, (name, group, jiffies) in used.items()
        if jiffies / TICK / span >= PROCESS_MIN_CORES
    ]
    out.sort(key=lambda p: (-p["cores"], p["pid"]))
    return out[:PROCESSES_KEPT]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m reportgen.observe.host", description=__doc__)
    parser.add_argument("--hz", type=float, default=HZ)
    parser.add_argument("--parent", type=int, default=os.getppid())
    args = parser.parse_args(argv)
    serve(args.hz, args.parent)


if __name__ == "__main__":
    main()
