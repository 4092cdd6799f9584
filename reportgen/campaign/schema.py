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
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from reportgen import engines
from reportgen.campaign.levels import Point

METRICS = (
    "output_tok_s",
    "total_tok_s",
    "req_s",
    "goodput_req_s",
    "ttft_ms",
    "itl_ms",
    "tpot_ms",
    "e2e_ms",
)
"""Metrics a campaign can name. Throughputs: higher is better; latencies: lower is better."""

DEFAULT_REQUESTS_PER_LEVEL = 64
COMPILING_ENGINES = ("vllm", "sglang")  # primed by default (see CampaignInfo)
SIMULATED_ENGINES = ("sim",)  # every other engine is bracketed by default (see CampaignInfo)
DEFAULT_MARGIN = 0.03  # relative changes smaller than this are "equivalent"
ENGINES = ("sim", "sglang", "vllm", "transformers", "generic")

_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
ArgValue = bool | int | float | str | list[bool | int | float | str] | dict[str, Any]
# A server's address: http(s)://host[:port][/path] (the path a prefix before /v1/...)
BASE_URL = r"^https?://[^/\s]+(/\S*)?$"
BaseUrl = Annotated[str, Field(pattern=BASE_URL)]


def is_throughput(metric: str) -> bool:
    """Throughputs are per second (``*_s``, one number per level); every other metric is a
    latency (a distribution per level, compared at a percentile)."""
    return metric.endswith("_s")


