"""The host and software fingerprint: every host field read or explained, git state of the
repositories a campaign names, the environment variables that matter with secrets redacted."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from reportgen.observe import fingerprint

HOST_KEYS = {
    "hostname", "cpu_model", "cpu_count", "cpu_affinity", "cpu_mhz_now", "cpu_max_mhz",
    "frequency_governor", "turbo", "numa_nodes", "memory_gib", "os", "kernel", "machine",
    "virtualization", "python", "container", "cgroup_limits",
}  # fmt: skip


def test_every_host_field_is_a_value_or_says_why_not() -> None:
    host = fingerprint.host()
    assert set(host) == HOST_KEYS
    assert host["cpu_count"] >= 1 and host["memory_gib"] > 0 and host["kernel"]
    for key in ("frequency_governor", "turbo", "numa_nodes", "cpu_max_mhz"):
        value = host[key]
        assert not isinstance(value, dict) or "error" not in value or value["error"], key
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
    assert "error" in sw["torch_stack"] or "torch" in sw["torch_stack"]


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
