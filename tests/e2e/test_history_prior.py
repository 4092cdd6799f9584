"""A campaign run again on the same host starts from the spread between server starts its
earlier runs measured (``reportgen run --history``, ``history.prior``), not from the stated
``campaign.start_spread``: recorded in the results, said in the methods, taken again alike
by ``verify``; a campaign that states its spread keeps it, and a history that is not there
is a one-line error."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from tests.conftest import FAST_WARMUP, free_port, reportgen_main

pytestmark = pytest.mark.slow

CAMPAIGN = """
[campaign]
name = "again"
title = "the same campaign, run twice"
margin = 0.05

[server]
engine = "sim"
args = {{ port = {port}, ttft-ms = 5, itl-ms = 2, seed = 1 }}
ready_timeout_s = 30

[workload]
concurrency = [1, 4]
requests_per_level = 8
input_tokens = 8
output_tokens = 8
repetitions = 2
warmup_requests = 1
warmup = {warmup}

[[experiment]]
id = "baseline"
why = "the reference"

[[experiment]]
id = "slower"
why = "a slower step"
args = {{ itl-ms = 3 }}
"""


def _run(tmp_path: Path, cache: Path, text: str, *more: object) -> tuple[dict, Path]:
    path = tmp_path / "c.toml"
    path.write_text(text.format(port=free_port(), warmup=FAST_WARMUP))
    out = tmp_path / "out"
    before = set(out.glob("again/*"))
    res = reportgen_main("run", path, "--output", out, "--quiet", "--no-pdf", *more, cache=cache)
    assert res.returncode == 0, res.stdout + res.stderr
    (run_dir,) = set(out.glob("again/*")) - before
    return json.loads((run_dir / "results.json").read_text()), run_dir


def test_a_second_run_starts_from_the_spread_the_first_measured(
    tmp_path: Path, cache: Path
) -> None:
    first, first_dir = _run(tmp_path, cache, CAMPAIGN)
    assert first.get("start_prior") is None  # no history yet
    store = tmp_path / "out" / "history.sqlite"  # the --output folder's: found by default
    res = reportgen_main("history", "add", first_dir, "--store", store)
    assert res.returncode == 0, res.stderr
    second, second_dir = _run(tmp_path, cache, CAMPAIGN)
    prior = second["start_prior"]
    assert prior["runs"] == [first["run_id"]] and prior["source"] == str(store)
    assert [lv["concurrency"] for lv in prior["levels"]] == [1, 4]
    # two starts of each of two configurations (a third where its starts disagreed, another
    # where it could still be shown equivalent: more_starts): a degree of freedom a start
    # beyond each configuration's first, a level, and a spread never taken as none
    dof = 2 + sum(("more_start" in e) + ("more_open" in e) for e in first["experiments"])
    assert all(lv["dof"] == dof and lv["spread"] >= 0.001 for lv in prior["levels"]), prior
    assert reportgen_main("verify", second_dir).returncode == 0
    page = (second_dir / "report.html").read_text()
    assert "taken from 1 earlier run of this campaign on the same GPUs" in page
    assert first["run_id"] in page

    # a campaign that states its spread keeps it
    stated = CAMPAIGN.replace("margin = 0.05", "margin = 0.05\nstart_spread = 0.02")
    third, _ = _run(tmp_path, cache, stated)
    assert third.get("start_prior") is None

    # another workload is another measurement: not taken
    other = CAMPAIGN.replace("output_tokens = 8", "output_tokens = 6")
    fourth, _ = _run(tmp_path, cache, other, "--history", store)
    assert fourth.get("start_prior") is None

    # a history file that is not there: one line naming the flag
    res = reportgen_main(
        "run", tmp_path / "c.toml", "--output", tmp_path / "out", "--history",
        tmp_path / "none.sqlite", cache=cache,
    )  # fmt: skip
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"error: --history {tmp_path / 'none.sqlite'}: no history file there; record runs "
        f"first (reportgen history add RUN_DIR --store {tmp_path / 'none.sqlite'}), or leave "
        "--history out"
    ]


def test_a_second_run_says_whether_it_replicated_the_first(tmp_path: Path, cache: Path) -> None:
    """Page one of a run whose campaign has earlier runs in the history store says, for each
    decided change, the earlier run's ratio to the baseline against this run's, and whether it
    lies inside this run's interval (``history.replication``); a run without history says
    nothing of it, and results.json keeps its form."""
    first, first_dir = _run(tmp_path, cache, CAMPAIGN)
    assert "replications" not in first  # no history: the key is left out
    store = tmp_path / "out" / "history.sqlite"
    assert reportgen_main("history", "add", first_dir, "--store", store).returncode == 0
    second, second_dir = _run(tmp_path, cache, CAMPAIGN)
    (rep,) = second["replications"]
    assert rep["experiment"] == "slower" and rep["run_id"] == first["run_id"]
    assert [lv["concurrency"] for lv in rep["levels"]] == [1, 4]
    then = {
        c["concurrency"]: c["ratio"] for c in first["experiments"][1]["decision"]["vs_baseline"]
    }
    now = {c["concurrency"]: c for c in second["experiments"][1]["decision"]["vs_baseline"]}
    for lv in rep["levels"]:  # the first run's ratio then, this run's with its interval now
        assert lv["then"] == pytest.approx(then[lv["concurrency"]], rel=0.05)
        c = now[lv["concurrency"]]
        assert (lv["now"], lv["ci_low"], lv["ci_high"]) == (c["ratio"], c["ci_low"], c["ci_high"])
    said = "Earlier runs of this campaign in the history, each change's ratio to the baseline"
    md = (second_dir / "report.md").read_text()
    within = all(lv["ci_low"] <= lv["then"] <= lv["ci_high"] for lv in rep["levels"])
    assert said in md and "slower: " in md
    assert (" replicated: ×" if within else " did not: ×") in md  # the same simulator: mostly
    assert html.unescape(said) in html.unescape((second_dir / "report.html").read_text())
    assert said not in (first_dir / "report.md").read_text()
    assert reportgen_main("verify", second_dir).returncode == 0