def higher_is_better(metric: str, direction: str | None = None) -> bool:
    """Which way a metric improves: as the campaign says, else throughputs up and latencies
    down."""
    if direction is not None:
        return direction == "higher"
    return is_throughput(metric)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def rate_kept(rate: float) -> float | str:
    """A request rate as JSON keeps it: infinity as "inf" (read back as one)."""
    return "inf" if math.isinf(rate) else rate


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
    name: str = Field(pattern=_ID, description="Short name, used for the output directory.")
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
        "rejected anyway (shared by the objective's levels): for each experiment, or for the "
        "whole campaign (alpha_scope).",
    )
    alpha_scope: Literal["experiment", "campaign"] = Field(
        "experiment",
        description='"experiment": alpha holds for each experiment (a campaign of eight '
        'changes that do nothing holds a wrong call more often); "campaign": for the '
        "campaign as a whole, each of its k compared experiments decided at alpha / k "
        "(Bonferroni: a campaign decides as it goes, so Holm's step-down, which needs every "
        "result at once, cannot be used); fewer wrong calls, less power.",
    )
    cv_bound: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="Largest coefficient of variation of output tok/s across a level's "
        "repetitions before the repetition-spread check warns.",
    )
    confirm: bool = Field(
        False,
        description="End the campaign by running the best configuration again and, for each "
        "change adopted on its way, the best configuration without that change (leave-one-out): "
        "the report says whether each adopted change still pays once the others are in.",
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
        "less on its verdict. 1 starts each experiment once, the baseline still twice.",
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
    random_weights: bool = Field(
        False,
        description="The model has random weights (a test model built locally, say): its "
        "text is meaningless by construction, so golden answers are not judged (that check "
        "is skipped, saying why); greedy answers are still compared with the baseline's.",
    )


class HostExpect(_Model):
    gpu_count: int | None = Field(None, ge=0, description="Number of visible GPUs required.")
    compute_capability: str | None = Field(
        None, pattern=r"^\d+\.\d+$", description='e.g. "9.0" (Hopper), "12.0".'
    )
    gpu_name: str | None = Field(None, description="Substring the GPU name must contain.")


class _FarSide(_Model):
    """What every executor that runs elsewhere needs there (``run.remote``)."""

    python: str = Field(
        "python3",
        description="The Python there with this version of reportgen installed (a virtual "
        "environment's bin/python, say).",
    )
    dir: str | None = Field(
        None,
        description="The folder there that the campaign's relative paths (prompts, model, "
        "tokenizer) are read from (default: the campaign file's folder, at the same path: "
        "the same checkout, or a shared file system).",
    )
    workdir: str = Field(
        "~/.cache/reportgen/remote",
        description="Where an experiment's files are kept there until they are sent back.",
    )


class SshHost(_FarSide):
    """The GPU host reached over SSH (``host.executor = "ssh"``): the servers and the load
    generator run there, the run directory stays here."""

    host: str = Field(
        pattern=r"^[A-Za-z0-9_.@:\[\]-]+$",
        description="The GPU host as ssh takes it: a name or address, user@host, or a Host of "
        "~/.ssh/config.",
    )
    user: str | None = Field(None, description="Login name (default: ssh's).")
    port: int | None = Field(None, ge=1, le=65535, description="SSH port (default: ssh's).")
    identity_file: str | None = Field(None, description="Private key (default: ssh's).")
    options: list[str] = Field(
        default_factory=list,
        description='More ssh options, e.g. ["-o", "ProxyJump=bastion"].',
    )


class SlurmHost(_FarSide):
    """A Slurm cluster (``host.executor = "slurm"``): each experiment is one job step on a
    node the cluster gives (``srun``), the run directory stays where ``reportgen run`` was
    typed (a login node, say)."""

    python: str = Field(
        "",
        description="The Python on the nodes with this version of reportgen installed "
        "(default: the one running reportgen here, at the same path: a shared file system).",
    )
    partition: str | None = Field(None, description="Partition (default: the cluster's).")
    gpus: int | None = Field(None, ge=0, description="GPUs per job (--gres=gpu:N).")
    time: str | None = Field(
        None,
        pattern=r"^(\d+-)?\d+(:\d\d){0,2}$",
        description='Time limit per experiment, as Slurm writes it ("90", "1:30:00").',
    )
    options: list[str] = Field(
        default_factory=list,
        description='More srun options, e.g. ["--account=perf", "--exclusive"].',
    )


class Host(_Model):
    executor: Literal["local", "ssh", "slurm"] = Field(
        "local",
        description="Where servers and load run: here (local), on host.ssh's host over SSH, "
        "or as Slurm job steps (host.slurm); the run directory and the report stay here.",
    )
    ssh: SshHost | None = Field(None, description='The GPU host, for executor = "ssh".')
    slurm: SlurmHost | None = Field(
        None, description='The cluster\'s settings, for executor = "slurm".'
    )
    expect: HostExpect = Field(default_factory=lambda: HostExpect())  # type: ignore[call-arg]
    repos: list[str] = Field(
        default_factory=list,
        description="Git checkouts whose commit and uncommitted changes the run records (an "
        "engine built from source, say); relative to the campaign file.",
    )

    @model_validator(mode="after")
    def _ssh_given(self) -> Host:
        if self.executor == "ssh" and self.ssh is None:
            raise ValueError(
                'executor = "ssh" needs host.ssh = { host = "gpu-box" } (the host to run on)'
            )
        return self


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


class PromptSource(_Model):
    """Where request prompts come from."""

    source: Literal["random", "shared-prefix", "sharegpt", "jsonl", "fixed", "trace"] = Field(
        "random",
        description="random: synthetic prompts of input_tokens tokens, each distinct; "
        "shared-prefix: synthetic prompts of input_tokens tokens whose first prefix_tokens are "
        "one of `groups` shared prefixes (a system prompt or a document several questions "
        "share: what a prefix cache is for); sharegpt: a ShareGPT-format JSON file (first "
        "human turn); jsonl: one JSON object per line; fixed: one text; trace: a JSONL trace "
        "of timestamped requests (Mooncake's form: timestamp, input_length, output_length, "
        "hash_ids) replayed on time, each level its first requests_per_level requests or its "
        "first duration_s seconds, at most C in flight.",
    )
    path: str | None = Field(None, description="Dataset file (sharegpt, jsonl).")
    field: str = Field("prompt", description="jsonl: the key holding the prompt text.")
    text: str | None = Field(None, description="fixed: the prompt sent with every request.")
    groups: int = Field(
        8,
        ge=1,
        description="shared-prefix: how many distinct prefixes; each request draws one "
        "(seeded), the same prefixes at every level and in every experiment.",
    )
    prefix_tokens: int | None = Field(
        None,
        ge=1,
        description="shared-prefix: tokens of each group's prefix; the rest of input_tokens "
        "is the request's own text.",
    )
    time_scale: float = Field(
        0.001,
        gt=0,
        allow_inf_nan=False,
        description="trace: seconds per timestamp unit (0.001: milliseconds, as Mooncake's "
        "traces; 0.5 replays a millisecond trace twice as fast).",
    )
    block_tokens: int = Field(
        512,
        ge=1,
        description="trace: tokens per hash_ids block (Mooncake: 512); requests naming the "
        "same block share that text.",
    )
    answer_lengths: bool = Field(
        False,
        description="sharegpt: each request asks for as many output tokens as the dataset's "
        "own answer to its prompt had (what vLLM's and SGLang's benchmarks do by default), "
        "counted by workload.tokenizer, else estimated as characters / 4; output_tokens is "
        "then the cap for answers longer than it.",
    )

    @model_validator(mode="after")
    def _needs(self) -> PromptSource:
        if self.path and self.source not in ("sharegpt", "jsonl", "trace"):
            raise ValueError(
                f"prompts.path is given but prompts.source = {self.source!r} reads no file: "
                'set source = "sharegpt", "jsonl" or "trace" (or remove path)'
            )
        if self.text and self.source != "fixed":
            raise ValueError(
                f"prompts.text is given but prompts.source = {self.source!r} sends no fixed "
                'text: set source = "fixed" (or remove text)'
            )
        if self.answer_lengths and self.source != "sharegpt":
            raise ValueError(
                f"prompts.answer_lengths reads a ShareGPT file's answers, but prompts.source = "
                f'{self.source!r}: set source = "sharegpt" (or remove answer_lengths)'
            )
        if self.source in ("sharegpt", "jsonl", "trace") and not self.path:
            raise ValueError(f"prompts.source = {self.source!r} needs prompts.path")
        if self.source == "fixed" and not self.text:
            raise ValueError('prompts.source = "fixed" needs prompts.text')
        if self.source == "shared-prefix" and self.prefix_tokens is None:
            raise ValueError(
                'prompts.source = "shared-prefix" needs prompts.prefix_tokens (the length of '
                "each group's shared prefix, below input_tokens)"
            )
        return self


class SteadyWarmup(_Model):
    """Before a level's first repetition on a server: the level's own load (its concurrency,
    or its rate) until the server is steady there, in consecutive windows of output tokens by
    their arrival time; the warm-up's requests are discarded."""

    steady: bool = Field(
        True,
        description="Warm every level up at its own load until the last `windows` windows "
        "agree on output tok/s and time per output token within `tolerance`, or `max_s` has "
        "passed; false: only the campaign's first warm-up (warmup_requests), as before.",
    )
    tolerance: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="Largest (max - min) / mean of the last windows' output tok/s and of "
        "their time per output token for the level to count as steady.",
    )
    windows: int = Field(3, ge=2, le=20, description="Consecutive windows that must agree.")
    window_s: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="Length of a window in seconds (default: the warm median request time, "
        "at least 0.25 s, so batches that finish together in waves do not set the count).",
    )
    max_s: float = Field(
        120.0,
        gt=0,
        allow_inf_nan=False,
        description="Most seconds a level warms up; a level still not steady then is "
        "measured and marked so.",
    )


