"""Levels that measure the steady state, driven against the simulator: closed-loop clients
start staggered by the warm-up's request time, duration levels trim their ramp-up and drain
unless told not to, and a level with too few requests for its percentiles is flagged."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest

from reportgen import results
from reportgen.analysis import checks, summary
from reportgen.campaign import Workload, loads, resolve
from reportgen.load.loadgen import RequestRecord, RequestSpec
from reportgen.observe.sources import CAPTURE_ENV
from reportgen.results.levels import Level
from reportgen.results.model import Experiment, Point
from reportgen.run.driver import STAGGER_SHARE, Driver
from tests.conftest import Sim, free_port, reportgen_main

SPEC = RequestSpec(api="chat", model=None, output_tokens=8)


def driver(url: str, tmp_path: Path, **workload: Any) -> Driver:
    wl = Workload.model_validate({"input_tokens": 8, "output_tokens": 8} | workload)
    return Driver(
        wl,
        url,
        SPEC,
        campaign_dir=tmp_path,
        tokenizer=None,
        ceiling=None,
        on_request=lambda r: None,
    )


def run_level(drv: Driver, concurrency: int, repetition: int = 0) -> tuple[Level, list]:
    if drv.wl.warmup_requests:
        drv.warmup()
    return drv.level(Point(concurrency), repetition)


def first_starts(recs: list[RequestRecord], clients: int) -> list[float]:
    """When each client sent its first request (indices are taken as clients start)."""
    return [r.start for r in sorted(recs, key=lambda r: r.index)[:clients]]


def surely_first_starts(recs: list[RequestRecord]) -> list[float]:
    """The starts of requests sent before any request ended, in order: each is a client's
    first (a closed-loop client sends its next one only when its last has ended). With
    clients spread over one request time, the last client's first request can come after
    the first client's second when requests run faster than the warm-up's did."""
    first_end = min(r.end for r in recs)
    return sorted(r.start for r in recs if r.start < first_end)


# -- staggered starts ------------------------------------------------------------------------


def test_clients_start_one_warmup_request_time_over_c_apart(start_sim: Any, tmp_path: Path) -> None:
    # ~100 ms per request, the same at any concurrency: 8 clients start 12.5 ms apart
    sim = start_sim("--ttft-ms", "30", "--itl-ms", "10", "--ttft-growth", "0", "--itl-growth", "0")
    drv = driver(sim.url, tmp_path, concurrency=[8], requests_per_level=16, warmup_requests=4)
    level, recs = run_level(drv, 8)
    st = level.stagger
    assert st is not None and st.measured == "warm-up" and not st.capped
    # a loaded host adds to the simulator's 100 ms (133 ms measured beside the whole suite on two
    # cores), never takes from it; the whole warm-up of 4 requests would be 0.4 s
    assert 0.09 < st.request_s < 0.3, st.request_s
    assert st.step_s == pytest.approx(st.request_s / 8)
    first = surely_first_starts(recs)
    assert len(first) >= 6, first  # most clients started within the first request's time
    for k, t in enumerate(first):
        assert t >= k * st.step_s, (k, first)  # client k waited its turn
    n = len(first) - 1
    assert first[-1] - first[0] > 0.5 * n * st.step_s  # spread over about one request time
    # recorded with the level, so a report can say how its clients started
    assert Level.model_validate(level.model_dump()).stagger == st


def test_stagger_off_or_open_loop_start_every_client_at_once(sim: Sim, tmp_path: Path) -> None:
    off = driver(sim.url, tmp_path, concurrency=[4], requests_per_level=8, stagger=False)
    level, recs = run_level(off, 4)
    assert level.stagger is not None and level.stagger.step_s == 0.0
    assert max(first_starts(recs, 4)) < 0.05
    # without a warm-up, the first level has nothing to stagger by; the next uses its time
    cold = driver(sim.url, tmp_path, concurrency=[4], requests_per_level=8, warmup_requests=0)
    first, _ = cold.level(Point(4), 0)
    second, _ = cold.level(Point(4), 1)
    assert first.stagger is not None and first.stagger.step_s == 0.0
    assert second.stagger is not None and second.stagger.measured == "C=4 repetition 1"
    assert second.stagger.step_s > 0
    rate = driver(sim.url, tmp_path, concurrency=[4], requests_per_level=4, request_rate=50.0)
    level, _ = run_level(rate, 4)
    assert level.stagger is None  # an open loop sends at its arrival times


def test_a_duration_levels_starts_spread_over_a_quarter_of_it_at_most(
    sim: Sim, tmp_path: Path
) -> None:
    drv = driver(sim.url, tmp_path, concurrency=[4], duration_s=0.3, warmup_requests=2)
    drv.request_s, drv.request_measured = 5.0, "warm-up"  # a request far longer than the level
    st = drv.stagger(Point(4))
    assert st is not None and st.capped
    assert 3 * st.step_s == pytest.approx(STAGGER_SHARE * 0.3)


# -- trimming --------------------------------------------------------------------------------


def test_a_duration_level_is_trimmed_by_default_and_records_its_window(
    sim: Sim, tmp_path: Path
) -> None:
    drv = driver(sim.url, tmp_path, concurrency=[4], duration_s=0.4, warmup_requests=2)
    assert drv.wl.trim is None and drv.wl.trims  # not written, on for a duration level
    level, recs = run_level(drv, 4)
    s = level.summary
    assert s.window_s is not None
    lo, hi = s.window_s
    assert (lo, hi) == summary.steady_window(recs)
    # The ramp-up (staggered starts) and the drain are outside it...
    assert 0 < lo < hi < s.duration_s
    # ... and requests per second are those that ended inside it, over its length.
    inside = sum(1 for r in recs if r.status == "ok" and lo <= r.end <= hi)
    assert s.req_s == pytest.approx(inside / (hi - lo))


def test_an_explicit_trim_false_counts_the_whole_level(sim: Sim, tmp_path: Path) -> None:
    drv = driver(sim.url, tmp_path, concurrency=[4], duration_s=0.3, trim=False)
    level, recs = run_level(drv, 4)
    s = level.summary
    assert s.window_s is None
    assert s.req_s == pytest.approx(len(recs) / s.duration_s)
    # ... and a request-count level is not trimmed unless asked
    counted = driver(sim.url, tmp_path, concurrency=[4], requests_per_level=8)
    assert counted.wl.trims is False
    assert run_level(counted, 4)[0].summary.window_s is None
    asked = driver(sim.url, tmp_path, concurrency=[4], requests_per_level=8, trim=True)
    assert run_level(asked, 4)[0].summary.window_s is not None


CAMPAIGN = """
[campaign]
name = "t"
title = "t"

