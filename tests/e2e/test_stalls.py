"""One request held up far beyond its level's others (a gap mid-stream, a response kept open
after its last token: a busy host) is named by the check ``request_stalls`` with its time,
its gaps against the level's, the host over that repetition and the level's throughput with
and without that repetition; requests that only jitter are not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from reportgen.analysis import checks_stalls
from reportgen.load.records import RequestRecord
from tests.conftest import FAST_WARMUP, reportgen_main, run_campaign

CAMPAIGN = """
[campaign]
name = "stalled"
title = "one request held up"

[server]
engine = "sim"
ready_timeout_s = 30

[server.args]
port = PORT
ttft-ms = 10
itl-ms = 4
jitter = 0.05
seed = 3
stall-after = 12
stall-ms = 300

[workload]
concurrency = [1]
requests_per_level = 12
input_tokens = 8
output_tokens = 24
repetitions = 2
warmup_requests = 2
warmup = WARMUP

[[experiment]]
id = "baseline"
why = "the reference"
"""


def _records(n: int, rng: np.random.Generator, stall: int | None = None) -> list[RequestRecord]:
    """``n`` requests one after another, 24 chunks 4 ms apart with 30% jitter (and up to a
    40 ms hiccup now and then); request ``stall`` pauses 300 ms halfway and closes 0.3 s late."""
    out, t = [], 0.0
    for i in range(n):
        start, times = t, []
        t += 0.01
        for k in range(24):
            t += 0.004 * rng.lognormal(0, 0.3) + (0.04 if rng.random() < 0.01 else 0.0)
            if i == stall and k == 12:
                t += 0.3
            times.append(t)
        end = t + (0.3 if i == stall else 0.0005)
        out.append(RequestRecord(index=i, start=start, end=end, first_token=times[0],
                                 chunk_times=times, output_tokens=24, concurrency=1))  # fmt: skip
        t = end
    return out


def test_jitter_is_no_stall_and_one_held_request_is() -> None:
    rng = np.random.default_rng(0)
    assert checks_stalls.stalls(_records(400, rng)) == []
    (s,) = checks_stalls.stalls(_records(40, rng, stall=17))
    assert s.index == 17 and s.gap_s > 0.3 and s.close_s == pytest.approx(0.3)


@pytest.mark.slow
def test_a_request_held_up_is_named_with_its_time_host_and_effect(
    tmp_path: Path, cache: Path
) -> None:
    got, run_dir = run_campaign(tmp_path, CAMPAIGN.replace("WARMUP", FAST_WARMUP), cache)
    (base,) = got["experiments"]
    check = next(c for c in base["checks"] if c["id"] == "request_stalls")
    assert check["status"] == "warn", check
    said = check["evidence"]
    assert said.startswith("C=1 repetition ") and "sent " in said and " s into the level" in said
    assert "ms gap mid-stream (that repetition's requests: " in said
    assert "s after its last token" in said
    assert "the host over that repetition: " in said and " cores busy" in said
    assert "the level's output tok/s " in said and " with that repetition, " in said
    assert "measure the level again" in check["hint"]
    # the report's assumptions section and report.md carry it
    assert "No request stalled far beyond" in (run_dir / "report.md").read_text()


DECIDED = (
    CAMPAIGN.replace('name = "stalled"', 'name = "stalled-decided"')
    .replace('title = "one request held up"', 'title = "one request held up in the baseline"\n'
             "margin = 0.03\nstarts = 1\nanchors = 0\nbracket = false\nconfirm = false")
    .replace("jitter = 0.05", "jitter = 0.02")
    .replace("stall-after = 12", "stall-after = STALL")
    .replace("repetitions = 2", "repetitions = 3")
    + """
[[experiment]]
id = "renamed"
why = "the same engine under another served name, on a host that held nothing up"
args = { model = "renamed", stall-after = 0 }
"""
)  # fmt: skip


@pytest.mark.slow
def test_a_run_holding_a_stalled_request_is_left_out_of_the_decision(
    tmp_path: Path, cache: Path
) -> None:
    """The baseline's first start holds one request up 300 ms mid-stream and 300 ms before
    it closes, in one of its repetitions; that run reads well below the others. It is left
    out of the comparison (its measurement keeps runs without one), and the decision names
    it: the unchanged experiment is not called faster."""
    # (no level warm-up: two warm-up requests a start, so the 20th request the first start
    # accepts is in its second repetition, and the second start, 14 requests, holds none)
    text = DECIDED.replace("WARMUP", "{ steady = false }").replace("STALL", "20")
    got, run_dir = run_campaign(tmp_path, text, cache)
    base, renamed = got["experiments"]
    held = [lv for lv in base["levels"] if lv["summary"].get("stall_s") is not None]
    assert len(held) == 1, [lv["summary"].get("stall_s") for lv in base["levels"]]
    assert held[0]["summary"]["stall_s"] == pytest.approx(0.3, abs=0.05)
    assert all(lv["summary"].get("stall_s") is None for lv in renamed["levels"])
    values = [lv["summary"]["output_tok_s"] for lv in base["levels"]]
    assert held[0]["summary"]["output_tok_s"] < 0.97 * max(values)  # it did slow the run
    d = renamed["decision"]
    (said,) = d["noise"]["stalls"]
    rep = held[0]["repetition"] + 1
    assert said.startswith(f"baseline C=1 repetition {rep}: a request in it stalled; "), said
    assert "Left out as held by a stall (a run one of whose requests" in d["explanation"]
    assert d["verdict"] != "adopted", d["explanation"]  # (faster than a held-up baseline)
    (c,) = d["vs_parent"]
    kept = [v for lv, v in zip(base["levels"], values, strict=True) if lv not in held]
    mine = [lv["summary"]["output_tok_s"] for lv in renamed["levels"]]
    import math

    expect = math.exp(sum(map(math.log, mine)) / len(mine) - sum(map(math.log, kept)) / len(kept))
    assert c["ratio"] == pytest.approx(expect, rel=1e-6)  # against the runs without it
    # verify recomputes each run's hold-up from its requests, and the decisions from them
    assert reportgen_main("verify", run_dir).returncode == 0
