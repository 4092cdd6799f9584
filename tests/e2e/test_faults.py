"""A campaign against servers that fail in every way a real one does (`reportgen sim --fault`):
each fault is recorded with its reason at the request, the level or the experiment, the
campaign goes on, the report shows what happened, and no server is left running."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import Ran, free_port, port_open, reportgen_main

# experiment id -> (--fault, what the request errors say)
REQUEST_FAULTS = {
    "hang": ("hang", "timeout"),
    "http-400": ("http-400", "HTTP 400"),
    "http-429": ("http-429", "HTTP 429"),
    "http-500": ("http-500", "HTTP 500"),
    "bad-sse": ("bad-sse", "stream ended without [DONE]"),
    "bad-json": ("bad-json", "invalid JSON in stream"),
    "drop": ("drop", "stream ended without [DONE]"),
    "error-in-stream": ("error-in-stream", "error in stream"),
}
START_FAULTS = {
    "exit-at-start": ("exit-at-start", "server exited with code 1 before it was ready"),
    "never-ready": ("never-ready", "server was not ready after 4 s (waiting for its health"),
    "crash": ("exit", "server exited with code 3 during C=1 repetition 1"),
    # The process lives on, answering 503: its log's fatal line ends the experiment at once.
    "dead-at-start": (
        "dead-loop",
        "server reported a fatal error before it was ready: sim: error in generation loop",
    ),
    "dead-loop": (
        "dead-loop",
        "server reported a fatal error during C=1 repetition 1: sim: error in generation loop",
    ),
    # C=1 finished before the loop died: kept, compared and drawn; the verdict stays failed
    "dead-later": (
        "dead-loop",
        "server reported a fatal error during C=2 repetition 1: sim: error in generation loop",
    ),
}
FAULT_AFTER = {"dead-at-start": 0, "dead-later": 7}


def campaign(port: int) -> str:
    text = f"""
[campaign]
name = "faults"
title = "Every fault a server shows"
objective = {{ metric = "output_tok_s", concurrency = [1], direction = "higher" }}

[server]
engine = "sim"
args = {{ port = {port}, ttft-ms = 5, itl-ms = 2, fault-after = 3 }}
ready_timeout_s = 4
stop_timeout_s = 4

[workload]
concurrency = [1, 2]
requests_per_level = 4
input_tokens = 16
output_tokens = 8
warmup_requests = 1
request_timeout_s = 2
warmup = {{ steady = false }}  # the faults come after a fixed number of requests

[[experiment]]
id = "baseline"
why = "No fault."
"""
    for exp_id, (fault, _) in {**START_FAULTS, **REQUEST_FAULTS}.items():
        text += f'\n[[experiment]]\nid = "{exp_id}"\nwhy = "--fault {fault}"\n'
        after = f", fault-after = {FAULT_AFTER[exp_id]}" if exp_id in FAULT_AFTER else ""
        text += f'args = {{ fault = "{fault}"{after} }}\n'
    return text


def run(path: Path, out: Path, cache: Path) -> Ran:
    """`reportgen run PATH --output OUT --quiet --no-pdf`, to its end (in this process: the
    processes whose faults are tested are the servers)."""
    return reportgen_main("run", path, "--output", out, "--quiet", "--no-pdf", cache=cache)


def sims_alive(port: int) -> list[int]:
    """Processes still running a simulator on our port (there must be none)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"reportgen.sim" in cmd and str(port).encode() in cmd:
            found.append(int(proc.name))
    return found


