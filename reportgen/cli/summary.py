"""What ``reportgen run`` ends with: the summary table on the console (each experiment's
verdict and objective per level; a lone configuration's headline numbers, as ``vllm bench
serve`` prints them) and, with ``--json``, the same for scripts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from reportgen import metrics

if TYPE_CHECKING:
    from reportgen.results.findings import LevelCost
    from reportgen.results.model import Point, Run

    # bench --percentiles, per experiment and level: each latency's asked percentiles, as the
    # mean and sd over repetitions ({id: {point: {"ttft_ms": {"p25": {"mean", "sd"}}}}})
    Asked = dict[str, dict[Point, dict[str, dict[str, dict[str, float | None]]]]]


def summary_json(
    run_dir: Path, data: Run, paths: list[Path], code: int, asked: Asked | None = None
) -> dict[str, Any]:
    """``run --json``: what the summary table and the report paths say, for scripts. Each
    experiment's objective per level is the mean and standard deviation over repetitions;
    its comparisons are the decision's, against its parent and the baseline. With ``asked``
    (bench's --percentiles, ``latency_percentiles``), each level's ``percentiles`` too."""
    from reportgen.results.levels import by_point

    key = metrics.key(data.metric)

    def compared(comps: list[Any], metric: bool = False) -> list[dict[str, Any]]:
        return [
            {
                k: getattr(c, k)
                for k in (
                    *(("metric",) if metric else ()),
                    "concurrency",
                    "rate",
                    "ratio",
                    "ci_low",
                    "ci_high",
                    "confidence",
                    "verdict",
                    "bound",
                    "eq_low",
                    "eq_high",
                    # what the noise allowed: the smallest change this comparison could
                    # detect (a ratio, at 80% power), and where inconclusive the repetitions
                    # (or requests) a side that would decide it, and what held it back
                    "mde",
                    "reps_needed",
                    "requests_needed",
                    "limit",
                )  # fmt: skip
            }
            for c in comps
        ]

    from reportgen.analysis.findings import attach

    found = attach(data).findings
    assert found is not None
    per_hour, basis = found.costs.per_hour, found.costs.basis
    spent = {(c.experiment, c.point): c for c in found.costs.levels}
    experiments = []
    for e in data.experiments:
        levels, measured = {}, {}
        runs = by_point(e.levels)
        for agg in e.by_level:
            stat = agg.stat(key)
            levels[str(agg.point)] = {
                "mean": stat.mean,
                "sd": stat.sd,
                "repetitions": agg.repetitions,
            }
            measured[str(agg.point)] = _level_json(agg, runs.get(agg.point, []))
            if asked and e.id in asked:
                measured[str(agg.point)]["percentiles"] = asked[e.id][agg.point]
            if (c := spent.get((e.id, agg.point))) is not None:
                measured[str(agg.point)]["cost"] = _cost_json(c)
        d = e.decision
        experiments.append(
            {
                "id": e.id,
                "status": e.status,
                "outcome": data.outcome(e),
                "reason": e.reason,
                "parent": e.parent,
                key: levels,
                "levels": measured,
                "vs_parent": compared(d.vs_parent) if d else [],
                "vs_baseline": compared(d.vs_baseline) if d else [],
                # every headline metric's and tail's comparisons beyond the objective
                "metrics": {
                    side: compared(cs, metric=True) for side, cs in (d.metrics or {}).items()
                }
                if d
                else {},
                "search": e.search.model_dump(mode="json") if e.search else None,
            }
        )
    kinds = {".html": "html", ".pdf": "pdf", ".md": "markdown"}
    return {
        "run_dir": str(run_dir),
        "status": data.status,
        "status_reason": data.status_reason,
        "exit_code": code,
        "best": data.best,
        "objective": {
            "metric": data.metric,
            "key": key,
            "concurrency": data.objective_levels,
            "higher_is_better": data.higher_is_better,
        },
        "price": {
            "per_hour": per_hour,
            "currency": found.costs.currency,
            "basis": basis or None,
        },
        "experiments": experiments,
        "reports": {kinds.get(p.suffix, "tables"): str(p) for p in paths},
    }


def _cost_json(c: LevelCost) -> dict[str, Any]:
    """One level's cost and efficiency in ``--json`` (``analysis.costs.LevelCost``): the cost
    of a million output and input tokens at the run's price, output tokens per joule (and
    their ratio to the parent's), and decode's and prefill's percent of their bounds; null
    where the run could not tell."""
    vs = c.tok_per_j_vs_parent
    return {
        "per_mtok_output": c.per_mtok_output,
        "per_mtok_input": c.per_mtok_input,
        "tok_per_j": c.tok_per_j,
        "tok_per_j_vs_parent": None
        if vs is None or vs.ratio is None
        else {"ratio": vs.ratio, "ci_low": vs.ci_low, "ci_high": vs.ci_high, "verdict": vs.verdict},
        "decode_bound_pct": c.decode_share,
        "prefill_bound_pct": c.prefill_share,
    }


# The latencies the console and --json show: the registry's, less ITL per token (a chunk of
# k tokens as k gaps), which only the report shows
SHOWN = tuple(m for m in metrics.LATENCIES if m != "itl_token_ms")

JSON_METRICS = (  # every level's metrics in --json, by their key in results.json
    *metrics.THROUGHPUTS,
    *(f"{m}_{p}" for m in SHOWN for p in metrics.PERCENTILES),
)


def latency_percentiles(run_dir: Path, data: Run, percentiles: Sequence[float]) -> Asked:
    """Each lone experiment's latencies at ``percentiles``, level by level, from its request
    table, through the samples its level summaries are computed from
    (``analysis.summary.latency_samples``): each repetition's own, then their mean and sd.
    Read once, for both the console and --json (empty where none was asked)."""
    if not percentiles:
        return {}
    import numpy as np

    from reportgen.analysis.summary import latency_samples
    from reportgen.campaign.levels import point_of
    from reportgen.results import store
    from reportgen.results.levels import by_point

    out: Asked = {}
    for e in data.experiments:
        rows: dict[tuple[Point, int], list[Any]] = {}
        for r in store.read_requests(run_dir, e.table):
            if r.status == "ok":
                rows.setdefault((point_of(r), r.repetition), []).append(r)
        mine = out.setdefault(e.id, {})
        for point, runs in by_point(e.levels).items():
            samples = [latency_samples(rows.get(lv.key, [])) for lv in runs]
            level: dict[str, dict[str, dict[str, float | None]]] = {}
            for name in SHOWN:
                level[name] = {}
                for p in percentiles:
                    got = [float(np.percentile(x[name], p)) for x in samples if x[name].size]
                    level[name][f"p{p:g}"] = {
                        "mean": sum(got) / len(got) if got else None,
                        "sd": float(np.std(got, ddof=1)) if len(got) > 1 else None,
                    }
            mine[point] = level
    return out


def _level_json(agg: Any, runs: Sequence[Any]) -> dict[str, Any]:
    """One level of ``run --json`` (and bench's): every metric's mean and sd over its
    repetitions (throughputs, and the p50, p90 and p99 of TTFT, TPOT, ITL and E2E in ms), and
    what its repetitions (``runs``) sent, finished and took, summed (tokens, requests) or
    averaged (duration, requests in flight)."""
    from reportgen.campaign.base import rate_kept

    sums = {
        name: sum(getattr(lv.summary, name) for lv in runs)
        for name in ("requests", "ok", "errors", "input_tokens", "output_tokens")
    }
    flight = [x for lv in runs if (x := lv.summary.in_flight) is not None]
    spans = [lv.summary.duration_s for lv in runs]
    out: dict[str, Any] = {
        "concurrency": agg.concurrency,
        "rate": None if agg.rate is None else rate_kept(agg.rate),  # inf: "inf" (strict JSON)
        "repetitions": agg.repetitions,
        **sums,
        "duration_s": sum(spans) / len(spans) if spans else None,
        "in_flight": sum(flight) / len(flight) if flight else None,
    }
    for name in JSON_METRICS:
        stat = agg.stat(name)
        out[name] = {"mean": stat.mean, "sd": stat.sd}
    return out


# A lone configuration's table (``reportgen bench``): per level, what `vllm bench serve`
# prints, each the mean over repetitions: (Aggregate key, column)
LONE = (
    ("req_s", "req/s"),
    ("output_tok_s", "output\ntok/s"),
    ("total_tok_s", "total\ntok/s"),
    ("ttft_ms_p50", "TTFT\np50 ms"),
    ("ttft_ms_p99", "TTFT\np99 ms"),
    ("tpot_ms_p50", "TPOT\np50 ms"),
    ("itl_ms_p50", "ITL\np50 ms"),
    ("itl_ms_p99", "ITL\np99 ms"),
    ("e2e_ms_p50", "E2E\np50 ms"),
)


# Where a terminal is too narrow for every column, these go first, in this order (the level,
# output tok/s, requests in flight, errors and the SLO are never left out or cut).
DROPPED_FIRST = (
    "e2e_ms_p50",
    "itl_ms_p99",
    "itl_ms_p50",
    "duration",
    "total_tok_s",
    "ttft_ms_p50",
    "req_s",
    "tpot_ms_p50",
    "ttft_ms_p99",
)


# The checks a lone table says under its numbers when they warn: the measurement itself in
# doubt (the rest, GPU telemetry missing say, are in the report)
SAID_UNDER = ("host_speed", "repetition_spread", "steady_state", "engine_events", "warmed_up")


def _lone_table(out: Console, data: Run) -> None:
    """One configuration, nothing to compare: its headline numbers per level, lowest level
    first; on a terminal too narrow for them all, the least needed columns left out (said
    under the table) rather than every column cut to "..."."""
    from reportgen.render.fmt import fmt_num, level_head
    from reportgen.results.levels import by_point

    (e,) = data.experiments
    status = "" if data.status == "complete" else f" - {data.status.upper()}"
    said: str = e.status
    if e.ok and data.outcome(e) == "failed":  # measured, but a check voids its numbers
        from reportgen.analysis.checks import invalidated

        said = f"NOT VALID, failed: {'; '.join(invalidated(e.checks))}"
    met = {p.point: p.passed for p in e.search.probes} if e.search else {}
    # by level, lowest first (a search's probes run in the order it tried them)
    rows = sorted(e.by_level, key=lambda a: a.point.order)
    runs = by_point(e.levels)
    totals = [_level_json(a, runs.get(a.point, [])) for a in rows]  # as --json says them
    columns: list[tuple[str, str, list[str]]] = [  # (key, header, cells)
        ("level", level_head(lv.point for lv in e.levels), [str(a.point) for a in rows])
    ]
    for key, label in LONE:
        cells = [fmt_num(a.stat(key).mean) if a.stat(key).mean is not None else "–" for a in rows]
        columns.append((key, label, cells))
    seconds = [f"{t['duration_s']:.1f}" if t["duration_s"] is not None else "–" for t in totals]
    columns.append(("duration", "duration\ns", seconds))  # a repetition's, on average
    columns.append(("in_flight", "in flight", [_in_flight(e, a.point) for a in rows]))
    errors = [f"{t['requests'] - t['ok']}/{t['requests']}" for t in totals]
    columns.append(("errors", "errors", errors))
    if e.search:
        columns.append(("slo", "SLO", ["met" if met.get(a.point) else "missed" for a in rows]))
    caption = f"{e.id}: {said}; means over {_reps_said(e)}; errors: failed requests of all sent"

    def build(shown: list[tuple[str, str, list[str]]], note: str) -> Table:
        table = Table(
            title=f"{data.settings.title}{status}",
            caption=caption + note,
            title_justify="left",
            caption_justify="left",
        )
        for key, label, _ in shown:
            table.add_column(label, justify="left" if key == "slo" else "right", no_wrap=True)
        for i in range(len(rows)):
            table.add_row(*(cells[i] for _, _, cells in shown))
        return table

    table, left_out = build(columns, ""), []
    if out.is_terminal:
        from rich.measure import Measurement

        for key in DROPPED_FIRST:
            wide = out.options.update_width(1_000)
            if Measurement.get(out, wide, table).maximum <= out.width:
                break
            header = next(label for k, label, _ in columns if k == key)
            left_out.append(header.replace("\n", " "))
            columns = [c for c in columns if c[0] != key]
            note = f"; left out at this width: {', '.join(left_out)} (the report has them)"
            table = build(columns, note)
    _print_table(out, table)
    if e.search:
        from reportgen.render.text import search_said

        out.print(search_said(e.search), markup=False, highlight=False)
    for check in e.checks:  # what a lone benchmark's reader acts on, under its numbers
        if check.status == "warn" and check.id in SAID_UNDER:
            out.print(f"warn: {check.title}: {check.evidence}", markup=False, highlight=False)


def _percentile_table(out: Console, data: Run, asked: Asked) -> None:
    """bench --percentiles: each latency at each asked percentile, per level (ms, the mean
    over repetitions), as `vllm bench serve --metric-percentiles` prints them."""
    from reportgen.render.fmt import fmt_num, level_head
    from reportgen.results.model import sorted_points

    (e,) = data.experiments
    got = asked[e.id]
    first = next(iter(got.values()), {})  # every level asked the same percentiles
    table = Table(
        caption="latency percentiles, ms: the mean over repetitions of each one's own",
        caption_justify="left",
    )
    table.add_column(level_head(lv.point for lv in e.levels), justify="right", no_wrap=True)
    names = [(m, p) for m in SHOWN for p in first.get(m, {})]
    for m, p in names:
        label = m.removesuffix("_ms").upper()
        table.add_column(f"{label}\n{p}", justify="right", no_wrap=True)
    for point in sorted_points(got):
        cells = [got[point][m][p]["mean"] for m, p in names]
        table.add_row(str(point), *(fmt_num(c) if c is not None else "–" for c in cells))
    _print_table(out, table)


def _print_table(out: Console, table: Table) -> None:
    """A table in full where the output is a file or a pipe (a log keeps every digit); fitted
    to the width of a terminal, as rich does, where it is one."""
    if out.is_terminal:
        out.print(table)
        return
    from rich.measure import Measurement
    from rich.segment import Segments

    wide = Measurement.get(out, out.options.update_width(1_000), table).maximum
    out.print(Segments(out.render(table, out.options.update_width(max(out.width, wide)))))


def _in_flight(e: Any, point: Any) -> str:
    """A level's mean requests in flight, marked "(low)" under 0.9 x a closed loop's C; an
    open loop's shortfall against its offered rate where it fell short."""
    from reportgen.analysis.checks_levels import under_load
    from reportgen.render.levels import achieved

    runs = [lv for lv in e.levels if lv.point == point]
    wl = e.ran_workload
    closed = point.rate is None and not (wl and wl.request_rate)
    short = next((u for lv in runs if (u := under_load(lv, wl))), "")
    if closed:
        return achieved([lv.summary for lv in runs], point.concurrency)
    return achieved([lv.summary for lv in runs]) + (f" (low: {short})" if short else "")


def _reps_said(e: Any) -> str:
    reps = sorted({lv.repetition for lv in e.levels})
    return f"{len(reps)} repetition{'s' if len(reps) != 1 else ''}"


def summary_table(out: Console, data: Run, asked: Asked | None = None) -> None:
    """One screen: each experiment's verdict and objective metric per level (mean ± sd); a
    lone configuration's headline numbers, and with ``asked`` (bench's --percentiles,
    ``latency_percentiles``) a table of them."""
    if len(data.experiments) == 1 and data.experiments[0].by_level:
        _lone_table(out, data)
        if asked:
            _percentile_table(out, data, asked)
        return
    from reportgen.render.fmt import fmt_bound, fmt_num
    from reportgen.render.levels import achieved, summaries_by_level
    from reportgen.results.model import sorted_points

    metric = data.metric
    key = metrics.key(metric)
    status = "" if data.status == "complete" else f" - {data.status.upper()}"
    table = Table(
        title=f"{data.settings.title}{status}",
        caption=f"{key}: mean ± sd over repetitions (in brackets: achieved concurrency); "
        f"best: {data.best or 'none'}",
        title_justify="left",
        caption_justify="left",
    )
    table.add_column("experiment", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    levels = sorted_points(agg.point for e in data.experiments for agg in e.by_level)
    for c in levels:
        table.add_column(c.label, justify="right", no_wrap=True)
    for e in data.experiments:
        cells = []
        runs = summaries_by_level(e)
        for c in levels:
            level = e.aggregate(c)
            stat = level.stat(key) if level else None
            mean, sd = (stat.mean, stat.sd) if stat else (None, None)
            spread = "" if not sd else f" ±{sd:,.0f}" if sd >= 10 else f" ±{sd:#.2g}"
            if level is not None and level.all_failed:
                cells.append("all failed")
            else:
                busy = f" ({achieved(runs[c])})" if c in runs else ""
                cells.append("" if mean is None else fmt_num(mean) + spread + busy)
        verdict = data.outcome(e)
        bound = e.decision.equivalent_bound if e.decision else None
        if verdict == "equivalent" and bound is not None:  # the bound it rests on, beside it
            verdict += f" ({fmt_bound(bound)})"
        if e.id == data.best:
            verdict += " (best)"
        table.add_row(e.id, verdict, *cells)
    _print_table(out, table)
