"""Campaigns as Slurm job steps (``host.executor = "slurm"``), on a real Slurm cluster of one
machine (``scripts/slurm_local.sh``: munge, slurmctld and two slurmd nodes on 127.0.0.1):
each experiment runs where the cluster puts it and says where; a job cancelled mid-level
leaves nothing running, the run stops as an interrupted one does, and ``--resume`` goes on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.conftest import (
    demo_outcomes,
    free_port,
    lighter_demo,
    port_open,
    reportgen_main,
    slurm_campaign,
)


@pytest.mark.slow
def test_the_demo_runs_as_slurm_jobs_two_at_once_on_two_nodes_and_says_where(
    tmp_path: Path, cache: Path, slurm: dict[str, str]
) -> None:
    """The demo (its objective's two levels, two repetitions: ``lighter_demo``), run with
    `--slurm debug --parallel 2`: each
    experiment a job on a node the cluster gives (each job takes a whole node, as one asking
    for all of a node's GPUs does); typo-in-flag, built on the baseline, runs beside
    fast-decode-kernel on the other node; those built on "best" wait for every earlier one;
    the outcomes are the demo's as run here, and the report says which node ran what.
    prefill-chunk is left out: a job like bigger-batches' (built on "best"), its verdict
    judged as anywhere (alone on two cores: 25 CPU-s and 58 s with it, 22 and 50 without)."""
    port = free_port()
    path = tmp_path / "demo.toml"
    path.write_text(lighter_demo(port, without=("prefill-chunk",)))
    plan = reportgen_main("plan", path)
    assert plan.returncode == 0 and "runs:" not in plan.stdout  # here, one at a time
    there = reportgen_main("plan", path, "--slurm", "debug", "--parallel", "2")
    assert "runs:   as Slurm job steps (srun: partition debug), up to 2 at once" in there.stdout
    alone = reportgen_main("run", path, "--parallel", "2")
    assert alone.returncode == 2, alone.stderr
    assert "campaign.parallel = 2 runs experiments at once on nodes of their own: set " in (
        " ".join(alone.stderr.split())
    )
    res = reportgen_main(
        "run", path, "--slurm", "debug", "--parallel", "2", "--output", tmp_path / "out",
        "--quiet", "--no-pdf", "--json", cache=cache, env=slurm,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    run_dir = demo_outcomes(res.stdout)
    data = json.loads((run_dir / "results.json").read_text())
    assert data["environment"]["executor"]["kind"] == "slurm"
    assert data["environment"]["executor"]["partition"] == "debug"
    exps = {e["id"]: e for e in data["experiments"]}
    ids = ("baseline", "fast-decode-kernel", "bigger-batches", "typo-in-flag")
    base, fast, bigger, typo = (exps[k] for k in ids)
    for e in exps.values():
        assert e["ran_on"]["node"] in ("n1", "n2") and e["ran_on"]["slurm_job"]
        (node,) = [c for c in e["checks"] if c["id"] == "node_matches"]
        assert node["status"] == "pass", node  # every node is the run's (one machine)
    # typo-in-flag beside fast-decode-kernel, on the other node; bigger-batches ("best")
    # after both
    assert {fast["ran_on"]["node"], typo["ran_on"]["node"]} == {"n1", "n2"}

    def at(stamp: str) -> float:
        return datetime.fromisoformat(stamp).timestamp()

    # started together: typo-in-flag fails within its first second, and a loaded host can
    # start fast-decode-kernel's step a second or two after it (stamps are whole seconds)
    assert at(typo["started_at"]) <= at(fast["finished_at"])
    assert at(fast["started_at"]) <= at(typo["finished_at"]) + 5
    assert bigger["started_at"] >= max(fast["finished_at"], typo["finished_at"])
    adopted = fast["decision"]["verdict"] == "adopted"  # (see demo_outcomes)
    assert bigger["parent"] == ("fast-decode-kernel" if adopted else "baseline")
    assert "unrecognized arguments: --itl-msec 2" in typo["log_tail"]
    moved = [w for e in (fast, typo) for w in e["warnings"] if w.startswith("port ")]
    assert len(moved) <= 1  # the second to claim the port on this one machine says it moved
    html = (run_dir / "report.html").read_text()
    assert f"<dt>Ran on</dt><dd>{base['ran_on']['node']} (Slurm job " in html
    assert "reached</th><td>as Slurm job steps from " in html and "(partition debug)" in html
    assert not port_open(port)
    assert reportgen_main("verify", run_dir).returncode == 0


@pytest.mark.slow
def test_a_job_cancelled_mid_level_stops_its_server_and_resume_goes_on(
    tmp_path: Path, cache: Path, slurm: dict[str, str]
) -> None:
    port = free_port()
    path = slurm_campaign(tmp_path, port, seconds=5)
    path.write_text(
        path.read_text().replace('title = "Run elsewhere"', 'title = "T"\nparallel = 2')
    )
    plan = reportgen_main("plan", path)
    assert "runs:   as Slurm job steps (srun: partition debug, time limit 10), up to 2 at " in (
        plan.stdout
    )
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


def test_a_node_unlike_the_runs_fails_its_check_and_its_verdict() -> None:
    """A node with another driver or another engine version than the one the run was
    fingerprinted on: its numbers are not comparable, and the check says how it differs."""
    from reportgen.analysis.checks import invalidated, node_check
    from reportgen.observe.environment import Environment
    from reportgen.results.model import Experiment

    h200 = {"name": "NVIDIA H200", "compute_capability": "9.0"}
    env = Environment.of({"gpus": {"driver": "580.1", "devices": [h200]},
                          "software": {"packages": {"vllm": "0.26.0"}}})  # fmt: skip
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


def test_a_job_is_as_large_as_the_largest_server_it_starts(tmp_path: Path) -> None:
    """An experiment on one node whose parent spans two, interleaved with it (the parent's
    server runs in the same job): a job of two nodes. Without interleaving, one node."""
    from reportgen import campaign
    from reportgen.run import executor, remote
    from reportgen.run.plan import plan

    path = slurm_campaign(tmp_path, free_port())
    text = path.read_text().replace("[server]\n", "[server]\nnodes = 2\n")
    text = text.replace("args = { itl-ms = 2 }", "args = { itl-ms = 2 }\nnodes = 1")
    for interleave, want in ((True, "--nodes=2"), (False, None)):
        flag = f"interleave = {'true' if interleave else 'false'}"
        path.write_text(text.replace('title = "Run elsewhere"', f'title = "T"\n{flag}'))
        c = campaign.load(path)
        base, child = plan(c)
        slurm = executor.choose(c)
        argv = slurm._far_side(remote.Job("experiment", c, r=child, parent=base), "faster")
        if want:
            assert argv[0] == "salloc" and want in argv, argv
        else:
            assert argv[0] == "srun" and "--nodes=1" in argv, argv
    both = reportgen_main("run", path, "--ssh", "gpu1", "--slurm")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
