"""GPUs: what they are (``info``), how they run (``sample``) and what went wrong (``counters``).

A ``GpuSource`` answers those three questions. ``nvml.NvmlSource`` asks the driver through
nvidia-ml-py; ``sources.FakeSource`` replays a capture recorded on a real GPU (the tests use
one recorded on an H200, ``tests/fixtures/gpu/``), also as several GPUs where no host has
them; ``sources.open_source()`` picks NVML when it works and says why not otherwise. Every field is
best-effort: one that cannot be read is ``{"error": "why"}`` (for example ``"NotSupported"``
for NVLink on a single PCIe GPU), so a report can say why it is missing instead of leaving a
blank.

This module needs only the standard library and, for ``NvmlSource``, nvidia-ml-py, so it
also runs where reportgen's other dependencies are not installed (the recording script).

Telemetry fields (one row per GPU per sample): ``sm_clock_mhz``, ``mem_clock_mhz``,
``power_w``, ``temp_c``, ``util_gpu_pct``, ``util_mem_pct``, ``mem_used_bytes``,
``clock_events`` (NVML's clock-event reasons bitmask; ``CLOCK_EVENTS`` names the bits),
``energy_mj`` (NVML's total energy consumption since the driver loaded, in millijoules; None
where the GPU or the recording has none).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

# NVML's clock-event ("throttle") reason bits (nvml.h, nvmlClocksEventReason*), stable ABI.
CLOCK_EVENTS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Reasons that mean the GPU ran slower than it could while busy (idle and settings do not).
SLOWDOWNS = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
TELEMETRY_FIELDS = (
    "sm_clock_mhz",
    "mem_clock_mhz",
    "power_w",
    "temp_c",
    "util_gpu_pct",
    "util_mem_pct",
    "mem_used_bytes",
    "clock_events",
    "energy_mj",
)
# nvmlGpuTopologyLevel_t
TOPOLOGY_LEVELS = {
    0: "internal (same board)",
    10: "single PCIe switch",
    20: "multiple PCIe switches",
    30: "same PCIe host bridge",
    40: "same NUMA node",
    50: "across NUMA nodes (system)",
}
# nvmlGpuP2PStatus_t
P2P_STATUS = {
    0: "ok",
    1: "chipset not supported",
    2: "GPU not supported",
    3: "IOH topology not supported",
    4: "disabled by registry key",
    5: "not supported",
    6: "unknown",
}


def event_names(mask: int) -> list[str]:
    """The clock-event reasons set in ``mask``."""
    return [name for bit, name in CLOCK_EVENTS.items() if mask & bit]


class GpuUnavailable(Exception):
    """No GPU source on this host; the message says why."""


class GpuSource(Protocol):
    def info(self) -> dict[str, Any]: ...
    def sample(self) -> list[dict[str, Any]]: ...
    def counters(self) -> list[dict[str, Any]]: ...
    def close(self) -> None: ...


def sample_for(source: GpuSource, seconds: float, hz: float) -> tuple[list[Any], list[float]]:
    """``seconds`` of telemetry at ``hz`` (absolute schedule), and each sample's cost in s."""
    samples: list[list[dict[str, Any]]] = []
    costs: list[float] = []
    period = 1.0 / hz
    due = time.perf_counter()
    end = due + seconds
    while due < end:
        began = time.perf_counter()
        samples.append(source.sample())
        costs.append(time.perf_counter() - began)
        due += period
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
    return samples, costs
