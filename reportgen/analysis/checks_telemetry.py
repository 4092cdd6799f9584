"""The telemetry's checks of an experiment: whether GPU telemetry was recorded for its measured
windows, whether the GPUs were throttled (a slowdown reason set in a window's samples),
whether their SM clocks held steady while busy, and whether the host's CPU ran at the speed it
ran at before (``host_speed``, from ``observe.host``'s canary)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from reportgen.results.levels import Level
from reportgen.results.model import Experiment
from reportgen.results.verdicts import Check

CLOCK_CV_BOUND = 0.05
# A window whose canary took this much longer or shorter than the run's typical one: the
# host's CPU ran at another speed (the H100 VM of 2026-12-06 moved 6% between two 10-s windows
# of one server start, and 1.0-1.8 ms between its 4-s bins, its throughput with it)
HOST_BOUND = 0.10
# A window with fewer canary samples (3 s at observe.host's 4 Hz) is not judged: one sample
# varies about 10% on an idle core, and a short level's own load weighs on it
HOST_SAMPLES = 12
# Clock events that are not a slowdown: an idle GPU, clocks set by the user, a sync boost.
NOT_SLOWDOWNS = ("gpu_idle", "applications_clocks_setting", "sync_boost")


def telemetry_checks(entry: Experiment) -> list[Check]:
    """Whether GPU telemetry was recorded, and what its windows say of throttling and
    clocks."""
    windows = [w for lv in entry.levels for w in lv.telemetry or []]
    error = entry.telemetry.error if entry.telemetry else None
    if not windows:
        return [
            Check(
                id="telemetry",
                title="GPU telemetry recorded",
                status="warn",
                evidence=error or "no samples fell inside the measured windows",
                hint="install nvidia-ml-py and run where NVML works",
            ),
            Check(
                id="gpu_throttling",
                title="GPUs not throttled",
                status="skip",
                evidence="no GPU telemetry",
            ),
            Check(
                id="clock_stability",
                title="Clocks stable",
                status="skip",
                evidence="no GPU telemetry",
            ),
        ]
    slow = max(w.slowdown_share or 0.0 for w in windows)
    reasons = sorted(
        {name for w in windows for name in w.clock_events if name not in NOT_SLOWDOWNS}
    )
    cvs = [w.sm_clock_cv_busy for w in windows if w.sm_clock_cv_busy]
    top = max(cvs) if cvs else 0.0
    return [
        Check(
            id="telemetry",
            title="GPU telemetry recorded",
            status="warn" if error else "pass",
            evidence=error or f"{len(windows)} GPU windows summarised",
        ),
        Check(
            id="gpu_throttling",
            title="GPUs not throttled",
            status="pass" if slow == 0 else "warn",
            evidence=f"at most {slow:.0%} of a window's samples slowed"
            + (f" ({', '.join(reasons)})" if reasons else ""),
            hint=""
            if slow == 0
            else "power or thermal caps shaped these numbers: say so when comparing",
        ),
        Check(
            id="clock_stability",
            title="Clocks stable",
            status="pass" if top <= CLOCK_CV_BOUND else "warn",
            evidence=f"largest SM clock coefficient of variation while busy: {top:.1%}",
            hint=""
            if top <= CLOCK_CV_BOUND
            else "clocks moved during windows: lock them or "
            "compare only runs with the same behaviour",
        ),
    ]


def _canary(lv: Level) -> float | None:
    h = lv.host
    if h is None or h.canary_ms is None or h.samples < HOST_SAMPLES:
        return None
    return h.canary_ms


def host_speed(entry: Experiment, earlier: Sequence[Experiment] = ()) -> list[Check]:
    """Whether the host's CPU ran each of this experiment's windows at the speed it ran the
    run's earlier experiments (on the same machine) at the same level, or else its own other
    windows at that level: the canary's median per window within HOST_BOUND of theirs. None
    when no window has host samples (a run recorded before they were taken)."""
    sampled = [lv for lv in entry.levels if lv.host is not None and lv.host.samples]
    if not sampled:
        return []
    title = "The host's CPU ran at one speed"
    mine = [(lv, c) for lv in sampled if (c := _canary(lv)) is not None]
    if not mine:
        return [
            Check(
                id="host_speed",
                title=title,
                status="skip",
                evidence=f"{len(sampled)} window(s), none with {HOST_SAMPLES} samples of the "
                "host's CPU: too short to judge its speed",
            )
        ]
    before: dict[object, list[float]] = {}
    for e in earlier:
        if e.ran_on != entry.ran_on:
            continue  # another machine's CPU is not this one's speed
        for lv in e.levels:
            if (c := _canary(lv)) is not None:
                before.setdefault(lv.point, []).append(c)
    offs = []
    for lv, c in mine:
        # the same level before it, else its own other windows there (never itself)
        others = before.get(lv.point) or [x for o, x in mine if o.point == lv.point and o is not lv]
        ref = statistics.median(others) if others else None
        if ref:
            offs.append((abs(c / ref - 1), c / ref - 1, lv, ref))
    if not offs:
        return [
            Check(
                id="host_speed",
                title=title,
                status="skip",
                evidence=f"{len(mine)} window(s), each the only one at its level: nothing to "
                "compare the host's speed with",
            )
        ]
    _, off, worst, ref = max(offs, key=lambda o: o[0])
    whose = "the experiments before it" if before.get(worst.point) else "its other windows"
    steal = [s for lv, _ in mine if lv.host and (s := lv.host.steal_max) is not None]
    lo, hi = min(c for _, c in mine), max(c for _, c in mine)
    evidence = (
        f"a fixed piece of Python work took {lo:.2f}-{hi:.2f} ms (median per window) in "
        f"{len(mine)} window(s); furthest from the same level's {ref:.2f} ms in {whose}: "
        f"{worst.point.label} repetition {worst.repetition + 1}, {off:+.1%}"
    )
    if steal:
        evidence += f"; the hypervisor took up to {max(steal):.1%} of the CPUs"
    ok = abs(off) <= HOST_BOUND
    return [
        Check(
            id="host_speed",
            title=title,
            status="pass" if ok else "warn",
            evidence=evidence,
            hint=""
            if ok
            else "the CPUs ran at another speed in these windows (a busy neighbour on the "
            "machine, a lower clock): an engine whose host side sets the pace (a scheduler or "
            "HTTP front end using a whole core) moves with them; compare on a quiet host, or "
            "measure the baseline again at the end",
        )
    ]
