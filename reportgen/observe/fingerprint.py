"""The environment a run happened in: host, software and GPUs, each field best-effort.

Every collector returns plain data and never raises: a field that cannot be read is recorded
as ``{"error": "why"}`` so the report can say why it is missing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from reportgen import __version__, engines
from reportgen.observe.environment import Environment
from reportgen.observe.gpu import GpuSource
from reportgen.observe.sources import open_source
from reportgen.redact import redact_env

# reportgen's, the libraries every engine stands on, and each engine's own (``Engine.packages``)
PACKAGES = tuple(
    dict.fromkeys(("reportgen", "httpx", "torch", *engines.packages(), "triton", "nvidia-ml-py"))
)
ENV_ALLOWLIST = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "LD_LIBRARY_PATH")
# Variables with these prefixes change how engines and their libraries run (values that look
# secret, HF_TOKEN say, are redacted).
ENV_PREFIXES = (
    "CUDA_",
    "NCCL_",
    "NVIDIA_",
    "TORCH_",
    "PYTORCH_",
    "FLASHINFER_",
    "TRITON_",
    "HF_",
    *engines.env_prefixes(),  # each engine's own (``Engine.env_prefixes``)
)
TORCH_PROBE = """
import json, torch
out = {"torch": torch.__version__, "cuda_runtime": torch.version.cuda,
       "cuda_available": torch.cuda.is_available()}
