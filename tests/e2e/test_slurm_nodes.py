"""One server across a Slurm job's nodes (``server.nodes``), on the one-machine cluster of
``scripts/slurm_local.sh``: rank 0 serves on the first node, the other ranks are job steps
started with srun, and a lost rank ends the server saying which."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port, port_open, reportgen_main, slurm_campaign


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
    path = slurm_campaign(tmp_path, port, seconds=6)
    text = path.read_text().replace("[server]\n", "[server]\nnodes = 2\n")
    # the baseline's levels of 12 requests, faster's of 6 s: time to lose rank 1 mid-level
    # (the baseline's two repetitions of 6 s were 5,662 requests in one run, never read; alone
    # on two cores the test took 44 s, now 31 s)
    text = text.replace("workload = { requests_per_level = 12 }\n", "")
    text = text.replace(
        'why = "The simulator as it starts."\n',
        'why = "The simulator as it starts."\nworkload = { requests_per_level = 12 }\n',
    )
    text = text.replace('executor = "slurm"\n', "")  # --slurm on the command line instead
    path.write_text(text.replace('title = "Run elsewhere"', 'title = "Across nodes"'))
    assert "nodes = 2 spans a server across a Slurm job's nodes" in (
        reportgen_main("plan", path).stderr
    )
    plan = reportgen_main("plan", path, "--slurm")
    assert plan.returncode == 0, plan.stderr
    assert "-m reportgen.run.nodes --engine sim --nodes 2 -- " in plan.stdout
    assert "nodes:    2, one Slurm job: rank 0 serves on its first node; " in plan.stdout
    env = {**os.environ, **slurm, "XDG_CACHE_HOME": str(cache)}
    out = tmp_path / "out"
    run = subprocess.Popen(
        [sys.executable, "-m", "reportgen", "run", str(path), "--slurm", "--output", str(out),
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
    other = base["ran_on"]["nodes"][1]
    assert f"[rank 1 on {other}] sim: node rank 1 of 2: joined rank 0 at 127.0.0.1:" in log
    server_args = base["log_evidence"]["found"]["server_args"]
    assert "node_rank=0" in server_args, server_args  # rank 0's, whichever printed first
    html = (run_dir / "report.html").read_text()
    first = base["ran_on"]["nodes"][0]
    assert "<dt>Ran on</dt><dd>2 nodes, n" in html and f"rank 0 on {first} (Slurm job " in html
    assert faster["status"] == "failed"
    assert "rank 1 on n" in faster["reason"] and "exited" in faster["reason"], faster["reason"]
    assert faster["stop"]["group_gone"]  # rank 0's launcher and server, by process group
    # salloc has given the allocation back; Slurm lists the job as completing while its
    # nodes' epilogs run, then drops it
    gone_by = time.monotonic() + 20
    while (left := squeue("-o", "%i:%T")) and time.monotonic() < gone_by:
        time.sleep(0.2)
    assert not left, f"a job outlived its experiment: {left}"
    assert not port_open(port)
    assert reportgen_main("verify", run_dir).returncode == 0
