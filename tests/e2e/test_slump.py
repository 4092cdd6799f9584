"""A slump inside a measured window: the server delivering far less for seconds while its load
stays on it, with nothing in its log to say why (seen on an H200: 3 s at about two thirds of a
C=64 window's median, all 64 requests in flight, the GPU's power falling). The window's own
token arrivals show it; the level is measured again, as after an engine event."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from reportgen.analysis import steady
from reportgen.load.records import RequestRecord
from tests.conftest import run_campaign


def closed_loop(
    seconds: float,
    concurrency: int,
    *,
    slow: tuple[float, float, float] | None = None,
    stop_at: float | None = None,
    seed: int = 0,
) -> list[RequestRecord]:
    """A closed loop's records: ``concurrency`` clients, each sending its next request when
    the last ends, 20 tokens a request, one token per chunk every 10 ms with 10% jitter;
    ``slow`` = (from, to, factor) makes every token that long; ``stop_at`` ends the clients'
    sending there (the load falls off)."""
    rng = np.random.default_rng(seed)
    out: list[RequestRecord] = []
    for client in range(concurrency):
        t = client * 0.01
        while t < seconds and (stop_at is None or t < stop_at):
            start, chunks = t, []
            for _ in range(20):
                step = 0.01 * rng.lognormal(0, 0.1)
                if slow is not None and slow[0] <= t < slow[1]:
                    step *= slow[2]
                t += step
                chunks.append(t)
            out.append(
                RequestRecord(
                    index=len(out), start=start, end=t, chunk_times=chunks, output_tokens=20
                )
            )
    return out


def test_a_slump_with_the_load_held_is_found_and_timed() -> None:
    recs = closed_loop(12, 16, slow=(5.0, 8.0, 2.0))
    event = steady.slump(recs, [0.5, 12.0], 16)
    assert event is not None and event.kind == "slump"
    assert event.at_s is not None and 4.5 <= event.at_s <= 5.6
    assert "for 3 s" in event.line or "for 2 s" in event.line
    assert "0.5" in event.line.split("x the window")[0]  # about half the median


def test_a_steady_window_or_a_short_one_holds_none() -> None:
    recs = closed_loop(12, 16)
    assert steady.slump(recs, [0.5, 12.0], 16) is None
    # half a second at half the speed is a hiccup, not a slump; a 4-s window is not judged
    assert steady.slump(closed_loop(12, 16, slow=(5.0, 5.5, 2.0)), [0.5, 12.0], 16) is None
    assert steady.slump(closed_loop(12, 16, slow=(1.0, 4.0, 3.0)), [0.5, 4.5], 16) is None


def test_clients_that_stop_sending_are_not_a_slow_server() -> None:
    # the load falls off for the window's last 4 s: fewer tokens, but not the server's doing
    recs = closed_loop(12, 16, stop_at=8.0)
    assert steady.slump(recs, [0.5, 12.0], 16) is None


CAMPAIGN = """
[campaign]
name = "slump"
title = "a server whose host side stalls once"
objective = { metric = "output_tok_s", concurrency = [8] }

[server]
engine = "sim"
ready_timeout_s = 30

[server.args]
port = PORT
ttft-ms = 15
itl-ms = 4
jitter = 0.01
seed = 3
slump-after = 200
slump-s = 3
slump-factor = 3

[workload]
concurrency = [8]
duration_s = 8
input_tokens = 8
output_tokens = 24
repetitions = 1
warmup_requests = 2
warmup = { steady = false }

[[experiment]]
id = "baseline"
why = "the reference"
"""


@pytest.mark.slow
def test_a_window_that_held_a_slump_is_measured_again(tmp_path: Path, cache: Path) -> None:
    got, run_dir = run_campaign(tmp_path, CAMPAIGN, cache)
    (base,) = got["experiments"]
    (level,) = base["levels"]
    # the stall (200 requests in, 3 s at a third of the speed) fell in the first window:
    # found there with the load held, and the level measured again past it
    (event,) = level["remeasured"]
    assert event["kind"] == "slump" and "of 8 requests in flight" in event["line"], event
    assert event["at_s"] is not None and 0 < event["at_s"] < 6
    assert level["events"] == []
    checks = {c["id"]: c for c in base["checks"]}
    assert checks["engine_events"]["status"] == "pass"
    assert "measured again after one (slump)" in checks["engine_events"]["evidence"]
    report = (run_dir / "report.html").read_text()
    assert "slump" in report and "measured again" in report
