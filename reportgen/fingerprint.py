"""The environment a run happened in: host, software and GPUs, each field best-effort.

Every collector returns plain data and never raises: a field that cannot be read is recorded
as ``{"error": "why"}`` so the report can say why it is missing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from reportgen import __version__
from reportgen.gpu import GpuSource, open_source
from reportgen.redact import redact_env

PACKAGES = (
    "reportgen",
    "httpx",
    "torch",
    "transformers",
    "sglang",
    "vllm",
    "flashinfer-python",
    "triton",
    "nvidia-ml-py",
)
ENV_ALLOWLIST = (
    "CUDA_VISIBLE_DEVICES",
    "NCCL_DEBUG",
    "NCCL_IB_DISABLE",
    "NCCL_P2P_DISABLE",
    "OMP_NUM_THREADS",
    "PYTORCH_CUDA_ALLOC_CONF",
    "HF_HUB_OFFLINE",
)


def _read(path: str) -> str | None:
    with contextlib.suppress(OSError):
        return Path(path).read_text().strip()
    return None


def host() -> dict[str, Any]:
    cpu_model = None
    cpuinfo = _read("/proc/cpuinfo") or ""
    for line in cpuinfo.splitlines():
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break
    mem_kib = None
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    os_name = None
    for line in (_read("/etc/os-release") or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            os_name = line.split("=", 1)[1].strip('"')
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model or platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": round(mem_kib / 1024**2, 1) if mem_kib else None,
        "os": os_name or platform.platform(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "container": os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"),
    }


def _git_commit() -> dict[str, Any]:
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return {"commit": None, "dirty": None}
    try:
        commit = (
            subprocess.run(
                ["git", "-C", str(root), "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            or None
        )
        dirty = bool(
            subprocess.run(
                ["git", "-C", str(root), "status", "--porcelain"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
        )
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": dirty}


def software() -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    dists = sorted(
        f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions() if d.metadata["Name"]
    )
    return {
        "reportgen": {"version": __version__, **_git_commit()},
        "packages": versions,
        "installed_packages_sha256": hashlib.sha256("\n".join(dists).encode()).hexdigest()[:16],
        "installed_packages_count": len(dists),
        "env": redact_env({k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ}),
    }


def gpus(source: GpuSource | None = None, why: str | None = None) -> dict[str, Any]:
    """GPUs through ``source`` (NVML by default); ``{"available": False, "reason": ...}``
    when there is none."""
    own = source is None and why is None
    if own:
        source, why = open_source()
    if source is None:
        return {"available": False, "reason": why or "no GPU source"}
    try:
        return source.info()
    except Exception as exc:  # a fingerprint must never stop a run
        return {"available": False, "reason": f"reading the GPUs failed: {exc}"}
    finally:
        if own:
            source.close()


def collect(source: GpuSource | None = None, why: str | None = None) -> dict[str, Any]:
    return {"host": host(), "software": software(), "gpus": gpus(source, why)}


def host_mismatches(expect: dict[str, Any], gpu_info: dict[str, Any]) -> list[str]:
    """What differs between a campaign's host expectations and this host (empty: matches)."""
    out: list[str] = []
    if not any(v is not None for v in expect.values()):
        return out
    devices = gpu_info.get("devices", []) if gpu_info.get("available") else []
    if not gpu_info.get("available"):
        out.append(f"no GPUs visible ({gpu_info.get('reason', 'unknown reason')})")
    count = expect.get("gpu_count")
    if count is not None and len(devices) != count and gpu_info.get("available"):
        out.append(f"expected {count} GPUs, found {len(devices)}")
    cc = expect.get("compute_capability")
    if cc is not None:
        seen = sorted({str(d.get("compute_capability")) for d in devices})
        if devices and seen != [cc]:
            out.append(f"expected compute capability {cc}, found {', '.join(seen)}")
    name = expect.get("gpu_name")
    if name is not None:
        names = sorted({str(d.get("name")) for d in devices})
        if devices and not all(name.lower() in n.lower() for n in names):
            out.append(f"expected GPU name containing {name!r}, found {', '.join(names)}")
    return out


def flatten(data: Any, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted key, text) pairs of a nested fingerprint, for tables; an unreadable field
    shows as "unavailable: why"."""
    if isinstance(data, dict) and set(data) == {"error"}:
        return [(prefix, f"unavailable: {data['error']}")]
    if isinstance(data, dict):
        out: list[tuple[str, str]] = []
        for key, value in data.items():
            out += flatten(value, f"{prefix}.{key}" if prefix else str(key))
        return out or [(prefix, "-")]
    if isinstance(data, list) and data and all(isinstance(x, dict) for x in data):
        out = []
        for i, value in enumerate(data):
            out += flatten(value, f"{prefix}[{i}]")
        return out
    if isinstance(data, list):
        return [(prefix, ", ".join(str(x) for x in data) or "-")]
    return [(prefix, "-" if data is None else str(data))]
