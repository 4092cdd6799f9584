"""The typed results of a run: what results.json holds, and what every stage passes on.

One tree, written by the runner and read by analysis, render, verify and diff::

    Run                      the run: campaign, environment, status, resumptions
      Experiment             one experiment: its configuration, what happened, its verdict
        Session              one server launch (start, warm-up, the levels it ran, its stop)
        Level                one concurrency level x repetition: its window and its Summary
          Summary            what the level's requests add up to (``analysis.summary``)
        Aggregate            one concurrency level across its repetitions (a Stat per metric)
        Control              the parent's configuration, interleaved with this experiment
        Check                one assumption checked: pass, warn, fail or skip, with evidence
        Decision             the verdict, with its Comparisons against parent and baseline

``Level`` down and ``Aggregate`` are in ``results.levels``; ``Check``, ``Comparison`` and
``Decision`` in ``results.verdicts``; an experiment's smaller records (``Failure``, ``Ready``,
``Stop``...) in ``results.records``; this module holds the run, its experiments and sessions.

Keys this reportgen does not know (written by a later one) are kept as they are, so reading
and saving a results file never loses anything. Per-request rows are not here: they are
``reportgen.load.records.RequestRecord`` in the tables beside results.json (``store``).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from reportgen.campaign.base import DEFAULT_MARGIN as DEFAULT_MARGIN
from reportgen.campaign.base import higher_is_better as higher_is_better

# the campaign's defaults, re-exported for readers of results
from reportgen.campaign.levels import Point as Point
from reportgen.campaign.levels import point_of as point_of
from reportgen.campaign.levels import rate_text as rate_text
from reportgen.campaign.levels import sorted_points as sorted_points
from reportgen.campaign.schema import CampaignInfo, Objective
from reportgen.campaign.workload import Workload
from reportgen.campaign.workload_tables import Repetitions
from reportgen.observe.environment import Environment
from reportgen.results.as_run import _info_as_run, _objective, _workload_as_run, workload_as_run
from reportgen.results.base import _Model
from reportgen.results.engine_log import LogEvidence
from reportgen.results.findings import Findings
from reportgen.results.levels import Aggregate, Level, SearchRecord, Settle

# an experiment's smaller records, re-exported: run and analysis import them from here
from reportgen.results.records import ConfigChange as ConfigChange
from reportgen.results.records import Failure as Failure
from reportgen.results.records import FlagChange as FlagChange
from reportgen.results.records import Look as Look
from reportgen.results.records import ProbeAnswer as ProbeAnswer
from reportgen.results.records import RanOn as RanOn
from reportgen.results.records import Ready as Ready
from reportgen.results.records import Stop as Stop
from reportgen.results.records import TelemetryInfo as TelemetryInfo
from reportgen.results.records import Warmup as Warmup
from reportgen.results.verdicts import Check, Decision, Redecision

SCHEMA_VERSION = 3
CONTROL_SUFFIX = "~control"  # "~" is not allowed in experiment ids: no clash with one
DEFAULT_METRIC = "output_tok_s"

Status = Literal["pending", "running", "ok", "failed", "interrupted"]
FINISHED = ("ok", "failed")  # an experiment in either state is kept by --resume


def control_table(exp_id: str) -> str:
    """The request table of an experiment's interleaved runs of its parent."""
    return f"{exp_id}{CONTROL_SUFFIX}"


class Session(_Model):
    """One server launch of an experiment: its configuration's or, interleaved, its
    parent's ("control")."""

    index: int
    # "prime": the baseline's configuration started once before it (``campaign.prime``),
    # its levels warmed up and nothing measured
    role: Literal["experiment", "control", "prime"] = "experiment"
    config: str
    repetitions: list[int] = Field(default_factory=list)
    log_file: str
    ready_s: float | None = None
    warmup: Warmup | None = None
    settled: list[Settle] = Field(default_factory=list)  # each level's own warm-up
    stop: Stop | None = None
    error: str | None = None
    log_tail: str | None = None
    log_heading: str | None = None


