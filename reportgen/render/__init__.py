"""Render a run's report from its saved results: report.html (self-contained) and report.pdf.

    results.json --load--> dict --view.build--> Report (formatted strings, pure)
                                         \\--charts--> inline SVG (ours, deterministic)
    Report + charts --html (jinja2, autoescaped)--> report.html
                    \\--the same template for print--> (WeasyPrint) --> report.pdf

Only saved files are read, so any report can be rebuilt later without a GPU or a server, and
rendering the same results twice gives byte-identical HTML (no clock, no random ids).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from markupsafe import Markup

from reportgen import results as results_mod
from reportgen import verify
from reportgen.errors import RenderError
from reportgen.render import charts, exports, html, view
from reportgen.render import pdf as printer  # `render` has a parameter named pdf

HTML_NAME = "report.html"
PDF_NAME = "report.pdf"
MARKDOWN_NAME = "report.md"
TABLES_DIR = "tables"

__all__ = ["HTML_NAME", "PDF_NAME", "Rendered", "render", "render_html"]


@dataclass(frozen=True)
class Rendered:
    """Where the report was written; ``pdf`` is None when only HTML was asked for."""

    html: Path
    pdf: Path | None
    markdown: Path | None = None
    tables: tuple[Path, ...] = ()


def render_html(
    results: Mapping[str, Any],
    telemetry: Mapping[str, Mapping[str, Any]] | None = None,
    tables: Mapping[str, str] | None = None,
    latencies: Mapping[str, Mapping[int, Mapping[str, list[float]]]] | None = None,
) -> str:
    """The report's HTML for a loaded results dict and, by experiment id, its telemetry
    columns (``results.load_telemetry``); the results and the raw tables' hashes
    (``verify.table_hashes``) are embedded for ``reportgen verify``; ``latencies`` are each
    experiment's latency percentiles by level (``latency_percentiles``). Pure: reads and
    writes no file."""
    return render_pages(results, telemetry, tables, latencies)[0]


def render_pages(
    results: Mapping[str, Any],
    telemetry: Mapping[str, Mapping[str, Any]] | None = None,
    tables: Mapping[str, str] | None = None,
    latencies: Mapping[str, Mapping[int, Mapping[str, list[float]]]] | None = None,
    for_print: bool = False,
) -> tuple[str, str | None]:
    """The screen page (``render_html``) and, with ``for_print``, the page the PDF is
    printed from: the same view and charts, without what only a screen uses."""
    report = view.build(results)
    jobs: list[charts.Job] = []
    for e in report.experiments:
        dist = (latencies or {}).get(e.id)
        if dist:
            key = f"dist-{e.index}"
            jobs.append((key, charts.distributions, (dist, key)))
        columns = (telemetry or {}).get(e.id)
        if columns and len(columns.get("t", ())):
            key = f"telemetry-{e.index}"
            jobs.append((key, charts.telemetry, (columns, e.telemetry_windows, key)))
    drawn = charts.all_charts(report.series, jobs=jobs)
    data = Markup(verify.embed(results, tables or {}))
    screen = html.render_page(report, drawn, data)
    printed = html.render_page(report, drawn, None, for_print=True) if for_print else None
    return screen, printed


def render(run_dir: Path, pdf: bool = True) -> Rendered:
    """Write report.html (and report.pdf), report.md and tables/*.csv into ``run_dir`` from
    its results.json.

    Raises ResultsError (from ``results.load``) when the results cannot be used, and
    RenderError when the report cannot be written. Each file is replaced atomically, so a
    reader never sees half a report and a failed render leaves the previous one in place.
    """
    run_dir = Path(run_dir)
    data = results_mod.load(run_dir)
    if not run_dir.is_dir():  # given results.json itself: write beside it
        run_dir = run_dir.parent
    text, print_text = render_pages(
        data,
        telemetry_columns(run_dir, data),
        verify.table_hashes(run_dir),
        latency_percentiles(run_dir, data),
        for_print=pdf,
    )
    html_path = _write(run_dir / HTML_NAME, text.encode("utf-8"))
    md_path = _write(run_dir / MARKDOWN_NAME, exports.markdown(view.build(data)).encode("utf-8"))
    csvs = tuple(
        _write(run_dir / TABLES_DIR / name, body.encode("utf-8"))
        for name, body in exports.tables(data).items()
    )
    pdf_path = None
    if pdf:
        printed = printer.html_to_pdf(print_text or text, run_dir)
        pdf_path = _write(run_dir / PDF_NAME, printed.data)
    return Rendered(html=html_path, pdf=pdf_path, markdown=md_path, tables=csvs)


PERCENTILES = tuple(range(101))
TELEMETRY_CHART_COLUMNS = ("t", "gpu", "sm_clock_mhz", "power_w")


def latency_percentiles(
    run_dir: Path, data: Mapping[str, Any]
) -> dict[str, dict[int, dict[str, list[float]]]]:
    """Per experiment and level, percentiles 0-100 of TTFT and end-to-end latency (ms) of
    its successful requests, every repetition pooled (for the distribution charts). Reads
    only the columns it needs (not every chunk's time)."""
    import pandas as pd

    out: dict[str, dict[int, dict[str, list[float]]]] = {}
    columns = ["concurrency", "status", "start", "first_token", "end"]
    for e in data.get("experiments") or []:
        path = run_dir / "requests" / f"{e.get('id')}.parquet"
        if not e.get("levels") or not path.exists():
            continue
        frame = pd.read_parquet(path, columns=columns)
        ok = frame[(frame["status"] == "ok") & frame["start"].notna()]
        levels: dict[int, dict[str, list[float]]] = {}
        for c, group in ok.groupby("concurrency", sort=True):
            for metric, stop in (("ttft_ms", "first_token"), ("e2e_ms", "end")):
                ms = ((group[stop] - group["start"]) * 1e3).dropna().to_numpy(dtype=float)
                if ms.size:
                    qs = np.percentile(ms, PERCENTILES)
                    levels.setdefault(int(c), {})[metric] = [float(x) for x in qs]
        if levels:
            out[str(e.get("id"))] = levels
    return out


def telemetry_columns(run_dir: Path, data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each experiment's saved telemetry table as numpy columns (missing values NaN; none for
    experiments without one)."""
    out = {}
    for e in data.get("experiments") or []:
        exp_id = str(e.get("id"))
        frame = results_mod.load_telemetry(run_dir, exp_id, columns=TELEMETRY_CHART_COLUMNS)
        if len(frame):
            out[exp_id] = {c: frame[c].to_numpy(dtype=float) for c in TELEMETRY_CHART_COLUMNS}
    return out


def _write(path: Path, data: bytes) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        results_mod.atomic_write_bytes(path, data)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise RenderError(
            f"{path}: cannot write the report ({reason}); make {path.parent} writable, or copy "
            f"the run directory somewhere writable and run `reportgen render` on the copy"
        ) from None
    return path
