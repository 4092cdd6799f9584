"""Decisions and assumption checks through `reportgen run` against the simulator: interleaved
parent runs compared pair by pair, a fresh server per repetition, golden prompts, the
campaign's own log checks and metric bounds, and a server still warming up."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from reportgen import results
from reportgen.observe.sources import CAPTURE_ENV
from tests.conftest import FAST_WARMUP, ROOT, Ran, reportgen_main, run_campaign

GPU_CAPTURE = ROOT / "tests" / "fixtures" / "gpu" / "h200-capture.json.xz"
pytestmark = pytest.mark.slow


INTERLEAVED = """
[campaign]
name = "ab"
title = "interleaved"
interleave = true
margin = 0.05

[server]
engine = "sim"
args = { port = PORT, ttft-ms = 5, itl-ms = 4 }
ready_timeout_s = 30

[workload]
concurrency = [1, 4]
requests_per_level = 12
input_tokens = 8
output_tokens = 16
repetitions = 2
warmup_requests = 2
warmup = FAST_WARMUP
fresh_server = true

[[probe]]
prompt = "Repeat after me: all is well"
expect = "all is well"

[[experiment]]
id = "baseline"
why = "reference"
checks = [
  { log_contains = "ready on", description = "the simulator says it is ready" },
  { log_absent = "Traceback" },
]

[[experiment]]
id = "faster"
why = "a faster decode"
args = { itl-ms = 2 }
""".replace("FAST_WARMUP", FAST_WARMUP)


@pytest.fixture(scope="module")
def interleaved(
    tmp_path_factory: pytest.TempPathFactory, cache: Path
) -> tuple[dict[str, Any], Path]:
    """INTERLEAVED run once for the module (read, never changed, by the tests), its GPU
    telemetry replayed from the H200 capture so that verify recomputes its windows too."""
    folder = tmp_path_factory.mktemp("interleaved")
    return run_campaign(folder, INTERLEAVED, cache, {CAPTURE_ENV: str(GPU_CAPTURE)})


def test_interleaved_runs_are_paired_and_each_repetition_gets_a_fresh_server(
    interleaved: tuple[dict[str, Any], Path],
) -> None:
    data, run_dir = interleaved
    base, faster = data["experiments"]
    # the baseline: one fresh server per repetition, no parent to interleave with
    assert [(s["role"], s["repetitions"]) for s in base["sessions"]] == [
        ("experiment", [0]), ("experiment", [1])]  # fmt: skip
    got = [(lv["session"], lv["concurrency"], lv["repetition"]) for lv in base["levels"]]
    assert got == [(0, 1, 0), (0, 4, 0), (1, 1, 1), (1, 4, 1)]  # each server: C=1, then C=4
    checks = {c["id"]: c for c in base["checks"]}
    assert checks["campaign_0"]["title"] == "the simulator says it is ready"
    assert checks["campaign_0"]["status"] == "pass" and "ready on" in checks["campaign_0"][
        "evidence"]  # fmt: skip
    assert checks["campaign_1"] | {"evidence": ""} == {
        "id": "campaign_1", "title": "log never shows /Traceback/", "status": "pass",
        "evidence": "", "hint": "", "invalidates": False}  # fmt: skip
    # the experiment: its parent's configuration alternates with it, P C C P
    assert [(s["role"], s["config"], s["repetitions"]) for s in faster["sessions"]] == [
        ("control", "baseline", [0]), ("experiment", "faster", [0]),
        ("experiment", "faster", [1]), ("control", "baseline", [1])]  # fmt: skip
    logs = [s["log_file"] for s in faster["sessions"]]
    assert len(set(logs)) == 4 and all((run_dir / x).exists() for x in logs)
    assert logs[1] == "logs/faster.server.log"
    control = faster["control"]
    assert control["of"] == "baseline" and control["error"] is None
    assert len(control["levels"]) == len(faster["levels"]) == 4
    rows = results.load_requests(run_dir, "faster~control")
    assert len(rows) == 2 * 2 * 12
    # compared pair by pair with the interleaved runs: 2 pairs per level
    decision = faster["decision"]
    assert decision["paired"] is True and "interleaved" in decision["explanation"]
    assert decision["explanation"].startswith("Changed from baseline: --itl-ms 4 -> 2. ")
    vs_parent = {c["concurrency"]: c for c in decision["vs_parent"]}
    assert all(c["paired"] and c["n_parent"] == c["n_child"] == 2 for c in vs_parent.values())
    assert vs_parent[1]["ratio"] > 1.3  # 4 ms -> 2 ms a token
    assert decision["verdict"] == "adopted"
    assert not any(c["paired"] for c in decision["vs_baseline"])  # the baseline's own runs
    # golden prompt answered by both configurations, word for word the same
    assert faster["probes"][0]["answer"] == " all is well"
    checks = {c["id"]: c for c in faster["checks"]}
    assert checks["outputs_sane"]["status"] == checks["baseline_agreement"]["status"] == "pass"
    # the report shows the interleaving and the new checks
    page = (run_dir / "report.html").read_text()
    assert "Golden answers agree with the baseline" in page
    assert "interleaved" in page


WARMING = """
[campaign]
name = "cold"
title = "a server still warming up"

