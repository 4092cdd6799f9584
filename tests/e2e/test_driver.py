"""The driver and small campaigns against the simulator: prompt sources, open loop, SLOs,
trimming, tokenizer counts, client calibration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reportgen import campaign
from reportgen.campaign import Workload
from reportgen.load.loadgen import LevelRun, RequestRecord, RequestSpec
from reportgen.run import calibrate
from reportgen.run.driver import Driver
from tests.builders import SMALL, run_small


@pytest.mark.slow
def test_dataset_prompts_slo_and_trim_end_to_end(tmp_path: Path, cache: Path) -> None:
    (tmp_path / "d.jsonl").write_text(
        "".join(
            json.dumps({"prompt": f"question number {i} about streaming"}) + "\n" for i in range(5)
        )
    )
    data = run_small(
        tmp_path,
        'prompts = { source = "jsonl", path = "d.jsonl" }\nslo = { ttft_ms = 1000 }\ntrim = true',
        cache,
    )
    exp = data["experiments"][0]
    assert exp["status"] == "ok", exp.get("reason")
    table = data["_requests"]
    assert table["input_tokens"].max() == 5  # the dataset's prompts, counted by the server
    s = exp["levels"][-1]["summary"]
    assert s["goodput_req_s"] == pytest.approx(s["req_s"], rel=0.5)  # every request met 1 s
    assert s["slo_attainment"] == 1.0
    assert s["window_s"] is not None  # trimmed to the steady state
    assert data["client_ceiling"]["chunks_per_cpu_s"] > 0
    client = s["client"]
    assert client["cpu_s"] > 0 and client["limited"] is False and 0 < client["load"] < 0.8


@pytest.mark.slow
def test_open_loop_and_fixed_prompt(tmp_path: Path, cache: Path) -> None:
    data = run_small(
        tmp_path,
        'request_rate = 40\narrival = "constant"\n'
        'prompts = { source = "fixed", text = "one two three" }',
        cache,
    )
    exp = data["experiments"][0]
    assert exp["status"] == "ok", exp.get("reason")
    table = data["_requests"]
    assert set(table["input_tokens"]) == {3}
    lv = table[(table["concurrency"] == 4)].sort_values("index")
    gaps = lv["start"].diff().dropna()
    assert gaps.median() == pytest.approx(
        1 / 40, abs=0.01
    )  # arrivals at the rate, not on completion


def rec(i: int, input_tokens: int) -> RequestRecord:
    return RequestRecord(index=i, start=0.0, end=0.1, input_tokens=input_tokens)


def test_word_count_is_corrected_from_the_servers_prompt_tokens(tmp_path: Path) -> None:
    wl = Workload(input_tokens=100)
    drv = Driver(
        wl,
        "http://127.0.0.1:1",
        RequestSpec(api="chat", model=None, output_tokens=4),
        campaign_dir=tmp_path,
        tokenizer=None,
        ceiling=None,
        on_request=lambda r: None,
    )
    assert all(len(p.split()) == 100 for p in drv.requests(3, seed=0)[0])
    # The server counted 125 tokens for 100 words: next time send 80 words.
    drv._correct_length(LevelRun(1, 0.0, 1.0, [rec(0, 125), rec(1, 125)]))
    assert drv.words_per_token == pytest.approx(0.8)
    assert all(len(p.split()) == 80 for p in drv.requests(3, seed=0)[0])


def test_campaign_rejects_a_dataset_without_a_path() -> None:
    text = SMALL.format(port=1, extra='prompts = { source = "sharegpt" }')
    with pytest.raises(campaign.CampaignError, match="needs prompts.path"):
        campaign.loads(text, "c.toml")


def test_cached_calibration_is_reused(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    first = calibrate.calibrate()
    assert calibrate.calibrate() == first  # no second measurement


@pytest.mark.slow
def test_shared_prefix_prompts_hit_the_servers_prefix_cache(tmp_path: Path, cache: Path) -> None:
    # The simulator caches 16-word blocks: prompts of 64 words whose first 48 are one of two
    # prefixes are mostly served from its cache; distinct prompts are not.
    (tmp_path / "shared").mkdir()
    (tmp_path / "distinct").mkdir()
    longer = SMALL.replace("input_tokens = 8", "input_tokens = 64")
    shared = run_small(
        tmp_path / "shared",
        'prompts = { source = "shared-prefix", groups = 2, prefix_tokens = 48 }',
        cache,
        template=longer,
    )
    distinct = run_small(tmp_path / "distinct", "", cache, template=longer)
    got = {}
    for name, data in (("shared", shared), ("distinct", distinct)):
        exp = data["experiments"][0]
        assert exp["status"] == "ok", exp.get("reason")
        got[name] = next(c for c in exp["checks"] if c["id"] == "prefix_cache")
    share = float(got["shared"]["evidence"].split("%")[0]) / 100
    assert 0.5 < share <= 0.75, got["shared"]  # 48 of 64 words at most
    assert got["shared"]["status"] == "pass"
    assert "share text on purpose" in got["shared"]["evidence"]
    assert got["distinct"]["evidence"].startswith("0.0%"), got["distinct"]


def test_shared_prefix_needs_a_prefix_below_the_prompt_length() -> None:
    text = SMALL.format(port=1, extra='prompts = { source = "shared-prefix", prefix_tokens = 8 }')
    with pytest.raises(campaign.CampaignError, match=r"prefix_tokens \(8\) must be below"):
        campaign.loads(text, "c.toml")
    text = SMALL.format(port=1, extra='prompts = { source = "shared-prefix" }')
    with pytest.raises(campaign.CampaignError, match="needs prompts.prefix_tokens"):
        campaign.loads(text, "c.toml")
