"""A check that fires on every experiment says nothing: on vLLM's H200 run every experiment's
repetitions spread 12-44% (the bound is 5%), and "Repetitions agree" warned nine times, as did
"Enough requests for the percentiles shown". Taken again (`render --recheck`), each warns where
the run's condition is first seen (the baseline) and where an experiment is out of line with
the earlier ones; the others pass, saying that it is the run's."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

from tests.conftest import ROOT, reportgen_main


def test_a_spread_of_the_whole_run_is_warned_of_once_and_an_outlier_apart(tmp_path: Path) -> None:
    fixture = ROOT / "tests" / "fixtures" / "runs" / "vllm-h200-moe"
    run_dir = shutil.copytree(fixture, tmp_path / "r")
    before = _spread(run_dir)
    assert set(before.values()) == {"warn"} and len(before) == 9
    res = reportgen_main("render", run_dir, "--recheck", "--no-pdf")
    assert res.returncode == 0, res.stderr
    after = _spread(run_dir)
    assert [k for k, v in after.items() if v == "warn"] == ["baseline", "graph-sizes-small"]
    rows = {r["experiment"]: r for r in _rows(run_dir) if r["id"] == "repetition_spread"}
    assert "x2.6 the run's earlier experiments' (median 16.6%)" in rows["graph-sizes-small"][
        "evidence"]  # fmt: skip
    assert "a spread of the whole run, which the intervals count" in rows["eager"]["evidence"]
    # the workload's shortfall of requests for a p99: the baseline's, and where another
    # experiment falls short where no earlier one did (eager, at C=16, its C=1 too few even
    # for a p90)
    samples = _spread(run_dir, "percentile_samples")
    assert list(_spread(fixture, "percentile_samples").values()) == ["warn"] * 9
    assert [k for k, v in samples.items() if v == "warn"] == ["baseline", "eager"]


def _rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "tables" / "checks.csv").open() as fh:
        return list(csv.DictReader(fh))


def _spread(run_dir: Path, check: str = "repetition_spread") -> dict[str, str]:
    return {r["experiment"]: r["status"] for r in _rows(run_dir) if r["id"] == check}
