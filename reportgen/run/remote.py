"""The GPU host's side of a run over SSH (``executor.Ssh``): run here what the run there asks.

`reportgen run` with ``host.executor = "ssh"`` starts ``python -m reportgen.run.remote`` on
the GPU host over SSH and writes one job on its standard input: a line of base64 (a pickled
``Job``; both sides run the same reportgen, which ``executor.Ssh`` checks first). Two kinds:

- ``prepare``: this host's fingerprint, the campaign's preflight here (the engine's flags,
  free ports, host.expect) and the client's ceiling (cached per host); one ``result`` line.
- ``experiment``: one experiment run here as a local run runs it (``run_experiment``: its
  servers, warm-ups, levels, telemetry), in a folder of its own under ``host.ssh.workdir``;
  its progress goes back as it happens (``phase``, ``level``, ``request`` lines), then a
  ``result`` line: the experiment's entry and its files (request and telemetry tables, server
  logs) as a base64 tar.

Standard input stays open for as long as the run there wants the experiment. When it closes
(the SSH connection dropped, the run there was stopped or killed), this side stops as a
Ctrl-C stops a run: the server by its process group, at once, then exits. Nothing is left
running, and what was measured is still sent if the connection is still there to take it.
"""

from __future__ import annotations

import base64
import io
import json
import os
import pickle
import shutil
import signal
import socket
import sys
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from reportgen.campaign import Campaign, Resolved
from reportgen.results import rundir
from reportgen.results.model import RanOn, Run

SENT = rundir.SENT  # the folders of a run directory an experiment writes (sent back whole)
# What a Slurm job step says of where it runs (``Experiment.ran_on``).
SLURM = {"slurm_job": "SLURM_JOB_ID", "node": "SLURMD_NODENAME"}


@dataclass
class Job:
    """What the run asks of this host (pickled: the same reportgen on both sides)."""

    kind: str  # "prepare" | "experiment"
    campaign: Campaign
    workdir: str = "~/.cache/reportgen/remote"
    run_id: str = ""
    index: int = 0  # the experiment's place in ``run.experiments``
    r: Resolved | None = None
    parent: Resolved | None = None
    run: Run | None = None  # the results so far (adaptive repetitions read its noise)
    env: dict[str, str] = field(default_factory=dict)


def encode(obj: Any) -> bytes:
    return base64.b64encode(pickle.dumps(obj)) + b"\n"


