"""A history of simulator runs with a slowdown planted at the fourth: ``reportgen history add``
records them (once each, even when added twice or by several processes at once; again when
their results file has changed), ``show``
locates the change at the run where it happened with the flag that changed there, ``check``
gates on it, and the history report says so in HTML (opened in Chromium) and PDF."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pypdf import PdfReader

from tests.conftest import FAST_WARMUP, ROOT, reportgen_main, run_campaign
from tests.e2e.test_browser import CHROMIUM, _load

pytestmark = pytest.mark.slow

# decode twice as slow from the fourth run on: output tok/s at C=1 falls to about 0.55x, clear
# of what a loaded host does to the simulator between runs
ITL_MS = (4, 4, 4, 8, 8)
CAMPAIGN = """
[campaign]
name = "nightly"
title = "one configuration measured night after night"
objective = { metric = "output_tok_s", concurrency = [1] }
starts = 1
prime = false
bracket = false

[server]
engine = "sim"
args = { port = PORT, ttft-ms = 5, itl-ms = ITL, seed = 4 }
ready_timeout_s = 30

[workload]
concurrency = [1]
requests_per_level = 8
input_tokens = 8
output_tokens = 16
repetitions = 2
warmup_requests = 1
warmup = FAST_WARMUP

[[experiment]]
id = "baseline"
why = "the configuration tracked from one run to the next"
""".replace("FAST_WARMUP", FAST_WARMUP)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> list[Path]:
    out = []
    for i, itl in enumerate(ITL_MS):
        folder = tmp_path_factory.mktemp(f"night{i}")
        _, run_dir = run_campaign(folder, CAMPAIGN.replace("ITL", str(itl)), cache)
        out.append(run_dir)
    return out


def history(*args: str | Path) -> Any:
    return reportgen_main("history", *args)


def test_a_planted_slowdown_is_found_where_it_happened_and_fails_the_gate(
    runs: list[Path], tmp_path: Path
) -> None:
    store = tmp_path / "h.sqlite"
    added = history("add", *runs, "--store", store)
    assert added.returncode == 0, added.stderr
    assert added.stdout.count("added ") == 5
    again = history("add", runs[2], "--store", store)
    assert again.returncode == 0 and "already: nothing added" in again.stdout
    # the same run with its results file written again (as a resumed or re-rendered run's
    # is): its record replaced, not added twice
    copy = Path(shutil.copytree(runs[2], tmp_path / "again"))
    results = copy / "results.json"
    results.write_text(json.dumps(json.loads(results.read_text()), indent=2))
    redone = history("add", copy, "--store", store)
    assert redone.returncode == 0 and redone.stdout.startswith("updated "), redone.stdout
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone() == (5,)
        (path,) = db.execute("SELECT path FROM runs WHERE path LIKE '%again'").fetchone()
        assert path == str(copy)

    shown = history("show", "nightly", "--store", store)
    assert shown.returncode == 0, shown.stderr
    said = shown.stdout
    # located at the fourth run, its size with an interval, and the flag that changed there
    assert "baseline C=1: regression at run 4" in said, said
    assert "flags[baseline].itl-ms: 4 -> 8" in said, said
    line = next(x for x in said.splitlines() if "regression at run 4" in x)
    ratio = float(line.split(" x", 1)[1].split(" ")[0])
    assert 0.4 < ratio < 0.75, line
    assert said.count("regression at") == 1, said  # nowhere else

    gate = history("check", "nightly", "--store", store, "--fail-on-regression", "5%")
    # the newest run is judged against the run before it, since the change: the same slow
    # configuration, so not regressed (or, on a noisy host, cannot tell); the change itself
    # was at the fourth
    assert gate.returncode in (0, 3), gate.stdout + gate.stderr
    # the store up to the fourth run: the newest is the slow one, and it regressed
    fourth = tmp_path / "four.sqlite"
    assert history("add", *runs[:4], "--store", fourth).returncode == 0
    gate = history("check", "nightly", "--store", fourth, "--fail-on-regression", "5%")
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "baseline C=1: regressed: x0." in gate.stdout and gate.stdout.rstrip().endswith(
        "regressed"
    )

    made = history("report", "nightly", "--store", fourth, "--out", tmp_path / "rep")
    assert made.returncode == 0, made.stderr
    # the same history gives the same page, in another process too (its charts' SVG ids
    # salted by name, as the reports')
    subprocess.run(
        [sys.executable, "-m", "reportgen", "history", "report", "nightly", "--store", fourth,
         "--out", tmp_path / "again", "--no-pdf"],
        cwd=ROOT, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    page = (tmp_path / "rep" / "history.html").read_bytes()
    assert (tmp_path / "again" / "history.html").read_bytes() == page
    pdf = "\n".join(p.extract_text() for p in PdfReader(tmp_path / "rep" / "history.pdf").pages)
    flat = " ".join(pdf.split())
    assert "regression at run 4" in flat and "flags[baseline].itl-ms: 4 -> 8" in flat, flat
    assert "regressed" in flat
    if CHROMIUM is None:
        pytest.skip("no chromium here")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = (tmp_path / "rep" / "history.html").read_text()
            loaded = _load(browser, page, tmp_path / "open.html")
            assert loaded.errors == [] and all(
                u.startswith(("file:", "data:")) for u in loaded.requests
            ), (loaded.errors, loaded.requests)
            text = loaded.text()
            assert "The newest run" in text and "regressed" in text
            assert loaded.count("figure.chart svg") == 1  # the one series: baseline at C=1
        finally:
            browser.close()


def test_runs_of_one_configuration_raise_no_false_alarm(runs: list[Path], tmp_path: Path) -> None:
    store = tmp_path / "h.sqlite"
    assert history("add", *runs[:3], "--store", store).returncode == 0
    shown = history("show", "nightly", "--store", store)
    assert "no change point" in shown.stdout and "regression at" not in shown.stdout
    gate = history("check", "nightly", "--store", store, "--fail-on-regression", "10%")
    assert gate.returncode in (0, 3), gate.stdout  # never "regressed"


def test_concurrent_adds_keep_each_run_once(runs: list[Path], tmp_path: Path) -> None:
    store = str(tmp_path / "h.sqlite")
    # four processes at once, each adding runs some of the others add too
    # (started together as processes of their own: a pool of Python workers to start them
    # imported this file, and the report's stack with it, four times over)
    add = [sys.executable, "-m", "reportgen", "history", "add", "--store", store]
    pipe = subprocess.PIPE
    adds = [
        subprocess.Popen([*add, *map(str, runs[i : i + 3])], cwd=ROOT, stdout=pipe, stderr=pipe)
        for i in range(4)
    ]
    said = [p.communicate(timeout=120) for p in adds]
    assert [p.returncode for p in adds] == [0, 0, 0, 0], said
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone() == (5,)
        levels = db.execute("SELECT COUNT(*) FROM levels GROUP BY run_id").fetchall()
        assert len({n for (n,) in levels}) == 1  # every run's levels written once


def test_what_is_not_a_run_or_not_a_history_is_refused_in_one_line(
    runs: list[Path], tmp_path: Path
) -> None:
    store = tmp_path / "h.sqlite"
    empty = tmp_path / "empty"
    empty.mkdir()
    for target in (empty, tmp_path / "missing"):
        got = history("add", runs[0], target, "--store", store)
        assert got.returncode == 2 and len(got.stderr.strip().splitlines()) == 1, got.stderr
        assert str(target) in got.stderr
    assert not store.exists()  # every run is read before anything is written: none added
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "results.json").write_text('{"schema_version": 3, "run_id": ')
    got = history("add", cut, "--store", store)
    assert got.returncode == 2 and "not valid JSON" in got.stderr, got.stderr
    assert "the file is damaged" in got.stderr and not store.exists()
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE notes (x TEXT)")
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not a database, just some words that fill a page\n" * 50)
    for bad in (foreign, text_file):
        got = history("add", runs[0], "--store", bad)
        assert got.returncode == 2 and "not a reportgen history" in got.stderr, got.stderr
        assert len(got.stderr.strip().splitlines()) == 1
    with sqlite3.connect(foreign) as db:  # the foreign file left as it was
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert names == {"notes"}
    got = history("show", "nightly", "--store", tmp_path / "none.sqlite")
    assert got.returncode == 2 and "reportgen history add" in got.stderr
    assert not (tmp_path / "none.sqlite").exists()
