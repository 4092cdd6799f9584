"""Servers reportgen did not start: `reportgen bench URL` and a campaign's `base_url`. The
server is a simulator the test started; reportgen measures it, records what its endpoints
say, says in the report that it cannot vouch for it, and leaves it running."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import FAST_WARMUP, Sim, free_port, reportgen_main

pytestmark = pytest.mark.slow


def test_bench_measures_a_running_server_and_leaves_it_running(
    tmp_path: Path, cache: Path, start_sim: Callable[..., Sim]
) -> None:
    sim = start_sim("--ttft-ms", "10", "--itl-ms", "2")
    out = tmp_path / "out"
    res = reportgen_main(
        "bench", sim.url + "/v1/completions", "--concurrency", "1,4", "--requests", "12",
        "--output-tokens", "6", "--input-tokens", "32", "--range-ratio", "0.5",
        "--warmup", "2", "--level-warmup-max", "2", "--output", out, "--no-pdf", cache=cache,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "engine: sim (its /metrics names sim:* series)" in res.stdout
    # the console's table: a row per level with the headline numbers, errors counted
    rows = [ln for ln in res.stdout.splitlines() if ln.startswith("│")]
    assert [r.split("│")[1].strip() for r in rows] == ["1", "4"]
    assert all(r.split("│")[-2].strip() == "0/24" for r in rows), rows
    assert sim.proc.poll() is None, "reportgen stopped a server it did not start"

    (written,) = (out / "bench").glob("bench-*.toml")  # the benchmark as a campaign file
    campaign = tomllib.loads(written.read_text())
    assert campaign["server"] == {"engine": "sim", "base_url": sim.url, "ready_timeout_s": 60.0}
    # an endpoint in the URL, as `vllm bench serve --endpoint` names one: its API, its server
    assert campaign["workload"]["api"] == "completions"
    assert campaign["workload"]["concurrency"] == [1, 4]
    assert campaign["workload"]["range_ratio"] == 0.5  # as vLLM's --random-range-ratio
    (run_dir,) = (p.parent for p in (out / "bench").glob("*/results.json"))
    data = json.loads((run_dir / "results.json").read_text())
    (exp,) = data["experiments"]
    assert exp["status"] == "ok" and exp["base_url"] == sim.url and exp["command"] == []
    asked = pd.read_parquet(run_dir / "requests" / "bench.parquet")["requested_output_tokens"]
    assert asked.between(3, 9).all() and asked.nunique() > 2  # 6 +- 50%, not all alike
    info = exp["engine_info"]
    assert info["/version"] == {"version": info["/version"]["version"]}
    assert info["/v1/models"]["data"][0]["id"] == "sim-model"
    assert all(lv["engine_metrics"]["counters"] for lv in exp["levels"])  # its /metrics
    assert not list((run_dir / "logs").glob("*.server.json"))  # no server of ours recorded
    log = (run_dir / "logs" / "bench.server.log").read_text()
    assert log.startswith("reportgen did not start this server")
    checks = {c["id"]: c["status"] for c in exp["checks"]}
    assert checks["request_errors"] == "pass" and checks["server_stable"] == "pass"
    html = (run_dir / "report.html").read_text()
    assert "Not started by reportgen: every experiment&#39;s server was already running" in html
    assert "cannot vouch for its configuration" in (run_dir / "report.md").read_text()
    assert "bench is the only configuration measured: nothing to compare it with." in html
    assert reportgen_main("verify", run_dir).returncode == 0


def test_bench_of_nothing_and_of_a_bad_address_is_one_line(
    tmp_path: Path, start_sim: Callable[..., Sim]
) -> None:
    port = free_port()
    sim_url = start_sim().url
    res = reportgen_main("bench", f"http://127.0.0.1:{port}", "--output", tmp_path)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert f"error: nothing answers at http://127.0.0.1:{port} (ConnectError" in res.stderr
    assert "start the server first, or check the address" in res.stderr
    assert "it names no port" not in res.stderr
    # no port: 80, where no engine serves (nothing listens on 80 on a test host)
    res = reportgen_main("bench", "http://127.0.0.1", "--output", tmp_path)
    assert res.returncode == 1 and "it names no port, so 80: vLLM serves on 8000" in res.stderr
    res = reportgen_main("bench", "localhost:8000", "--output", tmp_path)
    assert res.returncode == 2
    assert "error: reportgen bench: URL = 'localhost:8000': write http://host:port" in res.stderr
    res = reportgen_main("bench", "http://x", "--concurrency", "1,1")
    assert res.returncode == 2 and "give each level once" in res.stderr
    for flag, value in (("--concurrency", "1,,2"), ("--request-rate", "1,,2")):
        res = reportgen_main("bench", "http://x", flag, value)  # not read as 1,2
        assert res.returncode == 2 and f"'{value}': comma-separated" in res.stderr
    res = reportgen_main("bench", "http://x", "--request-rate", "2,1e400")  # not read as inf
    assert res.returncode == 2
    assert "'2,1e400': 1e400 is too large to hold; write inf for every request" in res.stderr
    for flag, value, said in (
        ("--duration", "-5", "'-5': seconds above 0"),
        ("--warmup", "-3", "'-3': a whole number of 0 or more"),
        ("--ready-timeout", "inf", "'inf': seconds above 0"),
    ):
        res = reportgen_main("bench", "http://x", flag, value)
        assert res.returncode == 2 and said in res.stderr, flag
    # flags wrong together: said before the server is asked anything (nothing answers here)
    res = reportgen_main("bench", f"http://127.0.0.1:{port}", "--find-max", "ttft<5")
    assert res.returncode == 2 and "nothing answers" not in res.stderr
    assert "reportgen bench: workload.find_max.slo = 'ttft<5'" in res.stderr
    https = sim_url.replace("http://", "https://")
    res = reportgen_main("bench", https, "--requests", "2")
    assert res.returncode == 1 and "does not answer with TLS" in res.stderr
    assert "a server listens there without it: write http://" in res.stderr
    res = reportgen_main("bench", "http://x/v1/completions", "--api", "chat")
    assert res.returncode == 2 and "the URL names the completions API's endpoint" in res.stderr
    res = reportgen_main("bench", "http://x", "--range-ratio", "1")
    assert res.returncode == 2 and "'1': a number from 0 up to 1 (not 1), e.g. 0.5" in res.stderr


def test_bench_fails_when_it_measured_nothing_or_half(
    tmp_path: Path, cache: Path, start_sim: Callable[..., Sim]
) -> None:
    """Against a server that wants an API key bench waited its whole ready timeout, advised
    raising it and exited 0; after most requests failed it printed "bench: ok" and exited 0."""
    keyed = start_sim("--api-key", "sekrit")
    res = reportgen_main(
        "bench", keyed.url, "--requests", "4", "--level-warmup-max", "2", "--output", tmp_path,
        "--no-pdf", "--quiet",
        "--ready-timeout", "600", cache=cache,
    )  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert (
        "server refused a one-token generation with HTTP 401 (no key): it wants an API "
        "key; set OPENAI_API_KEY" in res.stdout
    )
    assert "ready_timeout_s" not in res.stdout  # not "raise server.ready_timeout_s"
    failing = start_sim("--fault", "http-500", "--fault-after", "10")
    res = reportgen_main(
        "bench", failing.url, "--requests", "16", "--warmup", "0",
        "--level-warmup-max", "2", "--repetitions", "1",
        "--output", tmp_path, "--no-pdf", "--quiet", "--json", cache=cache,
    )  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    said = json.loads(res.stdout)
    assert said["exit_code"] == 1 and said["experiments"][0]["outcome"] == "failed"
    assert "the baseline (bench) failed a check that invalidates its numbers" in res.stderr
    res = reportgen_main(
        "bench", failing.url, "--requests", "16", "--warmup", "0",
        "--level-warmup-max", "2", "--repetitions", "1",
        "--output", tmp_path, "--no-pdf", "--quiet", cache=cache,
    )  # fmt: skip
    assert res.returncode == 1 and "bench: ok" not in res.stdout
    assert "bench: NOT VALID, failed: Requests succeeded" in res.stdout  # the table's footer


def test_a_stalled_stream_times_out_at_the_request_timeout(
    tmp_path: Path, cache: Path, start_sim: Callable[..., Sim]
) -> None:
    """A stream that stalls (two chunks, then nothing) held bench for the default 600 s a
    request: --request-timeout ends each such request, counted as a timeout."""
    stalled = start_sim("--fault", "hang")
    res = reportgen_main(
        "bench", stalled.url, "--requests", "2", "--warmup", "0",
        "--level-warmup-max", "2", "--repetitions", "1",
        "--request-timeout", "1.5", "--output", tmp_path, "--no-pdf", "--quiet", cache=cache,
    )  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    (written,) = (tmp_path / "bench").glob("bench-*.toml")
    assert tomllib.loads(written.read_text())["workload"]["request_timeout_s"] == 1.5
    (run_dir,) = (p.parent for p in (tmp_path / "bench").glob("*/results.json"))
    errors = pd.read_parquet(run_dir / "requests" / "bench.parquet")["error"]
    assert list(errors) == ["timeout: no complete response within 1.5 s"] * 2
    res = reportgen_main("bench", stalled.url, "--request-timeout", "0")
    assert res.returncode == 2 and "'0': seconds above 0, e.g. 30" in res.stderr


def test_a_refused_bench_writes_nothing_anywhere(tmp_path: Path) -> None:
    """A --name of ../../evil once wrote bench-*.toml two folders up before it was refused, and
    every refused call left a stray bench-*.toml behind: now nothing is written."""
    out = tmp_path / "a" / "b" / "out"
    res = reportgen_main("bench", "http://127.0.0.1:1", "--name", "../../evil", "--output", out)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "error: reportgen bench: --name = '../../evil': the run's folder under --output" in (
        res.stderr
    )
    res = reportgen_main(
        "bench", "http://127.0.0.1:1", "--engine", "sim", "--dataset",
        f"jsonl:{tmp_path / 'missing.jsonl'}", "--output", out,
    )  # fmt: skip
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "error: reportgen bench: experiment 'bench': workload.prompts.path" in res.stderr
    assert "file not found" in res.stderr
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_campaign_compares_a_server_it_starts_with_one_already_running(
    tmp_path: Path, cache: Path, start_sim: Callable[..., Sim]
) -> None:
    """The baseline started by reportgen; the experiment a deployed endpoint (base_url): it
    is compared as any experiment is, and said to be not started by reportgen."""
    deployed = start_sim("--ttft-ms", "20", "--itl-ms", "3")
    path = tmp_path / "mixed.toml"
    path.write_text(
        f"""
