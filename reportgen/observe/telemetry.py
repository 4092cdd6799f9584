"""GPU telemetry during an experiment: a sampling thread, and summaries of time windows.

``Telemetry(source, hz)`` samples every GPU of a ``reportgen.observe.gpu.GpuSource``
from ``start()`` to ``stop()`` on a thread of its own (NVML calls take microseconds and
release the GIL, so the load generator does not notice). If the source fails in the middle,
sampling stops, ``error`` says why and when, and the run goes on.
``window(rows, start, end)`` summarises the rows of one measurement window per GPU (pure function).
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from reportgen.observe.gpu import CLOCK_EVENTS, SLOWDOWNS, GpuSource

DEFAULT_HZ = 20.0
COVERED = 0.8  # the share of a window its energy's samples must span
EDGE_S = 0.15  # or all of it but this much (three periods at 20 Hz), whichever is less strict


class Telemetry:
    def __init__(self, source: GpuSource, hz: float = DEFAULT_HZ) -> None:
        self.source = source
        self.period = 1.0 / hz
        self.hz = hz
        self.rows: list[dict[str, Any]] = []
        self.error: str | None = None
        self.late_samples = 0  # samples taken more than one period late
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpu-telemetry", daemon=True)

    def start(self) -> Telemetry:
        self._thread.start()
        return self

    def stop(self) -> list[dict[str, Any]]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        return self.rows

    def rows_until(self, end: float, since: float | None = None) -> list[dict[str, Any]]:
        """The rows so far, once one was sampled past ``end`` (waiting at most three periods,
        or not at all once sampling stopped); with ``since``, only rows from there on."""
        wait = time.perf_counter() + 3 * self.period
        while (
            self._thread.is_alive()
            and not (self.rows and self.rows[-1]["t"] > end)
            and time.perf_counter() < wait
        ):
            time.sleep(self.period / 4)
        rows = list(self.rows)  # (appended to by the sampling thread meanwhile)
        if since is None:
            return rows
        return rows[bisect.bisect_left(rows, since, key=lambda r: r["t"]) :]

    def _run(self) -> None:
        due = time.perf_counter()
        while not self._stop.is_set():
            try:
                self.rows.extend(self.source.sample())
            except Exception as exc:  # NVML failing mid-run: keep what we have, say why
                self.error = f"telemetry stopped after {len(self.rows)} rows: {exc}"
                return
            due += self.period
            delay = due - time.perf_counter()
            if delay < -self.period:
                self.late_samples += 1
                due = time.perf_counter()  # skip the missed ones rather than burst
            elif delay > 0:
                self._stop.wait(delay)


def _stats(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "min": None, "max": None}
    mean = sum(values) / len(values)
    return {"mean": mean, "min": min(values), "max": max(values)}


def energy(
    rows: Sequence[dict[str, Any]], start: float, end: float
) -> tuple[float | None, str | None]:
    """One GPU's energy over ``start``-``end`` (J) from its rows inside it, and where it came
    from: NVML's energy counter read at the first and last sample ("counter"), else the
    sampled power integrated (trapezoids: "power integrated"); either scaled from the samples'
    span to the window's. (None, None) where neither spans COVERED of the window (NVML stopped
    answering early, a level shorter than two samples)."""
    span = end - start
    # samples spanning less of the window are not scaled up to it (a short window's edges
    # may fall up to a sampling period from its first and last samples)
    least = span - max((1 - COVERED) * span, EDGE_S)
    counted = [(r["t"], float(r["energy_mj"])) for r in rows if r.get("energy_mj") is not None]
    if (
        len(counted) > 1
        and counted[-1][0] - counted[0][0] >= max(least, 1e-9)
        and counted[-1][1] >= counted[0][1]
    ):
        (t0, e0), (t1, e1) = counted[0], counted[-1]
        return (e1 - e0) / 1e3 * span / (t1 - t0), "counter"
    powered = [(r["t"], float(r["power_w"])) for r in rows if r.get("power_w") is not None]
    if len(powered) > 1 and powered[-1][0] - powered[0][0] >= max(least, 1e-9):
        area = sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in pairwise(powered))
        return area * span / (powered[-1][0] - powered[0][0]), "power integrated"
    return None, None


def window(rows: Sequence[dict[str, Any]], start: float, end: float) -> list[dict[str, Any]]:
    """Per GPU, the rows with ``start <= t <= end`` summarised: how many and how often,
    clocks (with their coefficient of variation while the GPU was busy), power, temperature,
    utilisation, memory, the share of samples each clock-event reason was set (plus
    ``slowdown_share``: any reason that means the GPU ran slower than it could), and the
    energy it used over the window (``energy``)."""
    by_gpu: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        if start <= r["t"] <= end:
            by_gpu.setdefault(int(r["gpu"]), []).append(r)
    out = []
    for g in sorted(by_gpu):
        rs = by_gpu[g]
        n = len(rs)

        def col(name: str, rs: list[dict[str, Any]] = rs) -> list[float]:
            return [float(r[name]) for r in rs if r.get(name) is not None]

        busy_clocks = [
            float(r["sm_clock_mhz"])
            for r in rs
            if r.get("sm_clock_mhz") is not None and not (int(r.get("clock_events") or 0) & 0x1)
        ]
        cv = None
        if len(busy_clocks) > 1:
            mean = sum(busy_clocks) / len(busy_clocks)
            var = sum((x - mean) ** 2 for x in busy_clocks) / (len(busy_clocks) - 1)
            cv = math.sqrt(var) / mean if mean else None
        events = [int(r["clock_events"]) for r in rs if r.get("clock_events") is not None]
        shares = {
            name: sum(1 for e in events if e & bit) / len(events)
            for bit, name in CLOCK_EVENTS.items()
            if events and any(e & bit for e in events)
        }
        span = max(r["t"] for r in rs) - min(r["t"] for r in rs)
        joules, how = energy(rs, start, end)
        out.append(
            {
                "gpu": g,
                "samples": n,
                "hz": (n - 1) / span if span > 0 else None,
                "sm_clock_mhz": _stats(col("sm_clock_mhz")),
                "sm_clock_cv_busy": cv,
                "mem_clock_mhz": _stats(col("mem_clock_mhz")),
                "power_w": _stats(col("power_w")),
                "temp_c": _stats(col("temp_c")),
                "util_gpu_pct": _stats(col("util_gpu_pct")),
                "mem_used_bytes": _stats(col("mem_used_bytes")),
                "clock_events": shares,
                "slowdown_share": (
                    sum(1 for e in events if e & SLOWDOWNS) / len(events) if events else None
                ),
                "energy_j": joules,
                "energy_from": how,
            }
        )
    return out


def counter_deltas(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """What got worse between two ``counters()`` readings, as sentences (empty: nothing)."""
    out: list[str] = []
    for b, a in zip(before, after, strict=False):
        g = a.get("gpu")
        for key in ("corrected_volatile", "uncorrected_volatile"):
            x, y = b["ecc_errors"].get(key), a["ecc_errors"].get(key)
            if isinstance(x, int) and isinstance(y, int) and y > x:
                out.append(f"GPU {g}: {y - x} new {key.replace('_', ' ')} ECC error(s)")
        rb, ra = b.get("remapped_rows"), a.get("remapped_rows")
        if isinstance(rb, dict) and isinstance(ra, dict):
            for key in ("correctable", "uncorrectable"):
                x, y = rb.get(key), ra.get(key)
                if isinstance(x, int) and isinstance(y, int) and y > x:
                    out.append(f"GPU {g}: {y - x} new {key} remapped row(s)")
            if ra.get("pending") and not rb.get("pending"):
                out.append(f"GPU {g}: a row remapping is pending (reset the GPU)")
        x, y = b.get("pcie_replays"), a.get("pcie_replays")
        if isinstance(x, int) and isinstance(y, int) and y > x:
            out.append(f"GPU {g}: {y - x} new PCIe replay(s)")
        xb, xa = b.get("xid_events"), a.get("xid_events")
        if isinstance(xb, list) and isinstance(xa, list) and len(xa) > len(xb):
            # events NVML tied to another GPU belong to that GPU's line
            new = [e for e in xa[len(xb) :] if e.get("gpu", g) == g]
            if new:
                out.append(f"GPU {g}: XID event(s) {', '.join(str(e.get('xid')) for e in new)}")
    return out