[server]
engine = "sim"
args = { port = PORT, ttft-ms = 2, itl-ms = 10, cold-requests = 14 }
ready_timeout_s = 30

[workload]
concurrency = [1]
requests_per_level = 24
input_tokens = 8
output_tokens = 8
warmup_requests = 2
warmup = { steady = false }  # as before the steady warm-up: the cold part is measured

[[check]]
metric = "ttft_ms"
stat = "p99"
max = 0.001
description = "an impossible TTFT bound"

[[experiment]]
id = "baseline"
why = "reference"

[[experiment.checks]]
log_contains = "a line the simulator never prints"
invalidates = true
description = "the engine confirms the feature is on"
"""


def test_a_cold_server_warns_and_an_invalidating_campaign_check_fails_the_verdict(
    tmp_path: Path, cache: Path
) -> None:
    # exit 1: the baseline's numbers are void, so nothing measured can be compared with it
    data, run_dir = run_campaign(tmp_path, WARMING, cache, code=1)
    (base,) = data["experiments"]
    checks = {c["id"]: c for c in base["checks"]}
    # the readiness probe and 2 warm-up requests were not enough: 11 of 24 measured are cold
    assert checks["steady_state"]["status"] == "warn", checks["steady_state"]
    assert "later requests decoded at x0.3" in checks["steady_state"]["evidence"]
    assert "workload.warmup.steady" in checks["steady_state"]["hint"]
    assert checks["campaign_0"]["title"] == "an impossible TTFT bound"
    assert checks["campaign_0"]["status"] == "fail" and not checks["campaign_0"]["invalidates"]
    assert checks["campaign_1"]["status"] == "fail" and checks["campaign_1"]["invalidates"]
    assert base["decision"]["verdict"] == "failed"
    assert "the engine confirms the feature is on" in base["decision"]["explanation"]
    assert "an impossible TTFT bound" not in base["decision"]["explanation"]


def test_verify_recomputes_the_report_from_raw_data_and_catches_tampering(
    interleaved: tuple[dict[str, Any], Path], tmp_path: Path
) -> None:
    import pandas as pd

    _, run_dir = interleaved

    def verify(report: Path) -> Ran:
        return reportgen_main("verify", report)

    res = verify(run_dir / "report.html")
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    # requests, GPU telemetry (the replayed capture) and the host's CPU samples
    assert "ok   raw tables: 7 table(s), each with the sha256 given" in lines
    assert "ok   telemetry windows: 12 window(s) recomputed" in lines
    assert "ok   host CPU windows: 12 window(s) recomputed" in lines
    # 2 experiments x 2 levels x 2 repetitions, and the interleaved baseline runs
    assert "ok   level summaries: 12 level run(s) recomputed from their requests" in lines
    assert any(x.startswith("ok   decisions: ") for x in lines)
    assert "ok   report text: the page has the sha256 digest it carries: as rendered" in (
        res.stdout
    )
    assert res.stdout.rstrip().endswith("matches its raw data")
    # the Markdown summary and the CSV tables beside it
    md = (run_dir / "report.md").read_text()
    assert "| 2 | faster (best) | adopted |" in md
    levels = pd.read_csv(run_dir / "tables" / "levels.csv")
    assert len(levels) == 12 and set(levels["role"]) == {"experiment", "control"}
    comps = pd.read_csv(run_dir / "tables" / "comparisons.csv")
    assert comps[comps["kind"] == "objective_vs_parent"]["paired"].all()

    # one request 50 ms slower in the raw table (of a copy of the run): its hash and its
    # level's summary differ
    tampered = shutil.copytree(run_dir, tmp_path / "tampered-table")
    path = tampered / "requests" / "faster.parquet"
    frame = pd.read_parquet(path)
    frame.loc[0, "end"] += 0.05
    frame.to_parquet(path, index=False)
    res = verify(tampered / "report.html")
    assert res.returncode == 1
    assert "DIFF raw tables: requests/faster.parquet: changed since the report" in res.stdout
    diff = next(x for x in res.stdout.splitlines() if x.startswith("DIFF level summaries"))
    assert diff.startswith("DIFF level summaries: faster C=1 repetition 1: ")
    assert "e2e_ms" in diff and "achieved_concurrency" in diff and "ttft_ms" not in diff
    assert "does NOT match its raw data" in res.stderr

    # a number edited in the page itself (of another copy)
    report = shutil.copytree(run_dir, tmp_path / "tampered-page") / "report.html"
    page = report.read_text()
    report.write_text(page.replace("adopted", "rejected", 1))
    res = verify(report)
    assert res.returncode == 1
    assert "DIFF report text: the page does not have the digest it carries: it was edited " in (
        res.stdout
    )
    assert "ok   level summaries" in res.stdout

    # a verdict edited in results.json and the report rendered again from it: page and results
    # agree, but the verdict does not follow from the numbers (the runner's own function says)
    edited = shutil.copytree(run_dir, tmp_path / "tampered-verdict")
    saved = json.loads((edited / "results.json").read_text())
    saved["experiments"][1]["decision"]["verdict"] = "rejected"
    (edited / "results.json").write_text(json.dumps(saved))
    rendered = reportgen_main("render", edited, "--no-pdf")
    assert rendered.returncode == 0, rendered.stderr
    res = verify(edited / "report.html")
    assert res.returncode == 1
    assert "ok   report text" in res.stdout and "ok   results.json" in res.stdout
    assert "DIFF decisions: faster: the verdict would be 'adopted'" in res.stdout

    # the pairing flag edited (the report then drops "compared pair by pair" from its caption)
    unpaired = shutil.copytree(run_dir, tmp_path / "tampered-paired")
    saved = json.loads((unpaired / "results.json").read_text())
    saved["experiments"][1]["decision"]["paired"] = False
    (unpaired / "results.json").write_text(json.dumps(saved))
    assert reportgen_main("render", unpaired, "--no-pdf").returncode == 0
    res = verify(unpaired / "report.html")
    assert res.returncode == 1
    assert "DIFF decisions: faster: paired is False, but the runs say True" in res.stdout


SPECULATIVE = """
[campaign]
name = "spec"
title = "speculative decoding"

