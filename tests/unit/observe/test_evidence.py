"""The engine's own evidence: Prometheus deltas and log lines worked out by hand, model config
hashes, and a small campaign against the simulator recording all of it per level."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from reportgen import engines
from reportgen.observe import evidence
from tests.builders import run_small

T = "[2026-11-29 10:0"
SGLANG_LOG = "\n".join(
    [
        f"{T}0:01] server_args=ServerArgs(model_path='/models/qwen', tp_size=8, "
        "disable_custom_all_reduce=False)",
        f"{T}0:40] WARNING: Custom allreduce is disabled because it's not supported on more "
        "than two PCIe-only GPUs.",
        f"{T}1:10] Capture cuda graph end. Time elapsed: 12.3 s",
        f"{T}1:12] The server is fired up and ready to roll!",
        f"{T}2:00] Decode batch. #running-req: 4, #token: 900, accept len: 2.71, "
        "gen throughput (token/s): 180.2",
        f"{T}2:01] ERROR: something odd",
    ]
)


def test_deltas_by_hand() -> None:
    same = {"h_sum": ["histogram", 1.5]}
    before = {"series": {"a_total": ["counter", 10.0], "g": ["gauge", 3.0], **same}}
    after = {"series": {"a_total": ["counter", 25.0], "g": ["gauge", 7.0], **same}}
    # appeared between the scrapes: created since, from zero (SGLang creates its counters
    # at the first request that moves them)
    after["series"]["new_total"] = ["counter", 2.0]
    assert evidence.deltas(before, after) == {
        "counters": {"a_total": 15.0, "new_total": 2.0},
        "gauges": {"g": 7.0},
    }
    assert evidence.deltas({"error": "HTTP 404"}, after) == {"error": "HTTP 404"}


def test_sglang_log_lines_that_matter() -> None:
    found = evidence.log_evidence(SGLANG_LOG, engines.get("sglang").patterns())
    f = found["found"]
    assert f["server_args"].endswith("disable_custom_all_reduce=False)")
    assert "more than two PCIe-only GPUs" in f["custom_all_reduce_disabled"]  # a no-op, said
    assert f["cuda_graph_captured"].endswith("Time elapsed: 12.3 s")
    assert f["ready"].endswith("ready to roll!") and "accept len: 2.71" in f["decode_batch"]
    assert found["warnings"] == 1 and found["errors"] == 1
    assert evidence.server_args(f) == {
        "model_path": "/models/qwen",
        "tp_size": 8,
        "disable_custom_all_reduce": False,
    }
    vllm = {"non_default_args": "INFO non-default args: {'model': 'q', 'tensor_parallel_size': 8}"}
    assert evidence.server_args(vllm) == {"model": "q", "tensor_parallel_size": 8}
    nested = "x server_args=ServerArgs(a=[1, 2], b='c,d', e=Foo(1), f={'g': (1, 2)})"
    assert evidence.server_args({"server_args": nested}) == {
        "a": [1, 2],
        "b": "c,d",
        "e": "Foo(1)",
        "f": {"g": (1, 2)},
    }
    assert evidence.server_args({"ready": "x"}) is None
    assert found["error_lines"] == ["[2026-11-29 10:02:01] ERROR: something odd"]


def test_model_config_hashes(tmp_path: Path) -> None:
    model = tmp_path / "qwen"
    model.mkdir()
    quant = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
    config = {"architectures": ["Qwen3MoeForCausalLM"], "quantization_config": quant}
    (model / "config.json").write_text(json.dumps(config))
    got = evidence.model_files({"model-path": "qwen"}, tmp_path)
    assert (
        got["files"]["config.json"]
        == hashlib.sha256((model / "config.json").read_bytes()).hexdigest()
    )
    assert got["quantization"] == "modelopt" and len(got["quantization_config_sha256"]) == 64
    assert evidence.model_files({"model": "Qwen/Qwen3-8B"}, tmp_path)["error"].startswith(
        "not a local"
    )
    assert "error" in evidence.model_files({}, tmp_path)


@pytest.mark.slow
def test_a_campaign_records_the_engines_evidence(tmp_path: Path, cache: Path) -> None:
    data = run_small(tmp_path, "", cache)
    exp = data["experiments"][0]
    assert exp["engine_info"]["/v1/models"]["data"][0]["id"] == "sim-model"
    for level in exp["levels"]:
        counters = level["engine_metrics"]["counters"]
        assert counters["sim:requests_total"] == 12  # requests_per_level, nothing else
        assert counters["sim:generation_tokens_total"] == 12 * 6
        assert level["engine_metrics"]["gauges"]["sim:num_running_reqs"] == 0
    assert exp["log_evidence"]["found"]["ready"].startswith("sim: ready on")
    assert exp["model_files"] == {"error": "no model argument in the server's flags"}
    page = (data["_run_dir"] / "report.html").read_text()
    assert "The engine's own evidence" in page and "sim:requests_total +12" in page
