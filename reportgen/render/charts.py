"""Charts as inline SVG strings (and one-page PDFs for print), byte-identical from one
rendering to the next, drawn in worker processes when there are many. The figures themselves
are ``figures``'.

Why these settings:

- ``svg.hashsalt``: matplotlib names clip paths and markers by hashing their content with a
  salt that is random by default; a constant salt makes the ids stable. Each chart gets its own
  salt so two charts inlined in one HTML page never define the same id differently.
- ``metadata={'Date': None}``: no time stamp in the file. The rest of the metadata block (a
  link to matplotlib's site) is removed too, because the page must hold no external URLs.
- text stays text (``figures.RC``), so the SVG is small and its labels are searchable.
"""

from __future__ import annotations

import io
import multiprocessing as mp
import os
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import matplotlib
from markupsafe import Markup
from matplotlib.figure import Figure

from reportgen.render import figures, timeline, tradeoffs
from reportgen.render.content import Series
from reportgen.results.model import Point, sorted_points


def to_svg(fig: Figure) -> Markup:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    return Markup(_clean(buf.getvalue()))


def _to_pdf(fig: Figure) -> bytes:
    """The same figure as a one-page PDF, for the printed report: text stays text, no time
    stamp and no producer string, so the same chart gives the same bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="pdf", metadata={"CreationDate": None, "Producer": None})
    return buf.getvalue()


def _clean(svg: str) -> str:
    """Make matplotlib's SVG fit inline in HTML.

    Drops the XML prolog and doctype (invalid inside HTML), the metadata block (an external
    URL), the fixed width/height (CSS sizes the chart to the column; the viewBox keeps its
    shape) and the structural ``<g id="figure_1">`` ids that every chart would repeat, and
    cuts path coordinates to 0.01 pt.
    Text content cannot match these patterns: matplotlib escapes ``<`` in it.
    """
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, count=1, flags=re.S)
    head_end = svg.index(">")
    head = re.sub(r'\s(width|height)="[^"]*"', "", svg[:head_end])
    head = head.replace("<svg", '<svg class="chart" role="img"', 1)
    svg = head + svg[head_end:]
    svg = re.sub(r'<g id="[A-Za-z0-9_.-]+">', "<g>", svg)
    # Path coordinates to a hundredth of a point: finer cannot be seen, and it halves the size.
    svg = _PATH_DATA.sub(lambda m: m.group(1) + _DIGITS.sub(r"\1", m.group(2)) + '"', svg)
    return svg.strip() + "\n"


_PATH_DATA = re.compile(r'(\sd=")([^"]*)"')
_DIGITS = re.compile(r"(\.\d\d)\d+")  # cut, not rounded: a regex alone, no call per number


@dataclass(frozen=True)
class Lazy:
    """Data a chart needs, loaded where the chart is drawn (in a worker process, in
    parallel with the other charts) rather than before: ``func(*args)``."""

    func: Callable[..., Any]
    args: tuple[Any, ...] = ()


def _history(*args: Any) -> Figure:
    # imported when a history is drawn: its change points need scipy.stats (0.5 CPU-s to
    # import), which no campaign report does
    from reportgen.render import historychart

    return historychart.history(*args)


BUILDERS: dict[str, Callable[..., Figure]] = {  # a chart's kind: the function that draws it
    "throughput": figures.throughput,
    "latency": figures.latency,
    "tradeoff": tradeoffs.tradeoff,
    "efficiency": tradeoffs.efficiency,
    "distributions": figures.distributions,
    "telemetry": timeline.telemetry,
    "history": _history,
}


@dataclass(frozen=True)
class Chart:
    """One chart to draw: its name in the report (also its SVG ids' salt), its kind (a key of
    ``BUILDERS``), the builder's arguments (``Lazy`` ones are loaded when drawn) and
    the legend entries when the legend's size is known before the data (``size``)."""

    name: str
    kind: str
    args: tuple[Any, ...]
    legend: tuple[tuple[str, Mapping[str, Any]], ...] = ()

    def loaded(self) -> Chart:
        """This chart with its ``Lazy`` arguments loaded."""
        args = tuple(a.func(*a.args) if isinstance(a, Lazy) else a for a in self.args)
        return replace(self, args=args)

    def size(self) -> tuple[float, float]:
        """(width, height) in points before drawing: the printed report lays out the page
        with a box of this size while the chart is drawn elsewhere."""
        plot_in = figures.LATENCY_IN if self.kind == "latency" else figures.PLOT_IN
        if self.kind == "telemetry":
            return figures.WIDTH_IN * 72, timeline.TELEMETRY_IN * 72
        with matplotlib.rc_context(figures.RC):
            height = figures.legend_below(figures.new_figure(plot_in), self.legend, plot_in)
        return figures.WIDTH_IN * 72, height * 72


