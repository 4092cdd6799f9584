"""The report's figures, drawn with matplotlib: the campaign's charts (throughput, latency,
their trade-off) from the view's ``Series``, and each experiment's latency distributions and
GPU telemetry. ``charts`` turns them into inline SVG (and PDF) and draws them in parallel.

Labels are user text (experiment ids). Matplotlib escapes ``<``, ``>`` and ``&`` in SVG text
and comments; ``_label`` additionally stops ``$`` starting mathtext and a leading ``_`` hiding
the entry from the legend. Each figure is drawn on an Agg canvas created for it, not through
pyplot, so no global backend state is touched; only the per-experiment figures are kept
between charts of one process (``REUSE``, ``_pair``).

``svg.fonttype = 'none'`` (``RC``): text stays text (small, selectable, searchable in the
PDF) instead of glyph outlines; the reader's sans-serif font draws it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.typing import RcKeyType

from reportgen.render.axes import (
    _concurrency_axis,
    _left,
    _positions,
    _spans_decade,
    _value_axis,
)
from reportgen.render.content import Series
from reportgen.results.model import Point, sorted_points

# Okabe-Ito colours: distinguishable with the common colour-vision deficiencies; the baseline
# is black and thicker so it stands out whatever the palette.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#999933")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
DASHES = ("-", "--", ":", "-.")
BASELINE_COLOUR = "#000000"

WIDTH_IN = 7.2  # about the text width of an A4 page with 15 mm margins
PLOT_IN = 3.1  # height of the plots with their title and x label; the legend is added below
LATENCY_IN = 4.6  # the four latency panels, two rows: with figure 1 they fit one printed page
TITLE_IN = 0.32  # room above the plots for their titles
XLABEL_IN = 0.5  # room below the plots for tick labels and the x label
LEGEND_COLUMNS = 4
MAX_LABEL = 64  # characters, as campaign ids; longer ones are shortened in the middle

RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    # Titles at a fixed height over the plot: matplotlib otherwise measures every tick label
    # to place them (a fifth of a small chart's drawing time), and the top has no ticks.
    "axes.titley": 1.0,
    # Type 3 fonts in the printed charts (text stays text, extractable): TrueType (42) would
    # have fontTools subset the font for every chart, twice the time of drawing it.
    "pdf.fonttype": 3,
}


def _label(text: str, index: int | None = None) -> str:
    """User text as a literal label: no mathtext, no legend-hiding leading underscore.

    Ids longer than MAX_LABEL are cut in the middle and numbered as in the report's tables,
    since two cut ids may read the same.
    """
    if len(text) > MAX_LABEL:
        half = (MAX_LABEL - 1) // 2
        text = f"{text[:half]}…{text[-half:]}"
        if index is not None:
            text = f"{index}. {text}"
    text = text.replace("$", r"\$")
    return "\u200b" + text if text.startswith("_") else text


def _style(index: int, series: Series) -> dict[str, Any]:
    if series.is_baseline:
        return {
            "color": BASELINE_COLOUR,
            "linewidth": 2.6,
            "marker": "o",
            "markersize": 5,
            "linestyle": "-",
            "zorder": 5,
        }
    # Past the palette, vary the dash pattern so the lines stay distinguishable; a failed
    # experiment's finished levels are dotted.
    return {
        "color": PALETTE[index % len(PALETTE)],
        "linewidth": 1.5,
        "marker": MARKERS[index % len(MARKERS)],
        "markersize": 4.5,
        "linestyle": ":" if series.partial else DASHES[(index // len(PALETTE)) % len(DASHES)],
        "zorder": 3,
    }


def _legend_name(series: Series) -> str:
    if series.is_baseline:
        suffix = "" if series.id == "baseline" else " (baseline)"
    else:
        suffix = " (best)" if series.is_best else ""
    if series.untrusted:
        suffix += " (failed checks)"
    if series.partial:
        suffix += f" ({series.stopped}; levels before it)"
    return _label(series.id, series.index) + suffix


def entries(series: Sequence[Series]) -> list[tuple[str, dict[str, Any]]]:
    """Each series' legend label and line style, in drawing order (the baseline black)."""
    out = []
    others = 0
    for s in series:
        out.append((_legend_name(s), _style(others, s)))
        if not s.is_baseline:
            others += 1
    return out


