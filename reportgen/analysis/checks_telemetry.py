"""The GPU telemetry's checks of an experiment: whether telemetry was recorded for its measured
windows, whether the GPUs were throttled (a slowdown reason set in a window's samples), and
whether their SM clocks held steady while busy."""

from __future__ import annotations

from reportgen.results.model import Experiment
from reportgen.results.verdicts import Check

CLOCK_CV_BOUND = 0.05
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
