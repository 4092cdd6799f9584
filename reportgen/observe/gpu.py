"""GPUs: what they are (``info``), how they run (``sample``) and what went wrong (``counters``).

A ``GpuSource`` answers those three questions. ``NvmlSource`` asks the driver through
nvidia-ml-py; ``FakeSource`` replays a capture recorded on a real GPU (the tests use one
recorded on an H200, ``tests/fixtures/gpu/``), also as several GPUs where no host has them;
``open_source()`` picks NVML when it works and says why not otherwise. Every field is
best-effort: one that cannot be read is ``{"error": "why"}`` (for example ``"NotSupported"``
for NVLink on a single PCIe GPU), so a report can say why it is missing instead of leaving a
blank.

This module needs only the standard library and, for ``NvmlSource``, nvidia-ml-py, so it
also runs where reportgen's other dependencies are not installed (the recording script).

Telemetry fields (one row per GPU per sample): ``sm_clock_mhz``, ``mem_clock_mhz``,
``power_w``, ``temp_c``, ``util_gpu_pct``, ``util_mem_pct``, ``mem_used_bytes``,
``clock_events`` (NVML's clock-event reasons bitmask; ``CLOCK_EVENTS`` names the bits).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import time
from collections.abc import Callable
from pathlib import Path
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


def _text(value: Any) -> Any:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


class NvmlSource:
    """The driver's view, through nvidia-ml-py. Raises ``GpuUnavailable`` when NVML is missing
    or does not start."""

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError as exc:
            raise GpuUnavailable("nvidia-ml-py is not installed") from exc
        self.nv = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise GpuUnavailable(f"NVML did not start: {exc}") from exc
        except OSError as exc:  # the library itself is missing
            raise GpuUnavailable(f"NVML library not found: {exc}") from exc
        self.handles = [
            pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())
        ]
        self._xid_set: Any = None

    # -- helpers ---------------------------------------------------------------------------
    def _call(self, name: str, *args: Any) -> Any:
        """``pynvml.<name>(*args)``, or ``{"error": why}``."""
        fn: Callable[..., Any] | None = getattr(self.nv, name, None)
        if fn is None:
            return {"error": f"{name} is not in this nvidia-ml-py"}
        try:
            return _text(fn(*args))
        except self.nv.NVMLError as exc:
            return {"error": str(exc)}

    def _first(self, names: tuple[str, ...], *args: Any) -> Any:
        """The first of several names for one call that this nvidia-ml-py has."""
        for name in names:
            if hasattr(self.nv, name):
                return self._call(name, *args)
        return {"error": f"none of {', '.join(names)} in this nvidia-ml-py"}

    @staticmethod
    def _ok(value: Any) -> bool:
        return not (isinstance(value, dict) and "error" in value)

    def _pair(self, name: str, h: Any, keys: tuple[str, str]) -> Any:
        value = self._call(name, h)
        if self._ok(value) and isinstance(value, list | tuple) and len(value) == 2:
            return dict(zip(keys, value, strict=True))
        return value

    # -- info ------------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        nv = self.nv
        devices = [self._device(i, h) for i, h in enumerate(self.handles)]
        cuda = self._call("nvmlSystemGetCudaDriverVersion")
        return {
            "available": True,
            "source": "nvml",
            "nvml_bindings": self._bindings_version(),
            "driver": self._call("nvmlSystemGetDriverVersion"),
            "nvml_version": self._call("nvmlSystemGetNVMLVersion"),
            "cuda_driver": cuda,
            "cuda_driver_version": (
                f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else cuda
            ),
            "count": len(devices),
            "devices": devices,
            "topology": self._topology(),
            "nvlink_max_links": getattr(nv, "NVML_NVLINK_MAX_LINKS", 18),
        }

    def _bindings_version(self) -> str | None:
        from importlib import metadata

        with contextlib.suppress(metadata.PackageNotFoundError):
            return metadata.version("nvidia-ml-py")
        return None

    def _device(self, i: int, h: Any) -> dict[str, Any]:
        nv = self.nv
        cc = self._call("nvmlDeviceGetCudaComputeCapability", h)
        mem = self._call("nvmlDeviceGetMemoryInfo", h)
        pci = self._call("nvmlDeviceGetPciInfo", h)
        bus_id = _text(getattr(pci, "busId", None)) if self._ok(pci) else None

        def mw(value: Any) -> Any:  # milliwatts to watts
            return value / 1000 if isinstance(value, int | float) else value

        limits = self._call("nvmlDeviceGetPowerManagementLimitConstraints", h)
        clock_sm, clock_mem = nv.NVML_CLOCK_SM, nv.NVML_CLOCK_MEM
        return {
            "index": i,
            "name": self._call("nvmlDeviceGetName", h),
            "uuid": self._call("nvmlDeviceGetUUID", h),
            "serial": self._call("nvmlDeviceGetSerial", h),
            "board_part_number": self._call("nvmlDeviceGetBoardPartNumber", h),
            "vbios": self._call("nvmlDeviceGetVbiosVersion", h),
            "pci_bus_id": bus_id,
            "compute_capability": f"{cc[0]}.{cc[1]}" if isinstance(cc, tuple) else cc,
            "memory_total_bytes": getattr(mem, "total", mem),
            "memory_used_bytes": getattr(mem, "used", None),
            "persistence_mode": self._call("nvmlDeviceGetPersistenceMode", h),
            "ecc_mode": self._pair("nvmlDeviceGetEccMode", h, ("current", "pending")),
            "mig_mode": self._pair("nvmlDeviceGetMigMode", h, ("current", "pending")),
            "power_limit_w": mw(self._call("nvmlDeviceGetPowerManagementLimit", h)),
            "power_default_limit_w": mw(self._call("nvmlDeviceGetPowerManagementDefaultLimit", h)),
            "power_enforced_limit_w": mw(self._call("nvmlDeviceGetEnforcedPowerLimit", h)),
            "power_limit_range_w": (
                [mw(limits[0]), mw(limits[1])]
                if self._ok(limits) and isinstance(limits, list | tuple)
                else limits
            ),
            "clocks_mhz": {
                "applications_sm": self._call("nvmlDeviceGetApplicationsClock", h, clock_sm),
                "applications_mem": self._call("nvmlDeviceGetApplicationsClock", h, clock_mem),
                "default_applications_sm": self._call(
                    "nvmlDeviceGetDefaultApplicationsClock", h, clock_sm
                ),
                "default_applications_mem": self._call(
                    "nvmlDeviceGetDefaultApplicationsClock", h, clock_mem
                ),
                "max_sm": self._call("nvmlDeviceGetMaxClockInfo", h, clock_sm),
                "max_mem": self._call("nvmlDeviceGetMaxClockInfo", h, clock_mem),
            },
            "pcie": {
                "generation": self._call("nvmlDeviceGetCurrPcieLinkGeneration", h),
                "max_generation": self._call("nvmlDeviceGetMaxPcieLinkGeneration", h),
                "width": self._call("nvmlDeviceGetCurrPcieLinkWidth", h),
                "max_width": self._call("nvmlDeviceGetMaxPcieLinkWidth", h),
            },
            "nvlink": self._nvlink(h),
            "cpu_affinity": self._cpu_affinity(h),
            "numa_node": self._numa_node(h, bus_id),
            "processes": self._processes(h),
        }

    def _nvlink(self, h: Any) -> dict[str, Any]:
        links = []
        first_error = None
        for link in range(getattr(self.nv, "NVML_NVLINK_MAX_LINKS", 18)):
            state = self._call("nvmlDeviceGetNvLinkState", h, link)
            if not self._ok(state):
                first_error = first_error or state["error"]
                continue
            entry: dict[str, Any] = {"link": link, "active": bool(state)}
            if state:
                remote = self._call("nvmlDeviceGetNvLinkRemotePciInfo", h, link)
                entry["remote_pci_bus_id"] = (
                    _text(getattr(remote, "busId", None)) if self._ok(remote) else remote
                )
            links.append(entry)
        if not links:
            return {"error": first_error or "no NVLink"}
        return {"active_links": sum(1 for x in links if x["active"]), "links": links}

    def _cpu_affinity(self, h: Any) -> Any:
        import os

        words = ((os.cpu_count() or 64) + 63) // 64
        mask = self._call("nvmlDeviceGetCpuAffinity", h, words)
        if not self._ok(mask):
            return mask
        cpus = [w * 64 + b for w, word in enumerate(mask) for b in range(64) if word >> b & 1]
        return _ranges(cpus)

    def _numa_node(self, h: Any, bus_id: str | None) -> Any:
        if hasattr(self.nv, "nvmlDeviceGetNumaNodeId"):
            node = self._call("nvmlDeviceGetNumaNodeId", h)
            if self._ok(node):
                return node
        if bus_id:  # sysfs names the device by its lower-case 4-digit-domain bus id
            path = Path("/sys/bus/pci/devices") / bus_id.lower()[-12:] / "numa_node"
            with contextlib.suppress(OSError, ValueError):
                return int(path.read_text())
        return {"error": "not readable"}

    def _processes(self, h: Any) -> Any:
        out = []
        for kind in ("Compute", "Graphics"):
            procs = self._call(f"nvmlDeviceGet{kind}RunningProcesses", h)
            if not self._ok(procs):
                return procs
            for p in procs:
                used = getattr(p, "usedGpuMemory", None)
                out.append({"pid": p.pid, "used_memory_bytes": used, "kind": kind.lower()})
        return out

    def _topology(self) -> Any:
        pairs = []
        nv = self.nv
        caps = {
            "read": getattr(nv, "NVML_P2P_CAPS_INDEX_READ", 0),
            "write": getattr(nv, "NVML_P2P_CAPS_INDEX_WRITE", 1),
            "nvlink": getattr(nv, "NVML_P2P_CAPS_INDEX_NVLINK", 2),
            "atomics": getattr(nv, "NVML_P2P_CAPS_INDEX_ATOMICS", 3),
        }
        for a in range(len(self.handles)):
            for b in range(a + 1, len(self.handles)):
                ha, hb = self.handles[a], self.handles[b]
                level = self._call("nvmlDeviceGetTopologyCommonAncestor", ha, hb)
                p2p = {}
                for cap, idx in caps.items():
                    status = self._call("nvmlDeviceGetP2PStatus", ha, hb, idx)
                    p2p[cap] = P2P_STATUS.get(status, status) if self._ok(status) else status
                pairs.append(
                    {
                        "gpus": [a, b],
                        "common_ancestor": TOPOLOGY_LEVELS.get(level, level)
                        if self._ok(level)
                        else level,
                        "p2p": p2p,
                    }
                )
        return pairs

    # -- telemetry -------------------------------------------------------------------------
    def sample(self) -> list[dict[str, Any]]:
        nv = self.nv
        rows = []
        t = time.perf_counter()
        for i, h in enumerate(self.handles):
            util = self._call("nvmlDeviceGetUtilizationRates", h)
            mem = self._call("nvmlDeviceGetMemoryInfo", h)
            power = self._call("nvmlDeviceGetPowerUsage", h)
            rows.append(
                {
                    "t": t,
                    "gpu": i,
                    "sm_clock_mhz": _num(self._call("nvmlDeviceGetClockInfo", h, nv.NVML_CLOCK_SM)),
                    "mem_clock_mhz": _num(
                        self._call("nvmlDeviceGetClockInfo", h, nv.NVML_CLOCK_MEM)
                    ),
                    "power_w": power / 1000 if isinstance(power, int) else None,
                    "temp_c": _num(
                        self._call("nvmlDeviceGetTemperature", h, nv.NVML_TEMPERATURE_GPU)
                    ),
                    "util_gpu_pct": getattr(util, "gpu", None),
                    "util_mem_pct": getattr(util, "memory", None),
                    "mem_used_bytes": getattr(mem, "used", None),
                    "clock_events": _num(
                        self._first(
                            (
                                "nvmlDeviceGetCurrentClocksEventReasons",
                                "nvmlDeviceGetCurrentClocksThrottleReasons",
                            ),
                            h,
                        )
                    ),
                }
            )
        return rows

    def counters(self) -> list[dict[str, Any]]:
        nv = self.nv
        out = []
        for i, h in enumerate(self.handles):
            ecc: dict[str, Any] = {}
            for kind, etype in (
                ("corrected", nv.NVML_MEMORY_ERROR_TYPE_CORRECTED),
                ("uncorrected", nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
            ):
                for scope, counter in (
                    ("volatile", nv.NVML_VOLATILE_ECC),
                    ("aggregate", nv.NVML_AGGREGATE_ECC),
                ):
                    ecc[f"{kind}_{scope}"] = self._call(
                        "nvmlDeviceGetTotalEccErrors", h, etype, counter
                    )
            remapped = self._call("nvmlDeviceGetRemappedRows", h)
            if self._ok(remapped) and isinstance(remapped, list | tuple) and len(remapped) >= 4:
                keys = ("correctable", "uncorrectable", "pending", "failure")
                remapped = dict(zip(keys, remapped[:4], strict=True))
            retired = {}
            for cause, code in (
                (
                    "single_bit",
                    getattr(nv, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0),
                ),
                ("double_bit", getattr(nv, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)),
            ):
                pages = self._call("nvmlDeviceGetRetiredPages", h, code)
                retired[cause] = len(pages) if isinstance(pages, list) else pages
            out.append(
                {
                    "gpu": i,
                    "ecc_errors": ecc,
                    "remapped_rows": remapped,
                    "retired_pages": retired,
                    "pcie_replays": self._call("nvmlDeviceGetPcieReplayCounter", h),
                    "xid_events": self._xids(),
                }
            )
        return out

    def _xids(self) -> Any:
        """XID events since the first call (NVML delivers only those after registering),
        each with the index of its GPU where NVML says which."""
        nv = self.nv
        if self._xid_set is None:
            self._xids_seen: list[dict[str, Any]] = []
            try:
                self._xid_set = nv.nvmlEventSetCreate()
                for h in self.handles:
                    nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, self._xid_set)
            except (nv.NVMLError, AttributeError) as exc:
                self._xid_set = False
                self._xid_error = str(exc)
        if self._xid_set is False:
            return {"error": self._xid_error}
        wait = getattr(nv, "nvmlEventSetWait_v2", None) or getattr(nv, "nvmlEventSetWait", None)
        if wait is None:
            return {"error": "nvmlEventSetWait is not in this nvidia-ml-py"}
        addresses = [ctypes.cast(h, ctypes.c_void_p).value for h in self.handles]
        while True:
            try:
                event = wait(self._xid_set, 0)
            except nv.NVMLError:  # NVML_ERROR_TIMEOUT: nothing pending
                break
            entry: dict[str, Any] = {"xid": int(event.eventData), "t": time.time()}
            with contextlib.suppress(Exception):
                where = ctypes.cast(event.device, ctypes.c_void_p).value
                if where in addresses:
                    entry["gpu"] = addresses.index(where)
            self._xids_seen.append(entry)
        return list(self._xids_seen)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._xid_set:
                self.nv.nvmlEventSetFree(self._xid_set)
        with contextlib.suppress(Exception):
            self.nv.nvmlShutdown()


class FakeSource:
    """Replays a capture recorded on a real GPU (``record`` writes one): the same ``info`` and
    ``counters``, and its telemetry rows in a loop, stamped with the current time.

    ``gpus`` (or the capture's ``"replicate"`` key) replays the capture as that many GPUs, for
    the code paths of several GPUs on a host with one: GPU k is copy k // m of recorded GPU
    k % m (m GPUs recorded). A copy has the recorded fields, with its index, and its uuid,
    serial and PCI bus id ending in ``-r1``, ``-r2``...; its telemetry rows are the recorded
    GPU's from further on in the loop (copy c of n, c/n of the way through it), so that the
    GPUs do not move in step: one idles while another works; a pair of GPUs that was not
    recorded has a topology entry whose fields say so (nothing is known of how replayed GPUs
    connect). Without ``gpus`` the capture is replayed as it was recorded."""

    def __init__(self, capture: dict[str, Any] | str | Path, gpus: int | None = None) -> None:
        data: dict[str, Any] = (
            capture if isinstance(capture, dict) else json.loads(Path(capture).read_text())
        )
        self.capture = data
        self.samples: list[list[dict[str, Any]]] = data["samples"]
        self.position = 0
        # NVML failing in the middle of a run: a capture may say after how many samples.
        self.fail_after: int | None = data.get("fail_after_samples")
        self.recorded = len(data["info"].get("devices") or [])
        wanted = gpus if gpus is not None else data.get("replicate")
        if wanted is not None and (isinstance(wanted, bool) or not isinstance(wanted, int)):
            raise ValueError(f"a number of GPUs to replay the capture as, not {wanted!r}")
        if wanted is not None and wanted < 1:
            raise ValueError(f"a capture is replayed as 1 or more GPUs, not {wanted}")
        if wanted is not None and not self.recorded:
            raise ValueError("the capture records no GPU to replay")
        # How many GPUs to replay the capture as; None: as recorded (also when that many).
        self.gpus: int | None = None if wanted == self.recorded else wanted
        self.copies = -(-(self.gpus or 1) // max(self.recorded, 1))  # of each recorded GPU

    def _copy(self, k: int) -> tuple[int, int]:
        """The recorded GPU that replayed GPU ``k`` copies, and which copy it is (0: itself)."""
        return k % self.recorded, k // self.recorded

    def info(self) -> dict[str, Any]:
        info = dict(json.loads(json.dumps(self.capture["info"])))
        if self.gpus is None:
            return info
        recorded = info.get("devices") or []
        devices = []
        for k in range(self.gpus):
            g, copy = self._copy(k)
            device = {**json.loads(json.dumps(recorded[g])), "index": k}
            if copy:
                for key in ("uuid", "serial", "pci_bus_id"):
                    if isinstance(device.get(key), str):
                        device[key] = f"{device[key]}-r{copy}"
            devices.append(device)
        measured = {
            tuple(t.get("gpus") or ()): t for t in info.get("topology") or [] if isinstance(t, dict)
        }
        unknown = {"error": f"not measured: replayed from a {self.recorded}-GPU capture"}
        topology = []
        for a in range(self.gpus):
            for b in range(a + 1, self.gpus):
                if (a, b) in measured and b < self.recorded:
                    topology.append(measured[(a, b)])
                    continue
                topology.append(
                    {
                        "gpus": [a, b],
                        "common_ancestor": dict(unknown),
                        "p2p": {
                            cap: dict(unknown) for cap in ("read", "write", "nvlink", "atomics")
                        },
                    }
                )
        info.update(
            count=self.gpus,
            devices=devices,
            topology=topology,
            replayed=f"{self.recorded} recorded GPU(s) replayed as {self.gpus}",
        )
        return info

    def sample(self) -> list[dict[str, Any]]:
        if self.fail_after is not None and self.position >= self.fail_after:
            raise GpuUnavailable("the GPU source stopped answering")
        position = self.position
        self.position += 1
        t = time.perf_counter()
        if self.gpus is None:
            rows = self.samples[position % len(self.samples)]
            return [{**row, "t": t} for row in rows]
        out = []
        for k in range(self.gpus):
            g, copy = self._copy(k)
            ahead = copy * len(self.samples) // self.copies
            rows = self.samples[(position + ahead) % len(self.samples)]
            out += [{**row, "gpu": k, "t": t} for row in rows if row.get("gpu") == g]
        return out

    def counters(self) -> list[dict[str, Any]]:
        recorded = list(json.loads(json.dumps(self.capture["counters_before"])))
        if self.gpus is None:
            return recorded
        by_gpu = {c.get("gpu"): c for c in recorded}
        out = []
        for k in range(self.gpus):
            g, _ = self._copy(k)
            if g not in by_gpu:
                continue
            entry = {**json.loads(json.dumps(by_gpu[g])), "gpu": k}
            if isinstance(entry.get("xid_events"), list):
                entry["xid_events"] = [
                    {**x, "gpu": k} if isinstance(x, dict) and x.get("gpu") == g else x
                    for x in entry["xid_events"]
                ]
            out.append(entry)
        return out

    def close(self) -> None:
        pass


CAPTURE_ENV = "REPORTGEN_GPU_CAPTURE"
# How many GPUs to replay that capture as (``FakeSource``'s ``gpus``): unset, as recorded.
CAPTURE_GPUS_ENV = "REPORTGEN_GPU_CAPTURE_GPUS"


def open_source() -> tuple[GpuSource | None, str | None]:
    """NVML if it works here, else ``(None, why)``. With ``REPORTGEN_GPU_CAPTURE`` set to a
    capture file, that capture replayed instead (tests and demos on hosts without a GPU), as
    ``REPORTGEN_GPU_CAPTURE_GPUS`` GPUs where that is set."""
    import os

    capture = os.environ.get(CAPTURE_ENV)
    if capture:
        count = os.environ.get(CAPTURE_GPUS_ENV, "").strip()
        try:
            gpus = int(count) if count else None
        except ValueError:
            gpus = 0
        if gpus is not None and gpus < 1:
            return None, f"{CAPTURE_GPUS_ENV}={count}: not a number of GPUs (1 or more)"
        try:
            return FakeSource(capture, gpus=gpus), None
        except (OSError, ValueError, KeyError) as exc:
            return None, f"{CAPTURE_ENV}={capture}: not a readable GPU capture ({exc})"
    try:
        return NvmlSource(), None
    except GpuUnavailable as exc:
        return None, str(exc)


def _num(value: Any) -> Any:
    return value if isinstance(value, int | float) else None


def _ranges(cpus: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2,5,7-8"."""
    spans: list[list[int]] = []
    for c in cpus:
        if spans and c == spans[-1][1] + 1:
            spans[-1][1] = c
        else:
            spans.append([c, c])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)


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
