"""Campaigns on a GPU host over SSH (``host.executor = "ssh"``), against a real OpenSSH server
on 127.0.0.1 with key authentication: the servers and the load run through
``python -m reportgen.run.remote`` there, the run directory stays here; a connection killed
mid-level leaves nothing running there, the run stops as an interrupted one does, and
``--resume`` finishes it."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reportgen.observe.fingerprint import NO_TORCH_PROBE_ENV
from tests.conftest import (
    demo_outcomes,
    free_port,
    lighter_demo,
    port_open,
    reportgen_main,
    two_experiments,
)

SSHD = Path("/usr/sbin/sshd")


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> Iterator[dict[str, Any]]:
    """An OpenSSH server of this test's own on a free port of 127.0.0.1, one key allowed.
    Its sessions get the tests' cache (the client's ceiling, measured once for the session)
    and no torch probe, as a GPU host's own environment would hold its cache: without them
    each campaign's far side measured its ceiling again (about 18 s of two cores)."""
    if not SSHD.exists() or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("no OpenSSH here (scripts/bootstrap.sh --test installs it)")
    d = tmp_path_factory.mktemp("sshd")
    for name in ("host", "user"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True
        )
    (d / "authorized_keys").write_text((d / "user.pub").read_text())
    port = free_port()
    (d / "config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nStrictModes no\nUsePAM no\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PermitRootLogin prohibit-password\n"
        f"PidFile {d / 'sshd.pid'}\n"
        f"SetEnv XDG_CACHE_HOME={cache} {NO_TORCH_PROBE_ENV}=1\n"
    )
    try:
        Path("/run/sshd").mkdir(exist_ok=True)  # its privilege separation folder
    except OSError:
        pytest.skip("cannot make /run/sshd for an OpenSSH server here")
    log = (d / "sshd.log").open("wb")
    proc = subprocess.Popen(
        [str(SSHD), "-D", "-e", "-f", str(d / "config")],
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the OpenSSH server did not start: " + (d / "sshd.log").read_text())
    yield {"port": port, "key": str(d / "user"), "user": getpass.getuser(), "dir": d}
    os.killpg(proc.pid, signal.SIGTERM)  # it and every session it forked
    proc.wait(timeout=10)
    log.close()


def _campaign(tmp_path: Path, sshd: dict[str, Any], port: int, *, seconds: float = 0) -> Path:
    """Two experiments of the simulator, run over SSH; ``seconds``: the baseline's levels
    last that long (time to cut the connection mid-level)."""
    amount = f"duration_s = {seconds}" if seconds else "requests_per_level = 12"
    ssh = (
        f'executor = "ssh"\nssh = {{ host = "127.0.0.1", user = "{sshd["user"]}", '
        f'port = {sshd["port"]}, identity_file = "{sshd["key"]}", python = "{sys.executable}", '
        f'workdir = "{tmp_path / "there"}", options = ["-o", "StrictHostKeyChecking=no", '
        '"-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"] }'
    )
    return two_experiments(tmp_path / "remote.toml", "remote", ssh, port, amount)


@pytest.mark.slow
def test_a_campaign_runs_over_ssh_and_its_results_stay_here(
    tmp_path: Path, cache: Path, sshd: dict[str, Any]
) -> None:
    port = free_port()
    path = _campaign(tmp_path, sshd, port)
    res = reportgen_main(
        "run", path, "--output", tmp_path / "out", "--quiet", "--no-pdf", cache=cache
    )
    assert res.returncode == 0, res.stdout + res.stderr
    (run_dir,) = (p.parent for p in (tmp_path / "out" / "remote").glob("*/results.json"))
    data = json.loads((run_dir / "results.json").read_text())
    where = data["environment"]["executor"]
    assert where["kind"] == "ssh" and where["host"] == f"127.0.0.1:{sshd['port']}"
    assert where["ssh_rtt_ms"] > 0 and where["reportgen"] == data["reportgen_version"]
    base, faster = data["experiments"]
    assert base["status"] == faster["status"] == "ok"
    assert faster["decision"]["verdict"] == "adopted"  # 2 ms between tokens against 4
    assert base["stop"]["group_gone"] and base["stop"]["port_free"]
    for e in (base, faster):  # its tables and its server's log came back here
        assert (run_dir / "requests" / f"{e['id']}.parquet").exists()
        assert (run_dir / e["log_file"]).exists()
    assert not list((tmp_path / "there").iterdir())  # nothing left behind there
    assert not port_open(port)
    html = (run_dir / "report.html").read_text()
    assert f"reached</th><td>over SSH: 127.0.0.1:{sshd['port']} from " in html
    assert "<dt>Ran on</dt><dd>" in html  # the host's name
    assert reportgen_main("verify", run_dir).returncode == 0


@pytest.mark.slow
def test_a_connection_cut_mid_level_leaves_nothing_running_there_and_resume_goes_on(
    tmp_path: Path, cache: Path, sshd: dict[str, Any]
) -> None:
    port = free_port()
    path = _campaign(tmp_path, sshd, port, seconds=5)
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    out = tmp_path / "out"
    run = subprocess.Popen(
        [sys.executable, "-m", "reportgen", "run", str(path), "--output", str(out),
         "--quiet", "--no-pdf"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not port_open(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert port_open(port), "the server there never started"
        time.sleep(3)  # past the warm-up, into the first level
        client = _children(run.pid, "ssh")
        assert client, "no ssh client under the run"
        for pid in client:  # the connection dies as a dropped link would end it
            os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        while port_open(port) and time.monotonic() - t0 < 20:
            time.sleep(0.2)
        assert not port_open(port), "the server there outlived its connection"
        gone = time.monotonic() - t0
        stdout, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert gone < 15
    assert run.returncode == 1, stdout + stderr
    assert "the connection to 127.0.0.1:" in stderr and "--resume goes on" in stderr
    (run_dir,) = (p.parent for p in (out / "remote").glob("*/results.json"))
    data = json.loads((run_dir / "results.json").read_text())
    assert data["status"] == "incomplete"
    base = data["experiments"][0]
    assert base["status"] == "interrupted"
    assert base["reason"].startswith("the connection to 127.0.0.1:")
    assert (run_dir / "report.html").exists()  # the partial report, rendered
    t0 = time.monotonic()  # the far side cleans up once its server is stopped
    while list((tmp_path / "there").glob("*/logs")) and time.monotonic() - t0 < 20:
        time.sleep(0.2)
    assert not list((tmp_path / "there").glob("*/logs"))  # stopped there, its folder gone

    # the baseline again, then the rest
    res = reportgen_main("run", path, "--resume", run_dir, "--quiet", "--no-pdf", cache=cache)
    assert res.returncode == 0, res.stdout + res.stderr
    data = json.loads((run_dir / "results.json").read_text())
    assert data["status"] == "complete"
    assert [e["status"] for e in data["experiments"]] == ["ok", "ok"]


def _children(parent: int, name: str) -> list[int]:
    """The processes named ``name`` below ``parent`` (from /proc)."""
    kids: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(entry.name))
        names[int(entry.name)] = comm
    found, todo = [], [parent]
    while todo:
        pid = todo.pop()
        for kid in kids.get(pid, []):
            if names.get(kid) == name:
                found.append(kid)
            todo.append(kid)
    return found


def test_a_host_that_cannot_be_reached_is_one_line_and_nothing_starts(
    tmp_path: Path, sshd: dict[str, Any]
) -> None:
    port = free_port()
    path = _campaign(tmp_path, sshd, port)
    wrong = path.read_text().replace(f"port = {sshd['port']}", f"port = {free_port()}")
    path.write_text(wrong)
    res = reportgen_main("run", path, "--output", tmp_path / "out", "--quiet", "--no-pdf")
    assert res.returncode != 0
    assert "cannot connect over SSH" in res.stderr and "Traceback" not in res.stderr
    path.write_text(
        _campaign(tmp_path, sshd, port).read_text().replace(sys.executable, "/nonexistent/python")
    )
    res = reportgen_main("run", path, "--output", tmp_path / "out", "--quiet", "--no-pdf")
    assert "cannot import reportgen; nothing was started" in res.stderr, res.stderr
    assert not (tmp_path / "out" / "remote").exists() or not list(
        (tmp_path / "out" / "remote").glob("*/results.json")
    )


def test_ssh_on_the_command_line_names_the_host(tmp_path: Path) -> None:
    res = reportgen_main("run", "campaigns/demo.toml", "--ssh", "bad host", "--output", tmp_path)
    assert res.returncode == 2
    assert "--ssh = 'bad host': not a host: give HOST or USER@HOST" in res.stderr
    res = reportgen_main(
        "run", "campaigns/demo.toml", "--ssh", "nosuchhost.invalid", "--output", tmp_path
    )
    assert res.returncode != 0 and "nosuchhost.invalid: cannot connect over SSH" in res.stderr
    assert not list(tmp_path.glob("*/*/results.json"))  # nothing started


def test_where_it_runs_is_checked_before_anything_starts(tmp_path: Path) -> None:
    base = '[campaign]\nname = "x"\ntitle = "t"\n[server]\nengine = "sim"\n' + (
        '[[experiment]]\nid = "b"\nwhy = "w"\n'
    )
    cases = {
        '[host]\nexecutor = "ssh"\n': 'host: executor = "ssh" needs host.ssh = { host = ',
        '[host]\nexecutor = "ssh"\nssh = { host = "http://gpu:22" }\n': (
            "host.ssh.host = 'http://gpu:22': the GPU host as ssh takes it"
        ),
        '[host]\nexecutor = "slurm"\nslurm = { time = "soon" }\n': (
            "host.slurm.time = 'soon': a time limit as Slurm writes it"
        ),
        "[campaign]\n": "campaign.parallel = 2 runs experiments at once on nodes",
    }
    for extra, said in cases.items():
        text = (
            base + extra
            if extra != "[campaign]\n"
            else base.replace('title = "t"\n', 'title = "t"\nparallel = 2\n')
        )
        path = tmp_path / "c.toml"
        path.write_text(text)
        res = reportgen_main("validate", path)
        assert res.returncode == 2 and said in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 2  # the problem, then the count


@pytest.mark.slow
def test_the_demo_campaign_runs_over_ssh_as_typed_with_ssh_on_the_command_line(
    tmp_path: Path, cache: Path, sshd: dict[str, Any]
) -> None:
    """The demo (its objective's two levels, two repetitions: ``lighter_demo``), changed but
    for how to reach the host (a key, a port: what ~/.ssh/config would hold), run with
    `--ssh`: the same outcomes as run here. Its two small effects are left out: judging them
    is the same over SSH (the tables come back, test_a_campaign_runs_over_ssh_...), and each
    experiment over SSH is a far side of its own: alone on two cores, the test took 25-29
    CPU-s of the machine with them and 19-20 without."""
    port = free_port()
    text = lighter_demo(port, without=("bigger-batches", "prefill-chunk"))
    ssh = (
        f'\n[host]\nssh = {{ host = "ignored", port = {sshd["port"]}, '
        f'identity_file = "{sshd["key"]}", python = "{sys.executable}", '
        f'workdir = "{tmp_path / "there"}", options = ["-o", "StrictHostKeyChecking=no", '
        '"-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"] }\n'
    )
    path = tmp_path / "demo.toml"
    path.write_text(text + ssh)
    res = reportgen_main(
        "run", path, "--ssh", f"{sshd['user']}@127.0.0.1", "--output", tmp_path / "out",
        "--quiet", "--no-pdf", "--json", cache=cache,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    run_dir = demo_outcomes(res.stdout)
    data = json.loads((run_dir / "results.json").read_text())
    assert data["environment"]["executor"]["host"] == f"{sshd['user']}@127.0.0.1:{sshd['port']}"
    assert (run_dir / "report.html").exists() and not port_open(port)
    assert reportgen_main("verify", run_dir).returncode == 0
