"""The host's CPU beside a run (``observe.host``): the sampler is a process of its own that
stops with its group or when reportgen is gone, and the check says when the host's CPU ran a
window at another speed than the same level elsewhere in the run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from reportgen.analysis.checks_telemetry import host_speed
from reportgen.observe import host
from reportgen.results.model import Experiment
from tests.conftest import ROOT


def _gone(pid: int) -> bool:
    """The process has ended (or is a zombie waiting for its new parent to reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"
    except (OSError, IndexError):
        return True


def test_the_sampler_samples_in_a_process_of_its_own_and_stops_with_it() -> None:
    before = time.perf_counter()
    sampler = host.HostSampler(hz=10).start()
    assert sampler._proc is not None and sampler._proc.pid != os.getpid()
    time.sleep(1.5)
    rows = sampler.stop()
    after = time.perf_counter()
    assert sampler._proc.poll() is not None and _gone(sampler._proc.pid)
    assert len(rows) >= 5, rows
    ts = [r["t"] for r in rows]
    assert ts == sorted(ts) and before < ts[0] and ts[-1] < after  # on this process's clock
    assert all(r["canary_ms"] > 0 for r in rows)
    later = rows[1:]  # the first has no earlier /proc/stat reading to count from
    assert all(0 <= r["steal_share"] <= 1 for r in later)
    assert all(0 <= r["busy_cores"] <= (os.cpu_count() or 1) for r in later)
    summary = host.window(rows, ts[1], ts[-1])
    assert summary is not None and summary["samples"] == len(rows) - 1
    assert summary["canary_min_ms"] <= summary["canary_ms"] <= summary["canary_max_ms"]
    assert host.window(rows, after + 1, after + 2) is None


def test_the_sampler_ends_when_reportgen_dies_without_stopping_it() -> None:
    """reportgen killed (SIGKILL, no clean-up) leaves no sampler behind: it sees its parent
    gone within a sample's period."""
    code = textwrap.dedent(
        """
        import os, time
        from reportgen.observe.host import HostSampler
        s = HostSampler(hz=10).start()
        print(s._proc.pid, flush=True)
        time.sleep(0.5)
        os._exit(0)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    pid = int(out.stdout.split()[0])
    deadline = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)


def _experiment(eid: str, canaries: list[tuple[int, float]], samples: int = 40) -> Experiment:
    levels: list[dict[str, Any]] = []
    for rep, (c, ms) in enumerate(canaries):
        w = {"samples": samples, "canary_ms": ms, "steal_share": 0.001, "steal_max": 0.02}
        levels.append({"concurrency": c, "repetition": rep, "host": w})
    return Experiment.model_validate({"id": eid, "status": "ok", "levels": levels})


def test_a_window_the_host_ran_slower_warns_naming_it() -> None:
    """The same level 20% slower on the host than the baseline's: a warning naming the level
    and repetition; the other level (C=1 runs lighter on the host than C=64) is judged against
    its own kind, so 1.2 ms there against 1.5 ms at C=64 is no warning."""
    base = _experiment("baseline", [(1, 1.20), (1, 1.22), (64, 1.50), (64, 1.52)])
    same = _experiment("b", [(1, 1.21), (64, 1.49), (64, 1.55)])
    slow = _experiment("c", [(1, 1.21), (64, 1.50), (64, 1.82)])
    (ok,) = host_speed(same, [base])
    assert ok.status == "pass", ok
    (warn,) = host_speed(slow, [base, same])
    assert warn.status == "warn"
    assert "C=64 repetition 3, +20.5%" in warn.evidence, warn.evidence
    assert "the experiments before it" in warn.evidence and "2.0% of the CPUs" in warn.evidence
    assert "quiet host" in warn.hint
    # the first experiment: each window against its others at the level (never itself, so
    # two repetitions 22% apart warn, where a median of both would halve the gap)
    (first,) = host_speed(_experiment("baseline", [(64, 1.5), (64, 1.5), (64, 1.9)]))
    assert first.status == "warn" and "its other windows" in first.evidence
    (two,) = host_speed(_experiment("bench", [(64, 1.00), (64, 1.22)]))
    assert two.status == "warn" and "+22.0%" in two.evidence, two.evidence
    (one,) = host_speed(_experiment("bench", [(64, 1.00)]))
    assert one.status == "skip" and "the only one at its level" in one.evidence


def test_short_windows_are_not_judged_and_old_runs_have_no_check() -> None:
    short = _experiment("a", [(1, 1.0), (1, 2.0)], samples=4)
    (skip,) = host_speed(short)
    assert skip.status == "skip" and "too short" in skip.evidence
    old = Experiment.model_validate({"id": "a", "status": "ok", "levels": [{"concurrency": 1}]})
    assert host_speed(old) == []
