"""A real engine on the CPU: `transformers serve` with a tiny model built here, driven by
`reportgen run` end to end. Exercises what the simulator cannot: a real engine's flags and its
own --help, its protocol quirks (no [DONE], a 422 on fields it does not know, /v1/models
failing without a hub cache, SIGINT not enough to stop it under continuous batching), and a
model whose text is meaningless by construction."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import ROOT, Ran, free_port, port_open, reportgen_main

# Found, not imported: every xdist worker collects this file, and importing torch and fastapi
# there cost each worker 1.7 s of CPU (collecting this file alone: 2.83 -> 1.12 CPU-s) for an
# engine that runs in a process of its own.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None,
        reason="needs torch (make test installs the CPU build)",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("fastapi") is None,
        reason="needs transformers[serving] (make test installs it)",
    ),
]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("model") / "tiny-moe"
    res = subprocess.run(
        [sys.executable, "scripts/build_model.py", "--preset", "tiny", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    about = json.loads((out / "reportgen-model.json").read_text())
    assert about["preset"] == "tiny" and about["parameters"] < 1_000_000
    return out


def campaign(model: Path, port: int, *experiments: str) -> str:
    return f"""
[campaign]
name = "tf-cpu"
title = "transformers serve on the CPU, a tiny random model"
objective = {{ metric = "output_tok_s", concurrency = [1, 4], direction = "higher" }}
random_weights = true
# what an engine on the CPU takes to start (imports, the model) is most of this test's time:
# one start an experiment (the baseline still two) and no bracket at the end
starts = 1
bracket = false

[server]
engine = "transformers"
env = {{ OMP_NUM_THREADS = "1" }}
ready_timeout_s = 180
stop_timeout_s = 6

[server.args]
model = "{model}"
host = "127.0.0.1"
port = {port}
device = "cpu"
log-level = "info"

[workload]
api = "chat"
concurrency = [1, 4]
requests_per_level = 8
input_tokens = 32
output_tokens = 16
repetitions = 1
warmup_requests = 2
# generate() one request at a time on a shared CPU: its windows agree late (20 s at C=1 on a
# busy host), and the warm-up is not what this test reads: each level is measured after 1 s
# (with 5 s, three of a run's four level warm-ups ran the whole 5 s)
warmup = {{ max_s = 1 }}

[[probe]]
prompt = "Say hello."
expect = "hello"

[[experiment]]
id = "baseline"
why = "One request at a time through generate()."
{"".join(experiments)}
"""


CB = """
[[experiment]]
id = "continuous-batching"
why = "Paged attention and one batch for every request in flight."
args = { continuous-batching = true, cb-num-blocks = 64, cb-max-batch-tokens = 512 }
"""


def run(path: Path, out: Path, cache: Path) -> Ran:
    """`reportgen run PATH --output OUT` in this process (the engine is a process of its own)."""
    return reportgen_main("run", path, "--output", out, cache=cache)


def test_a_campaign_against_transformers_serve(model: Path, tmp_path: Path, cache: Path) -> None:
    port = free_port()
    path = tmp_path / "tf.toml"
    path.write_text(campaign(model, port, CB))
    res = run(path, tmp_path / "out", cache)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    (run_dir,) = (tmp_path / "out" / "tf-cpu").iterdir()
    results = json.loads((run_dir / "results.json").read_text())
    assert results["status"] == "complete"
    check = results["engine"]["flag_check"]
    assert check["error"] is None and check["flags"] > 20, check  # its own --help was read
    exps = {e["id"]: e for e in results["experiments"]}
    base, cb = exps["baseline"], exps["continuous-batching"]
    # the model is the positional argument; a boolean is its bare flag
    at = base["command"].index("serve")
    assert base["command"][at + 1] == str(model), base["command"]
    assert "--continuous-batching" in cb["command"] and "--cb-num-blocks" in cb["command"]
    for e in (base, cb):
        assert e["status"] == "ok", e.get("reason")
        assert e["stop"]["group_gone"] and e["stop"]["port_free"]
        assert [lv["concurrency"] for lv in e["levels"]] == [1, 4]
        assert all(lv["summary"]["errors"] == 0 for lv in e["levels"])
        checks = {c["id"]: c for c in e["checks"]}
        assert checks["request_errors"]["status"] == "pass"
        sane = checks["outputs_sane"]  # meaningless text is not judged, and says why
        assert sane["status"] == "skip" and "random weights" in sane["evidence"]
    assert base["log_evidence"]["found"]["continuous_batching"].endswith("CB: False")
    assert cb["log_evidence"]["found"]["continuous_batching"].endswith("CB: True")
    # greedy answers of the same weights: compared with the baseline's, not judged for sense
    agree = {c["id"]: c for c in cb["checks"]}["baseline_agreement"]
    same = agree["status"] == "pass" and agree["evidence"] == "1 answer(s) word for word the same"
    drifted = agree["status"] == "warn" and agree["evidence"].startswith("probe 1: same for ")
    assert same or drifted, agree
    rows = pd.read_parquet(run_dir / "requests" / "continuous-batching.parquet")
    assert len(rows) == 16 and set(rows["status"]) == {"ok"}
    # every answer ran to max_tokens (end of sequence outside the vocabulary), as the
    # engine counted them: its streams end without [DONE] but with usage
    assert set(rows["output_tokens"]) == {16} and set(rows["output_tokens_source"]) == {"usage"}
    log = (run_dir / "logs" / "baseline.server.log").read_text()
    assert 'HTTP/1.1" 422' not in log  # no field it rejects (ignore_eos, min_tokens) was sent
    # /v1/models (a 500 and a traceback here: it scans the hub's cache) asked once, while
    # waiting for readiness; each level's connections are opened with /health
    assert log.count("GET /v1/models") == 1 and log.count("GET /health") > 4
    html = (run_dir / "report.html").read_text()
    assert "continuous-batching" in html and "random weights" in html
    assert not port_open(port)


def test_a_misspelt_flag_stops_the_campaign_before_anything_starts(
    model: Path, tmp_path: Path, cache: Path
) -> None:
    port = free_port()
    path = tmp_path / "typo.toml"
    typo = CB.replace('id = "continuous-batching"', 'id = "typo"').replace(
        "continuous-batching = true", "continous-batching = true"
    )
    path.write_text(campaign(model, port, typo))
    res = run(path, tmp_path / "out", cache)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    err = " ".join(res.stderr.split())
    assert f"{path}: experiment 'typo': args.continous-batching = True: not a flag" in err
    assert "did you mean --continuous-batching?" in err and "nothing was started" in err
    assert not list((tmp_path / "out").rglob("results.json"))
    assert not port_open(port)


@pytest.mark.parametrize(
    "preset, arch", [("dense8b", "LlamaForCausalLM"), ("small", "Qwen3MoeForCausalLM")]
)
def test_a_config_only_model_names_its_architecture(tmp_path: Path, preset: str, arch: str) -> None:
    # SGLang 0.5.17 reads config.json's `architectures` before anything else and fails with a
    # TypeError where it is missing (a config saved without a model has none); vLLM guesses
    out = tmp_path / preset
    res = subprocess.run(
        [sys.executable, "scripts/build_model.py", "--preset", preset, "--eos", "in-vocab",
         "--config-only", "--out", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == [arch]
    assert not list(out.glob("*.safetensors"))  # no weights: --load-format dummy draws them
