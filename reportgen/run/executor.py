"""Where a campaign's servers and load run (``host.executor``): here, or on a GPU host over SSH.

The runner asks its executor (the ``local.Executor`` protocol) for two things: ``prepare``
(the measuring host's fingerprint, the campaign's preflight there, the client's ceiling there)
and ``run_experiment`` (one experiment's server sessions, into its results entry and the run
directory). ``local.Local`` does both in this process, as reportgen always did. ``Ssh`` runs
them on the GPU host through ``python -m reportgen.run.remote`` over one SSH connection each,
so the load generator runs next to the server, as the peers advise, and the run directory,
the report and ``--resume`` stay here. Telemetry and the fingerprint are the GPU host's; the
environment records how it was reached (``executor``: the host, the SSH round trip).

Faults: a connection that drops mid-experiment (or a host that reboots) ends the experiment
as failed with the reason, what finished before is kept and ``--resume`` goes on; the GPU
host's side stops its server by process group as soon as its end of the connection closes
(``remote``). Ctrl-C here closes the connection first, so the far side stops at once too.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import io
import json
import os
import pickle
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from reportgen import __version__, engines
from reportgen import results as store
from reportgen.campaign import Campaign, Resolved
from reportgen.campaign.host import SlurmHost, SshHost
from reportgen.errors import GpuError, HostLost, ReportgenError, ServerError
from reportgen.load.records import RequestRecord
from reportgen.observe import fingerprint
from reportgen.results.model import Experiment, Run
from reportgen.run import remote
from reportgen.run.experiment import Judge
from reportgen.run.local import Executor, Local
from reportgen.run.resume import utc_now
from reportgen.run.session import Context

# What asks the far side's Python for its reportgen's version.
ASK_VERSION = ("-c", "import reportgen; print(reportgen.__version__)")
# How long the far side has to send what it measured once asked to stop.
STOP_GRACE_S = 60.0


class RemoteError(ReportgenError):
    """The GPU host could not be reached, or runs another reportgen."""


def _python_failed(out: subprocess.CompletedProcess[str]) -> bool:
    """Whether the Python named there is missing (127, no such file) or ran and could not
    import reportgen, rather than the way there failing."""
    err = out.stderr
    return (
        out.returncode == 127
        or "No such file or directory" in err
        or "ModuleNotFoundError" in err
        or "ImportError" in err
    )


class Ssh:
    """Servers and load on ``spec``'s host, through ``python -m reportgen.run.remote``."""

    name = "ssh"
    lost = "the connection to {where}"  # what ended when no result came
    lock = threading.RLock()  # the results, saved from experiments at once (parallel)

    def __init__(self, spec: SshHost | SlurmHost, campaign: Campaign) -> None:
        self.spec = spec
        self.campaign = campaign
        self.ceiling: dict[str, Any] = {}

    @property
    def python(self) -> str:
        """The Python there (host.ssh.python; on Slurm, by default this one: a shared file
        system's same path)."""
        return self.spec.python or sys.executable

    @property
    def where(self) -> str:
        assert isinstance(self.spec, SshHost)
        return self.spec.host + (f":{self.spec.port}" if self.spec.port else "")

    def ssh_argv(self, *command: str) -> list[str]:
        """``ssh`` with the campaign's options, no prompt (a key or an agent, never a
        password typed mid-run), and a keep-alive that notices a dead link in ~30 s."""
        s = self.spec
        assert isinstance(s, SshHost)
        argv = ["ssh", "-T", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=10",
                "-o", "ServerAliveCountMax=3"]  # fmt: skip
        if s.port:
            argv += ["-p", str(s.port)]
        if s.user:
            argv += ["-l", s.user]
        if s.identity_file:
            argv += ["-i", str(Path(s.identity_file).expanduser())]
        argv += list(s.options)
        return [*argv, s.host, "--", *command]

    def _python(self, *args: str, name: str = "check") -> list[str]:
        return self.ssh_argv(shlex.join([self.python, *args]))

    # -- before the first experiment ----------------------------------------------------

    def check(self) -> tuple[str, float]:
        """The far side's reportgen version (refused unless it is this one) and the SSH
        round trip in ms (a second, warm connection's)."""
        out = self._ask(self._python(*ASK_VERSION))
        if out.returncode == 255:
            why = (out.stderr.strip().splitlines() or ["(nothing said)"])[-1]
            raise RemoteError(
                f"{self.where}: cannot connect over SSH ({why}); nothing was started. Check "
                "host.ssh (host, user, port, identity_file) and that `ssh HOST` works without "
                "a password"
            )
        version = self._same_version(out)
        times = []
        for _ in range(2):  # a connection's round trip, with nothing to start there
            t0 = time.monotonic()
            self._ask(self.ssh_argv("true"))
            times.append((time.monotonic() - t0) * 1e3)
        return version, min(times)

    def _same_version(self, out: subprocess.CompletedProcess[str]) -> str:
        """The far side's reportgen version (``ASK_VERSION``'s answer), refused unless its
        Python imports this very reportgen."""
        version = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
        said = out.stderr.strip().splitlines()
        cause = next(
            (x for word in ("fatal", "error") for x in said if word in x.lower()),
            said[-1] if said else "",
        )
        if out.returncode != 0 and cause and not _python_failed(out):
            # the way there failed, not the import (srun with no controller, a python that is
            # not there): its own words are the cause
            raise RemoteError(
                f"{self.where}: asking {self.python} there for reportgen's version failed: "
                f"{cause.strip()[:300]}; nothing was started"
            )
        if out.returncode != 0 or not version:
            raise RemoteError(
                f"{self.where}: {self.python} there cannot import reportgen; nothing was "
                f"started. Install reportgen {__version__} there (`pip install reportgen=="
                f"{__version__}`, or `pip install .` from this checkout) and name that Python "
                f"in host.{self.spec_key}.python"
            )
        if version != __version__:
            raise RemoteError(
                f"{self.where}: reportgen {version} there, {__version__} here; nothing was "
                f"started. Install {__version__} there (the same checkout or release), so "
                "both sides measure and record alike"
            )
        return version

    def _ask(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except FileNotFoundError:
            raise RemoteError("ssh is not installed here: install OpenSSH's client") from None
        except subprocess.TimeoutExpired:
            raise RemoteError(
                f"{self.where}: no answer over SSH within 60 s; check host.ssh"
            ) from None

    def prepare(self, ctx: Context) -> tuple[dict[str, Any], engines.Flags | None]:
        ctx.progress.phase(f"checking reportgen on {self.where}")
        version, rtt = self.check()
        ctx.progress.phase(f"fingerprint and preflight on {self.where}")
        got = self._call(remote.Job("prepare", self._campaign_there()), ctx.progress)
        if "error" in got:
            kind = {"GpuError": GpuError, "ServerError": ServerError}.get(
                str(got.get("kind")), RemoteError
            )
            raise kind(f"on {self.where}: {got['error']}")
        environment = dict(got["environment"])
        environment["executor"] = {
            **self.record(),
            "python": self.python,
            "reportgen": version,
            **({"ssh_rtt_ms": round(rtt, 1)} if rtt else {}),
            "from": fingerprint.host().get("hostname"),
        }
        flags = pickle.loads(bytes.fromhex(got["flags"])) if got.get("flags") else None
        self.ceiling = dict(got.get("client_ceiling") or {})
        return environment, flags

    def client_ceiling(self) -> dict[str, Any]:
        return self.ceiling

    spec_key = "ssh"

    def record(self) -> dict[str, Any]:
        """How the measuring host was reached, for the environment section."""
        return {"kind": "ssh", "host": self.where}

    def _campaign_there(self) -> Campaign:
        """The campaign as the far side reads it: its relative paths from host.ssh.dir."""
        here = Path(self.campaign.path).resolve()
        folder = Path(self.spec.dir) if self.spec.dir else here.parent
        return dataclasses.replace(self.campaign, path=str(folder / here.name))

    # -- one experiment ---------------------------------------------------------------

    def run_experiment(
        self,
        ctx: Context,
        run: Run,
        r: Resolved,
        parent: Resolved | None,
        entry: Experiment,
        save: Any,
        judge: Judge | None,
    ) -> dict[str, list[RequestRecord]]:
        index = run.experiments.index(entry)
        job = remote.Job(
            "experiment",
            self._campaign_there(),
            workdir=self.spec.workdir,
            run_id=ctx.run_dir.name,
            index=index,
            r=r,
            parent=parent,
            run=run,
        )
        entry.status = "running"
        entry.started_at = utc_now()
        try:
            got = self._call(job, ctx.progress, r.id)
        except KeyboardInterrupt:
            entry.status, entry.reason = "interrupted", "interrupted by the user"
            entry.finished_at = utc_now()
            save()
            raise
        except HostLost as exc:  # not the configuration's failure: --resume runs it again
            entry.status, entry.reason = "interrupted", str(exc)
            entry.finished_at = utc_now()
            save()
            raise
        back = Experiment.model_validate(got["entry"])
        with self.lock:
            entry.__dict__.update(back.__dict__)
            data = io.BytesIO(base64.b64decode(got["files"]))
            with tarfile.open(fileobj=data, mode="r:gz") as tar:
                tar.extractall(ctx.run_dir, filter="data")
            save()
        if got.get("here"):  # Ctrl-C here: what was measured came back first
            raise KeyboardInterrupt
        if got.get("stopped"):  # stopped there: a job cancelled or out of time, a shutdown
            entry.status = "interrupted"
            entry.reason = (
                f"{self.lost.format(where=self.where)} was stopped there before the "
                "experiment finished (cancelled, out of time, or its host shutting down); "
                "what finished before is kept: reportgen run CAMPAIGN --resume goes on"
            )
            save()
            raise HostLost(entry.reason)
        return {
            entry.table: store.read_requests(ctx.run_dir, entry.table),
            entry.control_table: store.read_requests(ctx.run_dir, entry.control_table),
        }

    def _far_side(self, job: remote.Job, name: str) -> list[str]:
        """The command that runs ``job`` there."""
        return self._python("-m", "reportgen.run.remote", name=name)

    def _call(self, job: remote.Job, progress: Any, name: str = "check") -> dict[str, Any]:
        """Send ``job``, relay its progress, return its result; RemoteError when the
        connection ends without one (dropped, the host gone). Ctrl-C closes the far side's
        standard input, waits for what it measured (STOP_GRACE_S), then is raised."""
        argv = self._far_side(job, name)
        if shutil.which(argv[0]) is None:
            raise RemoteError(
                f"{argv[0]} is not installed here: "
                + ("install OpenSSH's client" if argv[0] == "ssh" else "run reportgen where "
                   "Slurm's commands are")
            )  # fmt: skip
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # our Ctrl-C is ours to pass on, by closing its stdin
        )
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        errors: list[bytes] = []
        threading.Thread(target=_drain, args=(proc.stderr, errors), daemon=True).start()
        result: dict[str, Any] | None = None
        interrupted = False
        try:
            proc.stdin.write(remote.encode(job))
            proc.stdin.flush()
            result = _relay(proc.stdout, progress)
        except KeyboardInterrupt:
            interrupted = True
            _close(proc.stdin)
            deadline = time.monotonic() + STOP_GRACE_S
            result = _relay(proc.stdout, progress, deadline)
        except BrokenPipeError:
            pass
        finally:
            _close(proc.stdin)
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:  # all it started (salloc's srun): its group
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if interrupted:
            if result is not None and "entry" in result:
                result["here"] = True
                return result
            raise KeyboardInterrupt
        if result is None:
            said = b"".join(errors).decode("utf-8", "replace").strip().splitlines()
            last = said[-1] if said else "nothing said"
            raise HostLost(
                f"{self.lost.format(where=self.where)} ended before the experiment finished "
                f"({self.name} exit {proc.returncode}: {last}); what finished before is kept: "
                "reportgen run CAMPAIGN --resume goes on"
            )
        if "error" in result and "entry" not in result and job.kind == "experiment":
            raise RemoteError(f"{self.where}: {result['error']}")
        return result


