"""Assumption checks on hand-made experiment entries: each status from numbers small enough
to check by eye, and the checks that turn a verdict into "failed"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reportgen.analysis import checks
from reportgen.load.records import RequestRecord
from reportgen.observe.environment import Environment
from reportgen.results.model import Experiment
from reportgen.results.verdicts import Check
from tests.conftest import ROOT


def run_checks(
    e: dict[str, Any],
    env: dict[str, Any] | None = None,
    *,
    rows: Sequence[dict[str, Any]] | None = None,
    baseline: dict[str, Any] | None = None,
    **kw: Any,
) -> list[Check]:
    """``checks.run_checks`` on the typed experiment, rows and baseline of hand-made dicts."""
    return checks.run_checks(
        Experiment.model_validate({"id": "e"} | e),
        None if env is None else Environment.of(env),
        rows=None if rows is None else [RequestRecord(index=i, **r) for i, r in enumerate(rows)],
        baseline=None if baseline is None else Experiment.model_validate({"id": "e"} | baseline),
        **kw,
    )


def invalidated(got: Sequence[dict[str, Any]]) -> list[str]:
    return checks.invalidated([Check.model_validate(c) for c in got])


def level(c: int, requests: int = 100, errors: int = 0, short: int = 0, **tele: Any) -> dict:
    window = {"gpu": 0, "samples": 20, "slowdown_share": 0.0, "clock_events": {},
              "sm_clock_cv_busy": 0.01} | tele  # fmt: skip
    return {
        "concurrency": c,
        "summary": {
            "requests": requests,
            "ok": requests - errors,
            "errors": errors,
            "short_outputs": short,
        },
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


def by_id(got: list[Check]) -> dict[str, dict[str, Any]]:
    return {c.id: c.model_dump(exclude_none=True) for c in got}


def test_a_clean_experiment_passes_everything() -> None:
    got = by_id(run_checks(entry([level(1), level(8)]), ENV))
    assert {k: c["status"] for k, c in got.items()} == {
        "request_errors": "pass", "output_lengths": "pass", "repetition_spread": "pass",
        "client_headroom": "pass", "telemetry": "pass", "gpu_throttling": "pass",
        "clock_stability": "pass", "gpu_errors": "pass", "gpus_free_at_start": "pass",
        "host_matches": "skip", "steady_state": "skip", "request_stalls": "skip",
        "token_agreement": "skip",
        "prefix_cache": "skip", "server_stable": "pass", "outputs_sane": "skip",
        "percentile_samples": "pass", "achieved_load": "skip", "warmed_up": "skip",
        "engine_events": "pass",
    }  # fmt: skip
    assert got["request_errors"]["evidence"] == "0 of 200 requests failed (0.0%)"


def test_a_level_below_its_nominal_load_is_flagged() -> None:
    # 16 clients averaging 12.1 in flight; 8 req/s offered, 7.9 achieved (within 90%)
    low = level(16) | {"stagger": {"step_s": 0.01}}
    low["summary"] |= {"achieved_concurrency": 12.1}
    fine = level(4) | {"stagger": {"step_s": 0.01}}
    fine["summary"] |= {"achieved_concurrency": 3.9}
    rated = level(0) | {"rate": 8.0}
    rated["summary"] |= {"req_s": 7.9, "achieved_concurrency": 3.0}
    got = by_id(run_checks(entry([low, fine, rated]), ENV))["achieved_load"]
    assert got["status"] == "warn"
    assert got["evidence"] == (
        "1 of 3 level run(s) below 90%: C=16 repetition 1: 12.1 of 16 in flight"
    )
    slow = level(0) | {"rate": 8.0}
    slow["summary"] |= {"req_s": 6.0}
    got = by_id(run_checks(entry([slow]), ENV))["achieved_load"]
    assert got["status"] == "warn" and "6.00 of 8 req/s offered" in got["evidence"]


def test_an_open_loop_is_judged_by_what_its_client_sent_not_by_its_completions() -> None:
    # 256 requests at 32 req/s with 2-s answers: 26 completions a second over the level and
    # its drain, every request sent on time (an H100 rate search flagged 6 of 8 probes so)
    on_time = level(0) | {"rate": 32.0}
    on_time["summary"] |= {"req_s": 26.4, "schedule_kept": 0.999}
    # a concurrency cap held requests back: 256 due over 8 s went out over 10.7 s
    held = level(0) | {"rate": 32.0, "repetition": 1}
    held["summary"] |= {"req_s": 23.0, "schedule_kept": 0.75}
    got = by_id(run_checks(entry([on_time, held]), ENV))["achieved_load"]
    assert got["status"] == "warn"
    assert got["evidence"] == (
        "1 of 2 level run(s) below 90%: R=32/s repetition 2: 24.00 of 32 req/s sent"
    )
    assert "concurrency cap" in got["hint"]


def test_an_engine_event_left_in_a_window_warns_and_one_measured_again_passes() -> None:
    jit = {
        "kind": "jit",
        "line": "WARNING Triton kernel JIT compilation during inference",
        "at_s": 2.5,
    }
    redone = level(8) | {"remeasured": [jit]}
    got = by_id(run_checks(entry([level(1), redone]), ENV))["engine_events"]
    assert got["status"] == "pass"
    assert (
        got["evidence"] == "2 level run(s) free of engine events; 1 measured again after one (jit)"
    )
    left = level(8) | {"events": [jit], "repetition": 1}
    got = by_id(run_checks(entry([level(1), left]), ENV))["engine_events"]
    assert got["status"] == "warn"
    assert "C=8 repetition 2, 2.5 s in: WARNING Triton kernel JIT" in got["evidence"]


def test_a_level_warm_up_that_never_became_steady_warns() -> None:
    settled = [
        {"concurrency": 1, "reason": "steady", "duration_s": 3.0},
        {"concurrency": 64, "reason": "max_s", "duration_s": 120.0, "spread": 0.081},
    ]
    sessions = [{"index": 0, "config": "e", "log_file": "logs/e.server.log", "settled": settled}]
    got = by_id(run_checks(entry([level(1), level(64)], sessions=sessions), ENV))["warmed_up"]
    assert got["status"] == "warn"
    assert got["evidence"] == (
        "1 of 2 level warm-up(s) never steady: C=64: max_s, 120 s, last windows 8.1% apart"
    )
    assert "warmup.max_s" in got["hint"]


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
    assert got["campaign_0"] == {
        "id": "campaign_0", "title": "server ready", "status": "pass", "evidence": "x ready",
        "hint": "", "invalidates": False}  # fmt: skip
    assert got["campaign_1"]["status"] == "fail"
    assert got["campaign_1"]["title"] == "log never shows /all-?reduce is disabled/"
    assert invalidated(list(got.values())) == []  # the campaign's checks inform, not veto


def bound(**kw: Any) -> dict[str, Any]:
    return {"metric": None, "stat": "p50", "max": None, "min": None, "concurrency": None,
            "invalidates": False, "description": "", "log_contains": None,
            "log_absent": None} | kw  # fmt: skip


def test_campaign_metric_bounds_judge_the_mean_of_each_level() -> None:
    lv = [level(1), level(1), level(8)]
    for x, ttft99, tok in zip(lv, (400.0, 600.0, 1500.0), (90.0, 110.0, 700.0), strict=True):
        x["summary"] |= {"ttft_ms": {"p99": ttft99}, "output_tok_s": tok}
    e = entry(lv)
    e["campaign_checks"] = [
        bound(metric="ttft_ms", stat="p99", max=1000),  # C=1: mean 500; C=8: 1500
        bound(metric="ttft_ms", stat="p99", max=1000, concurrency=[1]),
        bound(metric="output_tok_s", min=95, invalidates=True, description="fast enough"),
    ]
    got = by_id(run_checks(e, ENV))
    assert got["campaign_0"]["title"] == "ttft_ms p99 <= 1000"
    assert got["campaign_0"]["status"] == "fail"
    assert got["campaign_0"]["evidence"] == "outside the bound at C=8: 1500"
    assert got["campaign_1"]["status"] == "pass"
    assert got["campaign_1"]["evidence"] == "C=1: 500"
    assert got["campaign_2"]["status"] == "pass"  # C=1 mean 100, C=8 700
    e["campaign_checks"][2]["min"] = 150
    got = by_id(run_checks(e, ENV))
    assert got["campaign_2"]["evidence"] == "outside the bound at C=1: 100"
    assert invalidated(list(got.values())) == ["fast enough"]  # only the one that says so


def rec(c: int, rep: int, start: float, tpot_s: float, n: int = 11) -> dict[str, Any]:
    """A request of n tokens: first token 0.1 s after start, then one every tpot_s."""
    return {"concurrency": c, "repetition": rep, "status": "ok", "start": start,
            "first_token": start + 0.1, "end": start + 0.1 + tpot_s * (n - 1),
            "output_tokens": n}  # fmt: skip


def test_steady_state_compares_early_and_late_requests_of_a_level() -> None:
    # C=1: 12 requests back to back; the first six decode at 30 ms a token, the rest at 10
    def back_to_back(tpots: list[float]) -> list[dict[str, Any]]:
        rows, t = [], 0.0
        for x in tpots:
            rows.append(rec(1, 0, t, x))
            t = rows[-1]["end"]
        return rows

    rows = back_to_back([0.030] * 6 + [0.010] * 6)
    got = by_id(run_checks(entry([level(1)]), ENV, rows=rows))["steady_state"]
    assert got["status"] == "warn"
    assert got["evidence"].startswith("C=1 repetition 1: later requests decoded at x0.33")
    assert "warmup.max_s" in got["hint"]
    steady = back_to_back([0.020, 0.021, 0.019] * 4)
    assert by_id(run_checks(entry([level(1)]), ENV, rows=steady))["steady_state"]["status"] == (
        "pass"
    )
    few = by_id(run_checks(entry([level(1)]), ENV, rows=rows[:5]))["steady_state"]
    assert few["status"] == "skip"


def metered(c: int, engine: dict[str, float], client_tokens: int, errors: int = 0) -> dict:
    lv = level(c, errors=errors)
    lv["repetition"] = 0
    lv["summary"]["output_tokens"] = client_tokens
    lv["engine_metrics"] = {"counters": engine, "gauges": {}}
    return lv


COUNTERS = {"generation_tokens": "e:gen_total", "prompt_tokens": "e:prompt_total",
            "prefix_hits": "e:hits_total"}  # fmt: skip


def test_engine_and_client_token_counts_and_prefix_cache_rate() -> None:
    levels = [
        metered(1, {'e:gen_total{model="m"}': 1000, "e:prompt_total": 4000}, 1000),
        metered(
            8, {'e:gen_total{model="m"}': 4100, "e:prompt_total": 16000, "e:hits_total": 200}, 4000
        ),  # fmt: skip
        metered(16, {"e:gen_total": 9999}, 10, errors=2),  # errors: not judged
    ]
    got = by_id(run_checks(entry(levels), ENV, counters=COUNTERS))
    assert got["token_agreement"]["status"] == "warn"
    assert got["token_agreement"]["evidence"] == (
        "2 level run(s), largest difference 2.5% (C=8 repetition 1: engine 4100, client 4000)"
    )
    # 200 of 20000 prompt tokens from the cache: 1%, in the default range
    assert got["prefix_cache"]["status"] == "pass"
    assert got["prefix_cache"]["evidence"].startswith("1.0% of 20000 prompt tokens")
    high = by_id(run_checks(entry(levels), ENV, counters=COUNTERS, prefix_expect=(0.5, 1.0)))
    assert high["prefix_cache"]["status"] == "warn"
    assert "is prefix caching enabled" in high["prefix_cache"]["hint"]
    none = by_id(run_checks(entry(levels), ENV, counters={}))
    assert none["token_agreement"]["status"] == none["prefix_cache"]["status"] == "skip"


def test_a_crash_or_a_restart_fails_the_server_check_and_the_verdict() -> None:
    e = entry([metered(1, {"e:gen_total": 10}, 10)])
    e["levels"].append(metered(8, {"e:gen_total": -500}, 10))  # counters reset: restarted
    got = by_id(run_checks(e, ENV))
    assert got["server_stable"]["status"] == "fail"
    assert got["server_stable"]["evidence"] == (
        "C=8 repetition 1: counter e:gen_total went back (the engine restarted)"
    )
    assert invalidated([got["server_stable"]]) == ["Server ran without a crash or restart"]
    # a server that exited: said as data (``Failure``), whatever its reason's words
    e = entry([level(1)], status="failed", reason="server exited with code -9 during C=8 "
              "repetition 2",
              failure={"kind": "exited", "exit_code": -9, "level": 8, "repetition": 1})  # fmt: skip
    assert by_id(run_checks(e, ENV))["server_stable"]["status"] == "fail"
    e["failure"] = {"kind": "other"}  # a check or the load failed: not the server
    assert by_id(run_checks(e, ENV))["server_stable"]["status"] == "pass"


def answers(*texts: str, expect: str | None = "Paris") -> list[dict[str, Any]]:
    return [{"prompt": "p", "expect": expect, "answer": t, "error": None} for t in texts]


def test_golden_prompts_catch_wrong_and_degenerate_answers() -> None:
    good = entry([level(1)], probes=answers("The capital of France is Paris."))
    got = by_id(run_checks(good, ENV))
    assert got["outputs_sane"]["status"] == "pass"
    assert got["outputs_sane"]["evidence"] == "1 of 1 answers as expected"
    assert "baseline_agreement" not in got  # the baseline itself
    loop = entry([level(1)], probes=answers("The capital of of of of of of of of of of"))
    got = by_id(run_checks(loop, ENV, baseline=good))
    assert got["outputs_sane"]["status"] == "fail"
    assert got["outputs_sane"]["evidence"] == (
        "probe 1: 'The capital of of of of of of of of of of' does not match /Paris/; "
        "probe 1: ends in a loop: 'of' (1 word(s)) repeated, 10 of 12 words"
    )
    assert invalidated(list(got.values())) == ["Outputs sane: golden prompts answered as expected"]
    assert got["baseline_agreement"]["status"] == "warn"
    assert got["baseline_agreement"]["evidence"] == "probe 1: same for 25% of the words"
    err = entry([level(1)], probes=[{"prompt": "p", "expect": None, "answer": None,
                                     "error": "HTTP 500: boom"}])  # fmt: skip
    got = by_id(run_checks(err, ENV, baseline=good))
    assert got["outputs_sane"]["evidence"] == "probe 1: HTTP 500: boom"
    assert got["baseline_agreement"]["status"] == "skip"
    same = by_id(run_checks(good | {"id": "x"}, ENV, baseline=good))
    assert same["baseline_agreement"]["evidence"] == "1 answer(s) word for word the same"


def test_memory_in_use_at_start_means_the_gpus_were_not_free() -> None:
    env = {"gpus": {"available": True, "devices": [
        {"index": 0, "processes": [], "memory_used_bytes": 40 * 2**30,
         "memory_total_bytes": 140 * 2**30},
        {"index": 1, "processes": [], "memory_used_bytes": 2**29,
         "memory_total_bytes": 140 * 2**30}]}}  # fmt: skip
    got = by_id(run_checks(entry([level(1)]), env))["gpus_free_at_start"]
    assert got["status"] == "warn"
    assert got["evidence"] == "GPU 0: 40.0 of 140 GiB memory in use"
    # a server that was already running (not started by reportgen) holds them: no warning,
    # and no CUDA graph check of a log that is not here
    running = entry([level(1)], base_url="http://127.0.0.1:8000")
    got = by_id(run_checks(running, env, log_patterns=["cuda_graph_captured"]))
    assert got["gpus_free_at_start"]["status"] == "skip"
    assert "already running (http://127.0.0.1:8000)" in got["gpus_free_at_start"]["evidence"]
    assert "cuda_graphs" not in got


def test_random_weights_skip_judging_answers_but_still_compare_them() -> None:
    loop = entry([level(1)], probes=answers("of of of of of of of of of of of of", expect=None))
    base = entry([level(1)], probes=answers("x y z", expect=None))
    got = by_id(run_checks(loop, ENV, baseline=base, random_weights=True))
    assert got["outputs_sane"]["status"] == "skip"  # a loop is what random weights give
    assert "random weights" in got["outputs_sane"]["evidence"]
    assert got["baseline_agreement"]["status"] == "warn"  # but not the baseline's answer
    err = entry([level(1)], probes=[{"prompt": "p", "expect": None, "answer": None,
                                     "error": "HTTP 500: boom"}])  # fmt: skip
    got = by_id(run_checks(err, ENV, random_weights=True))
    assert got["outputs_sane"]["status"] == "fail"  # an error is an error, whatever the weights


def test_answers_that_stream_no_text_are_flagged() -> None:
    e = entry([level(1)])
    e["levels"][0]["summary"]["silent_outputs"] = 3
    got = by_id(run_checks(e, ENV))["output_lengths"]
    assert got["status"] == "warn"
    assert got["evidence"].startswith("0 of 100 requests returned fewer tokens than asked (0.0%); ")
    assert "3 streamed no text although the engine counted their tokens" in got["evidence"]


def test_too_few_requests_for_the_percentiles_shown_warn_naming_the_level() -> None:
    # C=1 with six requests per run (twice), C=8 with 40 and 41: a p99 of six values is
    # their maximum, and so is a p90; forty values make a p90 but not a p99.
    levels = [level(1, requests=6), level(1, requests=6), level(8, requests=40),
              level(8, requests=42, errors=1)]  # fmt: skip
    got = by_id(run_checks(entry(levels), ENV))["percentile_samples"]
    assert got["status"] == "warn"
    assert got["evidence"] == (
        "successful requests per level run, too few for a p99 of TTFT and E2E: C=1: 6 (too "
        "few even for a p90), C=8: 40-41; a p99 needs 100, a p90 10"
    )
    assert "requests_per_level" in got["hint"]
    # Only the successful requests count: 100 sent with 1 failed is one short.
    one_short = by_id(run_checks(entry([level(4, requests=100, errors=1)]), ENV))
    assert one_short["percentile_samples"]["evidence"].startswith(
        "successful requests per level run, too few for a p99 of TTFT and E2E: C=4: 99; "
    )


def test_enough_requests_for_the_percentiles_pass_and_none_at_all_skip() -> None:
    got = by_id(run_checks(entry([level(1, requests=100), level(8, requests=240)]), ENV))
    assert got["percentile_samples"]["status"] == "pass"
    assert got["percentile_samples"]["evidence"].startswith(
        "fewest successful requests in a level run: 100 (C=1)"
    )
    failed = by_id(run_checks(entry([level(1, requests=5, errors=5)]), ENV))
    assert failed["percentile_samples"]["status"] == "skip"


def test_failed_requests_say_their_kinds_and_the_level_run_they_came_from() -> None:
    """The H200 run's eager-attention: its generation loop died at C=64. 77.3% failed, but
    by kind and place: 64 broke off mid-stream, 2,585 were refused at once with HTTP 503, all
    in that one run; the six runs before it had none."""
    from reportgen import results
    from reportgen.analysis.checks_levels import measurement_checks

    run = results.load(ROOT / "docs" / "examples" / "h200")
    checks = {c.id: c for c in measurement_checks(run.experiment("eager-attention"))}
    said = checks["request_errors"].evidence
    assert said == (
        "2649 of 3429 requests failed (77.3%): 2585 HTTP 503, 64 error in stream, all at "
        "C=64 repetition 1; the other level runs: 0 of 780 failed"
    )
    assert checks["request_errors"].status == "fail"


def test_a_server_that_lives_on_with_a_dead_generation_loop_is_not_stable() -> None:
    from reportgen import results
    from reportgen.analysis.checks_server import server_stable

    run = results.load(ROOT / "docs" / "examples" / "h200")
    check = server_stable(run.experiment("eager-attention"))
    assert check.status == "fail"
    assert check.evidence.startswith("the process stayed up but stopped generating: server "
                                     "reported a fatal error during C=64 repetition 1")  # fmt: skip
    assert server_stable(run.baseline).status == "pass"


def _started(eid: str, per_start: list[list[float]]) -> Experiment:
    """An experiment whose output tok/s at C=64 ran on one server start per inner list."""
    from reportgen.results.levels import Level, Summary

    levels = [
        Level(
            concurrency=64,
            repetition=rep,
            session=s,
            summary=Summary(requests=100, ok=100, output_tok_s=v),
        )
        for s, values in enumerate(per_start)
        for rep, v in enumerate(values)
    ]
    return Experiment(id=eid, status="ok", levels=levels)


def test_a_configuration_whose_starts_spread_more_than_the_others_is_warned() -> None:
    """starts_agree: the spread between an experiment's server starts against the other
    configurations' at each level (the pool its verdicts borrow); none with one start or
    nothing to compare with."""
    steady = [
        _started(f"c{k}", [[1000 + k, 1001 + k], [1004 + k, 1003 + k]]) for k in range(6)
    ]  # starts within about 0.3% of each other
    noisy = _started("noisy", [[1000, 1002], [1150, 1148]])  # 15% apart
    like = _started("like", [[1000, 1001], [1003, 1004]])
    got = checks.starts_agree(noisy, [*steady, noisy], "output_tok_s")
    (check,) = got
    assert check.status == "warn" and check.evidence.startswith("C=64: sd 10.")
    assert "between the other configurations' (6 degrees of freedom)" in check.evidence
    assert "campaign.starts" in check.hint
    (fine,) = checks.starts_agree(like, [*steady, like], "output_tok_s")
    assert fine.status == "pass" and not fine.hint
    # one start, or no other configuration started twice: nothing to say
    assert checks.starts_agree(_started("one", [[1000, 1001, 1002]]), steady, "output_tok_s") == []
    assert checks.starts_agree(noisy, [noisy], "output_tok_s") == []
    # run_checks asks it with the experiments known so far
    ids = [c.id for c in checks.run_checks(noisy, known=[*steady, noisy])]
    assert "starts_agree" in ids


def test_the_servers_cpu_per_token_names_a_host_side_that_ran_at_another_speed() -> None:
    """An earlier SGLang run's A/A copy measured 6-7% above its baseline at C=16 and C=64
    with the same flags: its server spent 26-28% less CPU per output token there, which the
    check says (warn). At C=1 the server is mostly idle (a fifth of a core), so a difference
    there is said but not judged; a changed configuration's is said, never judged."""
    from reportgen import engines, results
    from reportgen.analysis import noise
    from reportgen.analysis.checks import server_cpu

    def check(example: str, exp: str) -> list[Check]:
        kept = ROOT / "tests" / "fixtures" / "runs" / example  # an earlier H200 run
        run = results.load(kept if kept.is_dir() else ROOT / "docs" / "examples" / example)
        e = run.experiment(exp)
        assert e is not None
        parent = run.experiment(e.parent)
        same = noise.same_config(parent, e)
        return server_cpu(e, parent, same, dict(engines.get(run.engine.name).counters))

    (aa,) = check("sglang-h200-waves", "baseline-again")
    assert aa.status == "warn" and aa.evidence.startswith("C=16: 0.200 CPU-seconds"), aa
    assert "C=64: 0.159 CPU-seconds per 1,000 output tokens against 0.215" in aa.evidence
    assert "C=1:" not in aa.evidence and "host side ran at another speed" in aa.hint
    # the vLLM run on an H100: every configuration's server within 20% of its parent's
    (again,) = check("vllm-h100", "baseline-again")
    assert again.status == "pass" and "C=64: 0.079" in again.evidence
    assert "(x1.07)" in again.evidence
    (end,) = check("vllm-h100", "baseline-end")  # x0.88 at C=16: within a fifth
    assert end.status == "pass" and "C=16: 0.095" in end.evidence and "(x0.88)" in end.evidence
    assert check("h200", "baseline") == []  # no parent


