"""Workloads whose lengths vary from request to request: `range_ratio` (vLLM's
--random-range-ratio) and a ShareGPT file's own answer lengths. Unit tests of the draws,
then runs against the simulator, whose counters must see exactly what was asked for."""

from __future__ import annotations

import json
import math
import statistics
import tomllib
from pathlib import Path

import pytest

from reportgen.load import prompts
from tests.builders import DEMO, toml_document
from tests.conftest import FAST_WARMUP, free_port, reportgen_main


def test_lengths_are_drawn_within_the_range_reproducibly() -> None:
    drawn = prompts.lengths(2000, 100, 0.5, seed=3)
    assert min(drawn) >= 50 and max(drawn) <= 150
    assert min(drawn) <= 52 and max(drawn) >= 148  # the whole range is reached
    assert abs(sum(drawn) / len(drawn) - 100) < 3  # uniform: the mean is the length asked
    assert drawn == prompts.lengths(2000, 100, 0.5, seed=3)  # the same in every experiment
    assert drawn != prompts.lengths(2000, 100, 0.5, seed=4)
    assert prompts.lengths(5, 100, 0.0, seed=3) == [100] * 5
    # vLLM's bounds: floor(L (1 - r)) to ceil(L (1 + r)), never below one token
    assert set(prompts.lengths(500, 3, 0.9, seed=0)) == {1, 2, 3, 4, 5, 6}
    words = prompts.synthetic(4, [5, 9, 2, 30], seed=0)
    assert [len(w.split()) for w in words] == [5, 9, 2, 30]


