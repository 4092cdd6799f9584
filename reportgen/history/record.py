"""What the history keeps of one run: who it is, what it ran on, what it measured.

A ``RunRecord`` is made from a loaded ``Run`` (``of_run``) and is all that ``history show``,
``check`` and the history report read: the store needs no run directory after ``add``.

- **Identity**: the run's id, its campaign's name, when it started, the sha256 of its results
  file, where it was added from, and the hashes of its raw tables (which stay in the run
  directory: the store references them, it does not copy them).
- **Setup**: the run's fingerprint as flat ``key -> value`` text, in two parts. ``gate`` holds
  what makes two runs' numbers incomparable (the GPUs' model and count, each experiment's model
  checkpoint and workload, typed as it ran): runs whose gate differs are never compared (each
  kind its own stretch of a series). ``setup`` holds everything else a change could come from
  (driver, CUDA, packages, the engine and its build, reportgen, each experiment's flags as
  written and as the engine resolved them, its environment variables; not what the server said
  of itself at each start, nor its seed or ports): where a change point falls, the fields that
  differ there are its suspects. Fields that change from run to run without saying anything
  (``diff.VOLATILE``: memory in use, serial numbers...) are left out, as ``reportgen diff``
  leaves them out.
- **Levels**: each experiment's value of each compared metric at each level, one per
  repetition (a latency at its p50), the unit every statistic of the history starts from.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reportgen import diff
from reportgen.analysis import noise
from reportgen.analysis.welch import values_by_level
from reportgen.campaign.schema import Objective
from reportgen.observe import evidence
from reportgen.results.as_run import _objective
from reportgen.results.differences import flatten
from reportgen.results.embed import table_hashes
from reportgen.results.model import Point, PriorLevel, Run
from reportgen.results.rundir import read_bytes
from reportgen.results.store import results_path

# What is kept per level: the headline metrics, the objective's own metric when it is another
# one, and the output tokens per joule where the GPUs' energy was measured.
KEPT = tuple(m for m, _ in diff.COMPARED)


@dataclass(frozen=True)
class LevelValues:
    """One experiment's metric at one level: its value in each repetition."""

    experiment: str
    metric: str
    concurrency: int
    rate: float | None
    values: tuple[float, ...]

    @property
    def point(self) -> Point:
        return Point(self.concurrency, self.rate)


@dataclass
class RunRecord:
    run_id: str
    campaign: str
    title: str
    started_at: str
    finished_at: str | None
    status: str
    results_sha256: str
    path: str
    objective: dict[str, Any]  # the campaign's [campaign] objective, as written (``goal``)
    engine: str  # the engine's name
    engine_version: str | None
    label: str | None = None  # a version label given at ``history add --label``
    gate: dict[str, str] = field(default_factory=dict)
    setup: dict[str, str] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    levels: list[LevelValues] = field(default_factory=list)
    experiments: list[str] = field(default_factory=list)  # ids, in the campaign's order
    # the spread between server starts it measured, per level of its objective's metric
    # (``analysis.noise.measured_spread``): where a later run on the same host starts from
    starts: list[PriorLevel] = field(default_factory=list)

    @property
    def goal(self) -> Objective:
        """The objective typed as the run read it (``results.as_run``): which metric, which
        way it improves, which levels decide."""
        return _objective(json.dumps(self.objective, sort_keys=True))

    @property
    def metric(self) -> str:
        return str(self.goal.metric)

    def values(self, experiment: str, metric: str) -> dict[Point, tuple[float, ...]]:
        """An experiment's metric by level (``Point``), each level's repetitions."""
        return {
            lv.point: lv.values
            for lv in self.levels
            if lv.experiment == experiment and lv.metric == metric
        }


def of_run(run: Run, path: Path, label: str | None = None) -> RunRecord:
    """What the history keeps of ``run`` (loaded from ``path``, its directory)."""
    results = results_path(path)
    digest = hashlib.sha256(read_bytes(results)).hexdigest()
    folder = results.parent
    gate, setup = setup_of(run)
    engine = run.engine.name
    return RunRecord(
        run_id=run.run_id,
        campaign=str(run.info.get("name") or ""),
        title=str(run.info.get("title") or run.info.get("name") or ""),
        started_at=run.started_at,
        finished_at=run.finished_at,
        status=run.status,
        results_sha256=digest,
        path=str(folder),
        objective=run.objective,
        engine=engine,
        engine_version=engine_version(run),
        label=label,
        gate=gate,
        setup=setup,
        tables=table_hashes(folder),
        levels=levels_of(run),
        experiments=[e.id for e in run.experiments],
        starts=starts_of(run),
    )