@pytest.mark.slow
def test_every_fault_is_recorded_and_the_campaign_goes_on(tmp_path: Path, cache: Path) -> None:
    port = free_port()
    path = tmp_path / "faults.toml"
    path.write_text(campaign(port))
    res = run(path, tmp_path / "out", cache)
    assert res.returncode == 0, res.stdout + res.stderr  # failures are results
    assert "Traceback" not in res.stdout + res.stderr
    # the console says a run whose numbers a check invalidated is not ok
    assert "hang: ran - verdict failed: its check 'Requests succeeded' failed" in res.stdout
    assert ": ok - failed" not in res.stdout
    (run_dir,) = (tmp_path / "out" / "faults").iterdir()
    data = json.loads((run_dir / "results.json").read_text())
    assert data["status"] == "complete"
    exps = {e["id"]: e for e in data["experiments"]}
    assert exps["baseline"]["status"] == "ok"
    assert exps["baseline"]["decision"]["verdict"] == "baseline"
    html = (run_dir / "report.html").read_text()
    for exp_id, (_, reason) in START_FAULTS.items():  # at the experiment: failed, and why
        e = exps[exp_id]
        assert e["status"] == "failed" and e["reason"].startswith(reason), (exp_id, e["reason"])
        assert e["decision"]["verdict"] == "failed"
        assert reason in html
    assert "fault: exiting mid-run" in exps["crash"]["log_tail"]  # the log's last lines
    crashed = exps["crash"]["levels"][0]["summary"]  # the level it died in is kept
    assert crashed["errors"] >= 1 and crashed["ok"] >= 2
    assert exps["dead-at-start"]["levels"] == []
    for exp_id in ("dead-at-start", "dead-loop"):  # the fatal line and its traceback, distilled
        e = exps[exp_id]
        assert e["log_heading"] == "The server's first error, its traceback distilled"
        assert e["log_tail"].startswith("sim: error in generation loop"), e["log_tail"]
        last = e["log_tail"].splitlines()[-1]  # the exception's message, whole
        assert last.startswith("RuntimeError: CUDA out of memory (simulated).")
        assert last.endswith("says where the memory went (simulated fault (--fault dead-loop))")
        assert "in _dead_generation_loop" in e["log_tail"]
        assert "HTTP/1.1" not in e["log_tail"]  # not the requests refused after it
    assert "The server&#39;s first error, its traceback distilled (<code>logs/dead-loop" in html
    dead = exps["dead-loop"]["levels"]  # stopped after the level the loop died in
    assert len(dead) == 1 and dead[0]["summary"]["ok"] == 2
    assert dead[0]["summary"]["error_kinds"] == {"HTTP 503": 2}
    later = exps["dead-later"]  # C=1 finished before the loop died in C=2: compared
    assert [lv["aborted"] is None for lv in later["levels"]] == [True, False]
    decided = later["decision"]
    assert decided["verdict"] == "failed" and decided["before_failure"] == [1]
    (c1,) = decided["vs_baseline"]
    assert (c1["metric"], c1["concurrency"]) == ("output_tok_s", 1)
    # its C=1 over the baseline's, whatever a busy host made of either (0.19 was seen)
    tok_s = [e["levels"][0]["summary"]["output_tok_s"] for e in (later, exps["baseline"])]
    assert c1["ratio"] == pytest.approx(tok_s[0] / tok_s[1], rel=1e-6), (c1, tok_s)
    assert "The levels it finished before that (C=1) are compared, but decide nothing" in html
    assert exps["dead-loop"]["decision"]["before_failure"] is None  # it died in its first
    for exp_id, (_, kind) in REQUEST_FAULTS.items():  # at each request and level
        e = exps[exp_id]
        assert e["status"] == "ok", (exp_id, e.get("reason"))
        by_c = {lv["concurrency"]: lv["summary"] for lv in e["levels"]}
        assert by_c[1]["ok"] == 2 and by_c[1]["error_kinds"] == {kind: 2}, (exp_id, by_c[1])
        assert by_c[2]["error_kinds"] == {kind: 4}, (exp_id, by_c[2])
        checks = {c["id"]: c["status"] for c in e["checks"]}
        assert checks["request_errors"] == "fail"
        assert e["decision"]["verdict"] == "failed"  # its numbers are not trusted
        assert f"C=2: 4 of 4 request(s) failed: {kind} (4)" in html
    for e in data["experiments"]:
        stop = e.get("stop") or {}
        assert stop.get("group_gone", True) and stop.get("port_free", True), e["id"]
    assert not port_open(port) and sims_alive(port) == []


