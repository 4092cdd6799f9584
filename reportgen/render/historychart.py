"""The history report's chart (``historypage``): one experiment's series, a panel per level.
Drawn like every chart of the reports, through ``charts.draw`` (its kind "history")."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure

from reportgen.history import series
from reportgen.render import figures
from reportgen.render import historytext as text

CHART_IN = 2.2  # an experiment's chart height (a panel per level): three to a printed page
CHANGE_COLOUR = "#D55E00"
BREAK_COLOUR = "#999999"


def history(group: Sequence[series.Series], runs: int) -> Figure:
    """One experiment's series over ``runs`` runs, a panel per level: each run's mean with its
    interval, each stretch's segments (between change points) at their mean, a dashed line
    where the series breaks, a solid one at a change point, labelled with its size."""
    fig = figures.new_figure(CHART_IN)
    axes = fig.subplots(1, len(group), squeeze=False)[0]
    for ax, s in zip(axes, group, strict=True):
        _panel(ax, s, runs)
    axes[0].set_ylabel(text.metric_label(group[0].metric))
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.2, top=0.8, wspace=0.3)
    return fig


def _panel(ax: Any, s: series.Series, n: int) -> None:
    cuts = {c.at for c in s.changes}
    for k, stretch in enumerate(s.stretches()):
        xs = [i + 1 for i in stretch]
        got = [text.interval(s.values[i]) for i in stretch]
        means = [m for m, _, _ in got]
        low = [m - lo if not math.isnan(lo) else 0 for m, lo, _ in got]
        high = [hi - m if not math.isnan(hi) else 0 for m, _, hi in got]
        colour = figures.PALETTE[k % len(figures.PALETTE)]
        ax.errorbar(xs, means, yerr=[low, high], fmt="o-", color=colour, markersize=4,
                    linewidth=1, capsize=2)  # fmt: skip
        start = 0
        for end in [k for k, i in enumerate(stretch) if i in cuts] + [len(stretch)]:
            if end > start:
                seg = means[start:end]
                level = math.exp(sum(math.log(v) for v in seg) / len(seg))
                ax.hlines(level, xs[start] - 0.3, xs[end - 1] + 0.3, colors="#444444",
                          linewidth=1.6, alpha=0.6)  # fmt: skip
            start = end
    for b in s.breaks:
        ax.axvline(b.at + 0.5, color=BREAK_COLOUR, linestyle="--", linewidth=1)
    for c in s.changes:
        ax.axvline(c.at + 0.5, color=CHANGE_COLOUR, linewidth=1.4)
        ax.annotate(f"x{c.change.ratio:.2f}", (c.at + 0.5, 1), xycoords=("data", "axes fraction"),
                    fontsize=7, color=CHANGE_COLOUR, ha="center", va="bottom")  # fmt: skip
    ax.set_xlim(0.5, n + 0.5)
    figures.few_ticks(ax)
    ax.set_xticks(range(1, n + 1))
    ax.set_xlabel("run")
    ax.set_title(s.point.label, loc="left", pad=10)
