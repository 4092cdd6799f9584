"""The statistics are one grid in the metric registry: every latency carries the same
percentiles and mean, and the summaries, the aggregates, the bounds and the level table
derive from it."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen import metrics
from reportgen.analysis.checks_levels import PERCENTILE_SAMPLES
from reportgen.analysis.summary import aggregate, summarize
from reportgen.campaign import bounds
from reportgen.load.records import RequestRecord
from reportgen.render.levels import LEVEL_COLUMNS, table_layout
from reportgen.results.levels import Aggregate, Dist


def test_every_latency_carries_the_grid() -> None:
    assert {"p50", "p90", "p95", "p99"} <= set(metrics.PERCENTILES)
    assert tuple(Dist.model_fields) == metrics.STATS
    for m in metrics.LATENCIES:
        for p in metrics.PERCENTILES:
            assert f"{m}_{p}" in Aggregate.model_fields
    assert set(metrics.GRID) <= set(Aggregate.model_fields)


def _records(ms: list[float]) -> list[RequestRecord]:
    return [
        RequestRecord(
            index=i,
            concurrency=1,
            repetition=0,
            status="ok",
            start=float(i),
            first_token=float(i) + t / 1e3,
            end=float(i) + 2 * t / 1e3,
            output_tokens=10,
            input_tokens=10,
            chunk_times=[float(i) + t / 1e3 + k * 1e-3 for k in range(10)],
        )
        for i, t in enumerate(ms)
    ]


def test_a_level_run_and_its_aggregate_carry_p95() -> None:
    """TTFT 1..100 ms over 100 requests: its p95 is numpy's, in the summary and, across two
    identical repetitions, in the aggregate."""
    ms = [float(x) for x in range(1, 101)]
    s = summarize(_records(ms), duration_s=100.0)
    assert s.ttft_ms.p95 == pytest.approx(float(np.percentile(ms, 95)), rel=1e-6)
    agg = aggregate(1, [s, s])
    assert agg.stat("ttft_ms_p95").mean == pytest.approx(s.ttft_ms.p95)
    assert agg.stat("ttft_ms_p95").n == 2


def test_bounds_checks_and_tables_name_the_grid() -> None:
    (b,) = bounds.parse("ttft_ms.p95<300")
    assert (b.metric, b.stat) == ("ttft_ms", "p95")
    with pytest.raises(ValueError, match="p50, p90, p95, p99 or mean"):
        bounds.parse("ttft_ms.p97<300")
    assert PERCENTILE_SAMPLES == {"p90": 10, "p95": 20, "p99": 100}
    assert set(LEVEL_COLUMNS) <= set(metrics.GRID)
    full, paper = table_layout(), table_layout(compact=True)
    # a latency group's heading spans its statistics; paper leaves out the p90s
    spans = {g["label"]: g["stats"] for g in full["groups"] if g["latency"]}
    assert spans["TTFT"] == ["p50", "p90", "p99"]
    assert [g["stats"] for g in paper["groups"] if g["label"] == "TTFT"] == [["p50", "p99"]]
    assert full["latency_columns"] == sum(len(s) for s in spans.values())
    assert [i for i, _ in paper["cells"]] == [LEVEL_COLUMNS.index(k) for k in (
        "total_tok_s", "req_s", "ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50", "itl_ms_p99",
        "tpot_ms_p50", "e2e_ms_p50", "e2e_ms_p99",
    )]  # fmt: skip


def test_a_run_recorded_before_p95_keeps_its_form() -> None:
    """An aggregate and a distribution read from a file that had no p95 are saved again
    without one."""
    old = Aggregate.model_validate(
        {"concurrency": 1, "ttft_ms_p50": {"mean": 5.0, "sd": None, "n": 1}}
    )
    dumped = old.model_dump()
    assert "ttft_ms_p50" in dumped and "ttft_ms_p95" not in dumped
    assert "p95" not in Dist(mean=1.0, p50=1.0, p90=2.0, p99=3.0).model_dump()