class Relay:
    """A progress sink that writes what happens as JSON lines for the run there to show."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.lock = threading.Lock()

    def send(self, **event: Any) -> None:
        line = json.dumps(event, default=str)
        with self.lock:
            try:
                self.out.write(line + "\n")
                self.out.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass  # the run there is gone: stdin's end says so and stops this side

    def campaign_start(self, total_requests: int, experiments: int, run_dir: object) -> None:
        pass

    def experiment_start(self, index: int, count: int, exp_id: str) -> None:
        pass

    def phase(self, text: str) -> None:
        self.send(event="phase", text=text)

    def warn(self, text: str) -> None:
        self.send(event="warn", text=text)

    def level_start(
        self, label: str, repetition: int, repetitions: int, requests: int | None
    ) -> None:
        self.send(event="level", label=label, repetition=repetition, repetitions=repetitions,
                  requests=requests)  # fmt: skip

    def request_done(self, output_tokens: int, ok: bool) -> None:
        self.send(event="request", tokens=output_tokens, ok=ok)

    def experiment_end(self, exp_id: str, status: str, note: str, skipped: int) -> None:
        pass

    def close(self) -> None:
        pass


def _watch(stream: IO[bytes]) -> None:
    """Stop this process as Ctrl-C would once its standard input ends: the run there let go."""
    try:
        while stream.read(65536):
            pass
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGTERM)


def _prepare(job: Job, relay: Relay) -> dict[str, Any]:
    """What a run here does before its first experiment (``local.Local``), done here."""
    from reportgen.errors import ReportgenError
    from reportgen.observe import sources
    from reportgen.run.local import Local
    from reportgen.run.plan import campaign_secrets
    from reportgen.run.session import Context

    ctx = Context(job.campaign, Path("."), relay, campaign_secrets(job.campaign))  # type: ignore[arg-type]
    ctx.gpu_source, ctx.gpu_why = sources.open_source()
    here = Local()
    try:
        environment, flags = here.prepare(ctx)
    except ReportgenError as exc:
        return {"error": str(exc), "kind": type(exc).__name__}
    finally:
        if ctx.gpu_source is not None:
            ctx.gpu_source.close()
    relay.phase("measuring the client's ceiling here (cached per host)")
    return {
        "environment": environment,
        "flags": pickle.dumps(flags).hex() if flags is not None else None,
        "client_ceiling": here.client_ceiling(),
    }


def _experiment(job: Job, relay: Relay) -> dict[str, Any]:
    from reportgen.analysis import verdict
    from reportgen.observe import fingerprint, sources
    from reportgen.redact import redact_argv
    from reportgen.run import calibrate
    from reportgen.run.experiment import run_experiment
    from reportgen.run.plan import campaign_secrets, command_line
    from reportgen.run.session import Context

    assert job.r is not None and job.run is not None
    run = job.run
    entry = run.experiments[job.index]
    folder = Path(job.workdir).expanduser() / f"{job.run_id}-{entry.id}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    moved = _own_port(job) if os.environ.get("SLURM_JOB_ID") else None
    ctx = Context(job.campaign, folder, relay, campaign_secrets(job.campaign))  # type: ignore[arg-type]
    ctx.gpu_source, ctx.gpu_why = sources.open_source()
    ctx.client_ceiling = run.client_ceiling or calibrate.calibrate()
    stopped = None
    try:
        run_experiment(ctx, job.r, job.parent, entry, lambda: None, verdict.Judge(run, entry))
    except KeyboardInterrupt:
        stopped = "interrupted"  # the entry says so (run_experiment marked it)
    finally:
        # its servers are stopped: a second signal (SIGHUP as the link goes, scancel's
        # SIGKILL warning) must not cut short sending what was measured or cleaning up
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        try:
            node = fingerprint.this_node(ctx.gpu_source, ctx.gpu_why)
            if ctx.gpu_source is not None:
                ctx.gpu_source.close()
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                for name in SENT:
                    if (folder / name).exists():
                        tar.add(folder / name, arcname=name)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    if moved is not None:
        entry.warnings.append(moved)
    if job.r.base_url is None:  # what ran here: this Python, not the one the run there named
        entry.command = redact_argv(command_line(job.campaign, job.r, sys.executable))
    slurm = {k: os.environ[v] for k, v in SLURM.items() if os.environ.get(v)}
    entry.ran_on = RanOn.model_validate(
        {"host": socket.gethostname(), **slurm, "fingerprint": node}
    )
    if job.r.nodes > 1 and os.environ.get("SLURM_JOB_NODELIST"):
        from reportgen.run.nodes import NodesError, job_nodes

        try:
            entry.ran_on.nodes = job_nodes()[: job.r.nodes]
        except NodesError as exc:  # what was measured matters more than the names
            entry.warnings.append(f"the job's nodes could not be named: {exc}")
    return {
        "entry": entry.model_dump(mode="json"),
        "files": base64.b64encode(buf.getvalue()).decode("ascii"),
        "stopped": stopped,
    }


def _own_port(job: Job) -> str | None:
    """On a node of a cluster, shared with other jobs (or, on a cluster of one machine, with
    other nodes): the campaign's port where it is free, else one that is, said as a warning.
    None when the campaign's port was free."""
    from reportgen import engines
    from reportgen.run import server

    assert job.r is not None
    engine = engines.get(job.campaign.model.server.engine)
    wanted = engine.port(job.r.args)
    port = server.claimed_port(job.campaign.model.server.host, wanted)
    if port == wanted:
        return None
    for r in (job.r, job.parent):
        if r is not None and r.base_url is None:
            r.args["port"] = port
    return (
        f"port {wanted} was taken on this node ({socket.gethostname()}, another job's): "
        f"its servers listened on {port}"
    )


def main() -> int:
    from reportgen.run import interrupt

    interrupt.install()
    signal.signal(signal.SIGHUP, signal.getsignal(signal.SIGTERM))
    line = sys.stdin.buffer.readline()
    relay = Relay(sys.stdout)
    try:
        job: Job = pickle.loads(base64.b64decode(line))
    except Exception as exc:  # not a job of this reportgen's
        relay.send(event="result", error=f"not a job this reportgen can read: {exc}")
        return 2
    os.environ.update(job.env)
    threading.Thread(target=_watch, args=(sys.stdin.buffer,), daemon=True).start()
    t0 = time.monotonic()
    try:
        got = _prepare(job, relay) if job.kind == "prepare" else _experiment(job, relay)
    except KeyboardInterrupt:
        relay.send(event="result", error="stopped: the run that asked for it let go")
        return 130
    relay.send(event="result", seconds=round(time.monotonic() - t0, 3), **got)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
