"""The concurrency search of `workload.find_max` (`analysis.search`): bounds as written,
doubling then bisecting on a server whose latency grows with load, and what it says."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from reportgen.analysis.search import Bound, Ran, Search, drive, parse
from reportgen.render.text import search_said
from reportgen.results.levels import Dist, SearchProbe, SearchRecord, Summary
from tests.conftest import Sim, reportgen_main


def test_bounds_are_read_as_written_and_mistakes_are_named() -> None:
    assert parse("ttft_ms.p99<500, itl_ms.p99<=50,output_tok_s>1000,e2e_ms<2e3") == [
        Bound("ttft_ms", "p99", "<", 500.0),
        Bound("itl_ms", "p99", "<=", 50.0),
        Bound("output_tok_s", None, ">", 1000.0),
        Bound("e2e_ms", "p50", "<", 2000.0),  # a latency without a stat: its median
    ]
    for bad, said in (
        ("ttft_ms.p99=500", "is not a bound: write metric.stat<value"),
        ("ttft.p99<5", "unknown metric 'ttft'"),
        ("req_s.p99>3", "req_s is one number per level, no .p99"),
    ):
        with pytest.raises(ValueError, match=said):
            parse(bad)


def _run(ttft_p99: float, errors: int = 0) -> Summary:
    return Summary(requests=100, ok=100 - errors, ttft_ms=Dist(p99=ttft_p99))


def _search(latency_per_client: float, **kw: int) -> Search:
    """A server whose TTFT p99 is latency_per_client x C; the bound TTFT p99 < 100 ms."""
    look = Search(parse("ttft_ms.p99<100"), **kw)
    while (c := look.next()) is not None:
        look.record(c, [_run(latency_per_client * c), _run(latency_per_client * c)])
    return look


def test_the_search_doubles_then_bisects_to_the_highest_level_that_passes() -> None:
    look = _search(10.0)  # passes up to C=9
    assert [p.concurrency for p in look.done] == [1, 2, 4, 8, 16, 12, 10, 9]
    assert look.best == 9 and look.lowest_failure == 10 and look.converged
    look = _search(10.0, probes=6)  # cut short: the answer lies between 8 and 12
    assert (look.best, look.lowest_failure, look.converged) == (8, 12, False)
    look = _search(0.01, most=64)  # never fails: stops at the most allowed
    assert [p.concurrency for p in look.done] == [1, 2, 4, 8, 16, 32, 64]
    assert look.best == 64 and look.converged
    look = _search(30.0, start=16)  # the first probe fails: halve down, then bisect up
    assert [p.concurrency for p in look.done] == [16, 8, 4, 2, 3]
    assert look.best == 3 and look.converged
    look = _search(200.0)  # nothing passes, not even C=1
    assert look.best is None and look.lowest_failure == 1 and look.converged


def test_a_level_with_failed_requests_does_not_pass() -> None:
    look = Search(parse("ttft_ms.p99<100"))
    assert look.record(1, [_run(10.0, errors=0)]).passed
    assert not look.record(2, [_run(10.0, errors=5)]).passed  # 5% of requests failed


def test_a_probe_within_noise_of_a_bound_is_said_so_and_its_repetition_replaces_it() -> None:
    """Each bound's mean comes with the 95% t interval of its repetitions: a probe whose
    interval holds the bound's value is near (pass or fail within noise); measured again, the
    probe on all its repetitions replaces the first, and the search's answer says it."""
    look = Search(parse("ttft_ms.p99<100"))
    clear = look.record(4, [_run(60), _run(62), _run(61)])
    assert clear.passed and not clear.near
    assert clear.intervals["ttft_ms.p99<100"] == pytest.approx([58.5, 63.5], abs=0.1)
    near = look.record(8, [_run(88), _run(112), _run(95)])
    assert near.passed and near.near  # a mean of 98.3: passes on it, within noise
    lo, hi = near.intervals["ttft_ms.p99<100"]
    assert lo < 100 < hi
    again = look.record(8, [_run(v) for v in (88, 112, 95, 104, 108, 101)], repeated=True)
    assert [look.at(p) for p in look.done] == [4, 8]  # replaced, not added
    assert again.repeated and not again.passed and again.near
    assert (look.best, look.lowest_failure) == (4, 8)
    record = SearchRecord(
        slo="ttft_ms.p99<100",
        bounds=["ttft_ms.p99<100"],
        probes=look.done,
        best=4,
        lowest_failure=8,
        converged=False,
    )
    said = search_said(record)
    # the answer with its interval over its repetitions
    assert said.startswith(
        "The highest concurrency meeting ttft_ms.p99<100 is C=4, where ttft_ms.p99<100 61 (95% "
        "interval 58.52-63.48)"
    )
    assert "C=8 failed within noise (ttft_ms.p99<100: 95% interval " in said
    assert "over its repetitions on one server, after its repetitions ran again)" in said
    # one repetition: no interval, never near
    assert not Search(parse("ttft_ms.p99<100")).record(2, [_run(100)]).near


