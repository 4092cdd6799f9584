"""What a run's analysis found, beyond each experiment's decision, as typed data saved with
the run (``Run.findings``): the report formats these and computes none of them; ``run
--json`` and ``verify`` read them too. ``analysis.findings`` computes them from the run."""

from __future__ import annotations

from pydantic import Field

from reportgen.campaign.levels import Point, Rate
from reportgen.results.base import _Model
from reportgen.results.verdicts import Comparison

GPU, SERVER_CPU, CLIENT, UNKNOWN = "GPU", "server CPU", "client", "not known"


class LevelBound(_Model):
    """What bounded one level of an experiment (``analysis.bound``): ``by`` (``GPU``,
    ``SERVER_CPU``, ``CLIENT`` or ``UNKNOWN``), the GPU's mean utilisation (%), the busiest
    server process (name, cores) and the client's load, over the level's runs."""

    concurrency: int
    rate: Rate = None
    by: str
    gpu_busy: float | None = None
    process: str | None = None
    process_cores: float | None = None
    client_load: float | None = None

    @property
    def point(self) -> Point:
        return Point(self.concurrency, self.rate)

    @property
    def host_specific(self) -> bool:
        """Whether the level's numbers belong to this host's CPU or client, not the GPU."""
        return self.by in (SERVER_CPU, CLIENT)

    @property
    def said(self) -> str:
        """The limit and its evidence, short: "GPU (busy 99%)", "server CPU (VLLM::APIServer
        0.97 cores; GPU busy 86%)"."""
        parts = []
        if self.by == SERVER_CPU and self.process:
            parts.append(f"{self.process} {self.process_cores:.2f} cores")
        if self.by == CLIENT and self.client_load is not None:
            parts.append(f"client at {self.client_load:.0%} of its ceiling")
        if self.gpu_busy is not None:
            parts.append(f"{'' if self.by == GPU else 'GPU '}busy {self.gpu_busy:.0f}%")
        return f"{self.by} ({'; '.join(parts)})" if parts else self.by


class AllocationFinding(_Model):
    """How this run's repetitions would best be split over server starts
    (``analysis.allocation``): a start's and a repetition's measured cost (s), the spreads
    within and between starts, the repetitions and starts as it ran, the repetitions a start
    that make a mean surest for its GPU time (None: starts differed no more than repetitions),
    the starts that suggests, and how much narrower an interval would be for the same GPU
    time there (a fraction)."""

    start_s: float
    repetition_s: float
    within_sd: float
    between_sd: float
    repetitions: int
    starts: int
    per_start: float | None = None
    suggested_starts: int
    narrower: float


class Uncovered(_Model):
    """A level whose decode steps ran without CUDA graphs (``analysis.graphs``): the share
    the engine's log counted (None where it counts none), the largest captured batch and the
    running batch."""

    concurrency: int
    rate: Rate = None
    share: float | None = None
    captured: int | None = None
    running: int | None = None

    @property
    def point(self) -> Point:
        return Point(self.concurrency, self.rate)

    @property
    def said(self) -> str:
        if self.share is not None:
            text = f"{self.share:.0%} of decode steps without a CUDA graph"
        else:
            text = f"decode batches of up to {self.running} requests without a CUDA graph"
        if self.captured is not None:
            text += f" (the largest captured is {self.captured})"
        return f"{self.point.label}: {text}"


class Speculation(_Model):
    """Speculative decoding in one level run (``analysis.checks_engine.spec_length``): the
    mean accepted length (1 + accepted / draft rounds, or the engine's gauge) and the
    acceptance rate (accepted / proposed); None where the engine said neither."""

    concurrency: int
    rate: Rate = None
    repetition: int
    length: float | None = None
    acceptance: float | None = None

    @property
    def point(self) -> Point:
        return Point(self.concurrency, self.rate)


