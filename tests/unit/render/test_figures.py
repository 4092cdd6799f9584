"""The charts' value axes: where a series spans more than a decade the axis is logarithmic,
and there a ±1 sd bar larger than its mean must not run down to the axis' floor."""

from __future__ import annotations

import lzma
import shutil
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from reportgen.render import figures
from reportgen.render.charts import to_svg
from reportgen.render.content import Series
from reportgen.results.model import Point
from tests.conftest import ROOT, reportgen_main


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
    # a slower experiment's C=1 mean of 200 with an sd of 300: 200 - 300 is below zero
    fig = figures.throughput(
        [
            series("baseline", 1, [430, 4100, 8900], [5, 40, 90]),
            series("slower", 2, [200, 1500, 3500], [300, 20, 30]),
        ]  # fmt: skip
    )
    assert fig.axes[0].get_yscale() == "log"
    got = bars(fig)
    assert got and all(lo > 0 and hi > lo for lo, hi in got)
    # symmetric on the log scale: 200 * 200 / 500 = 80 below, 500 above
    assert any(abs(lo - 80) < 1e-6 and abs(hi - 500) < 1e-6 for lo, hi in got)


def test_a_log_axis_is_labelled_in_plain_numbers() -> None:
    """Tok/s read as "2,000", not mathtext's 2 × 10³."""
    fig = figures.throughput([series("baseline", 1, [430, 4100, 8900], [5, 40, 90])])
    (ax,) = fig.axes
    assert ax.get_yscale() == "log"
    fig.canvas.draw()
    labels = {t.get_text() for t in ax.get_yticklabels(minor=True) + ax.get_yticklabels()}
    labels.discard("")
    assert {"100", "1,000", "10,000"} <= labels, labels
    assert not any("$" in t or "10^" in t for t in labels), labels
    svg = to_svg(fig)
    assert "10,000" in svg and "mathdefault" not in svg


def test_an_experiment_far_below_the_baseline_is_drawn_apart_on_its_own_scale() -> None:
    """Eager mode at a tenth of the baseline would set the value axis for every candidate:
    it gets a narrow panel of its own, and the candidates' axis spans only theirs."""
    candidates = [
        series("baseline", 1, [430, 4100, 8900], [5, 40, 90]),
        series("bigger-batches", 2, [420, 4300, 9600], [5, 40, 90]),
    ]
    eager = series("eager", 3, [40, 300, 2900], [2, 10, 30])  # 0.09x, 0.07x, 0.33x
    assert figures.far_below([*candidates, eager]) == {"eager"}
    main, side = figures.throughput([*candidates, eager]).axes[:2]
    assert side.get_title(loc="left") == "under 1/3 of the baseline"
    low, high = main.get_ylim()
    assert 100 < low < 420 and high > 9600  # the candidates' range, not eager's 40
    drawn = [line.get_ydata() for line in side.get_lines()]
    assert [list(y) for y in drawn] == [[40, 300, 2900]]
    # within a third at one level (C=64 at 0.34x): drawn with the others
    close = series("eager", 3, [40, 300, 3030], [2, 10, 30])
    assert figures.far_below([*candidates, close]) == set()
    assert len(figures.throughput([*candidates, close]).axes) == 1


def test_on_a_linear_axis_a_bar_is_the_mean_plus_or_minus_its_sd() -> None:
    fig = figures.throughput([series("baseline", 1, [430, 470, 500], [5, 40, 90])])
    assert fig.axes[0].get_yscale() == "linear" and fig.axes[0].get_ylim()[0] == 0
    assert (425.0, 435.0) in bars(fig) and (410.0, 590.0) in bars(fig)


def latency_series() -> Series:
    keys = ("ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50", "itl_ms_p99")
    return Series(
        id="baseline",
        index=1,
        is_baseline=True,
        is_best=False,
        levels=[Point(1), Point(16), Point(64)],
        mean={k: [20.0, 60.0, 180.0] for k in keys},
        sd={k: [1.0, 2.0, 3.0] for k in keys},
    )


def test_a_searched_bound_is_drawn_across_the_panel_it_bounds() -> None:
    """A rate search held its levels to TTFT p99 < 200 ms: that panel shows the line."""
    fig = figures.latency([latency_series()], bounds=[("ttft_ms_p99", 200.0, "bound")])
    titles = {ax.get_title(loc="left"): ax for ax in fig.axes if ax.get_title(loc="left")}

    def flat(ax: Axes) -> list[float]:  # the horizontal lines drawn on a panel
        return [float(ys[0]) for line in ax.lines if len(set(ys := list(line.get_ydata()))) == 1]

    assert flat(titles["Time to first token, p99"]) == [200.0]
    assert flat(titles["Time to first token, p50"]) == []
    assert any(t.get_text() == "bound" for t in titles["Time to first token, p99"].texts)


def test_the_rate_search_example_draws_its_bound(tmp_path: Path) -> None:
    copy = shutil.copytree(ROOT / "docs/examples/bench-rate-search-sglang-h100", tmp_path / "run")
    assert reportgen_main("render", copy, "--no-pdf").returncode == 0
    page = lzma.decompress((copy / "report.html.xz").read_bytes()).decode()
    assert "the search's bound: ttft_ms.p99&lt;200" in page  # in the latency chart's SVG
