"""The host and software fingerprint: every host field read or explained, git state of the
repositories a campaign names, the environment variables that matter with secrets redacted."""

from __future__ import annotations

import hashlib
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from reportgen.observe import fingerprint

HOST_KEYS = {
    "hostname", "cpu_model", "cpu_count", "cpu_affinity", "cpu_mhz_now", "cpu_max_mhz",
    "frequency_governor", "turbo", "numa_nodes", "memory_gib", "os", "kernel", "machine",
    "virtualization", "python", "container", "cgroup_limits",
}  # fmt: skip


def why_not(value: Any) -> bool:
    """``{"error": "why"}``: a field that could not be read, with a reason."""
    return isinstance(value, dict) and set(value) == {"error"} and bool(value["error"])


def test_every_host_field_is_a_value_or_says_why_not() -> None:
    host = fingerprint.host()
    assert set(host) == HOST_KEYS
    assert host["cpu_count"] >= 1 and host["memory_gib"] > 0 and host["kernel"]
    # each of these is read from sysfs where the file is there, else says why not
    cpufreq = Path("/sys/devices/system/cpu/cpu0/cpufreq")
    governor = cpufreq / "scaling_governor"
    if governor.exists():
        assert host["frequency_governor"] == governor.read_text().strip()
    else:
        assert why_not(host["frequency_governor"]), host["frequency_governor"]
    if (cpufreq / "cpuinfo_max_freq").exists():
        assert isinstance(host["cpu_max_mhz"], int) and host["cpu_max_mhz"] > 0
    else:
        assert why_not(host["cpu_max_mhz"]), host["cpu_max_mhz"]
    assert isinstance(host["turbo"], bool) or why_not(host["turbo"]), host["turbo"]
    nodes = sorted(Path("/sys/devices/system/node").glob("node[0-9]*"))
    if nodes:
        assert sorted(host["numa_nodes"]) == [n.name for n in nodes]
        assert all(isinstance(v, str) and v for v in host["numa_nodes"].values())
    else:
        assert why_not(host["numa_nodes"]), host["numa_nodes"]
    assert isinstance(host["container"]["detected"], bool)
    assert set(host["cgroup_limits"]) == {"cpu.max", "memory.max"}


def test_git_state_of_a_named_repository(tmp_path: Path) -> None:
    repo = tmp_path / "engine"
    repo.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    git("init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    git("add", "a.py")
    git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "one")
    clean = fingerprint.git_state(repo)
    assert len(clean["commit"]) == 40 and clean["dirty"] is False
    (repo / "a.py").write_text("x = 2\n")
    dirty = fingerprint.git_state(repo)
    assert dirty["commit"] == clean["commit"] and dirty["dirty"] is True
    assert dirty["changed_files"] == 1 and dirty["describe"].endswith("-dirty")
    assert fingerprint.git_state(tmp_path / "nope") == {
        "path": str(tmp_path / "nope"),
        "error": "no such folder",
    }
    assert fingerprint.git_state(tmp_path)["error"] == "not a git checkout"


def test_environment_variables_that_matter_with_secrets_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("MY_SETTING", "7")
    monkeypatch.setenv("UNRELATED", "x")
    sw = fingerprint.software(env_keys=["MY_SETTING"])
    env = sw["env"]
    assert env["NCCL_DEBUG"] == "INFO" and env["MY_SETTING"] == "7"
    assert "UNRELATED" not in env
    assert "hf_abcdefghijklmnopqrstuvwxyz" not in str(sw) and "HF_TOKEN" in env
    assert sw["reportgen"]["version"] and len(sw["installed_packages_sha256"]) == 16
    # read from the metadata's headers alone: the same set as the full parse names
    full = sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions())
    assert sw["installed_packages_count"] == len(full)
    assert (
        sw["installed_packages_sha256"] == hashlib.sha256("\n".join(full).encode()).hexdigest()[:16]
    )
    assert sw["torch_stack"] == fingerprint.torch_stack()  # the probe below, once a process


def test_torch_stack_is_what_the_probe_saw_or_says_why_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(fingerprint.NO_TORCH_PROBE_ENV, raising=False)  # the tests' default
    try:
        version: str | None = metadata.version("torch")
    except metadata.PackageNotFoundError:
        version = None
    stack = fingerprint.torch_stack()
    if version is None:
        assert stack == {"error": "torch is not installed in reportgen's Python"}
    else:  # make test installs torch's CPU build
        assert stack["torch"] == version and isinstance(stack["cuda_available"], bool), stack
        assert stack["cuda_runtime"] is None or isinstance(stack["cuda_runtime"], str)
        assert isinstance(stack["nccl"], str) or why_not(stack["nccl"]), stack
        assert (
            isinstance(stack["cudnn"], int)
            or why_not(stack["cudnn"])
            or (stack["cudnn"] is None and not stack["cuda_available"])
        ), stack

    def no_subprocess(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("torch probed a second time")

    # once a process: asked again, it answers without starting a probe (a copy of it)
    monkeypatch.setattr(fingerprint.subprocess, "run", no_subprocess)
    again = fingerprint.torch_stack()
    assert again == stack and again is not fingerprint.torch_stack()
    # left out when asked to (the tests' runs as processes of their own)
    monkeypatch.setenv(fingerprint.NO_TORCH_PROBE_ENV, "1")
    assert fingerprint.torch_stack() == {"error": "not probed (REPORTGEN_NO_TORCH_PROBE is set)"}
    monkeypatch.setenv(fingerprint.NO_TORCH_PROBE_ENV, "0")
    assert fingerprint.torch_stack() == stack
    monkeypatch.undo()
    monkeypatch.delenv(fingerprint.NO_TORCH_PROBE_ENV, raising=False)
    # a probe that fails says why, and a version not probed before is probed anew
    monkeypatch.setattr(fingerprint, "_torch_stacks", {})
    monkeypatch.setattr(fingerprint.metadata, "version", lambda name: "0.0-test")
    monkeypatch.setattr(fingerprint, "TORCH_PROBE", "raise SystemExit('no torch here')")
    assert fingerprint.torch_stack() == {"error": "probing torch failed: no torch here"}


def test_flatten_for_tables() -> None:
    from reportgen.render.fmt import field_rows

    data = {"a": {"b": 1, "c": {"error": "Not Supported"}}, "d": [{"e": None}], "f": [1, 2]}
    data["g"], data["h"] = {}, []
    assert field_rows(data) == [
        ("a.b", "1"),
        ("a.c", "unavailable: Not Supported"),
        ("d[0].e", "-"),
        ("f", "1, 2"),
        ("g", "-"),
        ("h", "-"),
    ]
    assert field_rows({"error": "NVML not found"}) == [("", "unavailable: NVML not found")]