class BestGain(_Model):
    """The best configuration's objective score against the baseline (the mean log ratio
    over the objective's levels, its sign turned where lower is better) and that score
    shrunk for having been chosen as the best of ``experiments`` compared ones (empirical
    Bayes, ``analysis.selection``; ``tau``: the spread of true effects the campaign
    suggests, log scale)."""

    best: str
    score: float
    shrunk: float
    tau: float
    experiments: int


class ErrorRate(_Model):
    """The false-alarm rate the verdicts hold (``analysis.online``): the campaign's compared
    experiments, whether they were held online by the fallback procedure (else Bonferroni's
    equal shares, as campaigns were decided before 2026-12-07), and where held for the
    campaign what that cost in power: the smallest change the objective's comparisons could
    detect at the rates they were decided at and at the per-experiment rate (median ratios,
    80% power)."""

    compared: int
    fallback: bool = False
    mde: float | None = None
    mde_each: float | None = None


class LevelCost(_Model):
    """One experiment's cost and efficiency at one objective level (``analysis.costs``): its
    output and input tok/s, the cost of a million of each at the run's price (None without
    one), output tokens per joule of its GPUs' energy and their comparison with the
    parent's, and decode's and prefill's percent of their bounds (memory bandwidth, tensor
    throughput)."""

    experiment: str
    concurrency: int
    rate: Rate = None
    output_tok_s: float | None = None
    input_tok_s: float | None = None
    per_mtok_output: float | None = None
    per_mtok_input: float | None = None
    tok_per_j: float | None = None
    tok_per_j_vs_parent: Comparison | None = None
    decode_share: float | None = None
    prefill_share: float | None = None

    @property
    def point(self) -> Point:
        return Point(self.concurrency, self.rate)


class RoofBasis(_Model):
    """What an experiment's bounds were taken from (``analysis.roofline``): its model's size
    (parameters, active ones, experts), bytes per weight and KV cache bytes a token, and its
    GPU's published figures and the GPUs a server; or ``reason``, why its levels got none."""

    experiment: str
    reason: str | None = None
    params: float | None = None
    active: float | None = None
    experts: int = 0
    top_k: int = 0
    weight_bytes: float | None = None
    kv_bytes: float | None = None
    gpu: str | None = None
    bandwidth_gb_s: float | None = None
    bf16_tflops: float | None = None
    gpu_source: str | None = None
    shards: int = 1


class Costs(_Model):
    """What the run's levels cost and how efficient they were: the price an hour (None
    without one, or where it met no count of GPUs), the words for where it came from, its
    currency, each experiment's objective levels, and what each experiment's bounds rest
    on."""

    per_hour: float | None = None
    basis: str = ""
    currency: str | None = None
    levels: list[LevelCost] = Field(default_factory=list)
    roofs: list[RoofBasis] = Field(default_factory=list)


class MethodFinding(_Model):
    """The method's parameters as this run used them: the power a detectable change is
    stated at, the most repetitions a side the report calls reachable, the degrees of
    freedom before adaptive repetitions may stop for futility, and the share of a closed
    loop's concurrency below which its achieved load is marked low."""

    power: float
    max_reps: int
    futility_dof: int
    achieved_share: float


# The method's parameters now: the analysis decides by them, a run saves them with its
# findings, and a run recorded before findings were saved was decided by these too.
METHOD = MethodFinding(power=0.8, max_reps=200, futility_dof=8, achieved_share=0.9)


class Findings(_Model):
    """A run's findings (``analysis.findings.findings``)."""

    method: MethodFinding = Field(default_factory=lambda: METHOD.model_copy())
    allocation: AllocationFinding | None = None
    # by experiment id, what bounded each of its levels (levels with neither GPU nor host
    # samples left out)
    bounds: dict[str, list[LevelBound]] = Field(default_factory=dict)
    # by experiment id, its levels whose decode steps ran without CUDA graphs
    graphs: dict[str, list[Uncovered]] = Field(default_factory=dict)
    # by experiment id, speculative decoding in each level run where the engine said it
    speculation: dict[str, list[Speculation]] = Field(default_factory=dict)
    best_gain: BestGain | None = None
    error: ErrorRate | None = None
    costs: Costs = Field(default_factory=Costs)