class Slo(_Model):
    """Service-level objectives: a request counts toward goodput when it meets every one set."""

    ttft_ms: float | None = Field(None, gt=0, allow_inf_nan=False)
    tpot_ms: float | None = Field(None, gt=0, allow_inf_nan=False)
    e2e_ms: float | None = Field(None, gt=0, allow_inf_nan=False)


class FindMax(_Model):
    """Search the highest concurrency (or request rate) that meets latency bounds, instead
    of fixed levels."""

    slo: str = Field(
        description="Bounds every probed level must meet, as metric.stat<value joined by "
        "commas: ttft_ms.p99<500,itl_ms.p99<50 (latencies at p50, p90, p99 or mean; a "
        "throughput without a stat, output_tok_s>1000); a level also fails if more than 1% "
        "of its requests fail.",
    )
    over: Literal["concurrency", "request_rate"] = Field(
        "concurrency",
        description="What the search varies: the concurrency of a closed loop, or the "
        "request rate of an open loop (workload.concurrency then caps requests in flight; "
        "none by default).",
    )
    start: int | float = Field(
        1, gt=0, allow_inf_nan=False, description="The first concurrency (or rate) probed."
    )
    max: int | float = Field(
        1024, gt=0, allow_inf_nan=False, description="The highest concurrency (or rate) probed."
    )
    probes: int = Field(
        8, ge=1, le=50, description="Most levels run: doubling from start, then bisecting."
    )
    tolerance: float = Field(
        0.1,
        gt=0,
        lt=1,
        description="Stop bisecting when the highest pass and the lowest failure are this "
        "close (relative), or adjacent.",
    )
    repeat_near: bool = Field(
        True,
        description="Run a probe's repetitions once more when a bound's value lies inside the "
        "95% interval of its mean over them (pass or fail within noise), and decide on the mean "
        "of all of them.",
    )

    @field_validator("slo")
    @classmethod
    def _bounds(cls, value: str) -> str:
        from reportgen.campaign.bounds import parse

        parse(value)  # ValueError: the bound that is wrong, and how to write one
        return value

    @model_validator(mode="before")
    @classmethod
    def _whole(cls, data: Any) -> Any:
        """A search over concurrency takes whole numbers (1.0 is 1; 1.5 is refused)."""
        if not isinstance(data, dict) or data.get("over", "concurrency") != "concurrency":
            return data
        out = dict(data)
        for key in ("start", "max"):
            value = out.get(key)
            if isinstance(value, float) and math.isfinite(value):
                if not value.is_integer():
                    raise ValueError(
                        f"{key} ({value:g}) must be a whole number when the search is over "
                        'concurrency (over = "request_rate" searches rates)'
                    )
                out[key] = int(value)
        return out

    @model_validator(mode="after")
    def _range(self) -> FindMax:
        if self.max < self.start:
            raise ValueError(f"max ({self.max:g}) is below start ({self.start:g})")
        return self


