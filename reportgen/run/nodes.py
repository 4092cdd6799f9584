"""One server across a Slurm job's nodes (``server.nodes``): ``python -m reportgen.run.nodes``.

The far side (``run.remote``) runs an experiment on the job's first node; where the
experiment asks for several nodes, its server command is this launcher around the engine's
own command. It starts rank 0 here and one ``srun`` job step per other node of the job, each
the same engine command with the engine's rank flags (``Engine.node_args``: SGLang's
``--nnodes/--node-rank/--dist-init-addr``, vLLM's ``--nnodes/--node-rank/--master-addr``,
``--headless`` after rank 0), rank 0 serving HTTP. Every process it starts is in its process
group, which the session stops as it stops any server; when one rank exits, the others are
stopped and the launcher exits with the first non-zero code among those that went, saying
which ranks on which nodes went, so a lost node ends the session with its reason in the
server log. The lines the ranks after 0 print go to the same log, each marked with its rank
and node ("[rank 1 on n2] ...").

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
import threading
import time
from typing import IO

from reportgen import engines
from reportgen.observe.evidence import OTHER_RANK
from reportgen.run.server import claimed_port

GRACE_S = 20.0  # how long the other ranks have to stop once one has exited
# Where rank 0 listens for the others (torch.distributed's usual MASTER_PORT), so that two runs
# of one campaign start their servers with the same flags; another free port when it is taken.
RENDEZVOUS_PORT = 29500


class NodesError(Exception):
    """The job's nodes cannot be read (no Slurm job here, scontrol failing)."""


def _say(text: str) -> None:
    print(f"reportgen nodes: {text}", flush=True)


def job_nodes() -> list[str]:
    """The job's nodes, this one first (rank 0 runs where the session runs)."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST")
    if not nodelist:
        raise NodesError("SLURM_JOB_NODELIST is not set: not inside a Slurm job")
    try:
        got = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True
        )
    except OSError as exc:
        raise NodesError(f"scontrol: {exc}") from None
    if got.returncode != 0:
        raise NodesError(f"scontrol show hostnames {nodelist}: {got.stderr.strip()[-200:]}")
    listed = got.stdout.split()
    here = os.environ.get("SLURMD_NODENAME", "")
    return ([here] if here in listed else []) + [n for n in listed if n != here]


def node_address(name: str) -> str:
    """The address Slurm reaches ``name`` at (NodeAddr): what the other ranks connect to."""
    try:
        out = subprocess.run(
            ["scontrol", "show", "node", "-o", name], capture_output=True, text=True
        ).stdout
    except OSError:
        out = ""
    for field in out.split():
        if field.startswith("NodeAddr="):
            return field.split("=", 1)[1]
    return socket.getfqdn(name)


def _relay(rank: int, node: str, stream: IO[bytes]) -> None:
    """A rank's output into the server's log, each line marked with the rank and node (so
    the log's evidence, such as the engine's resolved arguments, is rank 0's)."""
    mark = f"{OTHER_RANK}{rank} on {node}] ".encode()
    out = sys.stdout.buffer
    for line in iter(stream.readline, b""):
        out.write(mark + line)
        out.flush()


def launch(engine: engines.Engine, nnodes: int, argv: list[str]) -> int:
    if not os.environ.get("SLURM_JOB_ID"):
        _say(f"error: {nnodes} nodes need a Slurm job of {nnodes} nodes; none here")
        return 2
    try:
        nodes = job_nodes()
    except NodesError as exc:
        _say(f"error: the job's nodes cannot be read: {exc}")
        return 2
    if len(nodes) < nnodes:
        _say(f"error: the job has {len(nodes)} node(s) ({', '.join(nodes)}), {nnodes} wanted")
        return 2
    addr = node_address(nodes[0])
    try:
        port = claimed_port(addr, RENDEZVOUS_PORT)
    except OSError as exc:
        _say(f"error: no port for the other ranks to reach on {addr}: {exc}")
        return 2
    ranks: list[tuple[int, str, subprocess.Popen[bytes]]] = []
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True  # the group has the signal too: every rank is stopping

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    for rank, node in enumerate(nodes[:nnodes]):
        if stopping:
            break
        cmd = [*argv, *engine.node_args(nnodes, rank, addr, port)]
        if rank:
            cmd = ["srun", f"--jobid={os.environ['SLURM_JOB_ID']}", "--nodes=1", "--ntasks=1",
                   f"--nodelist={node}", "--kill-on-bad-exit=1", "--quit-on-interrupt",
                   "--export=ALL", *cmd]  # fmt: skip
        _say(f"rank {rank} on {node}: {shlex.join(cmd)}")
        piped = subprocess.PIPE if rank else None
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=piped, stderr=piped and subprocess.STDOUT
        )
        if proc.stdout is not None:
            threading.Thread(target=_relay, args=(rank, node, proc.stdout), daemon=True).start()
        ranks.append((rank, node, proc))
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
