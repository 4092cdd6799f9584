"""The report's one-panel charts of what each configuration yields (``figures`` draws the
rest, in the same style): the trade-off vLLM's sweeps plot (output tokens per second per GPU
against per user) and the efficiency (per GPU against output tokens per joule), each a line per
experiment, a point per level; ``charts`` draws them by name, ``diffpage`` both runs on one."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from reportgen.render.axes import _left, _spans_decade, log_scale
from reportgen.render.content import Series
from reportgen.render.figures import PLOT_IN, empty, entries, legend_below, new_figure


def _per_gpu_label(per_gpu: int) -> str:
    """The axis of output tokens per second per GPU (the trade-off's, the efficiency's)."""
    return "output tokens / s per GPU" if per_gpu > 1 else "output tokens / s (1 GPU)"


def tradeoff(series: Sequence[Series], gpus: int = 1) -> Figure:
    """The trade-off vLLM's sweeps plot: output tokens per second per GPU (what the hardware
    yields) against output tokens per second per user (1000 / the median time per output
    token: how fast one answer streams), one point per level, a line per experiment. Up and
    to the right is better. Log axes where the values span more than a decade; concurrency
    labels on the baseline's and the best's points only, placed on alternate sides."""
    fig = new_figure(PLOT_IN)
    ax = fig.add_subplot()
    per_gpu = max(1, int(gpus))
    xs_all: list[float] = []
    ys_all: list[float] = []
    log_y = False
    for s, (_, style) in zip(series, entries(series), strict=True):
        pts = [
            (1000.0 / t, y / per_gpu, c)
            for c, y, t in zip(s.levels, s.mean["output_tok_s"], s.mean["tpot_ms_p50"], strict=True)
            if y is not None and t is not None and t > 0
        ]
        if not pts:
            continue
        xs, ys, _ = zip(*pts, strict=True)
        xs_all += xs
        ys_all += ys
        ax.plot(xs, ys, **style)
        if s.is_baseline or s.is_best:
            for k, (x, y, c) in enumerate(pts):
                side = 1 if (k + s.is_best) % 2 == 0 else -1
                ax.annotate(c.label, (x, y), textcoords="offset points",
                            xytext=(5 * side, 5 * side), fontsize=7, color=style["color"],
                            ha="left" if side > 0 else "right",
                            va="bottom" if side > 0 else "top")  # fmt: skip
    if xs_all:
        ax.set_xlabel("output tokens / s per user (1000 / TPOT p50)")
        ax.set_ylabel(_per_gpu_label(per_gpu))
        for values, which, lim in ((xs_all, "x", ax.set_xlim), (ys_all, "y", ax.set_ylim)):
            if _spans_decade(values):
                log_scale(ax, which)
                log_y = log_y or which == "y"
            else:
                lim(0, max(values) * 1.12)
    else:
        empty(ax, "no successful experiment to plot")
    return _titled(fig, ax, "Throughput per GPU against speed per user", series, log_y)


def efficiency(series: Sequence[Series], gpus: int = 1) -> Figure:
    """What each configuration yields of its GPUs against what it costs them in energy:
    output tokens per second per GPU against output tokens per joule, one point per level, a
    line per experiment (where its levels have energy). Up and to the right is better: more
    from each GPU, for less energy a token."""
    fig = new_figure(PLOT_IN)
    ax = fig.add_subplot()
    per_gpu = max(1, int(gpus))
    drawn = False
    for s, (_, style) in zip(series, entries(series), strict=True):
        pts = [
            (y / per_gpu, j, c)
            for c, y, j in zip(
                s.levels,
                s.mean["output_tok_s"],
                s.mean.get("output_tok_per_j") or [None] * len(s.levels),
                strict=True,
            )
            if y is not None and j is not None
        ]
        if not pts:
            continue
        xs, ys, _ = zip(*pts, strict=True)
        ax.plot(xs, ys, **style)
        drawn = True
        if s.is_baseline or s.is_best:
            for x, y, c in pts:
                ax.annotate(c.label, (x, y), textcoords="offset points", xytext=(5, 5),
                            fontsize=7, color=style["color"])  # fmt: skip
    if drawn:
        ax.set_xlabel(_per_gpu_label(per_gpu))
        ax.set_ylabel("output tokens per joule")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
    else:
        empty(ax, "no experiment with the GPUs' energy to plot")
    return _titled(fig, ax, "Throughput per GPU against tokens per joule", series, False)


def _titled(fig: Figure, ax: Axes, title: str, series: Sequence[Series], log_y: bool) -> Figure:
    """A one-panel chart of the experiments finished: its title ("up and to the right is
    better"), its margins, the experiments' legend below."""
    ax.set_title(f"{title} (up and to the right is better)", loc="left")
    fig.subplots_adjust(left=_left(log_y), right=0.98)
    legend_below(fig, entries(series))
    return fig