def starts_of(run: Run) -> list[PriorLevel]:
    """The spread between server starts ``run`` measured, per level of its objective's
    metric (none where no configuration ran on two starts)."""
    spread = noise.campaign_spread(run.experiments, run.metric)
    return [
        PriorLevel(concurrency=p.concurrency, rate=p.rate, spread=sd, dof=dof)
        for p, (sd, dof) in sorted(spread.items(), key=lambda kv: kv[0].order)
    ]


def engine_version(run: Run) -> str | None:
    """The engine's version as the run recorded it: its package's version where the
    fingerprint lists the engine's package, else what the server said of itself."""
    packages = run.fingerprint.software.packages or {}
    version = packages.get(run.engine.name) if isinstance(packages, dict) else None
    if isinstance(version, str) and version:
        return version
    for e in run.experiments:
        info = e.engine_info or {}
        version = info.get("version")
        if isinstance(version, str) and version:
            return version
    return None


# Beyond ``diff.VOLATILE``: what an engine reports differently at every start (its seed, the
# ports it took, how long its start took, what memory it found), which would make every pair of
# neighbours differ and bury the suspects that matter
NOISE = {
    *diff.VOLATILE,
    "random_seed",
    "port",
    "nccl_port",
    "dist_init_addr",
    "created",
    "startup_time",
    "memory_usage",
    "last_gen_throughput",
}


def _flat(prefix: str, value: Any) -> dict[str, str]:
    return {k: diff.fmt_value(v) for k, v in flatten(value, prefix, skip=NOISE).items() if k}


def setup_of(run: Run) -> tuple[dict[str, str], dict[str, str]]:
    """(gate, setup): the run's fingerprint as flat text, what breaks a series and what a
    change could come from (module docstring). The same fields as ``reportgen diff`` reads."""
    env = run.fingerprint
    gpus = env.gpus
    gate = {"GPUs": gpus.summary()}
    setup: dict[str, str] = {}
    soft = env.software
    for key, value in (
        ("driver", gpus.driver),
        ("CUDA driver", gpus.cuda_driver_version),
        ("packages.installed_packages_sha256", soft.installed_packages_sha256),
    ):
        if value is not None:
            setup[key] = diff.fmt_value(value)
    setup.update(_flat("GPU settings", [d.fields() for d in gpus.devices]))
    setup.update(_flat("packages", soft.packages))
    setup.update(_flat("reportgen", soft.reportgen.fields()))
    setup.update(_flat("torch stack", soft.torch_stack))
    setup.update(_flat("environment variables", soft.env))
    setup.update(_flat("engine", run.engine.model_dump(mode="json", exclude={"flag_check"})))
    setup.update(_flat("host", env.host.fields()))
    for e in run.experiments:
        gate.update(_flat(f"model[{e.id}]", diff.model_identity(e)))
        ran = e.ran_workload  # typed as it ran: a field added since reads as its default then
        if ran is not None:
            gate.update(_flat(f"workload[{e.id}]", ran.model_dump(mode="json")))
        setup.update(_flat(f"flags[{e.id}]", e.args))
        resolved = evidence.server_args(e.log_evidence.found if e.log_evidence else {})
        setup.update(_flat(f"resolved[{e.id}]", resolved or {}))
        setup.update(_flat(f"environment[{e.id}]", e.env))
    return gate, setup


def levels_of(run: Run) -> list[LevelValues]:
    """Every experiment's kept metrics at every level it measured, per repetition."""
    wanted = list(dict.fromkeys((run.metric, *KEPT)))
    out = []
    for e in run.experiments:
        for metric in wanted:
            for point, values in sorted(
                values_by_level(e.levels, metric).items(), key=lambda kv: kv[0].order
            ):
                clean = tuple(float(v) for v in values if v > 0)
                if clean:
                    out.append(LevelValues(e.id, metric, point.concurrency, point.rate, clean))
    return out