[server]
engine = "sim"
args = { port = PORT, ttft-ms = 5, itl-ms = 4 }
ready_timeout_s = 30

[workload]
concurrency = [1, 4]
requests_per_level = 8
input_tokens = 8
output_tokens = 25
warmup_requests = 1

[[experiment]]
id = "baseline"
why = "reference"

[[experiment]]
id = "mtp"
why = "four draft tokens, half accepted"
args = { spec-draft-tokens = 4, spec-accept-rate = 0.5 }
"""


def test_speculative_decoding_acceptance_is_reported(tmp_path: Path, cache: Path) -> None:
    data, run_dir = run_campaign(tmp_path, SPECULATIVE, cache)
    base, mtp = data["experiments"]
    assert mtp["log_evidence"]["spec_accept_length"]["mean"] == 3.0  # 24 tokens in 8 steps
    counters = mtp["levels"][0]["engine_metrics"]["counters"]
    assert counters["sim:spec_decode_num_drafts_total"] == 8 * 8  # 8 requests x 8 steps
    assert counters["sim:spec_decode_num_accepted_tokens_total"] == 8 * 16
    assert "spec_accept_length" not in base["log_evidence"]
    page = (run_dir / "report.html").read_text()
    assert "Speculative decoding in mtp" in page
    # 1 + 128 / 64 tokens per step; 128 of 256 draft tokens accepted
    assert '<td class="num">3.00</td><td class="num">50%</td>' in page
    assert "mean 3.00, from 3.00 to 3.00" in page
    assert "Speculative decoding in baseline" not in page
    # (1 + 0.4) / 3 of the time per token: about twice the output tok/s at C=1 (1.47 measured
    # beside a loaded suite on two cores: the first token's share of a short answer grows)
    (c1,) = [c for c in mtp["decision"]["vs_parent"] if c["concurrency"] == 1]
    assert c1["ratio"] > 1.3


ALSO_CHANGED = """
[campaign]
name = "also"
title = "what else a flag changed"
margin = 0.05

[server]
engine = "sim"
args = { port = PORT, ttft-ms = 5, itl-ms = 2 }
ready_timeout_s = 30

[workload]
concurrency = [1]
requests_per_level = 6
input_tokens = 8
output_tokens = 8
repetitions = 1
warmup_requests = 1
warmup = FAST_WARMUP

[[experiment]]
id = "baseline"
why = "reference"

[[experiment]]
id = "cap-8"
why = "at most 8 requests running"
args = { max-running-requests = 8 }
""".replace("FAST_WARMUP", FAST_WARMUP)


def test_what_else_a_flag_changed_is_read_from_the_log_and_said(
    tmp_path: Path, cache: Path
) -> None:
    """The simulator, like SGLang, derives its captured batch sizes from the running cap:
    ``--max-running-requests 8`` also moves ``cuda_graph_max_bs`` from 160 to 8, which no flag
    names. The run records each start's resolved configuration, the decision log lists what
    else changed, and the verdict's explanation says it."""
    data, run_dir = run_campaign(tmp_path, ALSO_CHANGED, cache)
    base, cap = data["experiments"]
    assert base["engine_config"]["cuda_graph_max_bs"] == 160
    assert "also_changed" not in base  # nothing else changed: left out
    assert cap["also_changed"] == [{"key": "cuda_graph_max_bs", "before": 160, "after": 8}]
    res = reportgen_main("render", run_dir, "--no-pdf", cache=cache)
    assert res.returncode == 0, res.stderr
    html = (run_dir / "report.html").read_text()
    assert "Also changed" in html
    assert "CUDA graphs captured up to a batch of 8 instead of 160" in html
