"""The charts' axes: where each level sits along x (its concurrency or request rate, on a log2
axis where they grow geometrically), and a value axis linear from zero or, past a decade,
logarithmic, with the margin its tick labels need."""

from __future__ import annotations

import math
from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.ticker import FixedLocator, LogFormatter, NullLocator

from reportgen.render.content import Series
from reportgen.results.model import Point, rate_text, sorted_points


def _positions(series: Sequence[Series]) -> dict[Point, float]:
    """Where each level sits on the x axis: its concurrency, or its request rate (inf one
    step of the axis beyond the highest finite rate)."""
    points = sorted_points(p for s in series for p in s.levels)
    finite = [p.rate for p in points if p.rate is not None and math.isfinite(p.rate)]
    beyond = max(finite) * 2 if finite else 1.0
    return {
        p: float(p.concurrency) if p.rate is None else (beyond if math.isinf(p.rate) else p.rate)
        for p in points
    }


def _concurrency_axis(ax: Axes, series: Sequence[Series]) -> None:
    """Concurrency levels (or request rates) usually grow geometrically (1, 4, 16...): use a
    log2 axis then."""
    where = _positions(series)
    if not where:
        return
    levels = sorted(set(where.values()))
    names = {
        x: (str(p.concurrency) if p.rate is None else rate_text(p.rate)) for p, x in where.items()
    }
    if levels[0] > 0 and levels[-1] / levels[0] >= 4:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_minor_locator(NullLocator())
        pad = 2**0.25
        ax.set_xlim(levels[0] / pad, levels[-1] * pad)
    ax.xaxis.set_major_locator(FixedLocator(levels))
    ax.set_xticklabels([names[x] for x in levels])
    rates = any(p.rate is not None for p in where)
    ax.set_xlabel("request rate (requests / s)" if rates else "concurrency (requests in flight)")


DECADE = 10.0  # a series spanning more than this factor gets a log axis


def _left(log: bool) -> float:
    """A one-panel figure's left margin: wider beside a log value axis, whose tick labels
    ("6,000", and the ones between decades) would otherwise push its label off the figure's
    edge."""
    return 0.125 if log else 0.09


class PlainLog(LogFormatter):
    """A log axis's tick labels as plain numbers ("2,000", "0.5"), where matplotlib writes
    mathtext ("2 × 10³"): the same ticks labelled (``LogFormatter`` chooses), numbers a reader
    of tok/s and ms reads at once, and no mathtext to lay out (the SGLang H100 example's
    charts: 0.74-0.80 CPU-s, against 1.02-1.19 with mathtext)."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        if not super().__call__(x, pos):
            return ""
        return f"{x:,.0f}" if x >= 1 else f"{x:.2g}"


def log_scale(ax: Axes, which: str) -> None:
    """``ax``'s x axis (``which`` "x") or y axis logarithmic (base 10), labelled with plain
    numbers (``PlainLog``), its minor ticks between decades labelled where the axis spans
    few of them, as matplotlib does."""
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_formatter(PlainLog())
    axis.set_minor_formatter(PlainLog(labelOnlyBase=False))


def _spans_decade(values: Sequence[float | None]) -> bool:
    positive = [float(v) for v in values if v is not None and v > 0]
    return bool(positive) and max(positive) / min(positive) > DECADE


def _value_axis(ax: Axes, values: Sequence[float | None]) -> None:
    """A linear axis from zero, or a log axis where the values span more than a decade (a
    linear one would flatten every series below the largest)."""
    if _spans_decade(values):
        log_scale(ax, "y")
    else:
        ax.set_ylim(bottom=0)