[workload]
concurrency = [1, 4]
{amount}

[[experiment]]
id = "baseline"
why = "reference"

[[experiment]]
id = "other"
why = "its own amount"
workload = {{ {override} }}
"""


@pytest.mark.parametrize(
    ("amount", "override", "trims"),
    [
        ("duration_s = 10", "requests_per_level = 12", (True, False)),
        ("requests_per_level = 12", "duration_s = 10", (False, True)),
        ("duration_s = 10\ntrim = false", "requests_per_level = 12", (False, False)),
        ("requests_per_level = 12", "duration_s = 10, trim = false", (False, False)),
    ],
)
def test_the_trim_default_follows_each_experiments_amount_and_is_saved_resolved(
    amount: str, override: str, trims: tuple[bool, bool]
) -> None:
    c = loads(CAMPAIGN.format(amount=amount, override=override), "c.toml")
    base = resolve(c.model, c.experiments[0], None)
    other = resolve(c.model, c.experiments[1], base)
    assert (base.workload.trims, other.workload.trims) == trims
    # Saved as it applied, so the report, verify and --resume read the same value.
    for r, want in zip((base, other), trims, strict=True):
        dumped = r.workload.model_dump(mode="json")
        assert dumped["trim"] is want and summary.trims(dumped) is want
    assert c.model.model_dump(mode="json")["workload"]["trim"] is trims[0]
    # results of an earlier reportgen wrote trim = false for duration levels: still false
    assert summary.trims({"duration_s": 10.0, "trim": False}) is False
    assert summary.trims({"duration_s": 10.0, "trim": None}) is True


# -- enough requests for the percentiles -----------------------------------------------------


def _check(levels: list[Level]) -> dict[str, Any]:
    got = checks.run_checks(Experiment(id="e", status="ok", levels=levels))
    return next(c for c in got if c.id == "percentile_samples").model_dump()


def test_a_c1_level_of_six_requests_is_flagged_and_one_of_a_hundred_passes(
    start_sim: Any, tmp_path: Path
) -> None:
    sim = start_sim("--ttft-ms", "1", "--itl-ms", "0.5")
    few = driver(sim.url, tmp_path, concurrency=[1], requests_per_level=6, output_tokens=2)
    six, _ = run_level(few, 1)
    assert six.summary.ok == 6
    got = _check([six])
    assert got["status"] == "warn"
    assert got["evidence"].startswith(
        "successful requests per level run, too few for a p99 of TTFT and E2E: C=1: 6 (too "
        "few even for a p90); a p99 needs 100, a p90 10"
    )
    enough = driver(sim.url, tmp_path, concurrency=[4], requests_per_level=100, output_tokens=2)
    hundred, _ = run_level(enough, 4)
    got = _check([hundred])
    assert got["status"] == "pass", got
    assert got["evidence"].startswith("fewest successful requests in a level run: 100 (C=4)")


# -- a whole run -----------------------------------------------------------------------------

RUN = """
[campaign]
name = "steady"
title = "steady"