try:
    out["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
except Exception as exc:
    out["nccl"] = {"error": str(exc)}
try:
    out["cudnn"] = torch.backends.cudnn.version()
except Exception as exc:
    out["cudnn"] = {"error": str(exc)}
print(json.dumps(out))
"""


def _read(path: str) -> str | None:
    with contextlib.suppress(OSError):
        return Path(path).read_text().strip()
    return None


def _sys(path: str, why: str) -> Any:
    """A sysfs/procfs value, or ``{"error": why}`` when the file is not there."""
    value = _read(path)
    return value if value is not None else {"error": why}


def host() -> dict[str, Any]:
    cpu_model = None
    mhz = []
    cpuinfo = _read("/proc/cpuinfo") or ""
    for line in cpuinfo.splitlines():
        if line.startswith("model name") and cpu_model is None:
            cpu_model = line.split(":", 1)[1].strip()
        elif line.startswith("cpu MHz"):
            with contextlib.suppress(ValueError):
                mhz.append(float(line.split(":", 1)[1]))
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
        "cpu_mhz_now": round(sum(mhz) / len(mhz)) if mhz else None,
        "cpu_max_mhz": _khz_to_mhz(
            _sys("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "no cpufreq")
        ),
        "frequency_governor": _sys(
            "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            "no cpufreq in this kernel or VM (the hypervisor sets the frequency)",
        ),
        "turbo": _turbo(),
        "numa_nodes": _numa(),
        "memory_gib": round(mem_kib / 1024**2, 1) if mem_kib else None,
        "os": os_name or platform.platform(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "virtualization": _virtualization(cpuinfo),
        "python": sys.version.split()[0],
        "container": _container(),
        "cgroup_limits": _cgroup_limits(),
    }


def _khz_to_mhz(value: Any) -> Any:
    with contextlib.suppress(TypeError, ValueError):
        return int(value) // 1000
    return value


def _turbo() -> Any:
    boost = _read("/sys/devices/system/cpu/cpufreq/boost")  # acpi-cpufreq, amd-pstate
    if boost is not None:
        return boost == "1"
    no_turbo = _read("/sys/devices/system/cpu/intel_pstate/no_turbo")
    if no_turbo is not None:
        return no_turbo == "0"
    return {"error": "not readable (no cpufreq boost or intel_pstate here)"}


def _numa() -> Any:
    base = Path("/sys/devices/system/node")
    nodes = sorted(p.name for p in base.glob("node[0-9]*")) if base.is_dir() else []
    if not nodes:
        return {"error": "no NUMA information in sysfs"}
    return {n: _read(str(base / n / "cpulist")) for n in nodes}


def _virtualization(cpuinfo: str) -> str | None:
    """The hypervisor, when the CPU says it runs under one (its "hypervisor" flag)."""
    flags = next((ln for ln in cpuinfo.splitlines() if ln.startswith("flags")), "")
    if " hypervisor" not in flags:
        return None
    vendor = _read("/sys/class/dmi/id/sys_vendor") or _read("/sys/hypervisor/type")
    return vendor or "a hypervisor"


def _container() -> dict[str, Any]:
    """Signs of a container: runtime marker files, the init process's cgroup, Kubernetes."""
    signs = []
    if os.path.exists("/.dockerenv"):
        signs.append("/.dockerenv")
    if os.path.exists("/run/.containerenv"):
        signs.append("/run/.containerenv (podman)")
    cgroup = _read("/proc/1/cgroup") or ""
    for word in ("docker", "kubepods", "containerd", "libpod", "lxc"):
        if word in cgroup:
            signs.append(f"cgroup of PID 1 mentions {word}")
    if "KUBERNETES_SERVICE_HOST" in os.environ:
        signs.append("KUBERNETES_SERVICE_HOST is set")
    image = next(
        (os.environ[k] for k in ("CONTAINER_IMAGE", "IMAGE_NAME") if k in os.environ), None
    )
    if image is None and "NVIDIA_PRODUCT_NAME" in os.environ:  # NVIDIA's base images
        image = (
            " ".join(
                os.environ[k]
                for k in ("NVIDIA_PRODUCT_NAME", "NVIDIA_PYTORCH_VERSION", "CUDA_VERSION")
                if k in os.environ
            )
            + " (an NVIDIA container image)"
        )
    return {"detected": bool(signs), "signs": signs, "image": image}


def _cgroup_limits() -> dict[str, Any]:
    """cgroup v2 CPU and memory limits of this process ("max": none)."""
    rel = ""
    for line in (_read("/proc/self/cgroup") or "").splitlines():
        if line.startswith("0::"):
            rel = line[3:].strip()
    base = Path("/sys/fs/cgroup") / rel.lstrip("/")
    out: dict[str, Any] = {}
    for name in ("cpu.max", "memory.max"):
        value = _read(str(base / name)) or _read(f"/sys/fs/cgroup/{name}")
        out[name] = value if value is not None else {"error": "no cgroup v2 limit file"}
    return out


def git_state(path: Path) -> dict[str, Any]:
    """Commit and uncommitted changes of the git checkout at ``path`` (best-effort)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(path), *args], capture_output=True, text=True, timeout=10
        ).stdout.strip()

    if not path.exists():
        return {"path": str(path), "error": "no such folder"}
    try:
        commit = git("rev-parse", "HEAD")
        if not commit:
            return {"path": str(path), "error": "not a git checkout"}
        changes = git("status", "--porcelain")
        return {
            "path": str(path),
            "commit": commit,
            "describe": git("describe", "--always", "--dirty", "--tags") or None,
            "dirty": bool(changes),
            "changed_files": len(changes.splitlines()),
        }
    except (OSError, subprocess.SubprocessError) as exc:
        return {"path": str(path), "error": f"git failed: {exc}"}


def _git_commit() -> dict[str, Any]:
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return {"commit": None, "dirty": None}
    state = git_state(root)
    return {"commit": state.get("commit"), "dirty": state.get("dirty")}


# Set (to anything but "" or "0") to leave the torch stack out of the fingerprint: the field
# then says it was not probed. For the test suite's runs, which do not test torch.
NO_TORCH_PROBE_ENV = "REPORTGEN_NO_TORCH_PROBE"
# (python, torch version, CUDA_VISIBLE_DEVICES) -> what the probe said
_torch_stacks: dict[tuple[str, str, str | None], dict[str, Any]] = {}


def torch_stack(timeout_s: float = 90) -> dict[str, Any]:
    """torch, its CUDA runtime, NCCL and cuDNN as this Python sees them (in a subprocess:
    importing torch takes seconds and must not stay in reportgen's process). Probed once per
    process, torch version and CUDA_VISIBLE_DEVICES: a second run in one process reuses it."""
    if os.environ.get(NO_TORCH_PROBE_ENV, "") not in ("", "0"):
        return {"error": f"not probed ({NO_TORCH_PROBE_ENV} is set)"}
    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return {"error": "torch is not installed in reportgen's Python"}
    key = (sys.executable, version, os.environ.get("CUDA_VISIBLE_DEVICES"))
    if key not in _torch_stacks:
        _torch_stacks[key] = _probe_torch(timeout_s)
    return dict(_torch_stacks[key])


def _probe_torch(timeout_s: float) -> dict[str, Any]:
    try:
        out = subprocess.run(
            [sys.executable, "-c", TORCH_PROBE], capture_output=True, text=True, timeout=timeout_s
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return {"error": f"probing torch failed: {exc}"}
    try:
        return dict(json.loads(out.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return {"error": f"probing torch failed: {out.stderr.strip()[-300:]}"}


def _name_version(dist: metadata.Distribution) -> tuple[str | None, str | None]:
    """A distribution's name and version from its metadata's headers alone: what
    ``dist.metadata`` gives, read 13x faster (it parses the whole file, long description
    included, with the email package: 0.09 CPU-s for 112 packages here, 0.007 this way)."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    name = version = None
    for line in text.splitlines():
        if not line:  # the headers end at the first empty line
            break
        if line.startswith("Name:"):
            name = line[5:].strip()
        elif line.startswith("Version:"):
            version = line[8:].strip()
    return name, version


def packages() -> dict[str, str | None]:
    """The versions of the packages that serve and measure (``PACKAGES``), None where absent."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def software(repos: list[Path] | None = None, env_keys: list[str] | None = None) -> dict[str, Any]:
    """Versions, this checkout's and ``repos``' git state, the installed package set's hash,
    the torch stack, and the environment variables that matter (allowlist, engine prefixes
    and ``env_keys``), secret-looking values redacted."""
    versions = packages()
    dists = sorted(
        f"{name}=={version}"
        for name, version in map(_name_version, metadata.distributions())
        if name
    )
    return {
        "reportgen": {"version": __version__, **_git_commit()},
        "packages": versions,
        "installed_packages_sha256": hashlib.sha256("\n".join(dists).encode()).hexdigest()[:16],
        "installed_packages_count": len(dists),
        "torch_stack": torch_stack(),
        "repos": [git_state(p) for p in repos or []],
        "env": redact_env(
            {
                k: v
                for k, v in sorted(os.environ.items())
                if k in ENV_ALLOWLIST or k.startswith(ENV_PREFIXES) or k in (env_keys or [])
            }
        ),
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


def collect(
    source: GpuSource | None = None,
    why: str | None = None,
    repos: list[Path] | None = None,
    env_keys: list[str] | None = None,
) -> dict[str, Any]:
    return {"host": host(), "software": software(repos, env_keys), "gpus": gpus(source, why)}


def this_node(source: GpuSource | None, why: str | None) -> dict[str, Any]:
    """This host as a ``Node`` (GPUs, driver, serving packages), read without the whole
    fingerprint (no torch probe, no package set): what each experiment run elsewhere sends
    back of where it ran."""
    here = Environment.of({"gpus": gpus(source, why), "software": {"packages": packages()}})
    return here.node.fields()