def overview(series: Sequence[Series], gpus: int = 1, bounds: figures.Bounds = ()) -> list[Chart]:
    """The campaign-wide charts (section 3); ``gpus``: the host's, for throughput per GPU;
    ``bounds``: the lines a rate search's SLO draws across the panels it bounds."""
    legend = tuple(figures.entries(series))
    out = [
        Chart("throughput", "throughput", (series, tuple(bounds)), legend),
        Chart("latency", "latency", (series, tuple(bounds)), legend),
        Chart("tradeoff", "tradeoff", (series, gpus), legend),
    ]
    if any(j is not None for s in series for j in s.mean.get("output_tok_per_j", ())):
        out.append(Chart("efficiency", "efficiency", (series, gpus), legend))
    return out


def distributions_chart(name: str, data: Any, levels: Sequence[Point]) -> Chart:
    """An experiment's latency distributions; ``data``: its percentiles by level (or a
    ``Lazy`` that loads them), ``levels``: the levels it ran (one legend entry each)."""
    levels = sorted_points(levels)
    return Chart(name, "distributions", (data, levels), tuple(figures.level_entries(levels)))


def telemetry_chart(name: str, data: Any, windows: Sequence[tuple[float, float, str]]) -> Chart:
    return Chart(name, "telemetry", (data, windows))


def draw(chart: Chart, pdf: bool = False) -> tuple[str, Markup, bytes | None]:
    """One chart as inline SVG and, with ``pdf``, as a one-page PDF of the same figure."""
    args = chart.loaded().args
    with matplotlib.rc_context({**figures.RC, "svg.hashsalt": f"reportgen-{chart.name}"}):
        fig = BUILDERS[chart.kind](*args)
        return chart.name, to_svg(fig), _to_pdf(fig) if pdf else None


def _draw(job: tuple[Chart, bool]) -> tuple[str, str, bytes | None]:
    name, svg, printed = draw(*job)
    return name, str(svg), printed


def _yield_cpu() -> None:
    os.nice(10)


PARALLEL_FROM = 8  # charts: below this, starting processes costs more than it saves


def _busy() -> bool:
    """Whether the host's cores are already all busy (the last minute's load average): then
    workers cannot draw sooner, only dearer (a report of 12 charts: 0.79 CPU-s in this
    process, 1.12 with two workers)."""
    try:
        return os.getloadavg()[0] >= (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        return False


class Drawing:
    """Charts being drawn: in worker processes when there are many (each is independent and
    its output is the same whichever process draws it: constant hash salts, no shared
    state), so the caller can lay out the printed page meanwhile. ``result()`` waits."""

    def __init__(self, charts: Sequence[Chart], pdf: Collection[str] = ()) -> None:
        """``pdf``: the names of the charts to draw as PDF too (those the printed page
        holds; ``on_page``)."""
        workers = min(os.cpu_count() or 1, 8)
        jobs = [(c, c.name in pdf) for c in charts]
        self._pool: ProcessPoolExecutor | None = None
        if (
            len(jobs) < PARALLEL_FROM
            or workers < 2
            or _busy()
            or "fork" not in mp.get_all_start_methods()
        ):
            self._done: list[tuple[str, str, bytes | None]] | None = [_draw(j) for j in jobs]
            self._futures = []
        else:
            self._done = None
            # With ``pdf`` this process lays out the printed page meanwhile, the longest
            # single task of a big report: the workers yield the CPU to it (nice 10).
            self._pool = ProcessPoolExecutor(
                workers,
                mp_context=mp.get_context("fork"),
                initializer=_yield_cpu if pdf else None,
            )
            # the costliest first, so no worker is left with a long one at the end
            jobs.sort(
                key=lambda j: j[0].kind not in ("latency", "throughput", "tradeoff", "efficiency")
            )
            self._futures = [self._pool.submit(_draw, j) for j in jobs]

    def result(self) -> tuple[dict[str, Markup], dict[str, bytes]]:
        """(SVG by chart name, PDF by chart name); the PDFs only when asked for."""
        if self._done is None:
            try:
                self._done = [f.result() for f in self._futures]
            finally:
                self.close()
        svgs = {name: Markup(svg) for name, svg, _ in self._done}
        pdfs = {name: data for name, _, data in self._done if data is not None}
        return svgs, pdfs

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> Drawing:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def all_charts(series: Sequence[Series]) -> dict[str, Markup]:
    """The campaign-wide charts by name, as inline SVG (Markup: this SVG is ours)."""
    return Drawing(overview(series)).result()[0]


def throughput(series: Sequence[Series]) -> Markup:
    return draw(overview(series)[0])[1]


def on_page(page: str) -> set[str]:
    """The charts a printed page holds (their ``placeholder`` boxes): only these are drawn as
    PDF, not every experiment's distributions and telemetry, which only the screen shows."""
    return set(re.findall(r'<svg class="chart" role="img" data-chart="([^"]+)"', page))


def placeholder(name: str, size: tuple[float, float]) -> Markup:
    """An empty SVG box of a chart's size, for the printed page: the chart itself (as PDF)
    is laid over it after printing (``pdf.print_pdf``)."""
    w, h = size
    return Markup(
        f'<svg class="chart" role="img" data-chart="{name}" viewBox="0 0 {w:.2f} {h:.2f}"></svg>\n'
    )