class Control(_Model):
    """The parent's configuration run alternately with the experiment (``interleave``), or,
    ``grown``, once more beside each round of adaptive repetitions: then its runs are added
    to the parent's own and compared with unpaired, not pair by pair."""

    of: str
    levels: list[Level] = Field(default_factory=list)
    error: str | None = None
    grown: bool = False
    by_level: list[Aggregate] = Field(default_factory=list)

    @property
    def usable(self) -> bool:
        """Whether its runs count: some were measured, and none failed."""
        return bool(self.levels) and not self.error

    @property
    def paired(self) -> bool:
        """Whether the experiment is compared with its runs pair by pair (interleaved, not
        grown): the parent's configuration ran beside it, on its machine."""
        return self.usable and not self.grown


class Experiment(_Model):
    """One experiment: why it was tried, what it ran with, what happened, what it decided."""

    id: str
    why: str = ""
    expect: str | None = None
    # its structured expectations as the campaign gave them (``campaign.schema.Expect``:
    # verdict, at, metric, text); None where it gave words only
    expects: list[dict[str, Any]] | None = None
    based_on: str | None = None
    # "experiment" (the campaign file's), or the end of a campaign with ``confirm``: "confirm"
    # (the best configuration run again) and "leave-one-out" (it without ``leaves_out``'s change)
    role: Literal["experiment", "confirm", "leave-one-out", "bracket", "anchor"] = "experiment"
    leaves_out: str | None = None
    status: Status = "pending"
    reason: str | None = None
    failure: Failure | None = None  # a failed experiment's reason, as data
    levels: list[Level] = Field(default_factory=list)
    # its configuration, resolved and redacted (``run.plan.describe``)
    parent: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)
    command: list[str] = Field(default_factory=list)
    # a server reportgen did not start (already running there): no command, args or env
    base_url: str | None = None
    flag_diff: list[FlagChange] = Field(default_factory=list)
    workload: dict[str, Any] | None = None  # the campaign's Workload, as dumped
    log_file: str | None = None
    # what happened
    started_at: str | None = None
    finished_at: str | None = None
    sessions: list[Session] = Field(default_factory=list)
    looks: list[Look] = Field(default_factory=list)  # adaptive repetitions, in order
    # campaign.more_starts: where its starts spread more than the others' (one more start)
    more_start: str | None = None
    # and where, then inconclusive inside the margin, it could still be shown equivalent
    more_open: str | None = None
    search: SearchRecord | None = None  # workload.find_max: the probes and the answer
    # where it ran, when not here: the host's name, and a Slurm job's id and node
    ran_on: RanOn | None = None
    control: Control | None = None
    server: Ready | None = None
    engine_info: dict[str, Any] | None = None
    probes: list[ProbeAnswer] | None = None
    warmup: Warmup | None = None
    stop: Stop | None = None
    warnings: list[str] = Field(default_factory=list)
    telemetry: TelemetryInfo | None = None
    gpu_counters: dict[str, Any] | None = None
    campaign_checks: list[dict[str, Any]] = Field(default_factory=list)
    log_evidence: LogEvidence | None = None
    server_args_resolved: dict[str, Any] | None = None  # as the engine's log printed them
    # its resolved configuration as the engine's log printed it at its first start, flattened
    # (``observe.evidence.engine_config``), and what of it differs from the parent's though
    # no changed flag names it (``analysis.engine_config.also_changed``)
    engine_config: dict[str, Any] | None = None
    also_changed: list[ConfigChange] = Field(default_factory=list)
    model_files: dict[str, Any] | None = None
    log_tail: str | None = None
    log_heading: str | None = None
    # what it adds up to
    by_level: list[Aggregate] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    decision: Decision | None = None

    @model_serializer(mode="wrap")
    def _without_unread_config(self, handler: SerializerFunctionWrapHandler) -> Any:
        """No ``engine_config`` or ``also_changed`` where none was read (runs recorded before
        them), no ``more_start`` or ``more_open`` where none was made: a run read and saved
        again keeps its form."""
        out = handler(self)
        if isinstance(out, dict):
            for key in ("engine_config", "expects", "more_start", "more_open"):
                if out.get(key, 0) is None:
                    out.pop(key)
            if out.get("also_changed") == []:
                out.pop("also_changed")
        return out

    @property
    def table(self) -> str:
        """Its request and telemetry tables' name."""
        return self.id

    @property
    def ran_workload(self) -> Workload | None:
        """The workload it ran, typed as the run ran it (``as_run.workload_as_run``); None
        where its results do not record one."""
        if not self.workload:
            return None
        return _workload_as_run(json.dumps(self.workload, sort_keys=True))

    @property
    def repetitions_asked(self) -> int | Repetitions:
        """``workload.repetitions`` as it ran (a count, or adaptive bounds); 1 where its
        results do not record a workload."""
        wl = self.ran_workload
        return wl.repetitions if wl is not None else 1

    @property
    def control_table(self) -> str:
        return control_table(self.id)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def finished(self) -> bool:
        """Run to its end and decided: kept as it is by ``--resume`` (one that ran but was not
        yet decided when the run stopped runs again)."""
        return self.status in FINISHED and self.decision is not None

    def finished_before_failure(self) -> list[Point]:
        """The levels a failed experiment completed before its server failed: none of their
        runs cut short, some of their requests answered. Their numbers are measurements (the
        verdict stays failed); the level it died in is not."""
        if self.ok:
            return []
        died = {lv.point.label for lv in self.levels if lv.aborted}
        if self.failure is not None and self.failure.level is not None:
            died.add(self.failure.level.label)  # by label: one read from words lacks its cap
        return sorted_points(
            a.point
            for a in self.by_level
            if a.point.label not in died and not a.all_failed and a.requests
        )

    def all_levels(self) -> list[Level]:
        """Its own levels, then its parent's interleaved ones."""
        return self.levels + (self.control.levels if self.control else [])

    def aggregate(self, point: Point | int) -> Aggregate | None:
        want = Point.of(point)
        return next((a for a in self.by_level if a.point == want), None)


