"""An experiment's level table: a row per level (its throughput and latencies, their spread,
the achieved load, the requests behind each percentile), the baseline's beside it, and the
notes under the table (requests that failed, levels cut short, what the throughputs count)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from reportgen import metrics
from reportgen.metrics import is_throughput
from reportgen.render.content import (
    Cell,
    LevelRow,
)
from reportgen.render.fmt import (
    NONE,
    fmt_bound,
    fmt_ci,
    fmt_num,
    fmt_ratio,
    fmt_stat,
    level_cell,
)
from reportgen.results import levels as results_levels
from reportgen.results import model
from reportgen.results import verdicts as results_verdicts
from reportgen.results.findings import METHOD
from reportgen.results.levels import Aggregate
from reportgen.results.model import Point, sorted_points
from reportgen.results.verdicts import ci_label

# Columns of the per-experiment table by level, after output tok/s: the registry's
# (``Metric.table``), in its order.
COLUMNS = metrics.columns()
LEVEL_COLUMNS = tuple(c.key for c in COLUMNS)


def table_layout(compact: bool = False) -> dict[str, Any]:
    """How the template lays out the level table's columns after output tok/s, from the
    registry: ``groups``, a heading each (a throughput's label alone, over both header rows;
    a latency's label and unit over its statistics), and ``cells``: for each column, its
    index among a row's cells (``LevelRow.cells``, every column of the full table) and
    whether it starts a latency's group (a rule before it). ``compact``: the table of every
    experiment on paper."""
    chosen = metrics.columns(compact)
    groups: list[dict[str, Any]] = []
    for c in chosen:
        if c.first:
            groups.append(
                {
                    "metric": c.metric,
                    "label": c.label,
                    "unit": c.unit,
                    "stats": [],
                    "latency": bool(c.stat),
                }
            )
        if c.stat:
            groups[-1]["stats"].append(c.stat)
    cells = [(LEVEL_COLUMNS.index(c.key), c.first and bool(c.stat)) for c in chosen]
    return {
        "groups": groups,
        "cells": cells,
        "throughputs": [g["label"] for g in groups if not g["latency"]],
        "latency_columns": sum(bool(c.stat) for c in chosen),
    }


def cell(level: Aggregate | None, key: str) -> Cell:
    """A level's statistic, mean and sd; "all failed" where no request of it succeeded (its
    throughput is zero, and its latencies unknown: not a measurement of the configuration)."""
    if level is None:
        return Cell(*fmt_stat(None))
    if level.all_failed:
        return Cell("all failed")
    return Cell(*fmt_stat(level.stat(key)))


def by_level(e: model.Experiment | None) -> dict[Point, Aggregate]:
    """An experiment's aggregates by level (none for no experiment)."""
    return {a.point: a for a in e.by_level} if e is not None else {}


def summaries_by_level(e: model.Experiment | None) -> dict[Point, list[results_levels.Summary]]:
    """An experiment's level runs' summaries by level, in the order they ran."""
    runs = results_levels.by_point(e.levels if e is not None else [])
    return {p: [lv.summary for lv in group] for p, group in runs.items()}


def achieved(runs: Sequence[results_levels.Summary], nominal: int | None = None) -> str:
    """The mean achieved concurrency of a level's runs (requests in flight, time-weighted,
    where the throughputs were counted: ``Summary.in_flight``);
    marked "(low)" below METHOD.achieved_share of a closed loop's ``nominal`` C."""
    values = [
        float(s.in_flight) for s in runs if s.in_flight is not None and math.isfinite(s.in_flight)
    ]
    if not values:
        return NONE
    mean = sum(values) / len(values)
    low = nominal is not None and nominal > 0 and mean < METHOD.achieved_share * nominal
    return fmt_num(mean) + (" (low)" if low else "")


def samples(runs: Sequence[results_levels.Summary]) -> str:
    """Successful requests per run, the values each run's TTFT and E2E percentiles come
    from: one number when every run had as many, else the range."""
    counts = [s.ok for s in runs]
    if not counts:
        return NONE
    low, high = min(counts), max(counts)
    return f"{low}" if low == high else f"{low}–{high}"


def level_row(
    c: Point,
    level: Aggregate,
    label: str,
    is_baseline: bool,
    base: Aggregate | None,
    runs: Sequence[results_levels.Summary] | None = None,
    base_runs: Sequence[results_levels.Summary] | None = None,
) -> LevelRow:
    # the ratio of geometric means, the same number as every comparison's
    mine, theirs = geomean(runs or []), geomean(base_runs or [])
    ratio = NONE if is_baseline or mine is None or not theirs else fmt_ratio(mine / theirs)
    return LevelRow(
        concurrency=level_cell(c),
        label=label,
        is_baseline=is_baseline,
        output=cell(level, "output_tok_s"),
        ratio=ratio,
        cells=[cell(level, key) for key in LEVEL_COLUMNS],
        errors=f"{level.errors}/{level.requests}",
        achieved=achieved(runs or [], c.concurrency if c.rate is None else None),
        samples=samples(runs or []),
    )


def geomean(runs: Sequence[results_levels.Summary]) -> float | None:
    """The geometric mean of the runs' output tok/s (positive ones), None without any."""
    got = [v for s in runs if (v := s.output_tok_s) is not None and v > 0]
    return statistics.geometric_mean(got) if got else None


