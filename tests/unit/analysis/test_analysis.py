"""Pure analysis on tables small enough to check by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reportgen import results
from reportgen.analysis.adopt import decide
from reportgen.analysis.summary import aggregate, summarize
from reportgen.analysis.tails import tail_comparisons
from reportgen.analysis.welch import compare_runs
from reportgen.load.records import RequestRecord
from reportgen.results.levels import Level, Summary
from reportgen.results.model import Point


def rec(
    start: float,
    chunks: list[float],
    end: float,
    out: int,
    status: str = "ok",
    inp: int = 10,
    concurrency: int = 1,
    repetition: int = 0,
) -> RequestRecord:
    return RequestRecord(
        index=0,
        start=start,
        first_token=chunks[0] if chunks else None,
        chunk_times=chunks,
        end=end,
        output_tokens=out,
        input_tokens=inp,
        status=status,
        requested_output_tokens=4,
        error=None if status == "ok" else "HTTP 500: x",
        concurrency=concurrency,
        repetition=repetition,
    )


def level(c: int, rep: int = 0, **summary: object) -> Level:
    return Level(concurrency=c, repetition=rep, summary=Summary.model_validate(summary))


def test_summary_by_hand() -> None:
    records = [
        rec(0.0, [0.1, 0.2, 0.3, 0.4], 0.4, 4),  # ttft 100, itl 100 x3, tpot 100, e2e 400
        rec(0.0, [0.2, 0.25, 0.3, 0.35], 0.5, 4),  # ttft 200, itl 50 x3, tpot 100, e2e 500
        rec(0.5, [], 0.6, 0, status="error"),
    ]
    s = summarize(records, duration_s=2.0)
    assert s.requests == 3 and s.ok == 2 and s.errors == 1
    assert s.output_tok_s == pytest.approx(8 / 2.0)
    assert s.total_tok_s == pytest.approx((8 + 20) / 2.0)
    assert s.req_s == pytest.approx(1.0)
    assert s.ttft_ms.p50 == pytest.approx(150)
    assert s.ttft_ms.mean == pytest.approx(150)
    assert s.itl_ms.p50 == pytest.approx(75)  # pooled: 100,100,100,50,50,50
    assert s.tpot_ms.mean == pytest.approx(100)
    assert s.e2e_ms.p90 == pytest.approx(490)  # 400 + 0.9 * (500 - 400)
    assert s.achieved_concurrency == pytest.approx((0.4 + 0.5 + 0.1) / 2.0)
    assert s.error_kinds == {"HTTP 500": 1}


def test_aggregate_mean_and_sd_across_repetitions() -> None:
    runs = [summarize([rec(0, [0.1, 0.2], 0.2, n)], 1.0) for n in (2, 4, 6)]
    agg = aggregate(1, runs)
    assert agg.output_tok_s.mean == pytest.approx(4.0)
    assert agg.output_tok_s.sd == pytest.approx(2.0)
    assert agg.repetitions == 3 and agg.concurrency == 1


def test_welch_ratio_by_hand() -> None:
    # Parent e^0, e^0.1, e^-0.1 (log mean 0, var 0.01); child twice that.
    p = [1.0, math.exp(0.1), math.exp(-0.1)]
    c = [2 * x for x in p]
    cmp = compare_runs(p, c, margin=0.05, higher_is_better=True)
    assert cmp.ratio == pytest.approx(2.0)
    # se = sqrt(0.01/3 + 0.01/3) = 0.08165, dof = 4, t(0.975, 4) = 2.7764
    half = 2.7764 * math.sqrt(0.02 / 3)
    assert cmp.ci_low == pytest.approx(2 * math.exp(-half), rel=1e-4)
    assert cmp.ci_high == pytest.approx(2 * math.exp(half), rel=1e-4)
    assert cmp.verdict == "better"
    assert compare_runs(p, c, margin=0.05, higher_is_better=False).verdict == "worse"


def test_equivalent_inconclusive_and_single_runs() -> None:
    p = [100.0, 100.5, 99.5]
    assert (
        compare_runs(p, [100.2, 100.1, 99.9], margin=0.05, higher_is_better=True).verdict
        == "equivalent"
    )
    assert (
        compare_runs(
            [90.0, 110.0, 100.0], [95.0, 120.0, 108.0], margin=0.05, higher_is_better=True
        ).verdict
        == "inconclusive"
    )
    one = compare_runs([100.0], [150.0], margin=0.05, higher_is_better=True)
    assert one.ratio == pytest.approx(1.5) and one.ci_low is None
    assert one.verdict == "inconclusive"


def test_decide_adopts_rejects_and_explains() -> None:
    better = compare_runs(
        [1.0, 1.01, 0.99],
        [1.3, 1.31, 1.29],
        margin=0.05,
        higher_is_better=True,
        metric="output_tok_s",
        level=Point(1),
    )
    same = compare_runs(
        [1.0, 1.01, 0.99],
        [1.0, 1.005, 0.995],
        margin=0.05,
        higher_is_better=True,
        metric="output_tok_s",
        level=Point(32),
    )
    worse = compare_runs(
        [1.0, 1.01, 0.99],
        [0.7, 0.71, 0.69],
        margin=0.05,
        higher_is_better=True,
        metric="output_tok_s",
        level=Point(32),
    )
    verdict, head, rest = decide("mtp", "baseline", [better, same], "output_tok_s", 0.05)
    why = head + rest
    assert verdict == "adopted" and "C=1: x1.30" in why and "build on mtp" in why
    verdict, head, rest = decide("mtp", "baseline", [better, worse], "output_tok_s", 0.05)
    why = head + rest
    assert verdict == "rejected" and "Worse at C=32" in why
    verdict, _, _ = decide("x", "baseline", [same], "output_tok_s", 0.05)
    assert verdict == "equivalent"


def test_per_token_itl_splits_multi_token_chunks_by_characters() -> None:
    # 5 tokens in 3 chunks: 1 token ("a"), then 2 ("bb"), then 2 ("cc") after gaps of 100 ms.
    r = rec(0.0, [0.1, 0.2, 0.3], 0.3, 5)
    r.chunk_chars = [1, 2, 2]
    s = summarize([r], 1.0)
    assert s.itl_ms.mean == pytest.approx(100)  # per chunk
    assert s.itl_token_ms.mean == pytest.approx(50)  # 100 ms / 2 tokens, counted twice
    assert s.chunks == 3


def test_goodput_counts_requests_meeting_every_slo() -> None:
    records = [
        rec(0.0, [0.1, 0.2, 0.3, 0.4], 0.4, 4),  # ttft 100, tpot 100, e2e 400
        rec(0.0, [0.3, 0.35, 0.4, 0.45], 0.45, 4),  # ttft 300, tpot 50
        rec(0.0, [], 0.1, 0, status="error"),
    ]
    s = summarize(records, 1.0, slo={"ttft_ms": 200, "tpot_ms": None, "e2e_ms": None})
    assert s.goodput_req_s == pytest.approx(1.0)
    assert s.slo_attainment == pytest.approx(1 / 3)
    s = summarize(records, 1.0, slo={"ttft_ms": None, "tpot_ms": 60, "e2e_ms": None})
    assert s.goodput_req_s == pytest.approx(1.0)  # only the second (tpot 50 ms)
    assert summarize(records, 1.0).goodput_req_s is None  # no SLO, no goodput


def test_trim_keeps_only_the_steady_state() -> None:
    # Two clients. In flight: 1 on [0, 1), 2 on [1, 3), 1 on [3, 4).
    records = [
        rec(0.0, [0.5, 1.5, 2.5, 3.5], 4.0, 4),
        rec(1.0, [1.5, 2.0, 2.5, 3.0], 3.0, 4),
    ]
    s = summarize(records, 4.0, trim=True)
    assert s.window_s == [1.0, 3.0]
    # Chunks inside [1, 3]: 1.5 and 2.5 of the first, all four of the second = 6 tokens / 2 s.
    assert s.output_tok_s == pytest.approx(3.0)
    assert s.req_s == pytest.approx(0.5)  # one request ended inside the window
    untrimmed = summarize(records, 4.0)
    assert untrimmed.window_s is None and untrimmed.output_tok_s == pytest.approx(2.0)
    # in flight: 2 inside the window it counts (the ramp and the drain left out), 1.5 over
    # the whole level (6 s of requests in 4 s); the level's table and its checks say 2
    assert s.window_concurrency == pytest.approx(2.0) and s.in_flight == pytest.approx(2.0)
    assert s.achieved_concurrency == pytest.approx(1.5)
    assert untrimmed.window_concurrency is None and untrimmed.in_flight == pytest.approx(1.5)


def test_an_open_loop_says_whether_its_requests_went_when_they_were_due() -> None:
    # 8 requests due every 0.25 s, each answered in 2 s: the server kept up, yet completions
    # spread over the sends and the last answer: 8 / 3.75 s = 2.1 req/s against 4 offered
    due = [i * 0.25 for i in range(8)]
    on_time = [
        rec(t, [t + 1.0, t + 2.0], t + 2.0, 2) for t in due
    ]  # fmt: skip
    for r, t in zip(on_time, due, strict=True):
        r.scheduled = t
    s = summarize(on_time, duration_s=3.75)
    assert s.req_s == pytest.approx(8 / 3.75)
    assert s.schedule_kept == pytest.approx(1.0)
    # held back (a concurrency cap): the same requests sent over 3.5 s instead of 1.75
    held = [rec(2 * t, [2 * t + 1.0], 2 * t + 2.0, 1) for t in due]
    for r, t in zip(held, due, strict=True):
        r.scheduled = t
    assert summarize(held, duration_s=5.5).schedule_kept == pytest.approx(0.5)
    # a closed loop schedules nothing
    assert summarize([rec(0.0, [0.1], 0.2, 1), rec(0.2, [0.3], 0.4, 1)], 0.4).schedule_kept is None


def test_smallest_detectable_effect_and_repetitions_needed_by_hand() -> None:
    """Two runs a side at 100 and 110 tok/s: log values 4.6052 and 4.7005, variance 0.004541
    per side; se = sqrt(2 x 0.004541 / 2) = 0.06739 with 2 degrees of freedom, where
    t_0.975 = 4.3027 and t_0.8 = 1.0607: mde = exp(5.3634 x 0.06739) = 1.4354."""
    import math

    from scipy import stats

    cmp = compare_runs([100, 110], [100, 110], margin=0.05, higher_is_better=True)
    assert cmp.verdict == "inconclusive" and cmp.ratio == 1.0
    assert cmp.mde == pytest.approx(1.4354, abs=1e-3)
    # identical means: deciding "equivalent" needs t(2n-2) x sd x sqrt(2/n) < log(1.05),
    # sd = 0.06739; true from n = 16 on, false at 15
    sd, gap = math.sqrt(0.0045412), math.log(1.05)

    def fits(n: int) -> bool:
        return float(stats.t.ppf(0.975, 2 * n - 2)) * sd * math.sqrt(2 / n) < gap

    assert cmp.reps_needed == 16 and fits(16) and not fits(15)
    decided = compare_runs([100, 101, 99], [120, 121, 119], margin=0.05, higher_is_better=True)
    assert decided.verdict == "better" and decided.reps_needed is None
    assert 1.0 < decided.mde < 1.05  # this little noise could see a 5% change


def test_two_level_bootstrap_of_a_tail_ratio() -> None:
    from reportgen.analysis.tails import bootstrap_ratio

    # every request of the child twice the parent's: ratio 2, no uncertainty at all
    assert bootstrap_ratio([[10, 10, 10], [10, 10]], [[20, 20], [20, 20, 20]]) == (2.0, 2.0, 2.0)
    # one child run slow, one fast: resampling runs lets the interval span both (a request-
    # only bootstrap would call it 3.0 give or take nothing)
    ratio, lo, hi = bootstrap_ratio([[10.0] * 50, [10.0] * 50], [[10.0] * 50, [30.0] * 50])
    assert ratio == 3.0 and lo == 1.0 and hi == 3.0
    assert bootstrap_ratio([], [[1.0]]) == (None, None, None)
    same = bootstrap_ratio([[1.0, 2.0, 3.0]] * 3, [[1.0, 2.0, 3.0]] * 3, seed=1)
    assert same == bootstrap_ratio([[1.0, 2.0, 3.0]] * 3, [[1.0, 2.0, 3.0]] * 3, seed=1)
    assert same[1] is not None and same[2] is not None and same[1] <= 1.0 <= same[2]


def test_the_bootstrap_drawn_in_bulk_is_the_loop_to_the_last_bit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Saved verdicts are recomputed by `verify`: the bulk draw must give the loop's numbers,
    whatever the runs' shapes (one run, runs of one request, uneven lengths, ties, a NaN),
    through rejected words (runs of 70,000 requests reject one word in 90,000) and in chunks."""
    from reportgen.analysis import bootstrap

    gen = np.random.default_rng(1)

    def side() -> list[np.ndarray]:
        runs = []
        for _ in range(int(gen.integers(1, 5))):
            v = gen.lognormal(3, 0.4, int(gen.choice([1, 2, 3, 16, 17, 100, 257])))
            v[0] = v[-1] if gen.random() < 0.2 else v[0]
            runs.append(v)
        return runs

    cases = [(side(), side(), float(gen.choice([50, 99, 100])), int(gen.integers(99)))
             for _ in range(60)]  # fmt: skip
    cases[0][1][0][-1] = np.nan
    big = [gen.lognormal(0, 1, 70_000)], [gen.lognormal(0, 1, 70_000), np.array([2.0, 1.0])]
    for parent, child, q, seed in [*cases, (*big, 99.0, 11)]:
        resamples = 20 if len(parent[0]) > 1000 else 150
        bulk = bootstrap._bulk(parent, child, q, resamples, seed)
        assert bulk is not None
        assert np.array_equal(bulk, bootstrap.looped(parent, child, q, resamples, seed),
                              equal_nan=True)  # fmt: skip
    assert bootstrap._rejections(*big, 20) > 10  # the big case went through rejected words
    monkeypatch.setattr(bootstrap, "CHUNK_VALUES", 50)
    parent, child, q, seed = cases[1]
    chunked = bootstrap._bulk(parent, child, q, 300, seed)
    assert np.array_equal(chunked, bootstrap.looped(parent, child, q, 300, seed), equal_nan=True)
    assert bootstrap._bulk_works()