def _relay(
    stream: IO[bytes], progress: Any, deadline: float | None = None
) -> dict[str, Any] | None:
    """The far side's JSON lines: progress shown as it comes, the result returned (None if
    the stream ends without one)."""
    for raw in stream:
        try:
            event = json.loads(raw)
        except ValueError:
            continue  # not ours (a login banner, say)
        kind = event.get("event")
        if kind == "result":
            return dict(event)
        if kind == "phase":
            progress.phase(str(event.get("text", "")))
        elif kind == "warn":
            progress.warn(str(event.get("text", "")))
        elif kind == "level":
            progress.level_start(
                str(event["label"]), int(event["repetition"]), int(event["repetitions"]),
                event.get("requests"),
            )  # fmt: skip
        elif kind == "request":
            progress.request_done(int(event.get("tokens") or 0), bool(event.get("ok")))
        if deadline is not None and time.monotonic() > deadline:
            return None
    return None


def _drain(stream: IO[bytes], into: list[bytes]) -> None:
    for chunk in iter(lambda: stream.read(4096), b""):
        into.append(chunk)
        del into[:-16]  # the last lines are what says why


def _close(stream: IO[bytes]) -> None:
    with contextlib.suppress(OSError):
        stream.close()


class Slurm(Ssh):
    """Each experiment a job step of its own (``srun``) on a node the cluster gives: the
    same far side as over SSH, reached through Slurm instead (its stdin and stdout are the
    step's). A job cancelled (scancel) or out of time gets SIGTERM there, which stops its
    server as a Ctrl-C would."""

    name = "srun"
    lost = "the Slurm job step ({where})"
    spec_key = "slurm"

    @property
    def where(self) -> str:
        s = self.spec
        assert isinstance(s, SlurmHost)
        return f"partition {s.partition}" if s.partition else "the default partition"

    def srun_argv(self, name: str, *command: str) -> list[str]:
        """One job step on one node: a job of its own (``srun``'s)."""
        step = ["srun", "--nodes=1", "--ntasks=1", f"--job-name=reportgen-{name}",
                "--kill-on-bad-exit=1"]  # fmt: skip
        return [*step, *self._asks(), self.python, *command]

    def _asks(self) -> list[str]:
        """What every job asks the cluster for, per node (host.slurm)."""
        s = self.spec
        assert isinstance(s, SlurmHost)
        argv = [f"--partition={s.partition}"] if s.partition else []
        if s.gpus is not None:
            argv.append(f"--gres=gpu:{s.gpus}")
        if s.time:
            argv.append(f"--time={s.time}")
        return [*argv, *s.options]

    def _far_side(self, job: remote.Job, name: str) -> list[str]:
        """A server across nodes (``server.nodes``): a job of that many nodes (``salloc``),
        the far side in a step on its first node, which starts the other ranks as steps of
        their own (``run.nodes``); else one step, as every other job."""
        nodes = job.r.nodes if job.r is not None else 1
        if job.parent is not None and self.campaign.model.campaign.interleave:
            nodes = max(nodes, job.parent.nodes)  # its parent's server runs there too
        if nodes == 1:
            return super()._far_side(job, name)
        job_of = ["salloc", "--quiet", f"--nodes={nodes}", "--ntasks-per-node=1",
                  f"--job-name=reportgen-{name}", *self._asks()]  # fmt: skip
        step = ["srun", "--nodes=1", "--ntasks=1", "--kill-on-bad-exit=1"]
        return [*job_of, *step, self.python, "-m", "reportgen.run.remote"]

    def _python(self, *args: str, name: str = "check") -> list[str]:
        return self.srun_argv(name, *args)

    def check(self) -> tuple[str, float]:
        if shutil.which("srun") is None:
            raise RemoteError(
                "srun is not installed here: run reportgen where Slurm's commands are"
            )
        out = self._ask(self._python(*ASK_VERSION))
        said = out.stderr.strip().splitlines()
        if out.returncode != 0 and said and said[-1].startswith("srun: error"):
            raise RemoteError(
                f"Slurm ({self.where}) did not run a job step: {said[-1]}; nothing was started"
            )
        return self._same_version(out), 0.0

    def record(self) -> dict[str, Any]:
        s = self.spec
        assert isinstance(s, SlurmHost)
        return {"kind": "slurm", "partition": s.partition, "gpus": s.gpus, "time": s.time}


def choose(campaign: Campaign) -> Executor:
    """The campaign's executor (``host.executor``)."""
    host = campaign.model.host
    if host.executor == "slurm":
        return Slurm(host.slurm or SlurmHost.model_validate({}), campaign)
    if host.executor == "ssh":
        if host.ssh is None:  # the schema refuses it; said again for a model built by hand
            raise RemoteError(f"{campaign.path}: host.executor = 'ssh' needs host.ssh")
        return Ssh(host.ssh, campaign)
    return Local()
