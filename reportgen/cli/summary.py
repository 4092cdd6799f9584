"""What ``reportgen run`` ends with: the summary table on the console (each experiment's
verdict and objective per level; a lone configuration's headline numbers, as ``vllm bench
serve`` prints them) and, with ``--json``, the same for scripts."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from reportgen.results.model import Run


def summary_json(run_dir: Path, data: Run, paths: list[Path], code: int) -> dict[str, Any]:
    """``run --json``: what the summary table and the report paths say, for scripts. Each
    experiment's objective per level is the mean and standard deviation over repetitions;
    its comparisons are the decision's, against its parent and the baseline."""
    from reportgen import metrics

    key = metrics.key(data.metric)

    def compared(comps: list[Any]) -> list[dict[str, Any]]:
        return [
            {
                k: getattr(c, k)
                for k in ("concurrency", "rate", "ratio", "ci_low", "ci_high", "verdict")
            }
            for c in comps
        ]

    experiments = []
    for e in data.experiments:
        levels = {}
        for agg in e.by_level:
            stat = agg.stat(key)
            levels[str(agg.point)] = {
                "mean": stat.mean,
                "sd": stat.sd,
                "repetitions": agg.repetitions,
            }
        d = e.decision
        experiments.append(
            {
                "id": e.id,
                "status": e.status,
                "outcome": data.outcome(e),
                "reason": e.reason,
                "parent": e.parent,
                key: levels,
                "vs_parent": compared(d.vs_parent) if d else [],
                "vs_baseline": compared(d.vs_baseline) if d else [],
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
        "experiments": experiments,
        "reports": {kinds.get(p.suffix, "tables"): str(p) for p in paths},
    }


# A lone configuration's table (``reportgen bench``): per level, what `vllm bench serve`
# prints, each the mean over repetitions: (Aggregate key, column)
LONE = (
    ("req_s", "req/s"),
    ("output_tok_s", "output\ntok/s"),
    ("ttft_ms_p50", "TTFT\np50 ms"),
    ("ttft_ms_p99", "TTFT\np99 ms"),
    ("itl_ms_p50", "ITL\np50 ms"),
    ("itl_ms_p99", "ITL\np99 ms"),
    ("e2e_ms_p50", "E2E\np50 ms"),
)


def _lone_table(out: Console, data: Run) -> None:
    """One configuration, nothing to compare: its headline numbers per level."""
    from reportgen.render.fmt import fmt_num, level_head

    (e,) = data.experiments
    status = "" if data.status == "complete" else f" - {data.status.upper()}"
    said: str = e.status
    if e.ok and data.outcome(e) == "failed":  # measured, but a check voids its numbers
        from reportgen.analysis.checks import invalidated

        said = f"NOT VALID, failed: {'; '.join(invalidated(e.checks))}"
    table = Table(
        title=f"{data.settings.title}{status}",
        caption=f"{e.id}: {said}; means over {_reps_said(e)}; errors: failed requests of all sent",
        title_justify="left",
        caption_justify="left",
    )
    table.add_column(level_head(lv.point for lv in e.levels), justify="right", no_wrap=True)
    for _, label in LONE:
        table.add_column(label, justify="right", no_wrap=True)
    table.add_column("in flight", justify="right", no_wrap=True)
    table.add_column("errors", justify="right", no_wrap=True)
    met = {p.point: p.passed for p in e.search.probes} if e.search else {}
    if e.search:
        table.add_column("SLO", no_wrap=True)
    for agg in e.by_level:
        cells = [fmt_num(agg.stat(key).mean) if agg.stat(key).mean is not None else "–"
                 for key, _ in LONE]  # fmt: skip
        sent = sum(lv.summary.requests for lv in e.levels if lv.point == agg.point)
        ok = sum(lv.summary.ok for lv in e.levels if lv.point == agg.point)
        slo = ["met" if met.get(agg.point) else "missed"] if e.search else []
        table.add_row(str(agg.point), *cells, _in_flight(e, agg.point), f"{sent - ok}/{sent}", *slo)
    _print_table(out, table)
    if e.search:
        from reportgen.render.text import search_said

        out.print(search_said(e.search), markup=False, highlight=False)


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


def summary_table(out: Console, data: Run) -> None:
    """One screen: each experiment's verdict and objective metric per level (mean ± sd)."""
    if len(data.experiments) == 1 and data.experiments[0].by_level:
        _lone_table(out, data)
        return
    from reportgen import metrics
    from reportgen.render.fmt import fmt_num
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
        if e.id == data.best:
            verdict += " (best)"
        table.add_row(e.id, verdict, *cells)
    _print_table(out, table)
