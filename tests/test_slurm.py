"""Campaigns as Slurm job steps (``host.executor = "slurm"``), on a real Slurm cluster of one
machine (``scripts/slurm_local.sh``: munge, slurmctld and two slurmd nodes on 127.0.0.1):
each experiment runs where the cluster puts it and says where; a job cancelled mid-level
leaves nothing running, the run stops as an interrupted one does, and ``--resume`` goes on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port, port_open, reportgen_main, two_experiments

SCRIPT = ROOT / "scripts" / "slurm_local.sh"


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """SLURM_CONF of a cluster of this test module's own, stopped after it."""
    if shutil.which("slurmctld") is None or shutil.which("munged") is None:
        pytest.skip("no Slurm here (scripts/bootstrap.sh --test installs slurm-wlm and munge)")
    if os.geteuid() != 0:
        pytest.skip("the one-machine Slurm cluster runs as root (SlurmUser=root)")
    d = tmp_path_factory.mktemp("slurm")
    got = subprocess.run(
        ["bash", str(SCRIPT), "start", str(d)], capture_output=True, text=True, timeout=180
    )
    if got.returncode != 0:
        subprocess.run(["bash", str(SCRIPT), "stop", str(d)], timeout=60)
        pytest.fail(f"the Slurm cluster did not start: {got.stderr}")
    try:
        yield {"SLURM_CONF": str(d / "slurm.conf")}
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", str(d)], timeout=60)


def _campaign(tmp_path: Path, port: int, *, seconds: float = 0) -> Path:
    amount = f"duration_s = {seconds}" if seconds else "requests_per_level = 12"
    slurm = (
        f'executor = "slurm"\nslurm = {{ partition = "debug", time = "10", '
        f'python = "{sys.executable}", workdir = "{tmp_path / "node"}" }}'
    )
    return two_experiments(tmp_path / "cluster.toml", "cluster", slurm, port, amount)


@pytest.mark.slow
def test_each_experiment_is_a_job_step_and_says_where_it_ran(
    tmp_path: Path, cache: Path, slurm: dict[str, str]
) -> None:
    path = _campaign(tmp_path, free_port())
    res = reportgen_main(
        "run", path, "--output", tmp_path / "out", "--quiet", "--no-pdf", cache=cache, env=slurm
    )
    assert res.returncode == 0, res.stdout + res.stderr
    (run_dir,) = (p.parent for p in (tmp_path / "out" / "cluster").glob("*/results.json"))
    data = json.loads((run_dir / "results.json").read_text())
    assert data["environment"]["executor"]["kind"] == "slurm"
    assert data["environment"]["executor"]["partition"] == "debug"
    base, faster = data["experiments"]
    assert base["status"] == faster["status"] == "ok"
    assert faster["decision"]["verdict"] == "adopted"
    for e in (base, faster):
        assert e["ran_on"]["node"] in ("n1", "n2") and e["ran_on"]["slurm_job"]
        assert (run_dir / "requests" / f"{e['id']}.parquet").exists()
    html = (run_dir / "report.html").read_text()
    assert f"<dt>Ran on</dt><dd>{base['ran_on']['node']} (Slurm job " in html
    assert "reached</th><td>as Slurm job steps from " in html and "(partition debug, " in html
    assert reportgen_main("verify", run_dir).returncode == 0


