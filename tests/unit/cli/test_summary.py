"""The console's table of a lone configuration (`reportgen bench`): on a narrow terminal its
key columns stay whole, and a search's levels come in order."""

from __future__ import annotations

import io

from rich.console import Console

from reportgen import results
from reportgen.cli import summary
from tests.conftest import ROOT

SEARCH = ROOT / "docs" / "examples" / "bench-rate-search-sglang-h100"


def _shown(width: int) -> list[str]:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=width, color_system=None)
    summary._lone_table(console, results.load(SEARCH))
    return buf.getvalue().splitlines()


def test_a_narrow_terminal_leaves_columns_out_rather_than_cutting_the_key_ones() -> None:
    lines = _shown(80)
    rows = [ln for ln in lines if ln.startswith("│")]
    assert rows and not any("…" in r for r in rows), "\n".join(lines)
    levels = [r.split("│")[1].strip() for r in rows]
    # lowest first, not in the order the search probed them
    assert levels == [f"R={r}/s" for r in (16, 24, 28, 30, 32, 64, 96, 128)]
    assert [r.split("│")[-2].strip() for r in rows] == ["met"] * 7 + ["missed"]
    said = " ".join(" ".join(lines).split())
    assert (
        "left out at this width: E2E p50 ms, ITL p99 ms, ITL p50 ms, duration s, total tok/s, "
        "TTFT p50 ms (the report has them)" in said
    )
    wide = _shown(200)
    assert "left out" not in " ".join(wide)
    # what `vllm bench serve` prints beside the latencies: TPOT, total tok/s, the duration
    heads = " ".join(" ".join(ln.split()) for ln in wide if ln.startswith("┃"))
    for word in ("TPOT", "total", "duration", "E2E"):
        assert word in heads, heads


def test_json_gives_every_metric_of_every_level() -> None:
    """`--json` carried output tok/s alone (mean and sd per level): a `vllm bench serve` user
    reads TTFT, TPOT, ITL and E2E percentiles, req/s, the duration and token totals."""
    import json
    from pathlib import Path

    rates = ROOT / "docs" / "examples" / "bench-rates-sglang-h200"
    data = results.load(rates)
    said = summary.summary_json(Path(rates), data, [], 0)
    text = json.dumps(said, allow_nan=False)  # strict JSON: an infinite rate is "inf"
    (e,) = json.loads(text)["experiments"]
    (exp,) = data.experiments
    assert set(e["levels"]) == {str(a.point) for a in exp.by_level}
    for agg in exp.by_level:
        level = e["levels"][str(agg.point)]
        runs = [lv for lv in exp.levels if lv.point == agg.point]
        assert level["requests"] == sum(lv.summary.requests for lv in runs)
        assert level["output_tokens"] == sum(lv.summary.output_tokens for lv in runs)
        assert level["duration_s"] > 0 and level["repetitions"] == agg.repetitions
        for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
            for p in ("p50", "p90", "p99"):
                assert level[f"{name}_{p}"]["mean"] == agg.stat(f"{name}_{p}").mean
        assert level["total_tok_s"]["mean"] == agg.stat("total_tok_s").mean
    assert any(level["rate"] == "inf" for level in e["levels"].values())


def test_a_measurement_in_doubt_is_said_under_the_numbers() -> None:
    """A lone benchmark whose host ran slower in one window (or whose repetitions spread)
    says so under its table, in one line a check, where the reader of the numbers is; a check
    that doubts nothing of the numbers (GPU telemetry missing) stays in the report."""
    from reportgen.results.verdicts import Check

    data = results.load(SEARCH)
    (e,) = data.experiments
    e.checks = [
        Check(id="host_speed", title="The host's CPU ran at one speed", status="warn",
              evidence="furthest: C=64 repetition 2, +21%"),
        Check(id="telemetry", title="GPU telemetry recorded", status="warn", evidence="none"),
        Check(id="repetition_spread", title="Repetitions agree", status="pass", evidence="2%"),
    ]  # fmt: skip
    buf = io.StringIO()
    summary._lone_table(Console(file=buf, width=200, color_system=None), data)
    lines = buf.getvalue().splitlines()
    assert "warn: The host's CPU ran at one speed: furthest: C=64 repetition 2, +21%" in lines
    assert not any("GPU telemetry" in ln or "Repetitions agree" in ln for ln in lines)
