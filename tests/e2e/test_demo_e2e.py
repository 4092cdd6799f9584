"""The demo campaign end to end, as `make demo` runs it, and what a reader gets from it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pypdf import PdfReader

from reportgen import results
from reportgen.observe.fingerprint import NO_TORCH_PROBE_ENV
from reportgen.render.fmt import fmt_num
from tests.conftest import ROOT, Ran, free_port, port_open, reportgen_main, small_demo

DEMO = ROOT / "campaigns" / "demo.toml"
DEMO_PORT = 18427
CHROMIUM = "/usr/bin/chromium"

# The module's shared demo run (its fixture, in the first test's setup) took 130 s on an idle
# two-core machine and more than the suite's 300 s beside two other workers: it gets 600.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def run_dir_of(output: Path, res: Ran) -> Path:
    folder = output / "demo"
    assert folder.is_dir(), f"no run directory; the run said:\n{res.stdout}\n{res.stderr}"
    runs = sorted(folder.iterdir())
    assert len(runs) == 1, runs
    return runs[0]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> tuple[Path, Ran]:
    """`reportgen run campaigns/demo.toml --quiet` once for the module (in this process,
    with the session's calibration); the tests only read what it wrote and printed."""
    output = tmp_path_factory.mktemp("output")
    res = reportgen_main("run", DEMO, "--output", output, "--quiet", cache=cache)
    return run_dir_of(output, res), res


def test_demo_runs_to_the_end_and_prints_the_report(demo_run: Any) -> None:
    run_dir, res = demo_run
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert f"report: {run_dir / 'report.html'}" in res.stdout
    assert f"report: {run_dir / 'report.pdf'}" in res.stdout
    assert "typo-in-flag" in res.stdout  # the closing summary table lists every experiment
    assert not port_open(DEMO_PORT), "a server was left running"


def test_demo_outcomes_differ_as_designed(demo_run: Any) -> None:
    run_dir, _ = demo_run
    data = json.loads((run_dir / "results.json").read_text())
    assert data["status"] == "complete" and data["engine"]["simulated"] is True
    exps = {e["id"]: e for e in data["experiments"]}
    verdicts = {k: e["decision"]["verdict"] for k, e in exps.items()}
    assert verdicts["baseline"] == "baseline"
    assert verdicts["fast-decode-kernel"] == "adopted"
    assert verdicts["bigger-batches"] == "rejected"
    # within noise (TTFT 30 -> 29 ms): no gain, no loss at any objective level, however
    # wide the interval came out
    assert verdicts["prefill-chunk"] in ("equivalent", "inconclusive")
    for c in exps["prefill-chunk"]["decision"]["vs_parent"]:
        assert c["verdict"] in ("equivalent", "inconclusive"), c
        assert 0.95 < c["ratio"] < 1.05, c
    assert verdicts["typo-in-flag"] == "failed"
    assert data["best"] == "fast-decode-kernel"
    # faster on paper, but its golden answer loops: "failed", never "adopted"
    broken = exps["fast-but-broken"]
    assert broken["status"] == "ok" and verdicts["fast-but-broken"] == "failed"
    assert "Outputs sane" in broken["decision"]["explanation"]
    sane = {c["id"]: c for c in broken["checks"]}["outputs_sane"]
    assert sane["status"] == "fail" and "ends in a loop: 'France'" in sane["evidence"]
    assert broken["probes"][0]["answer"].startswith(" The capital of France France")
    assert exps["baseline"]["probes"][0]["answer"] == " The capital of France is Paris."
    failed = exps["typo-in-flag"]
    assert failed["status"] == "failed" and "before it was ready" in failed["reason"]
    assert "unrecognized arguments: --itl-msec 2" in failed["log_tail"]
    # bigger-batches was based on "best", which had become fast-decode-kernel.
    assert exps["bigger-batches"]["parent"] == "fast-decode-kernel"
    assert {"key": "itl-growth", "kind": "changed", "before": 0.03, "after": 0.15} in exps[
        "bigger-batches"
    ]["flag_diff"]
    for e in exps.values():
        if e["status"] == "ok":
            assert e["stop"]["group_gone"] and e["stop"]["port_free"]
            # levels x repetitions (one more where its starts disagreed, one more where it
            # could still be shown equivalent: campaign.more_starts)
            more = ("more_start" in e) + ("more_open" in e)
            assert len(e["levels"]) == 3 * (3 + more), (e.get("more_start"), e.get("more_open"))
            summary = e["levels"][0]["summary"]
            assert summary["errors"] == 0 and summary["output_tok_s"] > 0
    # every headline metric against the parent, p99 latencies too: bigger-batches' slower
    # decode shows in its end-to-end tail at C=16
    every = {
        (c["metric"], c["concurrency"]): c
        for c in exps["bigger-batches"]["decision"]["metrics"]["vs_parent"]
    }
    assert {m for m, _ in every} == {
        "output_tok_s", "req_s", "ttft_ms", "itl_ms", "e2e_ms", "ttft_ms_p99", "e2e_ms_p99"
    }  # fmt: skip
    # its ratio above 1 (by design, diluted toward 1 when other tests share the cores:
    # 1.09 seen once); no interval: 3 x 16 requests a side hold under one above p99
    tail = every[("e2e_ms_p99", 16)]
    assert tail["ratio"] > 1.03 and tail["ci_low"] is None
    assert (tail["verdict"], tail["limit"]) == ("inconclusive", "too few above")
    # assumption checks on every experiment that measured; none invalidates the demo
    base_checks = {c["id"]: c for c in exps["baseline"]["checks"]}
    assert base_checks["request_errors"]["status"] == "pass"
    assert base_checks["output_lengths"]["status"] == "pass"
    # repetitions agree, or the check says where they did not: its number is the baseline's
    # largest coefficient of variation of output tok/s, and its status follows the bound
    spread = base_checks["repetition_spread"]
    cvs = {
        lv["concurrency"]: lv["output_tok_s"]["sd"] / lv["output_tok_s"]["mean"]
        for lv in exps["baseline"]["by_level"]
    }
    worst = max(cvs, key=lambda c: cvs[c])
    assert f"{cvs[worst]:.1%} at C={worst} (bound " in spread["evidence"], (cvs, spread)
    bound = float(re.findall(r"bound (\d+)%", spread["evidence"])[0]) / 100
    assert spread["status"] == ("pass" if cvs[worst] <= bound else "warn"), spread
    assert base_checks["telemetry"]["status"] == "warn"  # no GPU here: said, not hidden
    # the experiment that never started gets only the checks that need no measurement
    typo = {c["id"]: c["status"] for c in exps["typo-in-flag"]["checks"]}
    assert set(typo) == {
        "server_stable", "outputs_sane", "gpu_errors", "host_matches", "campaign_0"}  # fmt: skip
    assert typo["server_stable"] == typo["outputs_sane"] == typo["campaign_0"] == "skip"
    # the simulator counts its tokens as the client does, and its prefix cache misses
    checks = {c["id"]: c for c in exps["fast-decode-kernel"]["checks"]}
    assert checks["token_agreement"]["status"] == "pass", checks["token_agreement"]
    assert "largest difference 0.0%" in checks["token_agreement"]["evidence"]
    assert checks["prefix_cache"]["status"] == "pass", checks["prefix_cache"]
    assert checks["steady_state"]["status"] == "pass", checks["steady_state"]
    assert checks["server_stable"]["status"] == "pass"
    page = (run_dir / "report.html").read_text()
    assert "5. Assumptions checked" in page and "Outputs as long as requested" in page
    table = results.load_requests(run_dir, "baseline")
    # every experiment that ran, a repetition more where its starts disagreed and where it
    # could still be shown equivalent (more_starts)
    extra = sum(("more_start" in e) + ("more_open" in e) for e in exps.values())
    assert len(results.load_requests(run_dir)) == 16 * 3 * (3 * 5 + extra)
    assert len(table) == 16 * 3 * 3
    assert all(len(t) == 24 for t in table["chunk_times"])  # every chunk's arrival time


def baseline_c1(run_dir: Path) -> float:
    data = json.loads((run_dir / "results.json").read_text())
    base = data["experiments"][0]
    by = {lv["concurrency"]: lv for lv in base["by_level"]}
    return float(by[1]["output_tok_s"]["mean"])


def test_pdf_reads_back_with_ids_and_numbers(demo_run: Any) -> None:
    run_dir, _ = demo_run
    reader = PdfReader(run_dir / "report.pdf")
    text = "\n".join(page.extract_text() for page in reader.pages)
    for exp in (
        "baseline",
        "fast-decode-kernel",
        "bigger-batches",
        "prefill-chunk",
        "typo-in-flag",
    ):
        assert exp in text, exp
    assert fmt_num(baseline_c1(run_dir)) in text
    assert "Simulated engine" in text
    # six experiments, two of them failed with their log's end: 8 or 9 pages (its warnings
    # vary with the host's load), within the budget of a campaign of ten
    assert 3 <= len(reader.pages) <= 10


def test_html_loads_in_headless_chromium_without_errors(demo_run: Any) -> None:
    if not os.path.exists(CHROMIUM):
        pytest.fail("Chromium is missing: run `make test`, which installs it")
    from playwright.sync_api import sync_playwright

    run_dir, _ = demo_run
    problems: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            page = browser.new_page(viewport={"width": 390, "height": 844})  # a phone
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto((run_dir / "report.html").as_uri())
            page.wait_for_load_state("load")
            body = page.inner_text("body")
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            svgs = page.locator("svg").count()
        finally:
            browser.close()
    assert problems == []
    assert [u for u in requests if not u.startswith(("file:", "data:"))] == []
    assert "fast-decode-kernel" in body and "typo-in-flag" in body
    assert fmt_num(baseline_c1(run_dir)) in body
    assert svgs >= 1  # charts are inline vector graphics
    assert overflow <= 1, "the page scrolls sideways on a phone"


def test_ctrl_c_stops_the_server_and_leaves_a_partial_report(tmp_path: Path, cache: Path) -> None:
    """Ctrl-C in the demo's second experiment (the demo made smaller: two levels of two
    repetitions, its own port), from a terminal: a process of its own."""
    port = free_port()
    demo = small_demo(tmp_path, port)
    proc = subprocess.Popen(
        [sys.executable, "-m", "reportgen", "run", str(demo), "--output", str(tmp_path)]
        + ["--quiet", "--no-pdf"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "XDG_CACHE_HOME": str(cache), NO_TORCH_PROBE_ENV: "1"},
        # as from a terminal, whatever this test runs under: a shell's background job
        # inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        results = None
        while time.monotonic() < deadline:
            runs = list((tmp_path / "demo").glob("*/results.json"))
            if runs:
                data = json.loads(runs[0].read_text())
                if data["experiments"][1]["status"] == "running":
                    results = runs[0]
                    break
            time.sleep(0.2)
        assert results is not None, "the second experiment never started"
        time.sleep(1.0)  # inside the second experiment's measurement
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    data = json.loads(results.read_text())
    assert data["status"] == "incomplete"
    assert data["experiments"][0]["status"] == "ok"
    assert data["experiments"][1]["status"] == "interrupted"
    assert data["experiments"][1]["stop"]["group_gone"]
    assert (results.parent / "report.html").exists()
    assert "INCOMPLETE" in (results.parent / "report.html").read_text().upper()
    assert not port_open(port)
