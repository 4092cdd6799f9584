"""Assumption checks on hand-made experiment entries: each status from numbers small enough
to check by eye, and the checks that turn a verdict into "failed"."""

from __future__ import annotations

from typing import Any

from reportgen.analysis.checks import invalidated, run_checks


def level(c: int, requests: int = 100, errors: int = 0, short: int = 0, **tele: Any) -> dict:
    window = {"gpu": 0, "samples": 20, "slowdown_share": 0.0, "clock_events": {},
              "sm_clock_cv_busy": 0.01} | tele  # fmt: skip
    return {
        "concurrency": c,
        "summary": {"requests": requests, "errors": errors, "short_outputs": short},
        "telemetry": [window],
    }


def entry(levels: list[dict], cv: float = 0.01, **extra: Any) -> dict:
    return {
        "status": "ok",
        "levels": levels,
        "by_level": [
            {"concurrency": lv["concurrency"], "client_limited": 0,
             "output_tok_s": {"mean": 100.0, "sd": 100.0 * cv, "n": 3}}
            for lv in levels
        ],
        "telemetry": {"error": None, "rows": 100},
        "gpu_counters": {"new_errors": []},
        **extra,
    }  # fmt: skip


ENV = {"gpus": {"available": True, "devices": [{"index": 0, "processes": []}]}}


def by_id(checks: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    return {c["id"]: c for c in checks}


def test_a_clean_experiment_passes_everything() -> None:
    got = by_id(run_checks(entry([level(1), level(8)]), ENV))
    assert {k: c["status"] for k, c in got.items()} == {
        "request_errors": "pass", "output_lengths": "pass", "repetition_spread": "pass",
        "client_headroom": "pass", "telemetry": "pass", "gpu_throttling": "pass",
        "clock_stability": "pass", "gpu_errors": "pass", "gpus_free_at_start": "pass",
        "host_matches": "skip",
    }  # fmt: skip
    assert got["request_errors"]["evidence"] == "0 of 200 requests failed (0.0%)"


def test_errors_short_outputs_and_gpu_errors_invalidate() -> None:
    e = entry([level(1, errors=3), level(8, errors=9, short=4)])
    e["gpu_counters"]["new_errors"] = ["GPU 0: 2 new uncorrected volatile ECC error(s)"]
    got = by_id(run_checks(e, ENV))
    assert got["request_errors"]["status"] == "fail"  # 12 of 200 = 6%
    assert got["request_errors"]["evidence"] == "12 of 200 requests failed (6.0%)"
    assert got["output_lengths"]["status"] == "warn"  # 4 of 200 = 2%
    assert got["gpu_errors"]["status"] == "fail" and "ECC" in got["gpu_errors"]["evidence"]
    assert invalidated(list(got.values())) == ["Requests succeeded", "No new GPU errors"]


def test_noise_throttling_clocks_and_a_busy_gpu_warn() -> None:
    levels = [level(1), level(8, slowdown_share=0.25, clock_events={"sw_power_cap": 0.25,
              "gpu_idle": 0.1}, sm_clock_cv_busy=0.12)]  # fmt: skip
    env = {"gpus": {"available": True, "devices": [{"index": 0, "processes": [{"pid": 42}]}]}}
    got = by_id(run_checks(entry(levels, cv=0.08), env, log_patterns=["cuda_graph_captured"]))
    assert got["repetition_spread"]["status"] == "warn"
    assert "8.0% at C=1" in got["repetition_spread"]["evidence"]
    assert got["gpu_throttling"]["status"] == "warn"
    assert (
        got["gpu_throttling"]["evidence"]
        == "at most 25% of a window's samples slowed (sw_power_cap)"
    )
    assert got["clock_stability"]["status"] == "warn"
    assert got["gpus_free_at_start"]["evidence"] == "GPU 0: PID 42"
    assert got["cuda_graphs"]["status"] == "warn"  # the engine prints it; this log did not
    assert invalidated(list(got.values())) == []


def test_without_telemetry_or_repetitions_the_checks_say_so() -> None:
    lv = level(1)
    lv["telemetry"] = []
    e = entry([lv])
    e["by_level"][0]["output_tok_s"]["n"] = 1
    e["telemetry"] = {"error": "no GPU telemetry: NVML did not start"}
    got = by_id(run_checks(e, {"gpus": {"available": False}}))
    assert got["telemetry"] == {
        "id": "telemetry", "title": "GPU telemetry recorded", "status": "warn",
        "evidence": "no GPU telemetry: NVML did not start",
        "hint": "install nvidia-ml-py and run where NVML works",
    }  # fmt: skip
    assert got["gpu_throttling"]["status"] == got["clock_stability"]["status"] == "skip"
    assert got["repetition_spread"]["status"] == "skip" and "gpus_free_at_start" not in got


def test_host_expectations_are_recorded_as_a_check() -> None:
    env = {"gpus": {"available": True, "devices": [
        {"index": i, "name": "NVIDIA H200", "compute_capability": "9.0", "processes": []}
        for i in range(2)]}}  # fmt: skip
    ok = by_id(run_checks(entry([level(1)]), env, host_expect={"gpu_count": 2, "gpu_name": None}))
    assert ok["host_matches"]["status"] == "pass"
    assert ok["host_matches"]["evidence"] == "matched gpu_count = 2"
    bad = by_id(run_checks(entry([level(1)]), env, host_expect={"compute_capability": "12.0"}))
    assert bad["host_matches"]["status"] == "fail"
    assert bad["host_matches"]["evidence"] == "expected compute capability 12.0, found 9.0"
    assert invalidated(list(bad.values())) == ["Host as the campaign expects"]


def test_campaign_log_checks() -> None:
    e = entry([level(1)])
    e["campaign_checks"] = [
        {"log_contains": "ready", "log_absent": None, "description": "server ready"},
        {"log_contains": None, "log_absent": "all-?reduce is disabled", "description": ""},
    ]
    found = {"campaign:0": "x ready", "campaign:1": "Custom allreduce is disabled"}
    e["log_evidence"] = {"found": found}
    got = by_id(run_checks(e, ENV))
    assert got["campaign_0"] == {"id": "campaign_0", "title": "server ready", "status": "pass",
                                 "evidence": "x ready", "hint": ""}  # fmt: skip
    assert got["campaign_1"]["status"] == "fail"
    assert got["campaign_1"]["title"] == "log never shows /all-?reduce is disabled/"
    assert invalidated(list(got.values())) == []  # the campaign's checks inform, not veto