def test_a_request_word_rejected_before_a_rejected_pick_word_keeps_the_loops_numbers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A generator state whose word 5 (a request word of bound 3) and word 30 (a pick word
    of bound 3) are both rejected: the walk takes out the pick word first, then finds the
    request word before it, and must put the pick word back (once out of place, every later
    resample differed)."""
    from reportgen.analysis import bootstrap

    state = {"bit_generator": "PCG64", "has_uint32": 0, "uinteger": 0,
             "state": {"state": 214732264630023408762675574697421755898,
                       "inc": 164019746538756301789707431398774579161}}  # fmt: skip
    made = np.random.default_rng

    def crafted(seed: int | None = None) -> np.random.Generator:
        if seed != 99:
            return made(seed)
        bits = np.random.PCG64()
        bits.state = state
        return np.random.Generator(bits)

    monkeypatch.setattr(np.random, "default_rng", crafted)
    child = [np.array([1.0, 2.0])]
    parent = [np.arange(1.0, 4.0), np.arange(4.0, 7.0), np.arange(7.0, 10.0)]
    looped = bootstrap.looped(parent, child, 50, 4, 99)
    assert list(looped) == [0.5, 1 / 3, 0.5, 0.75]
    bulk = bootstrap._bulk(parent, child, 50, 4, 99)
    assert bulk is not None and np.array_equal(bulk, looped)


def test_tail_comparisons_from_request_rows() -> None:
    from reportgen.analysis.welch import compare_experiments
    from reportgen.metrics import HEADLINE

    def rows(ttft_s: float, reps: int = 2) -> list[RequestRecord]:
        return [
            RequestRecord(index=0, concurrency=4, repetition=r, status="ok", start=0.0,
                          first_token=ttft_s, end=ttft_s + 1.0)
            for r in range(reps)
            for _ in range(20)
        ] + [RequestRecord(index=0, concurrency=4, repetition=0, status="error", start=0.0,
                           first_token=None, end=9.0)]  # fmt: skip

    found = {c.metric: c for c in tail_comparisons(rows(0.1), rows(0.2), margin=0.05)}
    ttft, e2e = found["ttft_ms_p99"], found["e2e_ms_p99"]
    assert ttft.ratio == pytest.approx(2.0) and ttft.verdict == "worse"  # p99 100 -> 200 ms
    assert e2e.ratio == pytest.approx(1.2 / 1.1) and (ttft.n_parent, ttft.n_child) == (2, 2)
    reps = [level(4, k, output_tok_s=100.0, ttft_ms={"p50": 10.0}) for k in (0, 1)]
    heads = [
        c
        for metric, higher in HEADLINE
        for c in compare_experiments(reps, reps, metric, margin=0.05, higher_is_better=higher)
    ]
    assert {c.metric for c in heads} == {"output_tok_s", "ttft_ms"}
    assert all(c.verdict == "equivalent" and c.ratio == 1.0 for c in heads)


def test_paired_comparison_by_hand() -> None:
    """Pairs (100, 110), (120, 130), (90, 100): a drifting host moves both sides together.
    Log ratios 0.09531, 0.08004, 0.10536: mean 0.09357, sd 0.01275, se 0.007360 on 2 degrees
    of freedom (t_0.975 = 4.3027): ratio exp(0.09357) = 1.0981, interval exp(0.09357 -+
    0.03167) = 1.0639 to 1.1334. Unpaired, the drift (90 to 130) would swamp the change."""
    from reportgen.analysis.welch import compare_pairs

    got = compare_pairs([(100, 110), (120, 130), (90, 100)], margin=0.03, higher_is_better=True)
    assert got.paired and got.n_parent == got.n_child == 3
    assert got.ratio == pytest.approx(1.0981, abs=1e-4)
    assert got.ci_low == pytest.approx(1.0639, abs=1e-4)
    assert got.ci_high == pytest.approx(1.1334, abs=1e-4)
    assert got.verdict == "better"
    unpaired = compare_runs([100, 120, 90], [110, 130, 100], margin=0.03, higher_is_better=True)
    assert unpaired.verdict == "inconclusive" and unpaired.ci_low is not None
    assert unpaired.ci_low < 1 < unpaired.ci_high
    one = compare_pairs([(100, 110)], margin=0.03, higher_is_better=True)
    assert one.ratio == pytest.approx(1.1) and one.ci_low is None and one.verdict == "inconclusive"


def test_paired_levels_match_repetitions() -> None:
    from reportgen.analysis.welch import compare_experiments

    def lv(c: int, rep: int, tok: float) -> Level:
        return level(c, rep, output_tok_s=tok)

    parent = [lv(1, 0, 100), lv(1, 1, 120), lv(1, 2, 90)]
    child = [lv(1, 2, 100), lv(1, 0, 110), lv(1, 1, 130)]  # order does not matter, reps do
    (got,) = compare_experiments(
        parent, child, "output_tok_s", margin=0.03, higher_is_better=True, paired=True
    )
    assert got.paired and got.ratio == pytest.approx(1.0981, abs=1e-4)


def test_degenerate_text_detector() -> None:
    from reportgen.analysis.text import agreement, problems
    from reportgen.sim import generated_tokens

    assert problems("The capital of France is Paris. It lies on the Seine.") == []
    assert problems("def f(x):\n    return x + 1\n\n# ==========================") == []
    assert problems("".join(generated_tokens(7, "hello", 64))) == []  # the simulator's words
    assert problems("1 2 3 4 5 6 7 8 9 10 11 12") == []  # counting is not a loop
    assert problems("  ") == ["empty answer"]
    assert problems("Paris is nice. I like it. " + "I like it. " * 10) == [
        "ends in a loop: 'I like it.' (3 word(s)) repeated, 33 of 36 words"
    ]
    assert problems("!" * 30) == [
        "only 0 of 30 visible characters are letters or digits",
        "'!' repeated 30 times in a row",
    ]
    assert problems("ok \ufffd\ufffd") == ["2 unreadable characters of 5"]
    assert agreement("a b c d", "a b x d") == 0.5
    assert agreement("a b", "a b c d") == 0.5 and agreement("", "") == 1.0


def test_answers_without_streamed_text_count_tokens_but_no_latencies(tmp_path: Path) -> None:
    """transformers serve, random weights: 64 tokens counted, none of them text."""
    silent = rec(0.0, [], 1.0, 4)
    s = summarize([rec(0.0, [0.1, 0.2, 0.3, 0.4], 0.4, 4), silent], 1.0)
    assert (s.ok, s.silent_outputs, s.output_tokens) == (2, 1, 8)
    assert s.ttft_ms.p50 == pytest.approx(100.0)  # from the one that streamed
    # the same rows in a table written by pandas (as schema 1 runs were), read back
    rows = pd.DataFrame(
        [
            {"experiment": "x", **vars_of(rec(0.0, c, 1.0, 4, repetition=k))}
            for k in (0, 1)
            for c in ([0.1, 0.5], [])
        ]  # fmt: skip
    )
    (tmp_path / "requests").mkdir()
    rows.drop(columns=["scheduled"]).to_parquet(tmp_path / "requests" / "x.parquet")
    back = results.read_requests(tmp_path, "x")
    assert len(back) == 4 and all(r.scheduled is None for r in back)
    live = summarize([rec(0.0, [0.1, 0.5], 1.0, 4), rec(0.0, [], 1.0, 4)], 1.0)
    again = summarize([r for r in back if r.repetition == 0], 1.0)  # as verify reads them
    assert again.ttft_ms == live.ttft_ms and again.silent_outputs == 1
    found = {c.metric: c for c in tail_comparisons(back, back, margin=0.05)}
    assert found["ttft_ms_p99"].ratio == 1.0 and found["ttft_ms_p99"].verdict == "equivalent"
    assert found["e2e_ms_p99"].n_parent == 2


def vars_of(r: RequestRecord) -> dict[str, object]:
    from dataclasses import asdict

    return asdict(r)


def test_request_tables_keep_every_record_field(tmp_path: Path) -> None:
    """Written from RequestRecord's own fields and read back as records: an open loop's
    intended send times included (schema 1 tables dropped them)."""
    sent = [rec(0.1 * i, [0.1 * i + 0.05], 0.1 * i + 0.2, 1, concurrency=8) for i in range(3)]
    for i, r in enumerate(sent):
        r.index, r.scheduled, r.http_status = i, 0.1 * i - 0.001, 200
    sent[2].status, sent[2].error, sent[2].first_token = "error", "HTTP 500: boom", None
    path = results.save_requests(tmp_path, "exp~control", sent)
    assert pd.read_parquet(path).columns.tolist() == list(results.REQUEST_COLUMNS)
    assert pd.read_parquet(path)["experiment"].unique().tolist() == ["exp"]  # its experiment
    assert list(results.REQUEST_COLUMNS[:4]) == ["experiment", "concurrency", "rate", "repetition"]
    assert results.read_requests(tmp_path, "exp~control") == sent
    assert results.read_requests(tmp_path, "never-saved") == []
    empty = results.save_requests(tmp_path, "none", [])
    assert pd.read_parquet(empty).columns.tolist() == list(results.REQUEST_COLUMNS)


def test_results_with_nan_are_saved_as_null(tmp_path: Path) -> None:
    from reportgen.results.model import CampaignFile, EngineRecord, Experiment, Run

    lv = level(1, output_tok_s=float("nan"), req_s=float("inf"), ttft_ms={"p50": 2.5})
    run = Run(
        reportgen_version="x",
        run_id="r",
        started_at="now",
        campaign_file=CampaignFile(path="c.toml", sha256="0"),
        engine=EngineRecord(name="sim"),
        experiments=[Experiment(id="a", levels=[lv])],
        client_ceiling={"chunks": np.float64(3.0), "x": np.float32(2.5)},
    )
    results.save(tmp_path, run)
    saved = json.loads((tmp_path / "results.json").read_text())
    summary = saved["experiments"][0]["levels"][0]["summary"]
    assert summary["output_tok_s"] is None and summary["req_s"] is None
    assert summary["ttft_ms"]["p50"] == 2.5
    assert saved["client_ceiling"] == {"chunks": 3.0, "x": 2.5}
    assert results.load(tmp_path).experiments[0].levels[0].summary.output_tok_s is None
