"""Render a run's report from its saved results (see the package's docstring for the flow).

Rendering the same results twice gives byte-identical HTML (no clock, no random ids).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow.parquet as pq
from markupsafe import Markup

from reportgen import results as results_mod
from reportgen.campaign.bounds import parse
from reportgen.errors import RenderError
from reportgen.render import charts, exports, html, view
from reportgen.render import pdf as printer  # `render` has a parameter named pdf
from reportgen.render.content import Report
from reportgen.results import rundir
from reportgen.results.as_run import workload_as_run
from reportgen.results.embed import embed, table_hashes
from reportgen.results.model import Point, Run, sorted_points
from reportgen.results.rundir import RunDir

if TYPE_CHECKING:
    import pandas as pd

HTML_NAME = rundir.HTML
PDF_NAME = rundir.PDF
MARKDOWN_NAME = rundir.MARKDOWN
TABLES_DIR = rundir.TABLES

__all__ = ["HTML_NAME", "PDF_NAME", "Rendered", "render", "render_html"]


@dataclass(frozen=True)
class Rendered:
    """Where the report was written; ``pdf`` is None when only HTML was asked for."""

    html: Path
    pdf: Path | None
    markdown: Path | None = None
    tables: tuple[Path, ...] = ()


def render_html(
    run: Run,
    telemetry: Mapping[str, Any] | None = None,
    tables: Mapping[str, str] | None = None,
    latencies: Mapping[str, Any] | None = None,
    embedded: Run | None = None,
) -> str:
    """The report's HTML for a run's results and, by experiment id, its telemetry
    columns (t, gpu, sm_clock_mhz, power_w as arrays); the results and the raw tables' hashes
    (``results.embed.table_hashes``) are embedded for ``reportgen verify``; ``latencies`` are each
    experiment's latency percentiles by level. Either may be ``charts.Lazy`` loaders instead
    (``chart_inputs``, what ``render`` and ``verify`` pass); ``embedded``: the results to
    embed, where not ``run`` itself. Pure: reads and writes no file."""
    return render_pages(run, telemetry, tables, latencies, embedded=embedded).screen


@dataclass(frozen=True)
class Pages:
    """The screen page; with ``for_print``, the page the PDF is printed from (the same view
    without what only a screen uses; charts as empty boxes of their size) and the charts as
    PDF, to lay over those boxes (``pdf.html_to_pdf``)."""

    screen: str
    printed: str | None = None
    chart_pdfs: Mapping[str, bytes] = field(default_factory=dict)


def slo_lines(run: Run) -> list[tuple[str, float, str]]:
    """The bounds a search for the highest level (``workload.find_max``) held the levels to,
    as lines across the charts' panels: (the aggregate key, the value, its label)."""
    search = workload_as_run(run.default_workload).find_max
    if search is None:
        return []
    return [
        (f"{b.metric}_{b.stat}" if b.stat else b.metric, b.value, f"the search's bound: {b}")
        for b in parse(search.slo)
    ]


def chart_list(
    report: Report,
    run: Run,
    telemetry: Mapping[str, Any] | None,
    latencies: Mapping[str, Any] | None,
) -> list[charts.Chart]:
    """Every chart of the report: the campaign's, then each experiment's distributions and
    telemetry where it has them."""
    levels = {e.id: sorted_points(lv.point for lv in e.levels) for e in run.experiments}
    gpus = len(report.environment.get("devices") or []) or 1
    out = charts.overview(report.series, gpus=gpus, bounds=slo_lines(run))
    for e in report.experiments:
        dist = (latencies or {}).get(e.id)
        if dist:
            ran = levels.get(e.id) or (sorted_points(dist) if isinstance(dist, Mapping) else [])
            out.append(charts.distributions_chart(f"dist-{e.index}", dist, ran))
        columns = (telemetry or {}).get(e.id)
        if isinstance(columns, charts.Lazy) or (columns and len(columns.get("t", ()))):
            out.append(charts.telemetry_chart(f"telemetry-{e.index}", columns, e.telemetry_windows))
    return out


def render_pages(
    run: Run,
    telemetry: Mapping[str, Any] | None = None,
    tables: Mapping[str, str] | None = None,
    latencies: Mapping[str, Any] | None = None,
    for_print: bool = False,
    embedded: Run | None = None,
) -> Pages:
    """The screen page (``render_html``) and, with ``for_print``, the printed page and the
    charts as PDF (``Pages``); ``embedded``: the results to embed, where not ``run``."""
    report = view.build(run)
    todo = chart_list(report, run, telemetry, latencies)
    printed = _print_page(report, todo) if for_print else None
    with charts.Drawing(todo, pdf=charts.on_page(printed or "")) as drawing:
        svgs, pdfs = drawing.result()
    data = Markup(embed((embedded or run).dump(), tables or {}))
    return Pages(html.render_page(report, svgs, data), printed, pdfs)


def _print_page(report: Report, todo: list[charts.Chart]) -> str:
    """The page the PDF is printed from, each chart an empty box of its size."""
    boxes = {c.name: charts.placeholder(c.name, c.size()) for c in todo}
    return html.render_page(report, boxes, None, for_print=True)


