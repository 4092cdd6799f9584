"""The load generator against the simulator on loopback: records, timings, tokens, errors."""

from __future__ import annotations

import asyncio

import pytest

from reportgen.analysis.summary import summarize
from reportgen.loadgen import RequestSpec, run_level
from reportgen.prompts import synthetic
from tests.conftest import Sim


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_closed_loop_level_records_every_chunk(sim: Sim, api: str) -> None:
    spec = RequestSpec(api=api, model=None, output_tokens=10)
    prompts = synthetic(8, 12, seed=1)
    done: list[int] = []
    lv = asyncio.run(
        run_level(sim.url, spec, prompts, 4, requests=8, on_request=lambda r: done.append(r.index))
    )
    assert sorted(done) == list(range(8))
    assert [r.index for r in lv.records] == list(range(8))
    for r in lv.records:
        assert r.status == "ok", r.error
        assert r.output_tokens == 10 and r.output_tokens_source == "usage"
        assert r.input_tokens == 12  # the simulator counts words
        assert len(r.chunk_times) == 10  # one token per chunk
        assert r.first_token == r.chunk_times[0]
        assert r.start < r.first_token <= r.chunk_times[-1] <= r.end
        # --ttft-ms 20 --itl-ms 2 (growth with 4 active): TTFT 20-40 ms, chunks >= 2 ms apart
        assert 0.015 < r.first_token - r.start < 0.2
        assert r.output_text.strip()
    s = summarize([r.as_dict() for r in lv.records], lv.duration_s)
    assert s["ok"] == 8 and s["errors"] == 0
    assert s["output_tokens"] == 80
    assert s["output_tok_s"] == pytest.approx(80 / lv.duration_s)
    assert 1.5 < s["achieved_concurrency"] <= 4.01
    assert 15 < s["ttft_ms"]["p50"] < 200
    assert 1.5 < s["itl_ms"]["p50"] < 20


def test_non_streaming_and_duration_mode(sim: Sim) -> None:
    spec = RequestSpec(api="chat", model="sim-model", output_tokens=5, stream=False)
    lv = asyncio.run(run_level(sim.url, spec, synthetic(50, 5, 2), 2, duration_s=0.5))
    assert lv.records and all(r.status == "ok" for r in lv.records)
    assert all(r.output_tokens == 5 and r.output_tokens_source == "usage" for r in lv.records)
    # Requests stop being issued once the duration has passed; in-flight ones finish.
    assert lv.duration_s < 0.5 + 0.5


def test_server_errors_are_recorded_per_request(sim: Sim) -> None:
    spec = RequestSpec(api="chat", model=None, output_tokens=0)  # the simulator rejects 0
    lv = asyncio.run(run_level(sim.url, spec, ["hello"], 1, requests=2))
    assert [r.status for r in lv.records] == ["error", "error"]
    assert lv.records[0].http_status == 400 and lv.records[0].error.startswith("HTTP 400")
    s = summarize([r.as_dict() for r in lv.records], lv.duration_s)
    assert s["errors"] == 2 and s["output_tok_s"] == 0
    assert s["error_kinds"] == {"HTTP 400": 2}


def test_connection_refused_is_an_error_not_a_crash() -> None:
    from tests.conftest import free_port

    spec = RequestSpec(api="chat", model=None, output_tokens=3)
    lv = asyncio.run(run_level(f"http://127.0.0.1:{free_port()}", spec, ["x"], 1, requests=1))
    assert lv.records[0].status == "error" and "ConnectError" in (lv.records[0].error or "")
