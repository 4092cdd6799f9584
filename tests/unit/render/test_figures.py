"""The charts' value axes: where a series spans more than a decade the axis is logarithmic,
and there a ±1 sd bar larger than its mean must not run down to the axis' floor."""

from __future__ import annotations

from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from reportgen.render import figures
from reportgen.render.content import Series
from reportgen.results.model import Point


def series(name: str, index: int, means: list[float], sds: list[float]) -> Series:
    return Series(
        id=name,
        index=index,
        is_baseline=index == 1,
        is_best=False,
        levels=[Point(1), Point(16), Point(64)],
        mean={"output_tok_s": list(means)},
        sd={"output_tok_s": list(sds)},
    )


def bars(fig: Figure) -> list[tuple[float, float]]:
    (ax,) = fig.axes
    out = []
    for c in ax.collections:
        if isinstance(c, LineCollection):
            out += [(float(seg[0][1]), float(seg[1][1])) for seg in c.get_segments()]
    return out


def test_a_bar_wider_than_its_mean_stops_above_zero_on_a_log_axis() -> None:
    # a slow experiment's C=1 mean of 100 with an sd of 150: 100 - 150 is below zero
    fig = figures.throughput(
        [
            series("baseline", 1, [430, 4100, 8900], [5, 40, 90]),
            series("eager", 2, [100, 700, 2000], [150, 20, 30]),
        ]  # fmt: skip
    )
    assert fig.axes[0].get_yscale() == "log"
    got = bars(fig)
    assert got and all(lo > 0 and hi > lo for lo, hi in got)
    # symmetric on the log scale: 100 * 100 / 250 = 40 below, 250 above
    assert any(abs(lo - 40) < 1e-6 and abs(hi - 250) < 1e-6 for lo, hi in got)


def test_on_a_linear_axis_a_bar_is_the_mean_plus_or_minus_its_sd() -> None:
    fig = figures.throughput([series("baseline", 1, [430, 470, 500], [5, 40, 90])])
    assert fig.axes[0].get_yscale() == "linear" and fig.axes[0].get_ylim()[0] == 0
    assert (425.0, 435.0) in bars(fig) and (410.0, 590.0) in bars(fig)