[campaign]
name = "mixed"
title = "A server started here against a deployed one"
objective = {{ metric = "output_tok_s", concurrency = [2] }}

[server]
engine = "sim"
args = {{ port = {free_port()}, ttft-ms = 20, itl-ms = 15 }}

[workload]
concurrency = [2]
requests_per_level = 8
input_tokens = 16
output_tokens = 16
repetitions = 3
warmup_requests = 1
warmup = {FAST_WARMUP}

[[experiment]]
id = "baseline"
why = "Started by reportgen."

[[experiment]]
id = "deployed"
why = "The endpoint already serving."
base_url = "{deployed.url}"
"""
    )
    plan = reportgen_main("plan", path)
    assert plan.returncode == 0, plan.stderr
    assert f"server:   already running at {deployed.url}: reportgen starts and stops" in plan.stdout
    assert f"then sends to {deployed.url}/v1/chat/completions" in plan.stdout
    res = reportgen_main(
        "run", path, "--output", tmp_path / "out", "--quiet", "--no-pdf", cache=cache
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert deployed.proc.poll() is None
    (run_dir,) = (p.parent for p in (tmp_path / "out" / "mixed").glob("*/results.json"))
    data = json.loads((run_dir / "results.json").read_text())
    base, dep = data["experiments"]
    assert base["base_url"] is None and base["command"] and base["stop"]["group_gone"]
    assert dep["base_url"] == deployed.url and dep["command"] == [] and dep["stop"] is None
    assert dep["args"] == {} and dep["flag_diff"] == []
    # 65 ms a request against 245 (3.8x): at 25 ms a stall once left it x2.86 (0.53-15.45)
    assert dep["decision"]["verdict"] == "adopted", dep["decision"]["explanation"]
    assert dep["decision"]["explanation"].startswith(
        f"deployed is a server already running at {deployed.url}, not started by reportgen: "
        "how its configuration differs from baseline's is not known to it."
    )  # not "no server flag, only its environment or workload"
    assert "the servers of deployed were already running" in (run_dir / "report.md").read_text()

    # what cannot apply to a server reportgen does not start is refused, one line each
    text = path.read_text().replace('base_url = "', 'args = { itl-ms = 2 }\nbase_url = "')
    path.write_text(text.replace('engine = "sim"', f'engine = "sim"\nbase_url = "{deployed.url}"'))
    res = reportgen_main("validate", path)
    assert res.returncode == 2
    assert (
        f"{path}: server.args = {{'port': " in res.stderr
        and "server.base_url names a server that is already running: reportgen starts none, "
        "so its args would not apply"
        in res.stderr
    )
    assert (
        "experiment[1] (id='deployed').args = {'itl-ms': 2}: its base_url names a server "
        "that is already running" in res.stderr
    )


def test_only_a_server_on_this_host_has_its_gpus_sampled_here() -> None:
    """NVML sees this host's GPUs: a server elsewhere gets no telemetry rather than this
    host's idle GPUs under its name."""
    from reportgen.run.external import is_local

    assert is_local("http://127.0.0.1:8000") and is_local("http://localhost:8000/v1")
    assert not is_local("http://192.0.2.1:8000")  # TEST-NET-1: never an address of ours
    assert not is_local("http://no-such-host.invalid:8000")


