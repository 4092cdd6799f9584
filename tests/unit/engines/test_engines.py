"""Engine adapters: how flags are written for each engine, and the check of a campaign's flags
against the engine's own --help (a recorded SGLang 0.5.23 help, and real help commands)."""

from __future__ import annotations

import json
import lzma
import sys
import time
from pathlib import Path

from reportgen import campaign, engines
from reportgen.run import plan as planner
from reportgen.run.server import ServerProcess
from tests.conftest import ROOT

SGLANG_HELP = ROOT / "tests" / "fixtures" / "engines" / "sglang-0.5.23-help.txt.xz"


def test_flags_as_each_engine_writes_them() -> None:
    args = {
        "model": "/m",
        "port": 8000,
        "enable-prefix-caching": False,
        "enforce-eager": True,
        "speculative-config": {"method": "eagle3", "num_speculative_tokens": 3},
        "cuda-graph-sizes": [1, 2, 4],
    }
    vllm = engines.get("vllm").format_args(args)
    assert vllm[0] == "/m"  # `vllm serve MODEL`
    assert "--no-enable-prefix-caching" in vllm and "--enforce-eager" in vllm
    at = vllm.index("--speculative-config")
    assert json.loads(vllm[at + 1]) == {"method": "eagle3", "num_speculative_tokens": 3}
    assert vllm[vllm.index("--cuda-graph-sizes") :][:4] == ["--cuda-graph-sizes", "1", "2", "4"]
    sglang = engines.get("sglang").format_args({"model-path": "/m", "disable-cuda-graph": False})
    assert sglang == ["--model-path", "/m"]  # store_true flags: false leaves them out
    tf = engines.get("transformers").format_args({"model": "/m", "compile": False, "port": 1})
    assert tf == ["/m", "--no-compile", "--port", "1"]
    assert engines.get("transformers").request_extras(16) == {}  # it answers 422 to ignore_eos
    assert engines.get("sglang").request_extras(16) == {"ignore_eos": True, "min_tokens": 16}


def test_qwen397b_campaign_flags_are_all_sglangs() -> None:
    flags = engines.Flags.parse(
        ["sglang", "--help"], lzma.decompress(SGLANG_HELP.read_bytes()).decode()
    )
    assert len(flags.names) > 500 and "flashinfer_cutlass" in flags.choices["moe-runner-backend"]
    c = campaign.load(ROOT / "campaigns" / "qwen397b.toml")
    for r in planner.plan(c):
        assert flags.problems(r.args) == [], r.id
    bad = flags.problems(
        {"speculative-algo": "NEXTN", "moe-runner-backend": "flashinfer_cutlas", "tp-size": 8}
    )
    assert bad[0] == (
        "speculative-algo",
        "NEXTN",
        "not a flag of this engine; did you mean --speculative-algorithm?",
    )
    assert bad[1][:2] == ("moe-runner-backend", "flashinfer_cutlas")
    assert bad[1][2].startswith("not one of its choices {") and len(bad) == 2


HELP_PROGRAM = """
import argparse
p = argparse.ArgumentParser()
p.add_argument("--dtype", choices=["auto", "half", "bfloat16"])
p.add_argument("--max_model_len", type=int)
p.add_argument("--enable-thing", action=argparse.BooleanOptionalAction)
p.parse_args()
"""


def test_flags_read_from_a_real_help_command() -> None:
    flags = engines.read_flags([sys.executable, "-c", HELP_PROGRAM, "--help"])
    assert flags.error is None and {"dtype", "max-model-len", "no-enable-thing"} <= flags.names
    assert flags.problems({"dtype": "half", "max-model-len": 4096, "enable-thing": False}) == []
    assert flags.problems({"dtype": "fp8"}) == [
        ("dtype", "fp8", "not one of its choices {auto,half,bfloat16}")
    ]
    assert flags.record()["flags"] == len(flags.names)


def test_no_engine_here_skips_the_check_and_a_hung_help_is_stopped(tmp_path: Path) -> None:
    missing = engines.read_flags([str(tmp_path / "no-such-engine"), "--help"])
    assert missing.error and missing.error.startswith("cannot run it")
    assert missing.problems({"anything": 1}) == []  # the engine judges its flags at start
    failing = engines.read_flags([sys.executable, "-c", "raise SystemExit('no module sglang')"])
    assert failing.error == "exit code 1: no module sglang"
    pid_file = tmp_path / "child.pid"
    hang = (
        "import subprocess, sys, time; "
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pid_file)!r}, 'w').write(str(c.pid)); time.sleep(60)"
    )
    hung = engines.read_flags([sys.executable, "-c", hang], timeout_s=2)
    assert hung.error == "no answer within 2 s"
    child = int(pid_file.read_text())
    assert not running(child)  # its whole process group was stopped, the child too


def running(pid: int) -> bool:
    """Alive and not a zombie (a zombie waits for its reaper, but runs nothing)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        if state == "Z":
            return False
        time.sleep(0.05)
    return True


def test_a_dead_generation_loop_is_found_in_the_log(tmp_path: Path) -> None:
    """transformers serve 5.17.0 on the H200 (float16 with CUDA graphs): its generation loop
    died in graph capture and it answered 503 for ever. That log line, recorded there, is
    what ends the experiment; read as the server writes it, a line at a time."""
    recorded = ROOT / "tests" / "fixtures" / "engines" / "transformers-5.17.0-dead-loop.log"
    text = recorded.read_text()
    eng = engines.get("transformers")
    line = eng.fatal_in(text)
    assert line is not None and line.startswith("2026-11-30 05:19:16,645 - Continuous")
    assert "Error in generation loop: Cannot copy between CPU and CUDA tensors" in line
    assert eng.fatal_in(text.splitlines()[0]) is None  # "Request received": healthy
    log = tmp_path / "server.log"
    srv = ServerProcess(["true"], env={}, log_path=log, host="127.0.0.1", port=1, engine=eng)
    head, cut, rest = text.partition("Error in generation")
    log.write_text(head)
    assert srv.fatal_line() is None
    log.write_text(head + cut)  # the line is not whole yet
    assert srv.fatal_line() is None
    log.write_text(text)
    assert srv.fatal_line() == line.strip()
    excerpt = srv.fatal_excerpt()  # what the report shows: the line and the traceback after it
    assert excerpt.startswith("2026-11-30 05:19:16,645") and "\nTraceback" in excerpt
    assert engines.get("sglang").fatal_in(text) is None  # each engine its own lines
