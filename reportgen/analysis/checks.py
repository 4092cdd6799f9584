"""Assumption checks: what must hold for an experiment's numbers to mean what they seem to.

Each check reads what a run already recorded (level summaries, telemetry windows, error
counters, the engine's log evidence) and gives ``pass``, ``warn``, ``fail`` or ``skip`` with
its evidence (the numbers it looked at) and a hint (what to do). Pure functions of the
experiment's results entry and the run's environment; ``INVALIDATING`` names the checks whose
failure makes the experiment's verdict "failed", whatever its numbers say.

- ``request_errors``: failed requests, at most 1% (pass), 5% (warn), more (fail).
- ``output_lengths``: requests that returned fewer tokens than asked: none (pass), up to 5%
  (warn), more (fail: the engine did not do the work that was measured).
- ``repetition_spread``: coefficient of variation of output tok/s across repetitions at each
  level, at most ``cv_bound`` (warn beyond: the ratio intervals will be wide).
- ``client_headroom``: no level ran above 80% of the client's measured ceiling (warn).
- ``gpu_throttling``: share of telemetry samples with a slowdown reason (power or thermal
  caps, hardware slowdown) during measured windows: none (pass), otherwise warn with the
  reasons.
- ``clock_stability``: SM clock coefficient of variation while busy at most 5% (warn beyond).
- ``gpu_errors``: no new ECC, remapped-row, PCIe-replay or XID errors (fail otherwise).
- ``gpus_free_at_start``: no other process on the GPUs when the run began (warn).
- ``cuda_graphs``: the engine's log says CUDA graph capture finished (engines that print it).
- ``telemetry``: GPU telemetry was recorded for every window (warn when unavailable).
- ``host_matches``: the host matched the campaign's ``host.expect`` (a run on a host that does
  not is refused before it starts; this records that it was checked, and against what).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

INVALIDATING = ("request_errors", "output_lengths", "gpu_errors", "host_matches")
CV_BOUND = 0.05
CLOCK_CV_BOUND = 0.05


def _check(cid: str, title: str, status: str, evidence: str, hint: str = "") -> dict[str, str]:
    return {"id": cid, "title": title, "status": status, "evidence": evidence, "hint": hint}


def _share(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def run_checks(
    entry: Mapping[str, Any],
    environment: Mapping[str, Any] | None = None,
    *,
    log_patterns: Sequence[str] = (),
    cv_bound: float = CV_BOUND,
    host_expect: Mapping[str, Any] | None = None,
) -> list[dict[str, str]]:
    """Every check for one experiment (see the module docstring). ``log_patterns``: the
    engine's pattern names, so a check of a line the engine never prints is skipped."""
    levels = list(entry.get("levels") or [])
    by_level = list(entry.get("by_level") or [])
    out = [] if not levels else _measurement_checks(entry, levels, by_level, cv_bound)
    out += _gpu_state_checks(entry, environment)
    out.append(_host_check(environment, host_expect))
    out += _campaign_checks(entry)
    found = (entry.get("log_evidence") or {}).get("found") or {}
    if "cuda_graph_captured" in log_patterns and entry.get("status") == "ok":
        line = found.get("cuda_graph_captured")
        out.append(
            _check(
                "cuda_graphs",
                "CUDA graph capture finished before measuring",
                "pass" if line else "warn",
                line or "no capture line in the server log",
                "" if line else "graphs may have been disabled or captured during the run",
            )
        )
    return out


