"""The executor that runs a campaign's servers and load in this process (``host.executor =
"local"``), and what every executor does (``Executor``): ``executor.Ssh`` and ``executor.Slurm``
do the same on another host, whose far side (``remote``) runs ``Local`` there.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from reportgen import engines
from reportgen.campaign import Resolved
from reportgen.errors import ReportgenError
from reportgen.load.records import RequestRecord
from reportgen.observe import fingerprint
from reportgen.results.model import Experiment, Run
from reportgen.run import calibrate
from reportgen.run.experiment import Judge, run_experiment
from reportgen.run.preflight import preflight
from reportgen.run.session import Context


class Executor(Protocol):
    """Where a campaign's servers and load run: what the runner asks of it."""

    name: str
    lock: Any  # held while the results are saved (experiments at once, campaign.parallel)

    def prepare(self, ctx: Context) -> tuple[dict[str, Any], engines.Flags | None]:
        """The measuring host's fingerprint, and the campaign's preflight there."""
        ...

    def client_ceiling(self) -> dict[str, Any]:
        """The load generator's own ceiling on the measuring host (``run.calibrate``)."""
        ...

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
        """One experiment's server sessions, into ``entry`` and the run directory."""
        ...


class Local:
    """Servers and load in this process, on this host."""

    name = "local"
    lock = threading.RLock()  # the results, saved from experiments at once (parallel)

    def prepare(self, ctx: Context) -> tuple[dict[str, Any], engines.Flags | None]:
        m = ctx.m
        environment = fingerprint.collect(
            ctx.gpu_source,
            ctx.gpu_why,
            repos=[ctx.campaign_dir / p for p in m.host.repos],
            env_keys=sorted(m.server.env),
        )
        flags = preflight(ctx.campaign, environment, ctx.progress)
        return environment, flags

    def client_ceiling(self) -> dict[str, Any]:
        try:
            return calibrate.calibrate()
        except ReportgenError as exc:  # best-effort: the campaign is worth more than the flag
            return {"error": str(exc)}

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
        return run_experiment(ctx, r, parent, entry, save, judge)
