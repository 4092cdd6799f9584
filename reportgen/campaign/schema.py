"""The campaign file's schema: every table and key, its type, default and meaning.

A campaign is an ordered list of experiments. The first is the baseline; every other one is
its parent's server configuration (``based_on``: an earlier id, or ``"best"``, the best
configuration adopted so far, known only while running) plus its own ``args``/``env`` and
minus its ``unset`` keys. Workload overrides apply to the one experiment that names them.
``problems`` loads a file against it; ``resolve`` turns experiments into configurations.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal, Optional

from pydantic import (
    Field,
    create_model,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from reportgen import engines, metrics
from reportgen.campaign.base import (
    DEFAULT_MARGIN,
    ENGINES,
    ID,
    METRICS,
    ArgValue,
    BaseUrl,
    _Model,
    higher_is_better,
    rate_kept,
)
from reportgen.campaign.host import Host
from reportgen.campaign.levels import Point
from reportgen.campaign.workload import Workload
from reportgen.campaign.workload_tables import Repetitions


class Objective(_Model):
    """What decides adoption: a metric, the levels it is judged at, and which way is better."""

    metric: Literal[METRICS] = Field("output_tok_s", description="Metric that decides adoption.")  # type: ignore[valid-type]
    concurrency: list[Annotated[int, Field(ge=1)]] | None = Field(
        None,
        min_length=1,  # [] would judge no level (every verdict inconclusive): refused
        description="Levels at which the metric is judged (all common levels if omitted).",
    )
    request_rate: list[Annotated[float, Field(gt=0, allow_inf_nan=True)]] | None = Field(
        None,
        min_length=1,
        description="Where the workload's request_rate is a list: the rates at which the "
        "metric is judged (all common rates if omitted).",
    )
    direction: Literal["higher", "lower"] | None = Field(
        None, description="Which way is better; defaults to the metric's natural direction."
    )

    def better(self) -> Literal["higher", "lower"]:
        return "higher" if higher_is_better(self.metric, self.direction) else "lower"

    def decides(self, point: Point) -> bool:
        """Whether a level counts: a concurrency level by ``concurrency``, a rate level by
        ``request_rate`` (either left out: every level)."""
        if point.rate is None:
            return self.concurrency is None or point.concurrency in self.concurrency
        return self.request_rate is None or point.rate in self.request_rate

    @field_serializer("request_rate")
    def _rates_kept(self, rates: list[float] | None) -> list[float | str] | None:
        return None if rates is None else [rate_kept(r) for r in rates]


class CampaignInfo(_Model):
    name: str = Field(pattern=ID, description="Short name, used for the output directory.")
    title: str = Field(description="One-line title shown on the report.")
    description: str = Field("", description="Free text: the context of the campaign.")
    objective: Objective = Field(default_factory=lambda: Objective())  # type: ignore[call-arg]
    margin: float = Field(
        DEFAULT_MARGIN,
        gt=0,
        lt=1,
        description="Relative changes smaller than this count as equivalent.",
    )
    alpha: float = Field(
        0.05,
        gt=0,
        le=0.2,
        description="The chance that a change no different from its parent is adopted or "
        "rejected anyway (shared by the objective's levels): for the whole campaign, or for "
        "each experiment (alpha_scope).",
    )
    alpha_scope: Literal["experiment", "campaign"] = Field(
        "campaign",
        description='"campaign": alpha holds for the campaign as a whole, online, by the '
        "fallback procedure: of its k compared experiments each is decided at alpha / k, plus "
        "the rate of the one before it where that one was adopted or rejected (a campaign "
        "decides as it goes, so rules that need every result at once cannot be used); "
        '"experiment": alpha holds for each experiment (more power each, but a campaign of '
        "eight changes that do nothing holds a wrong call far more often).",
    )
    cv_bound: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="Largest coefficient of variation of output tok/s across a level's "
        "repetitions before the repetition-spread check warns.",
    )
    confirm: bool | Literal["best"] | None = Field(
        None,
        description="End the campaign by running the best configuration again (confirm-best), "
        "compared with its first run and with the baseline as measured nearest in time (the "
        "bracket, just before it): its gain measured where nothing chose it. true: also, for "
        "each change adopted on its way, the best configuration without that change "
        '(leave-one-out), to say whether each still pays once the others are in; "best": '
        'confirm-best alone; false: neither. Default: "best" wherever the baseline is '
        "measured again (campaign.anchors), else false. Nothing runs where the baseline stays "
        "the best.",
    )
    interleave: bool = Field(
        False,
        description="Alternate each experiment's repetitions with fresh runs of its parent "
        "(parent, child, child, parent, ...; a fresh server each), and compare the pairs: drift "
        "of the host over time then cancels out. Doubles the servers started.",
    )
    starts: int = Field(
        2,
        ge=1,
        le=8,
        description="Server starts every experiment's repetitions are split over (at most one "
        "per repetition), so the run measures how much two starts of one configuration differ "
        "(which repetitions on one server never show) and each experiment's own start weighs "
        "less on its verdict. 1 starts each experiment once, the baseline still twice: "
        "with the baseline measured again between experiments (campaign.anchors) its "
        "verdicts then rest on the stated spread between starts (campaign.start_spread) "
        "more than on the run's own, and decide less (benchmarks/campaigns.py: a true 10% "
        "gain adopted in 11-29% of simulated campaigns against 50-89% on two starts, at "
        "starts 0.3-5% apart).",
    )
    more_starts: bool = Field(
        True,
        description="Start an experiment once more, for one more repetition, where its "
        "server starts spread more than the other configurations' at an objective level (an "
        "F test at 5%, the check starts_agree): its verdicts take the spread between starts "
        "from every configuration together, which its own starts say is too small for it; "
        "then once more where it is still inconclusive with its ratio inside the margin, "
        "better and worse nowhere (where one more start could show it equivalent). Before it "
        "is decided, and only where it ran on two or more starts (campaign.starts) with a "
        "fixed count of repetitions, not interleaved (benchmarks/campaigns.py, designs "
        "new-2-m and new-2-me: identical configurations whose starts spread four times the "
        "others' were adopted or rejected in 5.6% of experiments instead of 9.4%; new-2-me: "
        "a true +5% adopted in 28-81% of campaigns instead of 26-67%, identical "
        "configurations called equivalent at C=1 in 19-48% instead of 12-24%, for 3-7% more "
        "GPU time).",
    )
    parallel: int = Field(
        1,
        ge=1,
        le=64,
        description='With host.executor = "slurm": experiments run at once, each a job '
        "step on a node of its own, as soon as the one it builds on is decided (based_on = "
        '"best" waits for every earlier one); verdicts are still taken in the campaign\'s '
        "order.",
    )
    prime: bool | None = Field(
        None,
        description="Start the baseline's configuration once before the baseline and warm "
        "every level up on it, then stop it and discard what it measured: the engine's "
        "compile caches (kernels built per batch shape, on first use, kept on disk) are then "
        "filled before anything is measured, so the first configuration on a fresh machine "
        "is not the only one that pays for them. Default: on for vLLM and SGLang.",
    )
    bracket: bool | None = Field(
        None,
        description="End the campaign by measuring the baseline's configuration again "
        "(experiment baseline-end, compared with the baseline): how far the host drifted "
        "over the campaign, said in the report (an adoption the drift could explain is "
        "withdrawn), and one more start of the baseline for the noise model. Default: on for "
        "every engine but the simulator; off where reportgen did not start the server "
        "(server.base_url).",
    )
    anchors: int | None = Field(
        None,
        ge=0,
        le=32,
        description="Measure the parent of the experiment just run (the baseline's "
        "configuration, or the best it was built on) again, on one server start, after every "
        "this many experiments (experiments <parent>-again-1, -2, ...), and after the last "
        "where its parent is not the baseline, so each experiment is compared with its parent "
        "as measured nearest in time (both, where two are as near): drift of the host over "
        "the campaign then bends no ratio, and every re-measurement is one more start for the "
        "noise model. "
        "0: never (the bracket at the end only). Default: 2 wherever the bracket is on; off "
        "where reportgen did not start the baseline's server (base_url) or experiments run "
        "at once (parallel).",
    )
    start_spread: float = Field(
        0.02,
        gt=0,
        lt=1,
        description="How much two server starts of one configuration differ (relative sd) "
        "before the run has measured it: the noise model starts from this, weighed as three "
        "starts, and moves level by level towards what the baseline's starts show (its "
        "re-measurements, campaign.anchors); set aside where those differ far more, giving "
        "way to the largest spread they allow where they differ far less, and "
        "replaced by what earlier runs on the host measured (reportgen run --history) where "
        "not stated here. Never taken as nothing: an experiment on one start is never "
        "compared as if starts did not differ. An H100 GPU-bound showed 0.1-1.5% (vLLM and "
        "SGLang, an 8B model); a level bound by the server's CPU, 13%. 2% holds identical "
        "configurations at 0-2.5% of simulated experiments where starts differ by 0.3-5% "
        "(benchmarks/campaigns.py).",
    )
    random_weights: bool = Field(
        False,
        description="The model has random weights (a test model built locally, say): its "
        "text is meaningless by construction, so golden answers are not judged (that check "
        "is skipped, saying why); greedy answers are still compared with the baseline's.",
    )


class Server(_Model):
    engine: Literal[ENGINES] = Field("generic", description="Engine adapter.")  # type: ignore[valid-type]
    command: list[str] | None = Field(
        None,
        min_length=1,
        description="Command that starts the server (engine default if omitted).",
    )
    args: dict[str, ArgValue] = Field(default_factory=dict, description="Flags, without dashes.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    host: str = Field(
        "127.0.0.1",
        pattern=r"^[^\s/:]+$|^[0-9A-Fa-f:]+$",
        description="Address the client connects to: a name or an address of this machine, "
        "without a scheme or port (the port is the server's port flag).",
    )
    model: str | None = Field(
        None,
        description="The model name sent with every request (default: the first one the "
        "server's /v1/models lists, else the model flag it was started with).",
    )
    base_url: BaseUrl | None = Field(
        None,
        description="An OpenAI-compatible server that is already running "
        "(http://host:port): every experiment sends its load there and reportgen starts "
        "nothing, so command, args and env do not apply. An experiment's own base_url "
        "overrides it.",
    )
    nodes: int = Field(
        1,
        ge=1,
        le=64,
        description='Nodes one server spans (host.executor = "slurm"): each experiment is a '
        "job of this many nodes, rank 0 on the first serving, the others started there with "
        "srun and the engine's own multi-node flags (SGLang's --nnodes/--node-rank/"
        "--dist-init-addr, vLLM's --nnodes/--node-rank/--master-addr/--headless). An "
        "experiment's own nodes overrides it.",
    )
    ready_timeout_s: float = Field(
        600, gt=0, allow_inf_nan=False, description="Deadline for the server to be ready."
    )
    stop_timeout_s: float = Field(
        30, gt=0, allow_inf_nan=False, description="Grace period before SIGKILL."
    )


def _optional_copy(model: type[_Model], name: str, doc: str) -> type[_Model]:
    """The same fields as ``model``, each optional with no default (for overrides)."""
    fields: dict[str, Any] = {}
    for key, info in model.model_fields.items():
        copy = FieldInfo.merge_field_infos(info, default=None)
        copy.default_factory = None
        fields[key] = (Optional[info.annotation], copy)  # noqa: UP045 - a runtime type
    out = create_model(name, __base__=_Model, __doc__=doc, **fields)
    return out


WorkloadOverride = _optional_copy(
    Workload, "WorkloadOverride", "Per-experiment changes to the campaign's workload."
)


class Reference(_Model):
    name: str
    metric: Literal[METRICS]  # type: ignore[valid-type]
    value: float = Field(gt=0)
    concurrency: int | None = Field(None, ge=1)
    gpus: int = Field(1, ge=1, description="GPUs the number was measured on (for per-GPU values).")
    source: str = Field(description="Where the number was published (a URL).")
    conditions: str = ""


STATS = metrics.STATS  # a latency bound's statistic


class Check(_Model):
    """A campaign's own assumption, one of: a server log line that must appear
    (``log_contains``) or must not (``log_absent``), as a regular expression; or a bound on a
    metric (``metric`` with ``max`` and/or ``min``) at every level or the ones named."""

    log_contains: str | None = Field(None, description="Regex a server log line must match.")
    log_absent: str | None = Field(None, description="Regex no server log line may match.")
    metric: Literal[METRICS] | None = Field(  # type: ignore[valid-type]
        None, description="Metric to bound (mean across repetitions of each level)."
    )
    stat: Literal[STATS] = Field(  # type: ignore[valid-type]
        "p50", description="Latencies: which statistic of the level is bounded."
    )
    max: float | None = Field(None, description="The metric must not exceed this.")
    min: float | None = Field(None, description="The metric must not fall below this.")

    @field_validator("max", "min")
    @classmethod
    def _a_number(cls, value: float | None) -> float | None:
        if value is not None and math.isnan(value):
            raise ValueError("nan is no bound: give a number")
        return value

    concurrency: list[Annotated[int, Field(ge=1)]] | None = Field(
        None, description="Levels the bound applies to (default: every level run)."
    )
    invalidates: bool = Field(
        False,
        description='A failure makes the experiment\'s verdict "failed" (its numbers cannot '
        "be used), not only a failed check in the report.",
    )
    description: str = Field("", description="What the check means, shown in the report.")

    @model_validator(mode="after")
    def _one_kind(self) -> Check:
        given = [x for x in (self.log_contains, self.log_absent, self.metric) if x is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of log_contains, log_absent or metric")
        if self.metric is None:
            if self.max is not None or self.min is not None or self.concurrency is not None:
                raise ValueError("max, min and concurrency go with metric")
            try:
                re.compile(str(given[0]))
            except re.error as exc:
                raise ValueError(f"not a valid regular expression ({exc})") from None
        elif self.max is None and self.min is None:
            raise ValueError(f"metric = {self.metric!r} needs max or min")
        elif self.max is not None and self.min is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max})")
        return self


class GoldenPrompt(_Model):
    """A golden prompt sent at temperature 0 to every configuration once it is ready, before
    warm-up; its answer must match ``expect`` and must not be degenerate (loops, garbage)."""

    prompt: str = Field(min_length=1, description="The prompt (a chat message, or raw text).")
    expect: str | None = Field(
        None, description="Regex the answer must match (searched, case-sensitive)."
    )
    max_tokens: int = Field(64, ge=1, le=4096, description="Output limit for the answer.")

    @field_validator("expect")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression ({exc})") from None
        return value


ExpectMetric = Literal[
    "objective", "output_tok_s", "ttft_ms", "itl_ms", "e2e_ms", "ttft_ms_p99", "e2e_ms_p99"
]


class Expect(_Model):
    """An expectation the report judges as written, level by level, without reading English:
    ``{ verdict = "worse", at = [16, 64], text = "Slower where batches grow" }``."""

    verdict: Literal["better", "worse", "equivalent", "fails"] = Field(
        description="What the comparison with the parent shows: better, worse or equivalent "
        "(within campaign.margin) at each level of `at`; fails: the experiment fails (its "
        "server does not start, or a check such as its outputs' invalidates it)."
    )
    at: list[Annotated[int, Field(ge=1)]] | None = Field(
        None,
        min_length=1,
        description="The concurrency levels it speaks of (default: every objective level).",
    )
    rate: list[Annotated[float, Field(gt=0)]] | None = Field(
        None,
        min_length=1,
        description="The request-rate levels it speaks of (req/s; inf for all at once), where "
        "the workload's request_rate is a list; instead of `at`.",
    )
    metric: ExpectMetric = Field(
        "objective",
        description="What it speaks of: the objective (default), output_tok_s, a latency's "
        "median (ttft_ms, itl_ms, e2e_ms) or tail (ttft_ms_p99, e2e_ms_p99).",
    )
    text: str = Field("", description="The expectation in words, as the report shows it.")

    def words(self) -> str:
        """Its text, or what it says in plain words."""
        if self.text:
            return self.text
        what = "" if self.metric == "objective" else f"{self.metric} "
        where = f" at C={','.join(str(c) for c in self.at)}" if self.at else ""
        if self.rate:
            where = f" at R={','.join(f'{r:g}' for r in self.rate)}/s"
        return f"{what}{self.verdict}{where}" if self.verdict != "fails" else "fails"


class ExperimentSpec(_Model):
    id: str = Field(pattern=ID)
    why: str = Field(min_length=1, description="Why this change is tried.")
    expect: str | Expect | list[Expect] = Field(
        "",
        description="What you expect to see: one or more structured expectations ({ "
        "verdict, at, metric, text }), each judged level by level against the comparison "
        "with the parent; words alone are shown as written and not judged.",
    )
    based_on: str | None = Field(
        None, description='Parent: an earlier experiment id, or "best". Default: the baseline.'
    )
    args: dict[str, ArgValue] = Field(default_factory=dict)
    unset: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    base_url: BaseUrl | None = Field(
        None,
        description="This experiment's server is already running there (a deployed "
        "endpoint, a server started by hand): reportgen sends the load and starts nothing; "
        "the report says it cannot vouch for that server's configuration.",
    )
    nodes: int | None = Field(
        None, ge=1, le=64, description="Nodes its server spans (default: its parent's)."
    )
    workload: WorkloadOverride | None = None  # type: ignore[valid-type]
    checks: list[Check] = Field(default_factory=list)

    @property
    def expect_text(self) -> str:
        """The expectation in words (a structured one's ``text``, or its plain words)."""
        if isinstance(self.expect, str):
            return self.expect
        items = self.expect if isinstance(self.expect, list) else [self.expect]
        return "; ".join(x.words() for x in items)

    @property
    def expects(self) -> list[dict[str, Any]] | None:
        """The structured expectations, as the results keep them (None: words only)."""
        if isinstance(self.expect, str):
            return None
        items = self.expect if isinstance(self.expect, list) else [self.expect]
        return [x.model_dump(exclude_defaults=True) | {"verdict": x.verdict} for x in items]


class CampaignModel(_Model):
    campaign: CampaignInfo
    host: Host = Field(default_factory=lambda: Host())  # type: ignore[call-arg]
    server: Server = Field(default_factory=lambda: Server())  # type: ignore[call-arg]
    workload: Workload = Field(default_factory=lambda: Workload())  # type: ignore[call-arg]
    reference: list[Reference] = Field(default_factory=list)
    probe: list[GoldenPrompt] = Field(
        default_factory=list, description="Golden prompts checked on every configuration."
    )
    check: list[Check] = Field(
        default_factory=list, description="Checks applied to every experiment."
    )
    experiment: list[ExperimentSpec] = Field(min_length=1)

    @property
    def primes(self) -> bool:
        """Whether the baseline's configuration is started once first (``campaign.prime``;
        by default for the engines that compile kernels at first use and cache them)."""
        given = self.campaign.prime
        return given if given is not None else engines.get(self.server.engine).compiles

    @property
    def brackets(self) -> bool:
        """Whether the baseline is measured again at the end (``campaign.bracket``)."""
        given = self.campaign.bracket
        return given if given is not None else not engines.get(self.server.engine).simulated

    def recorded(self) -> dict[str, Any]:
        """The campaign as a run's results keep it: its re-measurements of the baseline and
        its confirmation as the run makes them (``campaign.anchors``, ``campaign.confirm``,
        the defaults resolved for the engine)."""
        dump = self.model_dump(mode="json")
        dump["campaign"]["anchors"] = self.anchor_every
        dump["campaign"]["confirm"] = self.confirms
        return dump

    @property
    def confirms(self) -> bool | Literal["best"]:
        """What ends the campaign (``campaign.confirm``): True (the best again and each
        adopted change left out), "best" (the best again), or False."""
        given = self.campaign.confirm
        if given is not None:
            return given
        return "best" if self.anchor_every else False

    @property
    def anchor_every(self) -> int:
        """After how many experiments the baseline is measured again (``campaign.anchors``;
        0: never)."""
        given = self.campaign.anchors
        if given is not None:
            return given
        started = self.server.base_url is None and self.experiment[0].base_url is None
        plain = started and self.campaign.parallel == 1 and not self._searches
        return 2 if self.brackets and plain else 0

    @property
    def _searches(self) -> bool:
        """Whether the baseline's workload is a find_max search."""
        own = self.experiment[0].workload
        return self.workload.find_max is not None or getattr(own, "find_max", None) is not None

    @model_validator(mode="after")
    def _anchors(self) -> CampaignModel:
        n = self.campaign.anchors
        if not n:
            return self
        base = self.experiment[0]
        if self.server.base_url is not None or base.base_url is not None:
            raise ValueError(
                f"campaign.anchors = {n} measures the baseline again on a fresh server, but "
                "its server is already running at base_url and reportgen starts nothing: set "
                "campaign.anchors = 0, or leave base_url out"
            )
        if self.campaign.parallel > 1:
            raise ValueError(
                f"campaign.anchors = {n} measures the baseline again between experiments, "
                f"which campaign.parallel = {self.campaign.parallel} runs at once: set "
                "campaign.anchors = 0, or parallel = 1"
            )
        if self._searches:
            raise ValueError(
                f"campaign.anchors = {n}: the baseline's workload is a find_max search, whose "
                "answer is not a level to measure again: set campaign.anchors = 0"
            )
        return self

    @model_validator(mode="after")
    def _where_it_runs(self) -> CampaignModel:
        if self.campaign.parallel > 1 and self.host.executor != "slurm":
            raise ValueError(
                f"campaign.parallel = {self.campaign.parallel} runs experiments at once on "
                'nodes of their own: set host.executor = "slurm" (or run with --slurm; one '
                "host runs one at a time, or their numbers would share its GPUs), or leave "
                "parallel out"
            )
        for e in self.experiment:
            if e.nodes is not None and (e.base_url or self.server.base_url):
                raise ValueError(
                    f"experiment {e.id!r}: nodes = {e.nodes}, but its server is already "
                    "running at base_url and reportgen starts nothing: leave nodes out"
                )
        spans = [(f"experiment {e.id!r}", e.nodes) for e in self.experiment if e.nodes]
        for where, n in [("server", self.server.nodes), *spans]:
            if n > 1 and self.host.executor != "slurm":
                raise ValueError(
                    f"{where}: nodes = {n} spans a server across a Slurm job's nodes: set "
                    'host.executor = "slurm" (or run with --slurm), or leave nodes out'
                )
            if n > 1 and not engines.get(self.server.engine).node_flags:
                raise ValueError(
                    f"{where}: nodes = {n}, but reportgen knows no multi-node flags for the "
                    f"{self.server.engine} engine: use "
                    + " or ".join(k for k, e in engines.ENGINES.items() if e.node_flags)
                    + ", or leave nodes out and pass the engine's flags in server.args"
                )
        if self.campaign.parallel > 1 and isinstance(self.workload.repetitions, Repetitions):
            raise ValueError(
                "campaign.parallel: adaptive repetitions read the verdicts of the experiments "
                "before, so they run one at a time: give workload.repetitions a number"
            )
        return self


def json_schema() -> dict[str, Any]:
    """The campaign file's JSON Schema (for editors: taplo, Even Better TOML)."""
    schema = CampaignModel.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "reportgen campaign file"
    return schema