def vs_baseline_table(
    items: Sequence[results_verdicts.Comparison],
) -> tuple[list[str], list[tuple[str, list[tuple[str, str, str]]]]]:
    """Every headline metric's comparison with the baseline, as a level-by-metric table:
    the metrics' labels, then per level its cells (ratio, interval, verdict)."""
    metrics: list[str] = []
    cells: dict[tuple[Point, str], tuple[str, str, str]] = {}
    for c in items:
        if c.metric not in metrics:
            metrics.append(c.metric)
        # "equivalent" with the bound it rests on: the interval shown is wider than the
        # two one-sided tests' and may reach past the margin
        rests = f", {fmt_bound(c.bound)}" if c.verdict == "equivalent" and c.bound else ""
        cells[(c.point, c.metric)] = (
            fmt_ratio(c.ratio), fmt_ci(c.ci_low, c.ci_high) + rests, c.verdict
        )  # fmt: skip
    levels = sorted_points(c for c, _ in cells)
    labels = [m.replace("_p99", " p99") if m.endswith("_p99") else (
        m if is_throughput(m) else f"{m} p50") for m in metrics]  # fmt: skip
    return labels, [
        (level_cell(c), [cells.get((c, m), (NONE, "", "")) for m in metrics]) for c in levels
    ]


def ci_caption(items: Sequence[results_verdicts.Comparison]) -> str:
    """The confidence of the intervals in ``vs_baseline_table``, as its caption says it: one
    level ("97.5% CI"), which is every run's since comparisons of every metric share the
    objective's; or, for a run decided by an earlier method whose p99 intervals were a
    bootstrap at 95%, each level with the metrics it holds for."""
    by: dict[str, list[str]] = {}
    for c in items:
        if c.ci_low is not None and c.ci_high is not None:
            names = by.setdefault(ci_label(c), [])
            label = c.metric.replace("_p99", " p99")
            if label not in names:
                names.append(label)
    if len(by) <= 1:
        return next(iter(by), "no intervals")
    (main, _), *rest = sorted(by.items(), key=lambda kv: -len(kv[1]))
    return f"{main}; " + "; ".join(f"{label} for {', '.join(names)}" for label, names in rest)


def error_kinds(e: model.Experiment) -> dict[Point, dict[str, int]]:
    """Failed requests by level and kind ("HTTP 429", "timeout"...), repetitions pooled."""
    out: dict[Point, dict[str, int]] = {}
    for lv in e.levels:
        kinds = out.setdefault(lv.point, {})
        for kind, n in lv.summary.error_kinds.items():
            kinds[kind] = kinds.get(kind, 0) + n
    return out


def cut_short(e: model.Experiment) -> list[str]:
    """Levels ended early because their server died: when, and why."""
    out = []
    for lv in e.levels:
        where = f"{lv.point.label} repetition {lv.repetition + 1}"
        if not lv.aborted:
            continue
        if lv.aborted.startswith(results_verdicts.FAILED_DURING):
            out.append(f"{where}: {lv.aborted}; its numbers are not the configuration's.")
            continue
        out.append(
            f"{where}: cut short after {(lv.window.duration_s if lv.window else 0.0):.1f} s "
            f"({lv.aborted}); requests in flight then are not counted."
        )
    return out


def trim_notes(runs: Mapping[Point, Sequence[results_levels.Summary]]) -> list[str]:
    """Where throughputs were trimmed to the steady state: the window, per level (the runs'
    mean start and end, seconds from the level's start, against its whole length)."""
    notes: list[str] = []
    for c in sorted_points(runs):
        windows = [s.window_s for s in runs[c] if s.window_s and len(s.window_s) == 2]
        if not windows:
            continue
        start = sum(w[0] for w in windows) / len(windows)
        end = sum(w[1] for w in windows) / len(windows)
        whole = sum(s.duration_s for s in runs[c]) / len(runs[c])
        of = f"{len(windows)} of {len(runs[c])} runs" if len(windows) < len(runs[c]) else (
            "one run" if len(windows) == 1 else f"mean of {len(windows)} runs"
        )  # fmt: skip
        notes.append(
            f"{c.label}: throughputs trimmed to the steady state, {start:.2f}–{end:.2f} s of "
            f"{whole:.2f} s ({of}); latencies count every request."
        )
    return notes


def level_notes(
    levels: Mapping[Point, Aggregate], error_kinds: Mapping[Point, Mapping[str, int]]
) -> list[str]:
    """Caveats a reader must see next to the numbers they qualify."""
    notes: list[str] = []
    for c in sorted_points(levels):
        lv = levels[c]
        if lv.client_limited:
            load = lv.client_load_max
            share = f" (up to {load:.0%} of its measured ceiling)" if load is not None else ""
            notes.append(
                f"{c.label}: client-limited in {lv.client_limited} of {lv.repetitions}"
                f" repetition(s){share}; these numbers may describe the load generator rather "
                "than the server. Raise workload.workers or use a bigger client host."
            )
        if lv.errors:
            found = sorted((error_kinds.get(c) or {}).items(), key=lambda kv: -kv[1])
            kinds = ", ".join(f"{k} ({n})" for k, n in found)
            notes.append(
                f"{c.label}: {lv.errors} of {lv.requests} request(s) failed"
                + (f": {kinds}" if kinds else "")
                + "; the numbers count only those that succeeded."
            )
        if lv.silent_outputs:
            notes.append(
                f"{c.label}: {lv.silent_outputs} request(s) streamed no text although the "
                "engine counted their tokens; their latencies are left out."
            )
        if lv.short_outputs:
            notes.append(
                f"{c.label}: {lv.short_outputs} request(s) returned fewer output tokens than "
                "asked; the engine may ignore ignore_eos/min_tokens."
            )
        goodput = lv.mean("goodput_req_s")
        if goodput is not None:
            notes.append(
                f"{c.label}: goodput {fmt_num(goodput)} req/s (requests meeting every SLO)."
            )
    return notes