def test_sharegpt_answers_come_with_their_prompts(tmp_path: Path) -> None:
    items = [
        {"conversations": [{"from": "human", "value": "Why is the sky blue?"},
                           {"from": "gpt", "value": "Rayleigh scattering. " * 10}]},
        {"messages": [{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": "Name a prime."},
                      {"role": "assistant", "content": "Seven."}]},
        {"conversations": [{"from": "human", "value": "Unanswered."}]},
    ]  # fmt: skip
    path = tmp_path / "chats.json"
    path.write_text(json.dumps(items))
    assert prompts.load_pairs("sharegpt", path) == [
        ("Why is the sky blue?", "Rayleigh scattering. " * 10),
        ("Name a prime.", "Seven."),
        ("Unanswered.", None),
    ]


def _campaign(
    tmp_path: Path, workload: dict, port: int, more: list[dict] | None = None, **campaign: object
) -> Path:
    """The demo's baseline alone (and ``more`` experiments) with this workload (and these
    ``campaign`` keys)."""
    data = json.loads(json.dumps(DEMO))
    data["server"]["args"] = {**data["server"]["args"], "port": port, "jitter": 0}
    # one start an experiment (the baseline still two) and short warm-up windows: what these
    # tests read is the workload, not how starts or warm-ups vary
    data["campaign"]["starts"] = 1
    data["campaign"].update(campaign)
    warmup = tomllib.loads(f"warmup = {FAST_WARMUP}")["warmup"]
    data["workload"] = {**data["workload"], "warmup": warmup, **workload}
    data["experiment"], data["probe"], data["check"] = data["experiment"][:1] + (more or []), [], []
    data["campaign"]["objective"]["concurrency"] = workload["concurrency"]
    path = tmp_path / "lengths.toml"
    path.write_text(toml_document(data), encoding="utf-8")
    return path


def _ran(tmp_path: Path, path: Path, cache: Path) -> tuple[dict, list]:
    out = tmp_path / "out"
    res = reportgen_main("run", path, "--output", out, "--quiet", "--no-pdf", cache=cache)
    assert res.returncode == 0, res.stdout + res.stderr
    (run_dir,) = (p.parent for p in out.glob("*/*/results.json"))
    from reportgen import results

    data = json.loads((run_dir / "results.json").read_text())
    rows = results.read_requests(run_dir, data["experiments"][0]["id"])
    assert reportgen_main("verify", run_dir).returncode == 0
    return data, rows


@pytest.mark.slow
def test_a_range_of_lengths_reaches_the_server_as_drawn(tmp_path: Path, cache: Path) -> None:
    """range_ratio 0.5 around 32 output tokens: each request asks for its own length, the
    simulator produces exactly that (its generation counter agrees), prompts vary in length,
    and the report says how lengths were drawn."""
    wl = {"concurrency": [2], "requests_per_level": 24, "repetitions": 1, "warmup_requests": 0,
          "input_tokens": 40, "output_tokens": 32, "range_ratio": 0.5}  # fmt: skip
    data, rows = _ran(tmp_path, _campaign(tmp_path, wl, free_port()), cache)
    asked = [r.requested_output_tokens for r in rows]
    assert min(asked) >= 16 and max(asked) <= 48 and len(set(asked)) > 5
    assert [r.output_tokens for r in rows] == asked  # none short
    level = data["experiments"][0]["levels"][0]
    made = level["engine_metrics"]["counters"]["sim:generation_tokens_total"]
    assert made == sum(asked)
    inputs = [r.input_tokens for r in rows]
    assert len(set(inputs)) > 5 and min(inputs) < 40 < max(inputs)
    checks = {c["id"]: c["status"] for c in data["experiments"][0]["checks"]}
    assert checks["output_lengths"] == "pass"
    md = (next((tmp_path / "out").glob("*/*/report.md"))).read_text()
    html = (next((tmp_path / "out").glob("*/*/report.html"))).read_text()
    assert "input and output lengths drawn uniformly within ±50% of these (range_ratio 0.5)" in (
        html
    ), md


@pytest.mark.slow
def test_sharegpt_answer_lengths_are_asked_for(tmp_path: Path, cache: Path) -> None:
    answers = ["word " * n for n in (8, 20, 44, 400)]  # 10, 25, 55 and 500 characters / 4
    items = [
        {"conversations": [{"from": "human", "value": f"Question {k}?"},
                           {"from": "gpt", "value": a}]}
        for k, a in enumerate(answers)
    ]  # fmt: skip
    (tmp_path / "chats.json").write_text(json.dumps(items))
    source = {"source": "sharegpt", "path": "chats.json", "answer_lengths": True}
    wl = {"concurrency": [2], "requests_per_level": 16, "repetitions": 1, "warmup_requests": 0,
          "output_tokens": 64, "prompts": source}  # fmt: skip
    data, rows = _ran(tmp_path, _campaign(tmp_path, wl, free_port()), cache)
    want = {f"Question {k}?": min(64, round(len(a) / 4)) for k, a in enumerate(answers)}
    assert sorted({r.requested_output_tokens for r in rows}) == sorted(set(want.values()))
    assert [r.output_tokens for r in rows] == [r.requested_output_tokens for r in rows]
    assert sorted(set(want.values())) == [10, 25, 55, 64]  # the longest capped at 64
    html = (next((tmp_path / "out").glob("*/*/report.html"))).read_text()
    assert "as many output tokens as the dataset&#39;s own answer had (estimated as " in html
    assert math.isclose(
        data["experiments"][0]["levels"][0]["engine_metrics"]["counters"][
            "sim:generation_tokens_total"
        ],
        sum(r.output_tokens for r in rows),
    )


TRACE = [  # Mooncake's form: milliseconds, lengths in tokens, shared 512-token blocks
    {"timestamp": 1000 + 150 * k, "input_length": 700, "output_length": 5 + k % 3,
     "hash_ids": [1, 2] if k % 2 else [1, 3]}
    for k in range(10)
]  # fmt: skip


def test_a_trace_is_read_in_time_order_and_its_blocks_are_shared_text(tmp_path: Path) -> None:
    from reportgen.errors import LoadError
    from reportgen.load import trace

    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in reversed(TRACE)) + "\n")
    rows = trace.load(path)
    assert [r.at for r in rows] == pytest.approx([0.15 * k for k in range(10)])
    assert rows[1] == trace.TraceRow(pytest.approx(0.15), 700, 6, (1, 2))
    assert trace.window(rows, 3, None) == rows[:3]
    assert trace.window(rows, None, 0.5) == rows[:4]
    texts = trace.prompts(rows[:4], block_tokens=16, words_per_token=1.0, seed=0)
    assert all(len(t.split()) == 700 for t in texts)
    # the first block is the same text everywhere, the second is block 2 or block 3
    first = {" ".join(t.split()[:16]) for t in texts}
    second = {" ".join(t.split()[16:32]) for t in texts}
    assert len(first) == 1 and len(second) == 2
    path.write_text('{"timestamp": 1, "input_length": 3}\n')
    with pytest.raises(LoadError, match="line 1 needs a timestamp, an input_length and an output"):
        trace.load(path)