def level_entries(levels: Sequence[Point]) -> list[tuple[str, dict[str, Any]]]:
    """One entry per level, as the distribution charts draw them."""
    return [
        (
            c.label,
            {
                "color": PALETTE[i % len(PALETTE)],
                "linestyle": DASHES[(i // len(PALETTE)) % len(DASHES)],
                "linewidth": 1.4,
            },
        )
        for i, c in enumerate(sorted_points(levels))
    ]


Styled = tuple[Series, tuple[str, dict[str, Any]]]  # a series with its legend entry


def _plot(ax: Axes, series: Sequence[Series], key: str, errors: bool, log: bool = False) -> None:
    """Each series' means against the levels, styled as in their legend (``entries``)."""
    _plot_styled(ax, list(zip(series, entries(series), strict=True)), key, errors, log)


def _plot_styled(
    ax: Axes, pairs: Sequence[Styled], key: str, errors: bool, log: bool = False
) -> None:
    """Each series' means against the levels, in its legend entry's style, with ±1 sd bars
    where ``errors``; on a log axis (``log``) a bar's lower end is where the upper one is on
    that scale (y - sd may be at or below zero, and the bar would run to the axis' floor).
    ``pairs`` may be part of a figure's series, styled as in the whole figure's legend."""
    where = _positions([s for s, _ in pairs])
    for s, (_, style) in pairs:
        xs = [where[c] for c, v in zip(s.levels, s.mean[key], strict=True) if v is not None]
        ys = [v for v in s.mean[key] if v is not None]
        if not xs:
            continue
        ax.plot(xs, ys, **style)
        if errors:  # ±1 sd as plain bars: matplotlib's errorbar costs twice as much to draw
            sd = [
                0.0 if e is None else float(e)
                for e, v in zip(s.sd[key], s.mean[key], strict=True)
                if v is not None
            ]
            hi = [y + d for y, d in zip(ys, sd, strict=True)]
            lo = [y * y / (y + d) if log and y > 0 else y - d for y, d in zip(ys, sd, strict=True)]
            ax.vlines(xs, lo, hi, colors=style["color"], lw=0.9, zorder=style["zorder"])


def _values(series: Sequence[Series], key: str) -> list[float | None]:
    return [v for s in series for v in s.mean.get(key, [])]


def empty(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#666666")
    ax.set_xticks([])
    ax.set_yticks([])


def legend_below(
    fig: Figure, entries: Sequence[tuple[str, Mapping[str, Any]]], plot_in: float = PLOT_IN
) -> float:
    """A legend under the plots, as many columns as fit the width, and the figure grown to
    hold it: long experiment ids must neither run off the page nor squash the plot. Returns
    the figure's height (inches), which depends only on the entries, so ``size`` can tell it
    before anything is drawn."""
    height = plot_in
    if entries:
        handles = [Line2D([], [], **style) for _, style in entries]
        labels = [label for label, _ in entries]
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        for ncol in range(min(len(handles), LEGEND_COLUMNS), 0, -1):
            legend = fig.legend(
                handles,
                labels,
                loc="lower center",
                ncol=ncol,
                frameon=False,
                bbox_to_anchor=(0.5, 0.0),
                handlelength=2.5,
                columnspacing=1.5,
            )
            box = legend.get_window_extent(renderer)
            if box.width <= fig.bbox.width * 0.98 or ncol == 1:
                break
            legend.remove()
        height += box.height / fig.dpi
    fig.set_figheight(height)
    fig.subplots_adjust(bottom=(height - plot_in + XLABEL_IN) / height, top=1 - TITLE_IN / height)
    return height


def few_ticks(*axes: Axes) -> None:
    """At most about five ticks an axis on the half-width panels: enough to read them, and
    each tick is several artists for matplotlib to build and draw."""
    for ax in axes:
        ax.locator_params(nbins=5)


def new_figure(height: float) -> Figure:
    fig = Figure(figsize=(WIDTH_IN, height))
    FigureCanvasAgg(fig)
    return fig


REUSE = True
_KEPT: dict[str, tuple[Figure, list[Axes]]] = {}  # this process's kept figures, by kind


def grid(
    kind: str, reuse: bool, rows: int, cols: int, height: float, sharex: bool = False
) -> tuple[Figure, list[Axes]]:
    """A figure of ``rows`` x ``cols`` panels, for the per-experiment charts (all alike
    within a kind): made once per process and cleared for each chart, which spares
    matplotlib building the axes and their ticks again (a third of such a chart's time).
    Cleared: every artist a chart adds is removed and the limits are automatic again; what
    every chart sets anyway (titles, labels, ticks, size, margins) it sets again. Only
    charts whose panels all get data use a kept figure (an empty panel's limits come out
    differently); tests/unit/render/test_render.py checks that a chart drawn on a kept figure is
    byte-identical to one drawn on a new figure."""
    kept = _KEPT.get(kind) if REUSE and reuse else None
    if kept is None:
        fig = new_figure(height)
        grid = fig.subplots(rows, cols, sharex=sharex, squeeze=False)
        axes = [ax for row in grid for ax in row]
        if REUSE and reuse:
            _KEPT[kind] = (fig, axes)
        return fig, axes
    fig, axes = kept
    for below in list(fig.legends):
        below.remove()
    for ax in axes:
        for artist in [*ax.lines, *ax.collections, *ax.texts, *ax.patches]:
            artist.remove()
        if (inside := ax.get_legend()) is not None:
            inside.remove()
        ax.relim()
        ax.autoscale(True)
    fig.set_figheight(height)
    return fig, axes


def _pair(kind: str, reuse: bool, sharex: bool = False) -> tuple[Figure, Axes, Axes]:
    """Two panels side by side (``grid``)."""
    fig, (left, right) = grid(kind, reuse, 1, 2, PLOT_IN, sharex=sharex)
    return fig, left, right


# A bound drawn across a panel: (the aggregate key it bounds, its value, its label), e.g.
# ("ttft_ms_p99", 200.0, "bound: ttft_ms.p99<200"), the rate search's SLO
Bounds = Sequence[tuple[str, float, str]]


def _bound_lines(ax: Axes, key: str, bounds: Bounds) -> None:
    for bounded, value, label in bounds:
        if bounded == key:
            ax.axhline(value, color="#b3261e", linestyle="--", linewidth=1.0, zorder=2)
            ax.annotate(
                label, (1.0, value), xycoords=("axes fraction", "data"), xytext=(-2, 2),
                textcoords="offset points", ha="right", va="bottom", fontsize=7,
                color="#b3261e",
            )  # fmt: skip


FAR_BELOW = 3.0  # an experiment under a third of the baseline's throughput at every level


def far_below(series: Sequence[Series]) -> set[str]:
    """The experiments whose output tok/s is under 1 / ``FAR_BELOW`` of the baseline's at
    every level both measured (eager mode against CUDA graphs, say): drawn on an axis of
    their own, so that they neither turn the candidates' axis logarithmic nor squeeze the
    candidates into its top."""
    base = next((s for s in series if s.is_baseline), None)
    if base is None:
        return set()
    ref = dict(zip(base.levels, base.mean["output_tok_s"], strict=True))
    out = set()
    for s in series:
        if s is base:
            continue
        pairs = [
            (v, r)
            for c, v in zip(s.levels, s.mean["output_tok_s"], strict=True)
            if v is not None and (r := ref.get(c))
        ]
        if pairs and all(v * FAR_BELOW < r for v, r in pairs):
            out.add(s.id)
    return out


def throughput(series: Sequence[Series], bounds: Bounds = ()) -> Figure:
    """Output tok/s against concurrency, one line per successful experiment, ±1 sd bars, and
    a bound on it where the run searched under one (``bounds``). Experiments far below the
    baseline (``far_below``) are drawn apart, in a narrow panel at the right on their own
    scale, with the legend's styles."""
    fig = new_figure(PLOT_IN)
    apart = far_below(series)
    if apart:
        ax, side = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3.2, 1]})
    else:
        ax, side = fig.add_subplot(), None
    styled = list(zip(series, entries(series), strict=True))
    main = [(s, e) for s, e in styled if s.id not in apart]
    log = False
    if series:
        values = _values([s for s, _ in main], "output_tok_s")
        log = _spans_decade(values)
        _plot_styled(ax, main, "output_tok_s", errors=True, log=log)
        _bound_lines(ax, "output_tok_s", bounds)
        _concurrency_axis(ax, [s for s, _ in main])
        ax.set_ylabel("output tokens / s")
        _value_axis(ax, values)
    else:
        empty(ax, "no successful experiment to plot")
    ax.set_title("Output throughput (mean ± sd across repetitions)", loc="left")
    if side is not None:
        far = [(s, e) for s, e in styled if s.id in apart]
        values = _values([s for s, _ in far], "output_tok_s")
        _plot_styled(side, far, "output_tok_s", errors=True, log=_spans_decade(values))
        _concurrency_axis(side, [s for s, _ in far])
        side.set_xlabel("")
        _value_axis(side, values)
        side.set_title(f"under 1/{FAR_BELOW:g} of the baseline", loc="left", fontsize=7)
    fig.subplots_adjust(left=_left(log), right=0.98, wspace=0.28)
    legend_below(fig, entries(series))
    return fig


