"""Watch what the host's CPUs do while a server is measured (standard library only, Linux).

    python3 scripts/gpu/host_watch.py OUT.jsonl [--interval 0.25]

Until SIGTERM or SIGINT, writes one JSON line per sample: the time, every CPU's busy and stolen
share since the last sample (from /proc/stat), every process that used CPU since then (pid,
process group, name, the CPU it last ran on, its CPU seconds in the interval, from
/proc/PID/stat), and a canary: how long a fixed piece of Python work took on this sampler's CPU
(the fastest of five), which grows when the CPU it ran on is shared or slowed. The first line
holds the CPU topology (which logical CPUs share a core).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def cpu_times() -> dict[str, list[int]]:
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu"):
            name, *fields = line.split()
            out[name] = [int(f) for f in fields[:8]]
    return out


def processes() -> dict[int, tuple[str, int, int, int]]:
    """pid -> (name, process group, last CPU, user + system ticks)."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        rest = raw[raw.rindex(")") + 2 :].split()
        # rest[0] is field 3 (state): pgrp is field 5, utime 14, stime 15, processor 39
        out[int(entry.name)] = (name, int(rest[2]), int(rest[36]), int(rest[11]) + int(rest[12]))
    return out


def canary() -> float:
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        total = 0
        for i in range(20000):
            total += i * i
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def topology() -> dict[str, str]:
    out = {}
    for cpu in sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*")):
        sib = cpu / "topology" / "thread_siblings_list"
        if sib.exists():
            out[cpu.name] = sib.read_text().strip()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--interval", type=float, default=0.25)
    args = ap.parse_args()
    stop = False

    def _stop(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    me = os.getpid()
    with open(args.out, "w") as f:
        head = {"topology": topology(), "cpus": os.cpu_count(), "tick": TICK, "pid": me}
        f.write(json.dumps(head) + "\n")
        before_cpu, before_proc = cpu_times(), processes()
        seen: set[int] = set()
        while not stop:
            time.sleep(args.interval)
            t = time.time()
            now_cpu, now_proc = cpu_times(), processes()
            cpus = {}
            for name, v in now_cpu.items():
                d = [a - b for a, b in zip(v, before_cpu.get(name, v), strict=True)]
                total = sum(d) or 1
                # user nice system idle iowait irq softirq steal
                cpus[name] = (round(1 - (d[3] + d[4] + d[7]) / total, 3), round(d[7] / total, 3))
            procs = []
            for pid, (name, pgrp, psr, ticks) in now_proc.items():
                was = before_proc.get(pid)
                used = ticks - (was[3] if was else ticks)
                if used > 0:
                    procs.append((pid, pgrp, name, psr, round(used / TICK, 3)))
            new = {}
            for pid, *_ in procs:
                if pid not in seen:
                    seen.add(pid)
                    try:
                        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
                        new[pid] = raw.replace(b"\0", b" ").decode(errors="replace")[:160]
                    except OSError:
                        pass
            c = canary()
            mine = now_proc.get(me)
            f.write(
                json.dumps(
                    {
                        "t": t,
                        "cpu": cpus,
                        "procs": procs,
                        "canary_ms": round(c, 4),
                        "canary_cpu": mine[2] if mine else None,
                        "new": new,
                    }
                )
                + "\n"
            )
            f.flush()
            before_cpu, before_proc = now_cpu, now_proc


if __name__ == "__main__":
    main()