@pytest.mark.slow
def test_a_job_cancelled_mid_level_stops_its_server_and_resume_goes_on(
    tmp_path: Path, cache: Path, slurm: dict[str, str]
) -> None:
    port = free_port()
    path = _campaign(tmp_path, port, seconds=8)
    env = {**os.environ, **slurm, "XDG_CACHE_HOME": str(cache)}
    out = tmp_path / "out"
    run = subprocess.Popen(
        [sys.executable, "-m", "reportgen", "run", str(path), "--output", str(out),
         "--quiet", "--no-pdf"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not port_open(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert port_open(port), "the server never started on its node"
        time.sleep(3)
        jobs = subprocess.run(
            ["squeue", "-h", "-n", "reportgen-baseline", "-o", "%i"],
            capture_output=True, text=True, env=env, check=True,
        ).stdout.split()  # fmt: skip
        assert jobs, "no job step for the baseline"
        subprocess.run(["scancel", *jobs], env=env, check=True)
        t0 = time.monotonic()
        while port_open(port) and time.monotonic() - t0 < 20:
            time.sleep(0.2)
        assert not port_open(port), "the server outlived its job"
        stdout, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1, stdout + stderr
    assert "the Slurm job step (partition debug) was stopped there before the experiment " in (
        stderr
    )
    (run_dir,) = (p.parent for p in (out / "cluster").glob("*/results.json"))
    data = json.loads((run_dir / "results.json").read_text())
    assert data["status"] == "incomplete"
    base = data["experiments"][0]
    assert base["status"] == "interrupted" and "cancelled, out of time" in base["reason"]
    assert base["stop"]["group_gone"]  # its server was stopped there, by its process group
    res = reportgen_main("run", path, "--resume", run_dir, "--quiet", "--no-pdf", cache=cache,
                         env=slurm)  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    data = json.loads((run_dir / "results.json").read_text())
    assert [e["status"] for e in data["experiments"]] == ["ok", "ok"]


@pytest.mark.slow
def test_parallel_experiments_run_at_once_on_two_nodes_and_are_decided_in_order(
    tmp_path: Path, cache: Path, slurm: dict[str, str]
) -> None:
    """Two children of the baseline, each a job step with a node to itself (--exclusive),
    run at the same time on n1 and n2 (the cluster's one machine: the second finds the
    campaign's port taken and says so); a third, based on "best", waits for both."""
    port = free_port()
    path = _campaign(tmp_path, port)
    text = path.read_text().replace('time = "10"', 'time = "10", options = ["--exclusive"]')
    text = text.replace('title = "Run elsewhere"', 'title = "At once"\nparallel = 2')
    text += """
[[experiment]]
id = "bigger-batches"
why = "A first token sooner, on the baseline."
args = { ttft-ms = 5 }
workload = { requests_per_level = 12 }

[[experiment]]
id = "both"
why = "The best so far, with a quicker first token too."
based_on = "best"
args = { ttft-ms = 5 }
workload = { requests_per_level = 12 }
"""
    path.write_text(text)
    assert reportgen_main("validate", path).returncode == 0
    plan = reportgen_main("plan", path)
    assert "runs:   as Slurm job steps (srun: partition debug, time limit 10), up to 2 at " in (
        plan.stdout
    )
    res = reportgen_main(
        "run", path, "--output", tmp_path / "out", "--quiet", "--no-pdf", cache=cache, env=slurm
    )
    assert res.returncode == 0, res.stdout + res.stderr
    (run_dir,) = (p.parent for p in (tmp_path / "out" / "cluster").glob("*/results.json"))
    data = json.loads((run_dir / "results.json").read_text())
    base, faster, bigger, both = data["experiments"]
    assert all(e["status"] == "ok" for e in data["experiments"])
    assert {faster["ran_on"]["node"], bigger["ran_on"]["node"]} == {"n1", "n2"}
    assert (
        faster["started_at"] < bigger["finished_at"]
        and bigger["started_at"] < faster["finished_at"]
    )  # at the same time
    assert both["started_at"] >= max(faster["finished_at"], bigger["finished_at"])
    assert both["parent"] in ("faster", "bigger-batches")  # the best when it started
    for e in data["experiments"]:  # every node is the run's (one machine): comparable
        (node,) = [c for c in e["checks"] if c["id"] == "node_matches"]
        assert node["status"] == "pass", node
    moved = [w for e in (faster, bigger) for w in e["warnings"] if w.startswith("port ")]
    assert len(moved) == 1  # the one that found the port taken (one machine) said where it went
    assert reportgen_main("verify", run_dir).returncode == 0
    res = reportgen_main("validate", path.rename(tmp_path / "bad.toml"))
    text = (tmp_path / "bad.toml").read_text().replace('executor = "slurm"', 'executor = "local"')
    (tmp_path / "bad.toml").write_text(text)
    res = reportgen_main("validate", tmp_path / "bad.toml")
    assert res.returncode == 2 and "campaign.parallel = 2 runs experiments at once" in res.stderr


@pytest.mark.slow
def test_a_server_across_two_nodes_serves_from_rank_0_and_a_lost_node_fails_it(
    tmp_path: Path, cache: Path, slurm: dict[str, str]
) -> None:
    """server.nodes = 2: each experiment is a job of two nodes, rank 0 serving on the first
    and rank 1 started on the second with srun, the engine's own flags saying which is which
    (the simulator's stand-in for SGLang's --nnodes/--node-rank/--dist-init-addr). Killing
    rank 1's job step mid-level ends that server as a lost peer does: the experiment fails
    saying which rank on which node went, and nothing is left running on either node."""
    port = free_port()
    path = _campaign(tmp_path, port, seconds=6)
    text = path.read_text().replace("[server]\n", "[server]\nnodes = 2\n")
    text = text.replace("workload = { requests_per_level = 12 }\n", "")
    path.write_text(text.replace('title = "Run elsewhere"', 'title = "Across nodes"'))
    plan = reportgen_main("plan", path)
    assert plan.returncode == 0, plan.stderr
    assert "-m reportgen.run.nodes --engine sim --nodes 2 -- " in plan.stdout
    env = {**os.environ, **slurm, "XDG_CACHE_HOME": str(cache)}
    out = tmp_path / "out"
    run = subprocess.Popen(
        [sys.executable, "-m", "reportgen", "run", str(path), "--output", str(out),
         "--quiet", "--no-pdf"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip

    def squeue(*args: str) -> list[str]:
        got = subprocess.run(["squeue", "-h", *args], capture_output=True, text=True, env=env)
        return got.stdout.split()

    try:
        deadline = time.monotonic() + 180
        step = None
        while step is None and time.monotonic() < deadline and run.poll() is None:
            jobs = squeue("-n", "reportgen-faster", "-o", "%i")
            steps = squeue("-s", "-o", "%i") if jobs else []
            step = next((s for s in steps if s == f"{jobs[0]}.1"), None) if jobs else None
            time.sleep(0.3)
        assert step is not None, "rank 1 of faster's server never started"
        while not port_open(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)  # mid-level
        subprocess.run(["scancel", "--signal=KILL", step], env=env, check=True)
        stdout, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    (run_dir,) = (p.parent for p in (out / "cluster").glob("*/results.json"))
    data = json.loads((run_dir / "results.json").read_text())
    base, faster = data["experiments"]
    assert base["status"] == "ok", base["reason"]
    assert base["ran_on"]["nodes"] == ["n1", "n2"] or base["ran_on"]["nodes"] == ["n2", "n1"]
    assert base["ran_on"]["node"] == base["ran_on"]["nodes"][0]  # rank 0 where it served
    log = (run_dir / base["sessions"][0]["log_file"]).read_text()
    assert "--nnodes 2 --node-rank 1 --dist-init-addr 127.0.0.1:" in log
    assert "sim: node rank 1 joined from 127.0.0.1 (2 of 2)" in log
    assert "sim: ready on http://127.0.0.1:" in log and " across 2 nodes" in log
    html = (run_dir / "report.html").read_text()
    first = base["ran_on"]["nodes"][0]
    assert "<dt>Ran on</dt><dd>2 nodes, n" in html and f"rank 0 on {first} (Slurm job " in html
    assert faster["status"] == "failed"
    assert "rank 1 on n" in faster["reason"] and "exited" in faster["reason"], faster["reason"]
    assert faster["stop"]["group_gone"]  # rank 0's launcher and server, by process group
    assert not squeue("-o", "%i"), "a job outlived its experiment"
    assert not port_open(port)
    assert reportgen_main("verify", run_dir).returncode == 0


def test_a_node_unlike_the_runs_fails_its_check_and_its_verdict() -> None:
    """A node with another driver or another engine version than the one the run was
    fingerprinted on: its numbers are not comparable, and the check says how it differs."""
    from reportgen.analysis.checks import invalidated, node_check
    from reportgen.results.model import Experiment

    h200 = {"name": "NVIDIA H200", "compute_capability": "9.0"}
    env = {"gpus": {"driver": "580.1", "devices": [h200]},
           "software": {"packages": {"vllm": "0.26.0"}}}  # fmt: skip
    node = {"gpus": "1 x NVIDIA H200 (compute capability 9.0)", "driver": "575.9",
            "packages": {"vllm": "0.25.1"}}  # fmt: skip
    e = Experiment(id="x", ran_on={"node": "n7", "slurm_job": "12", "fingerprint": node})
    (check,) = node_check(e, env)
    assert check.status == "fail" and invalidated([check])
    assert check.evidence == (
        "n7: driver 575.9 (the run's: 580.1); vllm 0.25.1 (the run's: 0.26.0)"
    )
    same = Experiment(id="y", ran_on={"node": "n1", "fingerprint": {**node, "driver": "580.1",
                      "packages": {"vllm": "0.26.0"}}})  # fmt: skip
    assert node_check(same, env)[0].status == "pass"
    assert node_check(Experiment(id="z"), env) == []  # run here: nothing to compare
