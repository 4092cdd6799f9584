"""Page one says what the run could tell apart: per objective level, the smallest change its
comparisons would have decided (80% power), against the margin, and what would narrow it
where it is wider (more repetitions, or more server starts where their spread alone keeps it
wide)."""

from __future__ import annotations

import lzma
import re
import shutil
import statistics
from pathlib import Path

from reportgen import results
from reportgen.render import brief
from tests.conftest import ROOT, reportgen_main

VLLM = ROOT / "docs" / "examples" / "vllm-h100"
SGLANG = ROOT / "tests" / "fixtures" / "runs" / "sglang-h200-waves"  # an H200 run kept for it


def mdes(run_dir: Path, level: str) -> list[float]:
    run = results.load(run_dir)
    return sorted(
        (c.mde or 1) - 1
        for e in run.experiments
        if e.role == "experiment" and e.decision and e.decision.verdict != "baseline"
        for c in e.decision.vs_parent
        if c.point.label == level
    )


def test_each_level_says_the_smallest_change_it_could_decide() -> None:
    said = brief.build(results.load(VLLM)).detect
    assert said.startswith("Smallest change this run could decide (at 80% power")
    for level in ("C=1", "C=16", "C=64"):
        got = mdes(VLLM, level)
        median = f"±{100 * statistics.median(got):.1f}%".replace(".0%", "%")
        found = re.search(rf"{level} ±([\d.]+)% \(([\d.]+)%-([\d.]+)%\)", said)
        assert found, (level, said)
        assert abs(float(found[1]) / 100 - statistics.median(got)) < 0.006, (median, said)
        assert abs(float(found[2]) / 100 - got[0]) < 0.006
    assert "against a margin of 5.0%" in said
    # C=64's median (about 9%) is wider than the margin: more repetitions would narrow it,
    # C=1's and C=16's are not
    assert said.endswith("to see one, at C=64: about 11 repetitions a side.")


def test_where_the_starts_spread_alone_is_wider_it_says_more_starts() -> None:
    said = brief.build(results.load(SGLANG)).detect
    assert "at C=16, C=64: more server starts (campaign.starts), not repetitions" in said
    assert "at C=1: about 5 repetitions a side" in said


def test_page_one_shows_it(tmp_path: Path) -> None:
    copy = shutil.copytree(VLLM, tmp_path / "run")
    assert reportgen_main("render", copy, "--no-pdf").returncode == 0
    page = lzma.decompress((copy / "report.html.xz").read_bytes()).decode()  # as it was found
    summary = page[page.index('<section id="summary">') : page.index('<section id="decisions">')]
    assert '<p class="caption detect">Smallest change this run could decide' in summary
    assert "C=64: about 11 repetitions a side." in summary
