"""`bench --find-max` against a server whose capacity is known: the simulator's first token
takes 50 x (1 + 0.5 x (requests in flight - 1)) ms, so a bound of 450 ms at p99 holds up to 16
requests in flight (425 ms) and not at 17 (450 ms). The search finds 16 within 10%, converged,
and page one says it."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import reportgen_main

pytestmark = pytest.mark.slow


def test_a_search_finds_a_known_capacity_within_ten_percent(
    tmp_path: Path, cache: Path, start_sim: Any
) -> None:
    sim = start_sim("--ttft-ms", "50", "--ttft-growth", "0.5", "--itl-ms", "1", "--jitter", "0")
    out = tmp_path / "out"
    res = reportgen_main(
        "bench", sim.url, "--find-max", "ttft_ms.p99<450", "--concurrency", "1",
        "--find-max-probes", "12", "--requests", "32", "--repetitions", "2",
        "--output-tokens", "4", "--input-tokens", "16", "--warmup", "2",
        "--level-warmup-max", "2", "--output", out, "--no-pdf", "--json", cache=cache,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    found = json.loads(res.stdout)["experiments"][0]["search"]
    assert found["best"] == pytest.approx(16, rel=0.1), found["probes"]
    assert found["converged"]
    low, high = found["best"], found["lowest_failure"]
    assert high is not None and high - low <= max(1, 0.1 * low)  # resolved to within 10%
    (run_dir,) = (p.parent for p in (out / "bench").glob("*/results.json"))
    page = html.unescape((run_dir / "report.html").read_text())
    # page one's lead gives the answer; the search's own sentence, what was measured there
    assert f"The highest concurrency meeting ttft_ms.p99<450 is C={int(low)}." in page
    assert f"the boundary lies between C={int(low)} and C={int(high)}" in page