[server]
engine = "sim"
args = {{ port = {port}, ttft-ms = 5, itl-ms = 2 }}
ready_timeout_s = 30

[workload]
concurrency = [1, 4]
duration_s = 0.4
input_tokens = 8
output_tokens = 8
warmup_requests = 4

[[experiment]]
id = "baseline"
why = "reference"
"""


@pytest.mark.slow
def test_a_duration_run_says_it_was_trimmed_and_how_clients_started(
    tmp_path: Path, cache: Path
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(RUN.format(port=free_port()))
    out = tmp_path / "out"
    res = reportgen_main(
        "run", path, "--output", out, "--quiet", "--no-pdf", cache=cache, env={CAPTURE_ENV: None}
    )
    assert res.returncode == 0, res.stdout + res.stderr
    run_dir = next((out / "steady").iterdir())
    run = results.load(run_dir)
    assert run.experiments[0].workload is not None
    assert run.experiments[0].workload["trim"] is True  # saved as it applied
    c4 = next(lv for lv in run.experiments[0].levels if lv.concurrency == 4)
    assert c4.summary.window_s is not None and c4.stagger is not None
    # staggered by the level's own warm-up's request time (warm, at its concurrency)
    assert c4.stagger.measured == "C=4 warm-up" and c4.stagger.step_s > 0
    (settled,) = [x for x in run.experiments[0].sessions[0].settled if x.concurrency == 4]
    assert c4.stagger.request_s == settled.request_s
    page = (run_dir / "report.html").read_text()
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))
    lo, hi = c4.summary.window_s
    assert f"C=4: throughputs trimmed to the steady state, {lo:.2f}–{hi:.2f} s of " in text
    assert "Clients start staggered, so that they do not run in lockstep waves" in text
    assert "are trimmed to each level run's steady state" in text
    assert "(workload.trim, on by default for duration levels)" in text
    # verify recomputes every summary with the same, resolved trim
    checked = reportgen_main("verify", run_dir / "report.html")
    assert checked.returncode == 0, checked.stdout
    assert "ok   level summaries: 2 level run(s) recomputed from their requests" in checked.stdout
