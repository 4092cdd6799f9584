"""Where a run's GPU facts come from: the driver (``nvml.NvmlSource``) or a capture recorded on
a real GPU and replayed (``FakeSource``: the tests use one recorded on an H200, also as several
GPUs where no host has them); ``open_source`` picks NVML when it works and says why not
otherwise. Needs only the standard library (and nvidia-ml-py for NVML)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from reportgen.observe.gpu import TELEMETRY_FIELDS, GpuSource, GpuUnavailable
from reportgen.observe.nvml import NvmlSource


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
        data: dict[str, Any] = capture if isinstance(capture, dict) else read_capture(capture)
        self.capture = data
        self.samples: list[list[dict[str, Any]]] = data["samples"]
        self.position = 0
        # every field a sample has today, None where the capture predates it (energy_mj)
        self.blank: dict[str, Any] = dict.fromkeys(TELEMETRY_FIELDS)
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
        # said wherever the GPUs' facts are shown: not this host's, and not this load's power
        info.setdefault("replayed", "a capture recorded on a real GPU, replayed")
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
            return [{**self.blank, **row, "t": t} for row in rows]
        out = []
        for k in range(self.gpus):
            g, copy = self._copy(k)
            ahead = copy * len(self.samples) // self.copies
            rows = self.samples[(position + ahead) % len(self.samples)]
            out += [{**self.blank, **row, "gpu": k, "t": t} for row in rows if row.get("gpu") == g]
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


def read_capture(path: str | Path) -> dict[str, Any]:
    """A capture file as ``record`` wrote it, or xz-compressed (``.json.xz``)."""
    raw = Path(path).read_bytes()
    if str(path).endswith(".xz"):
        import lzma

        raw = lzma.decompress(raw)
    return dict(json.loads(raw))


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