def test_what_the_search_found_in_words() -> None:
    probes = [
        SearchProbe(concurrency=c, passed=c < 10, values={"ttft_ms.p99<100": 10.0 * c})
        for c in (1, 2, 4, 8, 16, 12, 10, 9)
    ]
    record = SearchRecord(slo="ttft_ms.p99<100", bounds=["ttft_ms.p99<100"], probes=probes,
                          best=9, lowest_failure=10, converged=True)  # fmt: skip
    assert search_said(record) == (
        "The highest concurrency meeting ttft_ms.p99<100 is C=9; C=10 did not "
        "(ttft_ms.p99<100 100): the boundary lies between C=9 and C=10, found in 8 probes."
    )


def _stalled_once(at: int, stall: float) -> tuple[list[int], object]:
    """``measure`` for ``drive`` on a server whose TTFT p99 is 5 ms x C (the bound of 100
    ms holds up to C=19), whose first run at C=``at`` held a stall (its p99 ``stall``);
    two repetitions a probe. Also the probes in the order run."""
    ran: dict[int, list[Summary]] = {}
    order: list[int] = []

    def measure(x: float) -> list[Summary]:
        c = int(x)
        order.append(c)
        first = c not in ran
        new = [_run(stall if first and c == at else 5.0 * c), _run(5.0 * c)]
        ran.setdefault(c, []).extend(new)
        return ran[c]

    return order, measure


def test_a_failure_from_one_stall_is_probed_again_and_the_search_goes_on() -> None:
    """A rate search once answered "15 req/s" on one stalled repetition at 16 that a sweep
    passed far above. The boundary's probes run again at the end, each decided on all its
    runs: the stall, diluted, no longer fails C=16, and the search goes on to the true
    boundary; the answer comes with the interval noise allows."""
    order, measure = _stalled_once(16, 180.0)
    once = Search(parse("ttft_ms.p99<100"), probes=10)
    drive(once, measure, confirm=False)
    assert (once.best, once.lowest_failure) == (15, 16)  # the stall set the answer

    order, measure = _stalled_once(16, 180.0)
    look = Search(parse("ttft_ms.p99<100"), probes=14)
    drive(look, measure)
    assert (look.best, look.lowest_failure, look.converged) == (19, 20, True)
    sixteen = next(p for p in look.done if p.concurrency == 16)
    assert sixteen.passed and sixteen.confirmed and sixteen.repeated and sixteen.runs == 6
    assert order.count(16) == 3  # its probe, again as near a bound, again to confirm
    # (16 and 15 were the boundary first; 16 passing on all its runs moved the search on)
    # both ends of the final boundary were confirmed too, each on its own four runs
    ends = {p.concurrency: p for p in look.done if p.concurrency in (19, 20)}
    assert all(p.confirmed and p.runs == 4 for p in ends.values())
    assert look.interval == [19, 20]
    record = SearchRecord(
        slo="ttft_ms.p99<100", bounds=["ttft_ms.p99<100"], probes=look.done, best=19,
        lowest_failure=20, converged=True, interval=look.interval,
    )  # fmt: skip
    said = search_said(record)
    assert order == [1, 2, 4, 8, 16, 16, 12, 14, 15, 16, 15, 32, 24, 20, 18, 19, 20, 19]
    assert (
        "the boundary lies between C=19 and C=20 (probed again at the end: C=15 passed on its 4 "
        "runs, C=16 passed on its 6 runs, C=19 passed on its 4 runs, C=20 failed on its 4 runs)"
    ) in said
    assert "allowing for noise" not in said  # the interval is the boundary itself


def test_the_answers_interval_widens_where_the_boundary_is_within_noise() -> None:
    """A boundary pass or failure whose interval holds the bound (near) does not pin the
    answer: its interval runs to the nearest probes that clear the bound either way."""
    look = Search(parse("ttft_ms.p99<100"))
    look.record(4, [_run(60), _run(62), _run(61)])
    look.record(8, [_run(88), _run(112), _run(95)])  # passes, within noise
    look.record(12, [_run(99), _run(111), _run(104)])  # fails, within noise
    look.record(16, [_run(150), _run(152), _run(149)])
    assert (look.best, look.lowest_failure) == (8, 12)
    assert look.interval == [4, 16]
    record = SearchRecord(
        slo="ttft_ms.p99<100", bounds=["ttft_ms.p99<100"], probes=look.done, best=8,
        lowest_failure=12, converged=False, interval=look.interval,
    )  # fmt: skip
    assert "allowing for noise, the answer lies between C=4 and C=16" in search_said(record)
    assert Search(parse("ttft_ms.p99<100")).interval is None


def _ran(ttft_ms: np.ndarray) -> Ran:
    p99 = float(np.percentile(ttft_ms, 99))
    return Ran(
        Summary(requests=ttft_ms.size, ok=ttft_ms.size, ttft_ms=Dist(p99=p99)), {"ttft_ms": ttft_ms}
    )


