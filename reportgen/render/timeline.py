"""GPU telemetry over time, one experiment's chart: SM clock and power, utilisation and memory
used per GPU, each level's measured window shaded and labelled (``figures`` holds the style
and the helpers every chart shares)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from reportgen.render import figures

MAX_POINTS = 300  # per line of a time series: more cannot be seen at a chart's width
BAND_GPUS = 2  # draw a min-max band under each GPU's line only for this many GPUs or fewer


def _decimate(t: np.ndarray, v: np.ndarray, points: int = MAX_POINTS) -> tuple[np.ndarray, ...]:
    """A long series as at most ``points`` buckets: each bucket's time, mean, min and max (the
    band shows what the mean smooths away). Short series come back as they are."""
    if t.size <= points:
        return t, v, v, v
    edges = np.linspace(0, t.size, points + 1).astype(int)
    starts = edges[:-1]
    counts = np.diff(edges)
    mean = np.add.reduceat(v, starts) / counts
    return (
        np.add.reduceat(t, starts) / counts,
        mean,
        np.minimum.reduceat(v, starts),
        np.maximum.reduceat(v, starts),
    )


TELEMETRY_IN = figures.PLOT_IN * 1.75  # two rows of two panels
TELEMETRY_PANELS = (
    ("sm_clock_mhz", "SM clock", "MHz", 1.0),
    ("power_w", "Power", "W", 1.0),
    ("util_gpu_pct", "GPU utilisation", "%", 1.0),
    ("mem_used_bytes", "Memory used", "GB", 1e-9),
)


def telemetry(rows: Mapping[str, Any], windows: Sequence[tuple[float, float, str]]) -> Figure:
    """One experiment's GPU telemetry over time, per GPU: SM clock and power, utilisation and
    memory used (what says a GPU waited on the host, or filled up), each level's measured
    window shaded and labelled. ``rows``: columns ``t``, ``gpu`` and the panels' (telemetry
    table, NaN where not read); ``windows``: (start, end, label) on the same clock. Long runs
    are drawn as bucket means with their min-max band."""
    t = np.asarray(rows.get("t") if rows.get("t") is not None else [], dtype=float)
    gpu = np.asarray(rows.get("gpu") if rows.get("gpu") is not None else [], dtype=float)
    columns = {
        k: np.asarray(rows.get(k) if rows.get(k) is not None else [], dtype=float) * scale
        for k, _, _, scale in TELEMETRY_PANELS
    }
    full = t.size > 0 and all(
        v.size == t.size and bool(np.any(~np.isnan(v) & ~np.isnan(gpu))) for v in columns.values()
    )
    fig, axes = figures.grid("telemetry", full, 2, 2, TELEMETRY_IN, sharex=True)
    figures.few_ticks(*axes)
    t0 = float(t.min()) if t.size else 0.0
    gpus = sorted({int(g) for g in np.unique(gpu[~np.isnan(gpu)])}) if gpu.size else []
    # each GPU's rows in time order (sampled in order, so the sort is a check, rarely a cost)
    by_gpu = {}
    for g in gpus:
        index = np.flatnonzero(gpu == g)
        if index.size > 1 and np.any(np.diff(t[index]) < 0):
            index = index[np.argsort(t[index], kind="stable")]
        by_gpu[g] = index
    spans: tuple[list[tuple[float, float]], list[tuple[float, float]]] = ([], [])
    shade = 0
    for start, end, label in windows:
        shade += 1 if label else 0  # a new level: the other shade
        spans[shade % 2].append((start - t0, end - start))
    for n, (ax, (key, title, unit, _)) in enumerate(zip(axes, TELEMETRY_PANELS, strict=True)):
        for colour, bars in zip(("#f1f5f9", "#e3ebf4"), spans, strict=True):
            if bars:  # one collection per shade: far cheaper than a patch per window
                ax.broken_barh(bars, (0, 1), facecolors=colour, lw=0, zorder=0,
                               transform=ax.get_xaxis_transform())  # fmt: skip
        values = columns[key]
        drawn = False
        for g, index in by_gpu.items():
            if values.size != t.size:
                continue
            index = index[~np.isnan(values[index])]
            if not index.size:
                continue
            drawn = True
            xs, ys, lo, hi = _decimate(t[index] - t0, values[index])
            colour = figures.PALETTE[g % len(figures.PALETTE)]
            if xs.size < index.size and len(gpus) <= BAND_GPUS:
                ax.fill_between(xs, lo, hi, color=colour, alpha=0.18, lw=0)
            ax.plot(xs, ys, color=colour, lw=1.0, label=f"GPU {g}")
        if not t.size:
            figures.empty(ax, "no telemetry")
        elif not drawn:
            ax.text(0.5, 0.5, "not recorded", ha="center", va="center",
                    transform=ax.transAxes, color="#666666")  # fmt: skip
        ax.set_title(f"{title} ({unit})", loc="left")
        if n >= 2:
            ax.set_xlabel("seconds since the server started")
        ax.set_ylim(bottom=0, top=105 if key == "util_gpu_pct" else None)
    left = axes[0]
    if windows and t.size:
        top = left.get_ylim()[1]
        span = max(float(t.max()) - t0, 1e-9)
        last = None
        for start, _, label in windows:  # skip a label that would overlap the last one
            if label and (last is None or (start - last) / span > 0.08):
                left.text(start - t0, top, label, fontsize=6.5, va="top", color="#555555")
                last = start
    fig.subplots_adjust(left=0.08, right=0.98, wspace=0.25, hspace=0.35, bottom=0.1, top=0.93)
    if len(gpus) > 1:
        left.legend(loc="lower right", frameon=False)
    return fig