# -- the run --------------------------------------------------------------------------------


class CampaignFile(_Model):
    path: str
    sha256: str
    text: str = ""


class EngineRecord(_Model):
    name: str
    simulated: bool = False
    flag_check: dict[str, Any] | None = None  # ``engines.Flags.record``


class Resumption(_Model):
    """One ``--resume``: when, after what, what was kept, and where it ran."""

    at: str
    after: str | None = None
    kept: list[str] = Field(default_factory=list)
    campaign_changed: dict[str, Any] | None = None  # sha256_before, added, removed
    reportgen_version: str | None = None
    host: str | None = None
    gpus: list[str | None] = Field(default_factory=list)
    gpu_uuids: list[str | None] = Field(default_factory=list)  # None: not recorded then


class PriorLevel(_Model):
    concurrency: int
    rate: float | None = None
    spread: float  # relative sd between server starts
    dof: float  # its degrees of freedom: the weight it has, in starts

    @property
    def point(self) -> Point:
        return Point(self.concurrency, self.rate)


class StartPrior(_Model):
    """The spread between server starts a run's decisions start from, measured by earlier
    runs of its campaign on the same host (``history.prior``) instead of stated
    (``campaign.start_spread``): per level of the objective's metric, with its weight."""

    metric: str
    source: str  # the history file it was read from
    runs: list[str] = Field(default_factory=list)  # their run ids
    levels: list[PriorLevel] = Field(default_factory=list)

    def by_level(self) -> dict[Point, tuple[float, float]]:
        return {lv.point: (lv.spread, lv.dof) for lv in self.levels}


