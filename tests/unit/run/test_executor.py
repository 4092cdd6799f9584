"""Before a run elsewhere: what the far side's answer to "which reportgen?" says when it fails."""

from __future__ import annotations

import subprocess

import pytest

from reportgen.campaign.host import SlurmHost, SshHost
from reportgen.errors import ReportgenError
from reportgen.run import executor


def _answer(code: int, err: str, out: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(["srun"], code, out, err)


def test_a_failure_on_the_way_there_is_said_in_its_own_words() -> None:
    """Slurm with no controller said "python there cannot import reportgen"; srun's error was
    the cause."""
    slurm = executor.Slurm(SlurmHost(python="/shared/venv/bin/python"), None)  # type: ignore[arg-type]
    no_controller = _answer(
        1,
        "srun: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
        "srun: error: fetch_config: DNS SRV lookup failed\n"
        "srun: error: _establish_config_source: failed to fetch config\n"
        "srun: fatal: Could not establish a configuration source\n",
    )
    with pytest.raises(ReportgenError) as said:
        slurm._same_version(no_controller)
    text = str(said.value)
    assert text.startswith("the default partition: asking /shared/venv/bin/python there for ")
    assert text.endswith("failed: srun: fatal: Could not establish a configuration source; "
                         "nothing was started")  # fmt: skip
    assert "cannot import" not in text
    # a Python there that cannot import reportgen, or is not there: install it, name it
    ssh = executor.Ssh(SshHost(host="gpu-box", python="/opt/py"), None)  # type: ignore[arg-type]
    for code, err in (
        (1, "Traceback ...\nModuleNotFoundError: No module named 'reportgen'\n"),
        (127, "bash: line 1: /opt/py: No such file or directory\n"),
    ):
        with pytest.raises(ReportgenError) as said:
            ssh._same_version(_answer(code, err))
        assert str(said.value).startswith("gpu-box: /opt/py there cannot import reportgen")
        assert "name that Python in host.ssh.python" in str(said.value)
