"""GPUs as NVIDIA's driver reports them, through nvidia-ml-py (``NvmlSource``): what each GPU is,
how it runs, what went wrong; every field best-effort (``{"error": why}`` where it cannot be
read). Needs only the standard library and nvidia-ml-py, as ``gpu`` does."""

from __future__ import annotations

import contextlib
import ctypes
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reportgen.observe.gpu import P2P_STATUS, TOPOLOGY_LEVELS, GpuUnavailable


def _text(value: Any) -> Any:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


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
                    "energy_mj": _num(self._call("nvmlDeviceGetTotalEnergyConsumption", h)),
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