class ReplicatedLevel(_Model):
    """One objective level of a replication (``Replication``): the earlier run's ratio of
    the experiment to the baseline there, and this run's, with its interval."""

    concurrency: int
    rate: float | None = None
    then: float  # the earlier run's ratio (geometric means of its repetitions)
    now: float  # this run's ratio (its comparison with the baseline)
    ci_low: float | None = None
    ci_high: float | None = None

    @property
    def point(self) -> Point:
        return Point(self.concurrency, self.rate)

    @property
    def within(self) -> bool:
        """The earlier ratio lies inside this run's interval."""
        if self.ci_low is None or self.ci_high is None:
            return False
        return self.ci_low <= self.then <= self.ci_high


class Replication(_Model):
    """A judged experiment of this run that an earlier run of the same campaign in the
    history store also ran (``history.replication``): where and when that run was made, and
    its ratio to the baseline at each objective level against this run's."""

    experiment: str
    run_id: str
    started_at: str
    gpus: str  # the earlier run's GPUs, as the history records them
    levels: list[ReplicatedLevel] = Field(default_factory=list)

    @property
    def replicated(self) -> bool:
        """Every level's earlier ratio lies inside this run's interval there."""
        return bool(self.levels) and all(lv.within for lv in self.levels)


RunStatus = Literal["running", "complete", "incomplete"]