CUT_SHORT = """
[campaign]
name = "cut"
title = "Levels cut short"
objective = {{ metric = "output_tok_s", concurrency = [2], direction = "higher" }}

[server]
engine = "sim"
args = {{ port = {port}, ttft-ms = 5, itl-ms = 2, fault-after = 6 }}
ready_timeout_s = 10
stop_timeout_s = 4

[workload]
concurrency = [2]
duration_s = 60
input_tokens = 16
output_tokens = 8
warmup_requests = 1
request_timeout_s = 5
warmup = {{ steady = false }}  # the fault comes a fixed number of requests in

[[experiment]]
id = "baseline"
why = "No fault, one short level."
workload = {{ duration_s = 1 }}

[[experiment]]
id = "crash"
why = "--fault exit, the load in this thread"
args = {{ fault = "exit" }}
workload = {{ workers = 1 }}

[[experiment]]
id = "dead-loop"
why = "--fault dead-loop, the load in two processes"
args = {{ fault = "dead-loop" }}
workload = {{ workers = 2 }}

[[experiment]]
id = "crash-warming"
why = "--fault exit while C=2 warms up until steady"
args = {{ fault = "exit" }}
workload = {{ workers = 1, warmup = {{ steady = true, max_s = 60 }} }}
"""


@pytest.mark.slow
def test_a_level_is_cut_short_when_its_server_dies(tmp_path: Path, cache: Path) -> None:
    """A 60-second level whose server exits, or logs that it can no longer generate, a few
    requests in: it ends within about a second, keeping the requests finished by then, not
    a minute of requests failing at once; the experiment fails with the reason."""
    port = free_port()
    path = tmp_path / "cut.toml"
    path.write_text(CUT_SHORT.format(port=port))
    began = time.monotonic()
    res = run(path, tmp_path / "out", cache)
    took = time.monotonic() - began
    assert res.returncode == 0, res.stdout + res.stderr
    assert took < 60, took  # less than one of the 60-second levels (or warm-ups) it planned
    (run_dir,) = (tmp_path / "out" / "cut").iterdir()
    exps = {e["id"]: e for e in json.loads((run_dir / "results.json").read_text())["experiments"]}
    assert exps["baseline"]["status"] == "ok"
    for exp_id, why, failure in (
        ("crash", "server exited with code 3", {"kind": "exited", "exit_code": 3}),
        (
            "dead-loop",
            "server reported a fatal error: sim: error in generation loop",
            {"kind": "fatal", "exit_code": None},
        ),
    ):
        e = exps[exp_id]
        assert e["status"] == "failed" and "during C=2 repetition 1" in e["reason"], e["reason"]
        # the same as data: what happened, in which level run
        assert e["failure"] == {**failure, "level": 2, "repetition": 0}, e["failure"]
        (level,) = e["levels"]
        assert level["aborted"].startswith(why), level["aborted"]
        assert level["window"]["duration_s"] < 10  # of the 60 planned
        assert 1 <= level["summary"]["ok"] <= 5  # the 5 served after the warm-up, or fewer
    # dying while the level warms up: nothing measured, the experiment failed there, at once
    warming = exps["crash-warming"]
    assert warming["status"] == "failed" and warming["levels"] == []
    assert warming["reason"].startswith("server exited with code 3 during C=2's warm-up")
    assert warming["failure"] == {
        "kind": "exited",
        "exit_code": 3,
        "level": None,
        "repetition": None,
    }
    html = (run_dir / "report.html").read_text()
    assert "C=2 repetition 1: cut short after " in html and "(server exited with code 3)" in html
    assert not port_open(port) and sims_alive(port) == []


def test_a_failed_baseline_fails_the_run(tmp_path: Path, cache: Path) -> None:
    # failures are results, but with no baseline nothing was compared: a script (or CI) that
    # runs a campaign must not read "every server failed to start" as success
    port = free_port()
    text = campaign(port).split("\n[[experiment]]")[0]
    for exp_id in ("baseline", "other"):
        text += f'\n[[experiment]]\nid = "{exp_id}"\nwhy = "Fails."\n'
        text += 'args = { fault = "exit-at-start" }\n'
    path = tmp_path / "faults.toml"
    path.write_text(text)
    res = run(path, tmp_path / "out", cache)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    err = " ".join(res.stderr.split())
    assert "2 experiment(s) failed: baseline, other" in err
    assert "the baseline (baseline) failed, so no experiment could be compared with it" in err
    (run_dir,) = (tmp_path / "out" / "faults").iterdir()
    assert (run_dir / "report.html").exists()  # the report of what happened is still written
    assert not port_open(port)