@pytest.mark.slow
def test_a_trace_is_replayed_on_time_with_its_lengths_and_shared_blocks(
    tmp_path: Path, cache: Path
) -> None:
    """Each request sent at its timestamp (never before it), asking for its own output
    length; the blocks requests share show up as prefix-cache hits in the simulator's own
    counters, read by the report."""
    (tmp_path / "trace.jsonl").write_text("\n".join(json.dumps(r) for r in TRACE) + "\n")
    source = {"source": "trace", "path": "trace.jsonl", "block_tokens": 64}
    wl = {"concurrency": [4], "requests_per_level": 10, "repetitions": 1, "warmup_requests": 0,
          "input_tokens": 64, "prompts": source}  # fmt: skip
    path = _campaign(tmp_path, wl, free_port())
    plan = reportgen_main("plan", path)
    assert "open loop at the trace's own times, at most C in flight" in plan.stdout
    data, rows = _ran(tmp_path, path, cache)
    rows.sort(key=lambda r: r.index)
    assert [r.scheduled for r in rows] == pytest.approx([0.15 * k for k in range(10)])
    # sent at its time, in order: never before it (about 1 ms after it alone on two cores,
    # 22 ms in the median beside a suite that keeps both cores busy: how late depends on the
    # host's load), and in the median within the gap to the next one: the trace's clock, not
    # each answer, sets the sends
    late = [r.start - r.scheduled for r in rows]
    assert min(late) > -0.002 and statistics.median(late) < 0.15, late
    assert [r.start for r in rows] == sorted(r.start for r in rows)
    assert [r.requested_output_tokens for r in rows] == [5 + k % 3 for k in range(10)]
    assert [r.output_tokens for r in rows] == [5 + k % 3 for k in range(10)]
    counters = data["experiments"][0]["levels"][0]["engine_metrics"]["counters"]
    hits = counters["sim:prefix_cache_hits_total"] / counters["sim:prefix_cache_queries_total"]
    assert hits > 0.05  # the shared blocks were found again
    html = (next((tmp_path / "out").glob("*/*/report.html"))).read_text()
    assert "Open loop, replaying a trace: each request is sent at its own timestamp" in html

    (tmp_path / "trace.jsonl").write_text('{"timestamp": 0, "input_length": 5}\n')
    res = reportgen_main("validate", path)
    assert res.returncode == 2
    assert "workload.prompts.path = 'trace.jsonl': line 1 needs a timestamp" in res.stderr


@pytest.mark.slow
def test_goodput_can_be_the_objective(tmp_path: Path, cache: Path) -> None:
    """The objective may be goodput (requests meeting the SLO per second): it is measured at
    every level and the run verifies; without an SLO the campaign is refused before anything
    starts."""
    wl = {"concurrency": [1, 4], "requests_per_level": 8, "repetitions": 2,
          "warmup_requests": 2, "input_tokens": 16, "output_tokens": 8,
          "slo": {"ttft_ms": 100},
          "warmup": {"max_s": 2, "window_s": 0.1, "tolerance": 0.1}}  # fmt: skip
    # (warm-ups of 2 s at most: bursts of 8 tokens after 150-200 ms never settle, and a 10 s
    # cap took 27 s of the test's 41; no warm-up left the baseline's starts 36% apart)
    # (the baseline's first token takes 30-35 ms, clear of the SLO on a loaded host too: with a
    # 40 ms SLO one of its starts missed it at C=4 and the two starts' goodputs split, with
    # 60 ms a fresh clone's loaded run once split them enough to leave the verdict open, and
    # with 80 ms once more beside eight test workers on two cores)
    # a first token of 150 ms misses the 100 ms SLO every time: its goodput falls to none
    slow = {"id": "slow-start", "why": "w", "args": {"ttft-ms": 150}}
    # ... and one slower still, against it: neither meets the SLO, nothing to tell them apart
    still = {"id": "slower-still", "why": "w", "based_on": "slow-start", "args": {"ttft-ms": 200}}
    # (a share of requests within a threshold moves with the host's load more than a mean
    # does: the baseline's two starts' goodputs once came out 31% apart on a fresh clone's
    # loaded CI run, and the stated 1.5% was set aside for one degree of freedom of its own;
    # the spread stated here is what such a host shows)
    path = _campaign(tmp_path, wl, free_port(), [slow, still], start_spread=0.3)
    text = path.read_text().replace('"output_tok_s"', '"goodput_req_s"', 1)
    path.write_text(text)
    res = reportgen_main("validate", path)
    assert res.returncode == 0, res.stderr
    data, _ = _ran(tmp_path, path, cache)
    assert data["campaign"]["campaign"]["objective"]["metric"] == "goodput_req_s"
    base, slow, still = data["experiments"]
    assert all(a["goodput_req_s"]["mean"] for a in base["by_level"])
    assert all(a["goodput_req_s"]["mean"] == 0 for a in slow["by_level"])
    # compared, and worse (it was "inconclusive: ran at no common level")
    assert slow["decision"]["verdict"] == "rejected", slow["decision"]["explanation"]
    # two goodputs of none are not compared by their levels' lengths (it was "rejected")
    assert still["decision"]["verdict"] == "inconclusive", still["decision"]["explanation"]
    assert "C=1: no request met the SLO on either side" in still["decision"]["explanation"]
    assert "No request met the SLO on either side" in still["decision"]["explanation"]
    assert reportgen_main("verify", next((tmp_path / "out").glob("*/*/"))).returncode == 0
    path.write_text(text.replace("ttft_ms = 100", "").replace('"ttft_ms" = 100', ""))
    res = reportgen_main("validate", path)
    assert res.returncode == 2
    assert "campaign.objective.metric = 'goodput_req_s': goodput counts the requests" in (
        res.stderr
    )