class Run(_Model):
    """A whole run: results.json."""

    schema_version: int = SCHEMA_VERSION
    reportgen_version: str
    run_id: str
    status: RunStatus = "running"
    status_reason: str | None = None
    started_at: str
    finished_at: str | None = None
    campaign: dict[str, Any] = Field(default_factory=dict)  # the CampaignModel, as dumped
    campaign_file: CampaignFile
    engine: EngineRecord
    environment: dict[str, Any] = Field(default_factory=dict)  # ``observe.fingerprint``
    best: str | None = None
    client_ceiling: dict[str, Any] | None = None  # ``run.calibrate``
    experiments: list[Experiment] = Field(default_factory=list)
    resumed: list[Resumption] = Field(default_factory=list)
    # ``reportgen render --redecide``: each time the decisions were taken again, by which
    # method, and what they had been (experiment id -> verdict)
    redecided: list[Redecision] = Field(default_factory=list)
    # the spread between starts taken from earlier runs (None: campaign.start_spread; then
    # left out of results.json, so a run read and saved again keeps its form)
    start_prior: StartPrior | None = None
    # judged experiments that earlier runs of the campaign in the history store also ran
    # (``history.replication``; None: no history was read, and left out of results.json)
    replications: list[Replication] | None = None
    # what the analysis found beyond the decisions (``analysis.findings``), which the report
    # formats; None in runs recorded before them (then left out of results.json)
    findings: Findings | None = None

    @model_serializer(mode="wrap")
    def _without_unset_prior(self, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(self)
        if isinstance(out, dict):
            for key in ("start_prior", "replications", "findings"):
                if out.get(key, 0) is None:
                    out.pop(key)
        return out

    @model_validator(mode="after")
    def _readable_objective(self) -> Run:
        """The objective is read by the schema's rules (``goal``): one it cannot read is a
        problem of the file, said when it is read, not when a verdict is drawn."""
        try:
            _ = self.goal
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise ValueError(f"campaign.campaign.objective.{where}: {first['msg']}") from None
        return self

    @property
    def fingerprint(self) -> Environment:
        """``environment`` typed (``observe.environment``), as its collectors recorded it."""
        return Environment.of(self.environment)

    # -- what the campaign said, with its defaults ------------------------------------------

    @property
    def info(self) -> dict[str, Any]:
        """The campaign file's [campaign] table."""
        return dict(self.campaign.get("campaign") or {})

    @property
    def settings(self) -> CampaignInfo:
        """The [campaign] table typed, as the run that wrote it ran it (``info_as_run``)."""
        return _info_as_run(json.dumps(self.info, sort_keys=True))

    def prior_for(self, metric: str, stat: str = "p50") -> float | dict[Point, tuple[float, float]]:
        """The spread between starts the "anchored" method starts from for ``metric``: the
        earlier runs' measured one (``start_prior``) for the objective's mean, else the
        stated ``campaign.start_spread``."""
        prior = self.start_prior
        if prior is not None and prior.levels and prior.metric == metric and stat == "p50":
            return prior.by_level()
        return self.settings.start_spread

    @property
    def objective(self) -> dict[str, Any]:
        return dict(self.info.get("objective") or {})

    @property
    def goal(self) -> Objective:
        """``campaign.objective`` as the campaign schema reads it: its rules (which levels
        decide, which way is better, the metric's default) have that one implementation."""
        return _objective(json.dumps(self.objective, sort_keys=True))

    @property
    def metric(self) -> str:
        return str(self.goal.metric)

    @property
    def objective_levels(self) -> list[int] | None:
        """``campaign.objective.concurrency``: the concurrencies whose levels decide (a rate
        level counts by its cap); None: all."""
        return self.goal.concurrency

    def decides(self, point: Point) -> bool:
        """Whether a level counts toward the objective (``Objective.decides``)."""
        return self.goal.decides(point)

    def objective_points(self, points: Any) -> list[Point]:
        """Of these levels, the ones that decide (``decides``): in the order
        ``objective.concurrency`` names them, else in order of load."""
        got = [p for p in sorted_points(points) if self.decides(p)]
        named = self.objective_levels
        if named:
            got.sort(key=lambda p: named.index(p.concurrency) if p.rate is None else len(named))
        return got

    def objective_count(self, points: Any) -> int:
        """How many levels the objective is judged at, for an experiment that ran these:
        the objective's list where it names them, else its own levels."""
        mine = set(points)
        if any(p.rate is not None for p in mine):
            return len(self.goal.request_rate or mine)
        return len(self.objective_levels or mine)

    @property
    def higher_is_better(self) -> bool:
        return self.goal.better() == "higher"

    @property
    def margin(self) -> float:
        return self.settings.margin

    @property
    def default_workload(self) -> dict[str, Any]:
        return dict(self.campaign.get("workload") or {})

    @property
    def workload(self) -> Workload:
        """The campaign's workload, typed, as the run ran it (``workload_as_run``)."""
        return workload_as_run(self.default_workload)

    # -- its experiments -----------------------------------------------------------------

    @property
    def baseline(self) -> Experiment | None:
        return self.experiments[0] if self.experiments else None

    def experiment(self, exp_id: str | None) -> Experiment | None:
        return next((e for e in self.experiments if e.id == exp_id), None)

    def known_at(self, exp_id: str) -> list[Experiment]:
        """The experiments up to ``exp_id``, itself included: what the run knew when it
        decided and checked it (all of them where it is not one of the run's)."""
        ids = [e.id for e in self.experiments]
        return self.experiments[: ids.index(exp_id) + 1] if exp_id in ids else self.experiments

    def outcome(self, e: Experiment) -> str:
        """What became of ``e``, in the word every table says it with: its verdict where it
        was decided ("not judged" where its numbers are no verdict: ``Decision.unjudged``);
        "interrupted" or "failed" where it stopped so; "not started" where this run ended
        before it (a run still saving: "pending", or "running" for the one under way)."""
        if e.decision is not None:
            return "not judged" if e.decision.unjudged else e.decision.verdict
        if e.status in ("pending", "running") and self.status != "running":
            return "not started" if e.status == "pending" else "interrupted"
        return e.status

    def finished_prefix(self) -> int:
        """How many experiments, from the first, are finished (kept by ``--resume``)."""
        n = 0
        for e in self.experiments:
            if not e.finished:
                break
            n += 1
        return n

    def dump(self) -> dict[str, Any]:
        """As results.json holds it (JSON types; numpy scalars in evidence as numbers)."""
        return self.model_dump(mode="json", fallback=_plain)


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