def test_looping_answers_of_random_weights_are_said_not_warned() -> None:
    """Random weights loop by construction, on every experiment: nothing for the reader to
    do, so the check says it (skip, with the evidence) instead of warning each experiment;
    the same answers from a model with real weights warn."""
    from reportgen.analysis.checks_server import answers_varied
    from reportgen.load.records import RequestRecord

    loop = "the sea the sea the sea the sea the sea the sea the sea the sea the sea the sea"
    rows = [
        RequestRecord(index=i, start=0.0, end=1.0, output_text=loop + f" {i}") for i in range(40)
    ]
    (real,) = answers_varied(rows)
    (dummy,) = answers_varied(rows, random_weights=True)
    assert real.status == "warn" and "looping text" in real.hint
    assert dummy.status == "skip" and dummy.evidence == real.evidence
    assert dummy.hint.startswith("not judged: random weights give such text by construction")


def test_an_expected_failure_is_told_from_words_that_only_mention_one() -> None:
    """A failure the campaign expected in prose ("Fails at start") sets an experiment's
    failure apart from a verdict (``Unjudged`` "expected failure"); "should not fail" and
    "the capture that fails" expect none."""
    from reportgen.analysis.unjudged import expects_failure

    assert [expects_failure(t) for t in (
        "Fails at start with vLLM's own reason.", "should fail: the cache cannot fit",
        "It should not fail", "should no longer fail at C=64", "fixes the capture that fails",
    )] == [True, True, False, False, False]  # fmt: skip