def test_a_percentile_bound_is_judged_on_the_requests_of_every_run_together() -> None:
    """As on an H100 at 64 req/s: one run of four held a stall that put 27 of its 256
    requests over 200 ms, the others clean. The runs' own p99s (23, 591, 24, 57 ms) average
    174 ms and passed; 2.6% of the level's requests missed the bound, so its p99 did not."""
    rng = np.random.default_rng(3)
    clean = [rng.uniform(15, 25, 256) for _ in range(3)]
    stalled = rng.uniform(15, 25, 256)
    stalled[100:127] = rng.uniform(450, 610, 27)
    runs = [clean[0], stalled, clean[1], clean[2]]
    bound = parse("ttft_ms.p99<200")
    old = Search(bound, over="request_rate", pooled=False).record(64, [_ran(r) for r in runs])
    assert old.passed and old.values["ttft_ms.p99<200"] < 200
    assert old.intervals["ttft_ms.p99<200"][0] < 0  # a latency's t interval below zero
    look = Search(bound, over="request_rate")
    probe = look.record(64, [_ran(r) for r in runs])
    assert not probe.passed
    assert probe.values["ttft_ms.p99<200"] == pytest.approx(np.percentile(np.concatenate(runs), 99))
    lo, hi = probe.intervals["ttft_ms.p99<200"]
    # resampled run by run: from draws without the stalled run (about 25 ms) to draws with it
    # twice or more; never below zero, and the same on every computation (verify takes it again)
    assert 15 < lo < 30 and hi > 450 and probe.near
    assert look.record(64, [_ran(r) for r in runs]).intervals == probe.intervals
    # a throughput bound is still the mean of the runs
    tput = Search(parse("output_tok_s>100")).record(
        8, [Ran(Summary(requests=1, ok=1, output_tok_s=v), {}) for v in (90.0, 130.0)]
    )
    assert tput.values["output_tok_s>100"] == pytest.approx(110.0) and tput.passed
    # without the requests at hand (a search recorded before), the runs' mean, as then
    assert Search(bound).record(64, [_ran(r).summary for r in runs]).passed
    record = SearchRecord(
        slo="ttft_ms.p99<200", bounds=["ttft_ms.p99<200"], probes=look.done, over="request_rate",
        lowest_failure=64, interval=look.interval, pooled=True,
    )  # fmt: skip
    said = search_said(record)
    assert "R=64/s failed within noise (ttft_ms.p99<200: 95% interval " in said
    assert "its runs resampled, their requests pooled" in said


@pytest.mark.slow
def test_bench_find_max_searches_a_running_server(
    tmp_path: Path, cache: Path, start_sim: object
) -> None:
    """A simulator whose first token slows by 20% per request in flight: the search finds the
    highest concurrency whose TTFT p99 stays under 60 ms, every probe a level in the report."""
    sim: Sim = start_sim("--ttft-ms", "10", "--itl-ms", "2", "--ttft-growth", "0.2")  # type: ignore[operator]
    out = tmp_path / "out"
    res = reportgen_main(
        "bench", sim.url, "--find-max", "ttft_ms.p99<60", "--find-max-probes", "6",
        "--requests", "24", "--output-tokens", "4", "--input-tokens", "16", "--warmup", "2",
        "--level-warmup-max", "2", "--output", out, "--no-pdf", "--json", cache=cache,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    found = json.loads(res.stdout)["experiments"][0]["search"]
    assert found["pooled"] is True  # latency bounds over each level's requests together
    probes = [p["concurrency"] for p in found["probes"]]
    # (doubling from C=1 until a level fails, then halving the gap: 1, 2, 4, ... on an idle
    # host; a loaded one can fail C=2 on one stall, so only the start and the bound are fixed)
    assert probes[0] == 1 and len(probes) <= 6
    passed = {p["concurrency"]: p["passed"] for p in found["probes"]}
    assert found["best"] is not None and passed[found["best"]]
    assert all(ok for c, ok in passed.items() if c <= found["best"])
    assert found["lowest_failure"] is None or found["lowest_failure"] > found["best"]
    (run_dir,) = (p.parent for p in (out / "bench").glob("*/results.json"))
    data = json.loads((run_dir / "results.json").read_text())
    assert sorted({lv["concurrency"] for lv in data["experiments"][0]["levels"]}) == sorted(probes)
    html = (run_dir / "report.html").read_text()
    assert f"The highest concurrency meeting ttft_ms.p99&lt;60 is C={found['best']}" in html
    assert reportgen_main("verify", run_dir).returncode == 0
    # the answer is checked: a report claiming a higher concurrency does not verify
    data["experiments"][0]["search"]["best"] = found["best"] * 2
    (run_dir / "results.json").write_text(json.dumps(data))
    assert reportgen_main("render", run_dir, "--no-pdf").returncode == 0
    res = reportgen_main("verify", run_dir)
    assert res.returncode == 1 and "DIFF load searches: bench: best " in res.stdout
    res = reportgen_main("bench", sim.url, "--find-max", "ttft<5", "--output", out)
    assert res.returncode == 2 and "unknown metric 'ttft'" in res.stderr
