"""One server across a Slurm job's nodes (``server.nodes``): ``python -m reportgen.run.nodes``.

The far side (``run.remote``) runs an experiment on the job's first node; where the
experiment asks for several nodes, its server command is this launcher around the engine's
own command. It starts rank 0 here and one ``srun`` job step per other node of the job, each
the same engine command with the engine's rank flags (``Engine.node_args``: SGLang's
``--nnodes/--node-rank/--dist-init-addr``, vLLM's ``--nnodes/--node-rank/--master-addr``,
``--headless`` after rank 0), rank 0 serving HTTP. Every process it starts is in its process
group, which the session stops as it stops any server; when one rank exits, the others are
stopped and the launcher exits with that rank's code, saying which rank on which node, so a
lost node ends the session with its reason in the server log.

    python -m reportgen.run.nodes --engine sglang --nodes 2 -- python -m sglang.launch_server ...
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import subprocess
import sys
import time

from reportgen import engines

GRACE_S = 20.0  # how long the other ranks have to stop once one has exited


def _say(text: str) -> None:
    print(f"reportgen nodes: {text}", flush=True)


def job_nodes() -> list[str]:
    """The job's nodes, this one first (rank 0 runs where the session runs)."""
    listed = subprocess.run(
        ["scontrol", "show", "hostnames", os.environ["SLURM_JOB_NODELIST"]],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    here = os.environ.get("SLURMD_NODENAME", "")
    return ([here] if here in listed else []) + [n for n in listed if n != here]


def node_address(name: str) -> str:
    """The address Slurm reaches ``name`` at (NodeAddr): what the other ranks connect to."""
    out = subprocess.run(
        ["scontrol", "show", "node", "-o", name], capture_output=True, text=True, check=False
    ).stdout
    for field in out.split():
        if field.startswith("NodeAddr="):
            return field.split("=", 1)[1]
    return socket.getfqdn(name)


def free_port(addr: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET) as s:
        s.bind((addr, 0))
        return int(s.getsockname()[1])


def launch(engine: engines.Engine, nnodes: int, argv: list[str]) -> int:
    if not os.environ.get("SLURM_JOB_ID"):
        _say(f"error: {nnodes} nodes need a Slurm job of {nnodes} nodes; none here")
        return 2
    nodes = job_nodes()
    if len(nodes) < nnodes:
        _say(f"error: the job has {len(nodes)} node(s) ({', '.join(nodes)}), {nnodes} wanted")
        return 2
    addr = node_address(nodes[0])
    port = free_port(addr)
    ranks: list[tuple[int, str, subprocess.Popen[bytes]]] = []
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True  # the group has the signal too: every rank is stopping

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    for rank, node in enumerate(nodes[:nnodes]):
        cmd = [*argv, *engine.node_args(nnodes, rank, addr, port)]
        if rank:
            cmd = ["srun", f"--jobid={os.environ['SLURM_JOB_ID']}", "--nodes=1", "--ntasks=1",
                   f"--nodelist={node}", "--kill-on-bad-exit=1", "--quit-on-interrupt",
                   "--export=ALL", *cmd]  # fmt: skip
        _say(f"rank {rank} on {node}: {shlex.join(cmd)}")
        ranks.append((rank, node, subprocess.Popen(cmd, stdin=subprocess.DEVNULL)))
    code = 0
    while not stopping:
        if any(p.poll() is not None for _, _, p in ranks):
            time.sleep(1.0)  # a lost rank takes its peers with it: say all that went
            if stopping:
                break
            ended = [(r, n, p.returncode) for r, n, p in ranks if p.poll() is not None]
            said = ", ".join(f"rank {r} on {n} (code {c})" for r, n, c in ended)
            _say(f"error: {said} exited; stopping the other ranks (the server cannot serve "
                 "without every node)")  # fmt: skip
            code = next((c for _, _, c in ended if c), 1)
            for _, _, p in ranks:
                if p.poll() is None:
                    p.terminate()
            break
        time.sleep(0.2)
    deadline = time.monotonic() + GRACE_S
    for _, _, p in ranks:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reportgen.run.nodes")
    parser.add_argument("--engine", required=True, choices=sorted(engines.ENGINES))
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    engine = engines.get(args.engine)
    if not engine.node_flags:
        _say(f"error: the {engine.name} engine cannot span nodes")
        return 2
    return launch(engine, args.nodes, command)


if __name__ == "__main__":
    sys.exit(main())