@pytest.mark.slow
def test_conversations_show_up_in_the_engines_prefix_cache(tmp_path: Path, cache: Path) -> None:
    """Three-turn conversations re-send their history: the simulator's prefix cache finds it
    again (its own counters, read by the report), where single-turn random prompts share
    nothing; the plan and the methods say how the load ran."""
    wl = {"concurrency": [2], "requests_per_level": 12, "repetitions": 1, "warmup_requests": 0,
          "input_tokens": 48, "output_tokens": 16, "turns": 3, "think_s": 0.05}  # fmt: skip
    path = _campaign(tmp_path, wl, free_port())
    plan = reportgen_main("plan", path)
    assert "closed loop, C clients, each holding conversations of 3 turns (history re-sent, " in (
        plan.stdout
    )
    data, rows = _ran(tmp_path, path, cache)
    assert sorted(r.turn for r in rows) == [0] * 4 + [1] * 4 + [2] * 4
    counters = data["experiments"][0]["levels"][0]["engine_metrics"]["counters"]
    multi = counters["sim:prefix_cache_hits_total"] / counters["sim:prefix_cache_queries_total"]
    assert multi > 0.3  # the history is most of a later turn's prompt
    checks = {c["id"]: c["status"] for c in data["experiments"][0]["checks"]}
    assert checks["prefix_cache"] == "pass"  # no "prompts repeat" warning: they do, on purpose
    html = (next((tmp_path / "out").glob("*/*/report.html"))).read_text()
    assert "Each client holds a conversation of 3 turns at a time" in html

    (tmp_path / "one").mkdir()
    single = _campaign(tmp_path / "one", {**wl, "turns": 1}, free_port())
    data, _ = _ran(tmp_path / "one", single, cache)
    counters = data["experiments"][0]["levels"][0]["engine_metrics"]["counters"]
    assert (
        counters.get("sim:prefix_cache_hits_total", 0)
        < 0.05 * counters["sim:prefix_cache_queries_total"]
    )
    res = reportgen_main("validate", _campaign(tmp_path, {**wl, "request_rate": 4.0}, free_port()))
    assert res.returncode == 2 and "turns > 1: conversations run in a closed loop" in res.stderr


@pytest.mark.slow
def test_the_warm_up_corrects_lengths_toward_what_each_request_asked(
    tmp_path: Path, cache: Path
) -> None:
    """After the warm-up, prompts made of words are scaled by what the server counted against
    what those requests asked for: a trace's own lengths (600 tokens here, whatever
    workload.input_tokens says), not input_tokens."""
    rows = [{"timestamp": 50 * k, "input_length": 600, "output_length": 4} for k in range(12)]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    source = {"source": "trace", "path": "t.jsonl"}
    wl = {"concurrency": [4], "requests_per_level": 8, "repetitions": 1, "warmup_requests": 4,
          "input_tokens": 128, "prompts": source}  # fmt: skip
    _, recs = _ran(tmp_path, _campaign(tmp_path, wl, free_port()), cache)
    seen = [r.input_tokens for r in recs]
    assert all(550 <= n <= 650 for n in seen), seen  # was 128 once the warm-up corrected it