def _measurement_checks(
    entry: Mapping[str, Any],
    levels: list[Mapping[str, Any]],
    by_level: list[Mapping[str, Any]],
    cv_bound: float,
) -> list[dict[str, str]]:
    """The checks that need measured levels."""
    out = []

    requests = sum(int(lv["summary"].get("requests", 0)) for lv in levels)
    errors = sum(int(lv["summary"].get("errors", 0)) for lv in levels)
    share = _share(errors, requests)
    status = "pass" if share <= 0.01 else "warn" if share <= 0.05 else "fail"
    out.append(
        _check(
            "request_errors",
            "Requests succeeded",
            status,
            f"{errors} of {requests} requests failed ({share:.1%})",
            "" if status == "pass" else "read the error kinds per level and the server log",
        )
    )

    short = sum(int(lv["summary"].get("short_outputs", 0)) for lv in levels)
    share = _share(short, requests)
    status = "pass" if short == 0 else "warn" if share <= 0.05 else "fail"
    out.append(
        _check(
            "output_lengths",
            "Outputs as long as requested",
            status,
            f"{short} of {requests} requests returned fewer tokens than asked ({share:.1%})",
            ""
            if status == "pass"
            else "the engine stopped early: check that it honours ignore_eos / min_tokens",
        )
    )

    worst: tuple[float, int] | None = None
    for agg in by_level:
        tok = agg.get("output_tok_s") or {}
        mean, sd = tok.get("mean"), tok.get("sd")
        if mean and sd is not None and int(tok.get("n") or 0) > 1:
            cv = sd / mean
            if worst is None or cv > worst[0]:
                worst = (cv, int(agg.get("concurrency", 0)))
    if worst is None:
        out.append(
            _check(
                "repetition_spread",
                "Repetitions agree",
                "skip",
                "fewer than two repetitions per level",
                "set workload.repetitions to 3 or more",
            )
        )
    else:
        ok = worst[0] <= cv_bound
        out.append(
            _check(
                "repetition_spread",
                "Repetitions agree",
                "pass" if ok else "warn",
                f"largest coefficient of variation of output tok/s: {worst[0]:.1%} at "
                f"C={worst[1]} (bound {cv_bound:.0%})",
                "" if ok else "more repetitions, or find what varies (clocks, other load)",
            )
        )

    limited = sum(int(agg.get("client_limited") or 0) for agg in by_level)
    out.append(
        _check(
            "client_headroom",
            "Client not saturated",
            "pass" if limited == 0 else "warn",
            f"{limited} level run(s) above 80% of the client's measured ceiling",
            "" if limited == 0 else "more workload.workers, or a bigger client host",
        )
    )

    windows = [w for lv in levels for w in lv.get("telemetry") or []]
    tele = entry.get("telemetry") or {}
    if not windows:
        reason = tele.get("error") or "no samples fell inside the measured windows"
        out.append(_check("telemetry", "GPU telemetry recorded", "warn", reason,
                          "install nvidia-ml-py and run where NVML works"))  # fmt: skip
        for cid, title in (("gpu_throttling", "GPUs not throttled"),
                           ("clock_stability", "Clocks stable")):  # fmt: skip
            out.append(_check(cid, title, "skip", "no GPU telemetry"))
    else:
        out.append(
            _check(
                "telemetry",
                "GPU telemetry recorded",
                "warn" if tele.get("error") else "pass",
                tele.get("error") or f"{len(windows)} GPU windows summarised",
            )
        )
        slow = max(float(w.get("slowdown_share") or 0) for w in windows)
        reasons = sorted(
            {
                name
                for w in windows
                for name in (w.get("clock_events") or {})
                if name not in ("gpu_idle", "applications_clocks_setting", "sync_boost")
            }
        )
        out.append(
            _check(
                "gpu_throttling",
                "GPUs not throttled",
                "pass" if slow == 0 else "warn",
                f"at most {slow:.0%} of a window's samples slowed"
                + (f" ({', '.join(reasons)})" if reasons else ""),
                ""
                if slow == 0
                else "power or thermal caps shaped these numbers: say so when comparing",
            )
        )
        cvs = [float(w["sm_clock_cv_busy"]) for w in windows if w.get("sm_clock_cv_busy")]
        top = max(cvs) if cvs else 0.0
        out.append(
            _check(
                "clock_stability",
                "Clocks stable",
                "pass" if top <= CLOCK_CV_BOUND else "warn",
                f"largest SM clock coefficient of variation while busy: {top:.1%}",
                ""
                if top <= CLOCK_CV_BOUND
                else "clocks moved during windows: lock them or "
                "compare only runs with the same behaviour",
            )
        )

    return out


def _gpu_state_checks(
    entry: Mapping[str, Any], environment: Mapping[str, Any] | None
) -> list[dict[str, str]]:
    """Error counters around the experiment and the GPUs' state when the run began."""
    out = []
    counters = entry.get("gpu_counters") or {}
    if "new_errors" in counters:
        new = list(counters["new_errors"])
        out.append(
            _check(
                "gpu_errors",
                "No new GPU errors",
                "pass" if not new else "fail",
                "; ".join(new) or "ECC, remapped rows, PCIe replays, XID: no change",
                "" if not new else "check the GPU (nvidia-smi -q) before trusting these numbers",
            )
        )
    else:
        out.append(_check("gpu_errors", "No new GPU errors", "skip",
                          str(counters.get("error") or "no GPU error counters")))  # fmt: skip

    gpus = (environment or {}).get("gpus") or {}
    busy = [
        f"GPU {d.get('index')}: PID {p.get('pid')}"
        for d in gpus.get("devices") or []
        if isinstance(d.get("processes"), list)
        for p in d["processes"]
    ]
    if gpus.get("available"):
        out.append(
            _check(
                "gpus_free_at_start",
                "GPUs free when the run began",
                "pass" if not busy else "warn",
                "; ".join(busy) or "no other process on any GPU",
                "" if not busy else "another process shared the GPUs: stop it and rerun",
            )
        )

    return out


def _host_check(
    environment: Mapping[str, Any] | None, expect: Mapping[str, Any] | None
) -> dict[str, str]:
    from reportgen.fingerprint import host_mismatches

    wanted = {k: v for k, v in (expect or {}).items() if v is not None}
    if not wanted:
        return _check("host_matches", "Host as the campaign expects", "skip",
                      "the campaign sets no host.expect", "set host.expect (GPU count, "
                      "compute capability, name) so a wrong host is refused")  # fmt: skip
    problems = host_mismatches(dict(wanted), dict((environment or {}).get("gpus") or {}))
    said = ", ".join(f"{k} = {v}" for k, v in sorted(wanted.items()))
    return _check(
        "host_matches",
        "Host as the campaign expects",
        "fail" if problems else "pass",
        "; ".join(problems) or f"matched {said}",
    )


def _campaign_checks(entry: Mapping[str, Any]) -> list[dict[str, str]]:
    """The campaign's own log checks: a line that must appear, or must not (fail when not)."""
    found = (entry.get("log_evidence") or {}).get("found") or {}
    out = []
    for i, c in enumerate(entry.get("campaign_checks") or []):
        line = found.get(f"campaign:{i}")
        must = c.get("log_contains")
        pattern = must or c.get("log_absent")
        title = c.get("description") or (
            f"log shows /{pattern}/" if must else f"log never shows /{pattern}/"
        )
        if must:
            status, evidence = ("pass", line) if line else ("fail", "no log line matched")
        else:
            status, evidence = ("fail", line) if line else ("pass", "no log line matched")
        out.append(_check(f"campaign_{i}", str(title), status, str(evidence)))
    return out


def invalidated(checks: Sequence[Mapping[str, str]]) -> list[str]:
    """The failed checks that make an experiment's verdict "failed"."""
    return [c["title"] for c in checks if c["status"] == "fail" and c["id"] in INVALIDATING]