def render(run_dir: Path, pdf: bool = True, attach: Callable[[Run], Run] | None = None) -> Rendered:
    """Write report.html (and report.pdf), report.md and tables/*.csv into ``run_dir`` from
    its results.json.

    Raises ResultsError (from ``results.load``) when the results cannot be used, and
    RenderError when the report cannot be written. Each file is replaced atomically, so a
    reader never sees half a report and a failed render leaves the previous one in place.

    ``attach``: gives the run its findings (``analysis.findings.attach``) before the report
    is built from it; the report formats them and computes none (without it, those saved
    with the run).

    With ``pdf``, WeasyPrint lays out the printed page (charts as empty boxes of their
    size) in this process while other processes draw the charts, as SVG for the HTML and
    as PDF to lay over the boxes: the two largest costs of a big report overlap.
    """
    run_dir = Path(run_dir)
    run = results_mod.load(run_dir)
    if attach is not None:  # its findings, taken by the caller (``analysis.findings``)
        run = attach(run)
    if not run_dir.is_dir():  # given results.json itself: write beside it
        run_dir = run_dir.parent
    report = view.build(run)
    telemetry, latencies = chart_inputs(run_dir, run)
    todo = chart_list(report, run, telemetry, latencies)
    page = _print_page(report, todo) if pdf else None
    with charts.Drawing(todo, pdf=charts.on_page(page or "")) as drawing:
        # while other processes draw the charts: the PDF's layout, or the rest of the work
        printed = None
        if page is not None:
            printed = printer.html_to_pdf(page, run_dir, lambda: drawing.result()[1])
        embedded = Markup(embed(run.dump(), table_hashes(run_dir)))
        where = RunDir(run_dir)
        md_path = _write(where.markdown, exports.markdown(report, pdf=pdf).encode("utf-8"))
        csvs = tuple(
            _write(where.csv(name), body.encode("utf-8"))
            for name, body in exports.tables(run).items()
        )
        svgs, _ = drawing.result()
    screen = html.render_page(report, svgs, embedded).encode("utf-8")
    html_path = _write(*where.target(HTML_NAME, screen))  # compressed in a compacted directory
    pdf_path = _write(where.pdf, printed.data) if printed is not None else None
    return Rendered(html=html_path, pdf=pdf_path, markdown=md_path, tables=csvs)


def chart_inputs(run_dir: Path, run: Run) -> tuple[dict[str, charts.Lazy], dict[str, charts.Lazy]]:
    """Loaders of each experiment's telemetry columns and latency percentiles, for the
    experiments that saved a telemetry table with rows, or requests: the charts' processes
    read them, in parallel, instead of this one before drawing starts."""

    telemetry, latencies = {}, {}
    where = RunDir(run_dir)
    for e in run.experiments:
        path = where.telemetry(e.table)
        if path.exists() and pq.read_metadata(path).num_rows:
            telemetry[e.id] = charts.Lazy(_telemetry_of, (run_dir, e.table))
        if e.levels and where.requests(e.table).exists():
            latencies[e.id] = charts.Lazy(_latencies_of, (run_dir, e.table))
    return telemetry, latencies


TELEMETRY_CHART_COLUMNS = ("t", "gpu", "sm_clock_mhz", "power_w", "util_gpu_pct", "mem_used_bytes")


CURVE = tuple(range(101))  # the percentiles a latency distribution's curve is drawn at


def latency_curves(frame: pd.DataFrame) -> dict[Point, dict[str, list[float]]]:
    """Per level, TTFT's and E2E's percentiles 0-100 in ms over its successful requests (a
    request table's times, ``results.store.load_request_times``): the distributions' charts."""
    ok = frame[(frame["status"] == "ok") & frame["start"].notna()]
    rate = ok["rate"].to_numpy(dtype=float)
    keys = [
        Point(int(c), None if np.isnan(r) else float(r))
        for c, r in zip(ok["concurrency"].to_numpy(), rate, strict=True)
    ]
    order = sorted_points(keys)
    code = {p: i for i, p in enumerate(order)}
    codes = np.asarray([code[k] for k in keys], dtype=int)
    levels: dict[Point, dict[str, list[float]]] = {}
    for metric, stop in (("ttft_ms", "first_token"), ("e2e_ms", "end")):
        ms = ((ok[stop] - ok["start"]) * 1e3).to_numpy(dtype=float)
        for i, p in enumerate(order):
            values = ms[(codes == i) & ~np.isnan(ms)]
            if values.size:
                levels.setdefault(p, {})[metric] = [float(x) for x in np.percentile(values, CURVE)]
    return levels


def _latencies_of(run_dir: Path, exp_id: str) -> dict[Point, dict[str, list[float]]]:
    """One experiment's latency percentiles by level, from its requests' times."""
    return latency_curves(results_mod.load_request_times(run_dir, exp_id))


def _telemetry_of(run_dir: Path, exp_id: str) -> dict[str, Any]:
    frame = results_mod.load_telemetry(run_dir, exp_id, columns=TELEMETRY_CHART_COLUMNS)
    return {c: frame[c].to_numpy(dtype=float) for c in TELEMETRY_CHART_COLUMNS}


def _write(path: Path, data: bytes, instead: str = "") -> Path:
    """``data`` into ``path``, whole or not at all; ``instead``: what to do when the folder
    cannot be written (by default: render a copy of the run elsewhere)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        results_mod.atomic_write_bytes(path, data)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        instead = instead or (
            "copy the run directory somewhere writable and run `reportgen render` on the copy"
        )
        raise RenderError(
            f"{path}: cannot write the report ({reason}); make {path.parent} writable, or {instead}"
        ) from None
    return path