class Repetitions(_Model):
    """Adaptive repetitions: ``min`` for every level, up to ``max`` where still undecided."""

    min: int = Field(2, ge=2, description="Repetitions every level gets.")
    max: int = Field(8, ge=2, le=50, description="Most repetitions a level may get.")

    @model_validator(mode="after")
    def _order(self) -> Repetitions:
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        return self


def repetitions_range(value: int | Repetitions) -> tuple[int, int]:
    """(min, max) of a workload's repetitions; a number is both."""
    if isinstance(value, Repetitions):
        return value.min, value.max
    return int(value), int(value)


def resolve_trim(trim: bool | None, duration_s: float | None) -> bool:
    """``workload.trim`` as it applies: as written, else on for duration levels (a level of
    fixed length whose ramp-up and drain would otherwise count) and off for request-count
    levels (whose every request is the measurement). The one place this rule lives."""
    return bool(trim) if trim is not None else duration_s is not None


class Workload(_Model):
    api: Literal["chat", "completions"] = "chat"
    stream: bool = Field(True, description="Stream responses (needed for TTFT and ITL).")
    concurrency: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: [1],
        min_length=1,
        description="Levels: clients in a closed loop, or the in-flight cap with request_rate "
        "(0: no cap; the default where the rates are the levels).",
    )
    request_rate: float | list[float] | None = Field(
        None,
        description="Open loop: requests per second, or inf for every request of a level at "
        "once, at most C in flight (default: closed loop). A list makes its rates the "
        "levels, e.g. [1, 2, 4, inf], at one concurrency cap.",
    )
    arrival: Literal["poisson", "constant"] = Field(
        "poisson", description="Open loop: exponential (seeded) or constant gaps."
    )
    requests_per_level: int | None = Field(None, ge=1)
    duration_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    max_duration_s: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="Closed-loop duration levels run past duration_s, up to this long, until "
        "their output tok/s is known within the campaign's margin (the 95% interval of its "
        "windows' mean narrower than the margin); then their clients stop and the requests "
        "in flight finish. Default: 3 x duration_s; equal to duration_s: exactly duration_s.",
    )
    input_tokens: int = Field(128, ge=1)
    output_tokens: int = Field(128, ge=1)
    range_ratio: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="Lengths that vary, as vLLM's --random-range-ratio: each request's output "
        "tokens (and a random or shared-prefix prompt's input tokens) drawn uniformly from "
        "[L x (1 - r), L x (1 + r)], seeded (the same at every level and in every "
        "experiment); 0: every request the same length.",
    )
    turns: int = Field(
        1,
        ge=1,
        description="Multi-turn conversations: each client holds a conversation of this many "
        "turns, each turn sending the turns before it and their answers (the history grows "
        "by a turn's prompt and answer each time, as a chat does), then starts the next; "
        "the level's requests count turns. Closed loop only.",
    )
    think_s: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="Multi-turn: seconds a client waits after an answer before its next turn.",
    )
    find_max: FindMax | None = Field(
        None,
        description="Instead of the concurrency levels: search the highest concurrency that "
        "meets these bounds, doubling then bisecting, each probe a level with its "
        "repetitions, in one server session (closed loop only).",
    )
    prompts: PromptSource = Field(default_factory=lambda: PromptSource())  # type: ignore[call-arg]
    tokenizer: str | None = Field(
        None,
        description="Local tokenizer folder (transformers): exact prompt lengths and token "
        "counts when the server reports no usage.",
    )
    repetitions: int | Repetitions = Field(
        1,
        description="Repetitions of every level: a number, or { min, max }: min first, then, "
        "at levels where the objective's verdict is still open, one more at a time on a fresh "
        "server, up to max (each look at Pocock's level, so the error rate holds).",
    )
    warmup_requests: int = Field(
        4,
        ge=0,
        description="Requests of the first warm-up of every server (prompt lengths are "
        "corrected from it), and the fewest each level's steady warm-up sends.",
    )
    warmup: SteadyWarmup = Field(
        default_factory=lambda: SteadyWarmup(),  # type: ignore[call-arg]
        description="Each level's own warm-up, until steady (see SteadyWarmup).",
    )
    trim: bool | None = Field(
        None,
        description="Throughput from the steady state only: from when the most requests are "
        "in flight to the last moment they still are (ramp-up and drain left out). Default: "
        "on for duration_s levels, off for requests_per_level levels.",
    )
    stagger: bool = Field(
        True,
        description="Closed loop: spread the clients' first requests over one request time "
        "(client k starts k x the warm-up's median request time / C after the level's start), "
        "so they do not run in lockstep waves; false starts every client at once.",
    )
    slo: Slo = Field(default_factory=lambda: Slo())  # type: ignore[call-arg]
    fresh_server: bool = Field(
        False,
        description="Start a fresh server (and warm it up) for every repetition, so a "
        "repetition also samples start-to-start variation (memory layout, autotuning).",
    )
    prefix_cache_hit_rate: list[Annotated[float, Field(ge=0, le=1)]] | None = Field(
        None,
        min_length=2,
        max_length=2,
        description="Expected [lowest, highest] share of prompt tokens the engine serves from "
        "its prefix cache during levels. Default: at most 0.1 for random and dataset prompts "
        "(a higher rate flatters the numbers), no expectation for a fixed prompt.",
    )
    workers: int | None = Field(
        None, ge=1, description="Client processes (default: chosen from concurrency)."
    )
    seed: int = 0
    request_timeout_s: float = Field(600, gt=0, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _default_amount(cls, data: Any) -> Any:
        """Neither requests_per_level nor duration_s given: 64 requests per level."""
        if (
            isinstance(data, dict)
            and data.get("requests_per_level") is None
            and data.get("duration_s") is None
        ):
            return {**data, "requests_per_level": DEFAULT_REQUESTS_PER_LEVEL}
        return data

    @field_validator("request_rate", mode="before")
    @classmethod
    def _rates(cls, value: Any) -> Any:
        """A positive number (inf allowed), or a list of them, unique: one clear error."""
        if value is None:
            return None
        many = isinstance(value, list)
        values = value if many else [value]
        out = []
        for v in values:
            if isinstance(v, str) and v.strip().lower() in ("inf", "infinity"):
                v = math.inf
            if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
                raise ValueError(
                    f"{v!r} is not a request rate: give requests per second above 0 (inf: "
                    "every request at once), or a list of them such as [1, 2, 4, inf]"
                )
            out.append(float(v))
        if many and not out:
            raise ValueError("give at least one rate, e.g. [1, 2, 4, inf]")
        if len(set(out)) != len(out):
            raise ValueError(f"rates must be unique, got {value}")
        return out if many else out[0]

    @property
    def rates(self) -> list[float] | None:
        """The rates that are the levels (``request_rate`` as a list), or None."""
        return self.request_rate if isinstance(self.request_rate, list) else None

    @property
    def points(self) -> list[Point]:
        """The levels to run, in order (a search's are found as it goes: none here)."""
        if self.rates is not None:
            return [Point(self.concurrency[0], r) for r in self.rates]
        return [Point(c) for c in self.concurrency]

    def rate_at(self, point: Point) -> float | None:
        """The request rate a level runs at: its own, the workload's one, or None (closed)."""
        if point.rate is not None:
            return point.rate
        return self.request_rate if isinstance(self.request_rate, float) else None

    @property
    def open_loop(self) -> bool:
        over = self.find_max.over if self.find_max is not None else None
        return self.request_rate is not None or over == "request_rate"

    @model_validator(mode="after")
    def _levels_unique(self) -> Workload:
        over_rates = self.find_max is not None and self.find_max.over == "request_rate"
        if "concurrency" not in self.model_fields_set and (self.rates is not None or over_rates):
            # rates as the levels and no concurrency given: no cap on requests in flight, as
            # the peers' rate sweeps have it (left out of the fields set: a default still)
            self.__dict__["concurrency"] = [0]
        if len(set(self.concurrency)) != len(self.concurrency):
            raise ValueError("concurrency levels must be unique")
        if self.requests_per_level is not None and self.duration_s is not None:
            raise ValueError("give requests_per_level or duration_s, not both")
        one = self.request_rate
        rates = self.rates or ([one] if isinstance(one, float) else [])
        if math.inf in rates and self.duration_s is not None:
            raise ValueError(
                "request_rate = inf sends a level's requests all at once, so it needs "
                "requests_per_level; with duration_s leave request_rate out (a closed loop "
                "keeps C requests in flight)"
            )
        if 0 in self.concurrency and self.rates is None and not over_rates:
            raise ValueError(
                "concurrency 0 (no cap on requests in flight) is for rate levels: write "
                "request_rate as a list, such as [2] or [1, 2, inf], or give concurrency "
                "levels of at least 1"
            )
        if self.rates is not None and len(self.concurrency) != 1:
            raise ValueError(
                "request_rate as a list makes its rates the levels, at one cap on requests "
                f"in flight: give one concurrency value (got {self.concurrency}), or leave "
                "concurrency out for no cap"
            )
        src = self.prompts
        find = self.find_max
        if find is not None and find.over == "request_rate":
            if self.request_rate is not None or len(self.concurrency) != 1:
                raise ValueError(
                    'find_max over = "request_rate" chooses the rates: leave out '
                    "request_rate, and give at most one concurrency (the cap on requests in "
                    "flight; none if left out)"
                )
            if src.source == "trace" or self.turns > 1 or isinstance(self.repetitions, Repetitions):
                raise ValueError(
                    "find_max searches with fixed repetitions and generated arrivals: leave "
                    "out trace prompts, turns and adaptive repetitions"
                )
        elif find is not None and (
            self.request_rate is not None
            or src.source == "trace"
            or isinstance(self.repetitions, Repetitions)
        ):
            raise ValueError(
                "find_max searches concurrency levels of a closed loop with fixed "
                "repetitions: leave out request_rate, trace prompts and adaptive repetitions "
                '(over = "request_rate" searches rates)'
            )  # fmt: skip
        if self.turns > 1 and (self.request_rate is not None or src.source == "trace"):
            raise ValueError(
                "turns > 1: conversations run in a closed loop (each client waits for an "
                "answer before its next turn), so leave out request_rate and trace prompts"
            )
        if src.source == "trace" and self.request_rate is not None:
            raise ValueError(
                'prompts.source = "trace" replays the trace\'s own arrival times: remove '
                "request_rate (workload.concurrency caps the requests in flight)"
            )
        if src.source == "shared-prefix" and (src.prefix_tokens or 0) >= self.input_tokens:
            raise ValueError(
                f"prompts.prefix_tokens ({src.prefix_tokens}) must be below input_tokens "
                f"({self.input_tokens}): each request adds its own text after the prefix"
            )
        return self

    @field_validator("repetitions", mode="before")
    @classmethod
    def _repetitions(cls, value: Any) -> Any:
        """One clear error for either form (a union would report both)."""
        if isinstance(value, dict):
            try:
                return Repetitions(**value)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(x) for x in first["loc"])
                msg = str(first["msg"]).removeprefix("Value error, ")
                raise ValueError(f"{where + ': ' if where else ''}{msg}") from None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(
                "give a whole number of at least 1, or a range such as { min = 2, max = 8 }"
            )
        return value

    @property
    def trims(self) -> bool:
        """Whether throughputs are trimmed to the steady state (``resolve_trim``)."""
        return resolve_trim(self.trim, self.duration_s)

    @field_serializer("request_rate")
    def _rate_kept(self, rate: float | list[float] | None) -> Any:
        # JSON has no infinity: "inf" (read back as one), never null, which is a closed loop
        if rate is None:
            return None
        return [rate_kept(r) for r in rate] if isinstance(rate, list) else rate_kept(rate)

    @field_serializer("trim")
    def _trim_resolved(self, trim: bool | None) -> bool:
        # Saved as it applies: results, plans and resume compare the resolved value.
        return resolve_trim(trim, self.duration_s)

    @field_validator("prefix_cache_hit_rate")
    @classmethod
    def _low_high(cls, rate: list[float] | None) -> list[float] | None:
        if rate is not None and rate[0] > rate[1]:
            raise ValueError("[lowest, highest]: the lowest comes first")
        return rate


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


STATS = ("mean", "p50", "p90", "p99")


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


class ExperimentSpec(_Model):
    id: str = Field(pattern=_ID)
    why: str = Field(min_length=1, description="Why this change is tried.")
    expect: str = Field("", description="What you expect to see.")
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
        return given if given is not None else self.server.engine in COMPILING_ENGINES

    @property
    def brackets(self) -> bool:
        """Whether the baseline is measured again at the end (``campaign.bracket``)."""
        given = self.campaign.bracket
        return given if given is not None else self.server.engine not in SIMULATED_ENGINES

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
                    f"{self.server.engine} engine: use sglang or vllm (or sim), or leave nodes "
                    "out and pass the engine's flags in server.args"
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