def test_an_api_key_for_a_running_server_is_sent_and_never_written(
    tmp_path: Path, cache: Path, start_sim: Callable[..., Sim]
) -> None:
    """OPENAI_API_KEY goes with every request as a bearer token (the simulator refuses
    requests without it) and is hidden wherever it would be written; a server's own answer
    that echoes it (SGLang's /server_info lists its api_key) is hidden too."""
    from reportgen.redact import REDACTED, redact_tree

    key = "letmein-secret-1234"
    sim = start_sim("--api-key", key, "--ttft-ms", "5", "--itl-ms", "1")
    out = tmp_path / "out"
    res = reportgen_main(
        "bench", sim.url, "--requests", "4", "--output-tokens", "4", "--warmup", "1",
        "--level-warmup-max", "2",
        "--repetitions", "1", "--output", out, "--no-pdf", "--quiet", cache=cache,
        env={"OPENAI_API_KEY": key},
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    (run_dir,) = (p.parent for p in (out / "bench").glob("*/results.json"))
    data = json.loads((run_dir / "results.json").read_text())
    assert data["experiments"][0]["levels"][0]["summary"]["errors"] == 0
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
    answer = {"model_path": "/m", "api_key": key, "nested": [{"hf_token": "x" * 8}]}
    assert redact_tree(answer) == {
        "model_path": "/m", "api_key": REDACTED, "nested": [{"hf_token": REDACTED}]
    }  # fmt: skip


def test_bench_takes_the_flags_a_vllm_bench_serve_user_brings(
    tmp_path: Path, cache: Path, start_sim: Callable[..., Sim]
) -> None:
    """--burstiness (gamma arrivals), --extra-body and the sampling flags (sent in every
    request), --goodput (vLLM's KEY:MS SLOs), --tokenizer and --multi-turn become the
    campaign's workload; the simulator records the sampling each request asked for."""
    sends = tmp_path / "sends.jsonl"
    sim = start_sim("--ttft-ms", "5", "--itl-ms", "1", "--record-sends", str(sends))
    out = tmp_path / "out"
    res = reportgen_main(
        "bench", sim.url, "--request-rate", "50", "--requests", "24", "--repetitions", "1",
        "--warmup", "0", "--level-warmup-max", "2", "--output-tokens", "4", "--burstiness",
        "0.25", "--extra-body", '{"top_p": 0.9, "seed": 3}', "--temperature", "0.7",
        "--goodput", "ttft:500", "tpot:50", "--header", "X-Route=pool-a", "--ignore-eos",
        "--output", out,
        "--no-pdf", "--quiet", cache=cache,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    (written,) = (out / "bench").glob("bench-*.toml")
    wl = tomllib.loads(written.read_text())["workload"]
    assert wl["burstiness"] == 0.25 and wl["slo"] == {"ttft_ms": 500.0, "tpot_ms": 50.0}
    assert wl["warmup"] == {"max_s": 2.0}
    assert wl["extra_body"] == {"top_p": 0.9, "seed": 3, "temperature": 0.7}
    lines = [json.loads(line) for line in sends.read_text().splitlines()]
    assert all(x["headers"] == {"x-route": "pool-a"} for x in lines)  # readiness checks too
    assert wl["headers"] == {"X-Route": "pool-a"}
    asked = [x["sampling"] for x in lines]
    measured = [a for a in asked if a.get("seed") == 3]
    assert len(measured) >= 24 and all(
        a == {"temperature": 0.7, "top_p": 0.9, "seed": 3} for a in measured
    )
    (run_dir,) = (p.parent for p in (out / "bench").glob("*/results.json"))
    html = " ".join((run_dir / "report.html").read_text().split())
    assert "The gaps between arrivals are gamma-distributed of shape 0.25" in html
    assert "Every request also sends seed = 3, temperature = 0.7, top_p = 0.9" in html
    assert "Every request carries the headers X-Route: pool-a" in html
    # a credential in a header would be written into the campaign file and the results
    bad = reportgen_main("bench", sim.url, "--header", "Authorization=Bearer abc", "--output", out)
    assert bad.returncode == 2 and "authorization: its value would be written" in bad.stderr
    assert "OPENAI_API_KEY" in bad.stderr and "abc" not in bad.stderr
    bad = reportgen_main("bench", sim.url, "--extra-body", '{"max_tokens": 5}', "--output", out)
    assert bad.returncode == 2 and "max_tokens: reportgen sets these itself" in bad.stderr
    bad = reportgen_main("bench", sim.url, "--goodput", "ttfb:500")
    assert bad.returncode == 2 and "KEY:MILLISECONDS with KEY one of ttft, tpot, e2el" in (
        bad.stderr
    )


def test_percentiles_asked_are_shown_and_agree_with_the_summaries(
    tmp_path: Path, cache: Path, start_sim: Callable[..., Sim]
) -> None:
    """--percentiles 25,50,99.9 (vLLM's --metric-percentiles): each latency at each, per level,
    in the JSON and as a table; the p50 is the level summaries' own."""
    sim = start_sim("--ttft-ms", "5", "--itl-ms", "1", "--jitter", "0.2")
    args = ["bench", sim.url, "--concurrency", "1,2", "--requests", "8", "--warmup", "1",
    "--level-warmup-max", "2",
            "--percentiles", "25,50,99.9", "--output", tmp_path, "--no-pdf", "--quiet"]  # fmt: skip
    saved = tmp_path / "results" / "bench.json"  # as vllm bench serve's --save-result
    res = reportgen_main(*args, "--json", "--save-result", saved, cache=cache)
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(saved.read_text()) == json.loads(res.stdout)
    (e,) = json.loads(res.stdout)["experiments"]
    for level in e["levels"].values():
        got = level["percentiles"]
        assert set(got) == {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}
        for name in got:
            assert set(got[name]) == {"p25", "p50", "p99.9"}
            assert got[name]["p50"]["mean"] == pytest.approx(level[f"{name}_p50"]["mean"])
            assert (
                got[name]["p25"]["mean"] <= got[name]["p50"]["mean"] <= got[name]["p99.9"]["mean"]
            )
    res = reportgen_main(*args, cache=cache)
    assert "latency percentiles, ms: the mean over repetitions" in res.stdout
    heads = " ".join(ln for ln in res.stdout.splitlines() if ln.startswith("┃"))
    assert "p99.9" in heads and "TPOT" in heads
    bad = reportgen_main("bench", sim.url, "--save-result", tmp_path)
    assert bad.returncode == 2 and "--save-result = " in bad.stderr and "a folder" in bad.stderr
    bad = reportgen_main("bench", sim.url, "--percentiles", "50,150")
    assert bad.returncode == 2 and "percentiles above 0 and at most 100" in bad.stderr


def test_a_model_the_server_does_not_serve_fails_at_once(
    tmp_path: Path, cache: Path, start_sim: Callable[..., Sim]
) -> None:
    """--model with a typo: vLLM answers 404 ("The model `x` does not exist."), and bench
    waited its whole ready timeout, then advised raising it."""
    sim = start_sim("--strict-model")
    res = reportgen_main(
        "bench", sim.url, "--model", "sim-modle", "--requests", "4", "--ready-timeout", "600",
        "--output", tmp_path, "--no-pdf", "--quiet", cache=cache,
    )  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert (
        "server answered a one-token generation of model 'sim-modle' with HTTP 404: it "
        "serves no such model" in " ".join(res.stdout.split())
    )
    assert "ready_timeout_s" not in res.stdout


def test_a_vllm_ramp_up_is_measured_as_a_staircase_of_rate_levels(
    tmp_path: Path, cache: Path, start_sim: Callable[..., Sim]
) -> None:
    """`--ramp-up-strategy exponential --ramp-up-start-rps 5 --ramp-up-end-rps 20` (vLLM's
    flags) runs rate levels 5, 10 and 20 req/s, each measured by itself and said so; the
    flags vLLM refuses together are refused here in one line, before anything is written."""
    sim = start_sim("--ttft-ms", "5", "--itl-ms", "1")
    out = tmp_path / "out"
    res = reportgen_main(
        "bench", sim.url, "--ramp-up-strategy", "exponential", "--ramp-up-start-rps", "5",
        "--ramp-up-end-rps", "20", "--ramp-up-steps", "3", "--requests", "12",
        "--repetitions", "1", "--warmup", "0",
        "--level-warmup-max", "2", "--output-tokens", "4", "--output", out,
        "--no-pdf", "--quiet", "--json", cache=cache,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ramp-up exponential from 5 to 20 req/s: measured as 3 rate levels (5, 10, 20 " in (
        res.stderr
    )
    (written,) = (out / "bench").glob("bench-*.toml")
    assert tomllib.loads(written.read_text())["workload"]["request_rate"] == [5.0, 10.0, 20.0]
    (bench,) = json.loads(res.stdout)["experiments"]
    assert sorted(lv["rate"] for lv in bench["levels"].values()) == [5.0, 10.0, 20.0], bench
    refused = {
        ("--ramp-up-strategy", "linear", "--ramp-up-end-rps", "9"): "give --ramp-up-start-rps",
        ("--ramp-up-end-rps", "9"): "a ramp's rate: give --ramp-up-strategy too",
        ("--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1", "--ramp-up-end-rps", "9",
         "--request-rate", "4"): "the ramp sets the rates: give one of the two",
        ("--ramp-up-strategy", "exponential", "--ramp-up-start-rps", "0",
         "--ramp-up-end-rps", "9"): "an exponential ramp starts above 0",
        ("--ramp-up-strategy", "linear", "--ramp-up-start-rps", "9",
         "--ramp-up-end-rps", "3"): "a ramp rises",
        ("--ramp-up-strategy", "linear", "--ramp-up-steps", "1"): "2 or more",
    }  # fmt: skip
    for flags, message in refused.items():
        bad = reportgen_main("bench", sim.url, *flags, "--output", tmp_path / "refused")
        assert bad.returncode == 2 and message in bad.stderr, (flags, bad.stderr)
        said = [line for line in bad.stderr.splitlines() if message in line]
        assert "Traceback" not in bad.stderr and len(said) == 1, bad.stderr
    assert not (tmp_path / "refused").exists()


def test_a_price_gives_the_cost_of_a_million_tokens_at_each_level(
    tmp_path: Path, cache: Path, start_sim: Callable[..., Sim]
) -> None:
    """`--price 36` (an hour of the host) gives, per level, the cost of a million output and
    input tokens (the hour over the tokens an hour makes), quoting where the price came from;
    a campaign without a price (and without GPU energy) has no such table. `--json` carries
    the same numbers, per level, and the price it used."""
    sim = start_sim("--ttft-ms", "5", "--itl-ms", "2")
    out = tmp_path / "out"
    res = reportgen_main(
        "bench", sim.url, "--concurrency", "1,4", "--requests", "12", "--repetitions", "1",
        "--warmup", "0",
        "--level-warmup-max", "2", "--output-tokens", "8", "--price", "36", "--price-source",
        "list price, 2026-12", "--output", out, "--no-pdf", "--quiet", "--json", cache=cache,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    said = json.loads(res.stdout)
    assert said["price"] == {
        "per_hour": 36.0, "currency": "USD", "basis": "36 USD an hour (list price, 2026-12)"
    }  # fmt: skip
    for level in said["experiments"][0]["levels"].values():
        out_s = level["output_tok_s"]["mean"]
        assert level["cost"]["per_mtok_output"] == pytest.approx(36 / 3600 / out_s * 1e6)
        assert level["cost"]["per_mtok_input"] > 0 and level["cost"]["tok_per_j"] is None
    (written,) = (out / "bench").glob("bench-*.toml")
    price = tomllib.loads(written.read_text())["host"]["price"]
    assert price == {"per_hour": 36.0, "source": "list price, 2026-12"}
    (run_dir,) = (p.parent for p in (out / "bench").glob("*/results.json"))
    data = json.loads((run_dir / "results.json").read_text())
    page = " ".join((run_dir / "report.html").read_text().split())
    assert "Cost at 36 USD an hour (list price, 2026-12)" in page
    for agg in data["experiments"][0]["by_level"]:
        out_s = agg["output_tok_s"]["mean"]
        in_s = agg["total_tok_s"]["mean"] - out_s
        expect = [f"{36 / 3600 / x * 1e6:.4g}" for x in (out_s, in_s)]
        row = f'<td class="num">{expect[0]}</td><td class="num">{expect[1]}</td>'
        assert row in page, (expect, page[page.index('id="costs"') :][:1500])
    # no price, no energy: no cost table
    res = reportgen_main(
        "bench", sim.url, "--requests", "4", "--repetitions", "1", "--warmup", "0",
        "--level-warmup-max", "2",
        "--output", tmp_path / "plain", "--no-pdf", "--quiet", cache=cache,
    )  # fmt: skip
    (plain,) = (p.parent for p in (tmp_path / "plain" / "bench").glob("*/results.json"))
    assert 'id="costs"' not in (plain / "report.html").read_text()