def latency(series: Sequence[Series], bounds: Bounds = ()) -> Figure:
    """TTFT and ITL, p50 and p99, against concurrency: four panels sharing one legend, each
    with the bound on it where the run searched under one (``bounds``)."""
    fig = new_figure(LATENCY_IN)
    axes = fig.subplots(2, 2)
    for ax, key, title in (
        (axes[0][0], "ttft_ms_p50", "Time to first token, p50"),
        (axes[0][1], "ttft_ms_p99", "Time to first token, p99"),
        (axes[1][0], "itl_ms_p50", "Inter-token latency, p50"),
        (axes[1][1], "itl_ms_p99", "Inter-token latency, p99"),
    ):
        if series:
            values = _values(series, key)
            _plot(ax, series, key, errors=True, log=_spans_decade(values))
            _bound_lines(ax, key, bounds)
            _concurrency_axis(ax, series)
            ax.set_ylabel("ms")
            _value_axis(ax, values)
        else:
            empty(ax, "no data")
        ax.set_title(title, loc="left")
    fig.subplots_adjust(left=0.08, right=0.98, wspace=0.25, hspace=0.45)
    legend_below(fig, entries(series), plot_in=LATENCY_IN)
    return fig


def distributions(
    data: Mapping[Point, Mapping[str, Sequence[float]]], levels: Sequence[Point]
) -> Figure:
    """One experiment's latency distributions: for each of its ``levels``, TTFT and
    end-to-end latency as cumulative distributions (from percentiles 0 to 100 of its
    successful requests, every repetition pooled; ``data`` by level)."""
    full = all(any((data.get(c) or {}).get(k) for c in levels) for k in ("ttft_ms", "e2e_ms"))
    fig, left, right = _pair("distributions", reuse=full)
    few_ticks(left, right)
    entries = level_entries(levels)
    drawn = False
    for ax, key, title in (
        (left, "ttft_ms", "Time to first token"),
        (right, "e2e_ms", "End-to-end latency"),
    ):
        for c, (_, style) in zip(sorted_points(levels), entries, strict=True):
            qs = list((data.get(c) or {}).get(key) or [])
            if qs:
                drawn = True
                ys = [100 * k / (len(qs) - 1) for k in range(len(qs))] if len(qs) > 1 else [100]
                ax.plot(qs, ys, **style)
        ax.set_title(f"{title} (ms)", loc="left")
        ax.set_xlabel("ms")
        ax.set_xlim(left=0)
        ax.set_ylim(0, 100)
    if not drawn:
        for ax in (left, right):
            empty(ax, "no successful requests")
    left.set_ylabel("percent of requests at or below")
    fig.subplots_adjust(left=0.09, right=0.98, wspace=0.25)
    legend_below(fig, entries)
    return fig
