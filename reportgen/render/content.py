"""The report's content: what the template places, as frozen dataclasses of strings already
formatted (``view.build`` makes them from a ``results.model.Run``).

Nothing here reads results or formats a number: ``view`` decides what to say, ``fmt`` how a
value looks, the template where it goes. ``Series`` alone keeps raw floats, for the charts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reportgen.results.model import Point


@dataclass(frozen=True)
class BriefCell:
    baseline: str
    best: str
    ratio: str  # "×1.63"
    words: str  # "better", "no clear change", "within the margin", "no interval"
    css: str  # verdict class for colour: better | worse | inconclusive | equivalent | none
    ci: str = ""  # "98.3% CI 1.23–2.16"


@dataclass(frozen=True)
class Expectation:
    id: str
    expected: str
    reading: str  # what the text was read to say: "slower at C=64"
    outcome: str  # what was measured there
    judged: str  # met | not met | partly met | not shown | not judged


@dataclass(frozen=True)
class Brief:
    best: str  # "" when no experiment was adopted
    best_line: str  # one sentence: which, adopted against what
    command: str
    columns: list[str]
    levels: list[tuple[Point, list[BriefCell]]]
    failed: list[tuple[str, str]]
    # a run that stopped early: what it did not finish (interrupted, not started), and why
    unfinished: list[tuple[str, str]] = field(default_factory=list)
    # the experiments whose numbers are no verdict (``Decision.unjudged``), and why in short
    unjudged: list[tuple[str, str]] = field(default_factory=list)
    # nothing adopted: the baseline's own numbers per level (the configuration to run), in
    # ``columns``' order
    plain: list[tuple[Point, list[str]]] = field(default_factory=list)
    plain_columns: list[str] = field(default_factory=list)
    # where a column of ``plain`` is not the mean over repetitions: what it is instead (a
    # search's bound over every repetition's requests pooled, as it was judged)
    plain_note: str = ""
    # per level in ``levels``: successful requests per run behind the best's percentiles
    # ("28-33"): a p99 of fewer than 100 is about the maximum
    samples: list[str] = field(default_factory=list)
    expectations: list[Expectation] = field(default_factory=list)
    expect_hint: str = ""  # how a prose expectation is judged, where one is
    next_steps: list[str] = field(default_factory=list)
    kv_cache: str = ""  # the best configuration's KV cache, as its engine's log said
    # per objective level, the smallest change the run could decide, against the margin
    detect: str = ""
    base_url: str = ""  # the configuration shown was already running there (no command)
    # where it is not the best: the configuration that meets the objective for the least
    # energy a token (and money, with a price), in a sentence (``brief.cheapest``)
    cheapest: str = ""
    # what the configuration to run costs a token (``brief.cost_line``)
    cost: str = ""
    # whether earlier runs of the campaign in the history replicated its verdicts
    # (``brief.replication_line``): "" where no history was read or none ran them
    replication: str = ""


@dataclass(frozen=True)
class Header:
    title: str
    name: str
    description: str
    run_id: str
    started: str
    finished: str
    duration: str
    created: str  # ISO time for the PDF's metadata: when the run finished (or started)
    version: str
    status: str
    complete: bool
    incomplete_reason: str
    simulated: bool
    simulated_notice: str
    engine: str
    host: str = ""  # "hostname: 8 x NVIDIA H200" (or why the GPUs are unknown)
    # servers reportgen did not start (already running): which, and what it cannot vouch for
    external_notice: str = ""
    gpu_notice: str = ""  # the campaign was written for another GPU than it was measured on
    model: str = ""  # the model(s) the experiments served, as the client asked for them
    resumed: str = ""  # when the run was continued with --resume, and what it kept


@dataclass(frozen=True)
class Objective:
    metric: str
    key: str  # the by_level key: the metric itself for throughputs, its p50 for latencies
    label: str  # what the report calls it: "output_tok_s" or "ttft_ms p50"
    levels: list[Point]
    direction: str
    margin: str


@dataclass(frozen=True)
class Comparison:
    concurrency: str  # the level's cell (``fmt.level_cell``)
    ratio: str
    ci: str
    verdict: str
    n: str
    detectable: str  # the smallest change the noise let it see, "±4.1%"
    decide_with: str  # inconclusive: repetitions per side that would decide, else ""
    metric: str = ""
    rests_on: str = ""  # equivalent: the bound it rests on (``fmt.fmt_rests_on``)


@dataclass(frozen=True)
class FlagChange:
    key: str
    before: str
    after: str
    kind: str  # added | removed | changed


@dataclass(frozen=True)
class Cell:
    value: str
    sd: str = ""


@dataclass(frozen=True)
class LevelRow:
    concurrency: str  # the level's cell (``fmt.level_cell``)
    label: str  # "this" or "baseline"
    is_baseline: bool
    output: Cell
    ratio: str  # output tok/s relative to the baseline at this level
    cells: list[Cell]
    errors: str
    achieved: str = ""  # achieved concurrency: mean requests in flight, repetitions' mean
    samples: str = ""  # successful requests per repetition behind its percentiles: "64", "6-7"


@dataclass(frozen=True)
class ExperimentView:
    index: int
    anchor: str
    id: str
    status: str
    verdict: str
    # "equivalent": the largest change any objective level leaves possible, "no change beyond
    # 4.6%" (the bound the verdict rests on); "" otherwise
    rests_on: str
    is_baseline: bool
    is_best: bool
    parent: str
    # what the verdict compared with instead of the parent's own runs (``Decision.stand_in``)
    stand_in: str
    based_on: str
    why: str
    expect: str
    flag_diff: list[FlagChange]
    # settings of the engine's resolved configuration that moved though no flag names them
    also_changed: list[FlagChange]
    bound_by: str  # what bounded each level (``analysis.bound``), "" where nothing says
    bound_elsewhere: bool  # some level not bound by the GPU (print says only those)
    graphs: str  # levels whose decode steps ran without CUDA graphs (``analysis.graphs``)
    vs_parent: list[Comparison]
    vs_baseline: list[Comparison]
    explanation: str
    reason: str
    log_tail: str
    log_heading: str  # what log_tail is: "End of the server log" unless the runner said
    cut_short: list[str]  # levels ended early because the server died
    log_file: str
    warnings: list[str]
    started: str
    finished: str
    command: str
    env: list[tuple[str, str]]
    base_url: str  # already running there, not started by reportgen ("" when it started it)
    search: str  # workload.find_max: the highest concurrency meeting the bounds, in words
    objective: list[Cell]  # the objective metric at each objective level
    objective_ratio: list[str]  # ... relative to the baseline there (from vs_baseline)
    # ... and its latency effect there, against the baseline too, for a decided change
    # (``experiment.latency_effect``): "TTFT p99 2.40× worse, TPOT 1.15×" ("" otherwise)
    latency_ratio: list[str]
    levels: list[LevelRow]
    notes: list[str]  # measurement caveats by level: client-limited, short outputs, goodput
    trims: list[str]  # where each level's throughputs were trimmed to its steady state
    telemetry: list[dict[str, Any]]  # per level and repetition, during the measured window
    telemetry_windows: list[tuple[float, float, str]]  # (start, end, label), records' clock
    telemetry_note: str  # why there is none, or how it was sampled
    gpu_errors: list[str]  # error counters that grew during the experiment
    evidence: dict[str, Any]  # the engine's own: log lines, info endpoints, metrics, model
    all_metrics: list[Comparison]  # every headline metric against the parent
    checks: list[dict[str, str]]  # assumption checks: id, title, status, evidence, hint
    # Every headline metric against the baseline: metric labels, then per level its cells
    # (ratio with interval, verdict)
    baseline_metrics: list[str] = field(default_factory=list)
    baseline_table: list[tuple[str, list[tuple[str, str, str]]]] = field(default_factory=list)
    baseline_ci: str = "95% CI"  # the intervals' confidence there, as its caption says it
    # Speculative decoding, where the engine reported it: per level run (C, repetition,
    # mean accepted length, acceptance rate), and what its log said over the whole run
    spec: list[tuple[str, str, str, str]] = field(default_factory=list)
    spec_log: str = ""
    paired: bool = False  # compared with interleaved runs of its parent, pair by pair
    servers: str = ""  # how many server launches, and how they were arranged
    repetitions: str = ""  # adaptive repetitions: what each level got and why, what it saved
    probes: list[tuple[str, str, str]] = field(default_factory=list)  # prompt, expect, answer
    # achieved concurrency (mean requests in flight) at each objective level
    objective_achieved: list[str] = field(default_factory=list)
    telemetry_idle: str = ""  # said when the GPU was mostly idle while measured
    # per level, repetition and GPU, where the experiment ran on more than one GPU (else empty)
    telemetry_gpus: list[dict[str, str]] = field(default_factory=list)
    hint: str = ""  # what to change, where a failure's cause is a known one
    # the reason without the message the excerpt below starts with ("" : the reason whole)
    reason_short: str = ""
    ran: str = ""  # "2026-11-30 05:14:50 to 05:16:53 UTC (2 min 3 s)"
    kv_cache: str = ""  # the KV cache the engine's log said it allocated
    log_print: str = ""  # log_tail as print shows it (``experiment._log_print``)
    # the explanation without the flag changes and per-level ratios its tables show (print)
    conclusion: str = ""
    # a failed experiment whose finished levels were compared: what that means
    before_failure: str = ""
    ran_on: str = ""  # where it ran when not here: "gpu-box", "n2 (Slurm job 14)"
    # each level's own warm-up per server start: how long, how many requests, why it ended
    warmups: list[str] = field(default_factory=list)
    # engine events inside measurement windows, at their time on the level's timeline
    events: list[str] = field(default_factory=list)

    @property
    def telemetry_stopped(self) -> bool:
        """Its telemetry stopped before it ended (``telemetry_note`` says when and why)."""
        return self.telemetry_note.startswith("telemetry stopped")


@dataclass(frozen=True)
class Series:
    """One successful experiment's numbers for the charts (raw floats, not strings)."""

    id: str
    index: int  # 1-based, as numbered in the report's tables
    is_baseline: bool
    is_best: bool
    levels: list[Point]
    mean: dict[str, list[float | None]]
    sd: dict[str, list[float | None]]
    untrusted: bool = False  # ran, but a check invalidated its numbers (verdict "failed")
    partial: bool = False  # its server failed: only the levels it finished before are drawn
    stopped: str = "failed"  # why it is partial: "failed" or "interrupted"


@dataclass(frozen=True)
class Reference:
    name: str
    metric: str
    concurrency: str
    value: str
    gpus: str
    per_gpu: str
    measured: str  # this run's best configuration at the same metric and level
    measured_per_gpu: str  # ... divided by this host's GPUs (throughputs only)
    versus: str  # measured per GPU / the reference per GPU (throughputs), or measured / value
    conditions: str
    source: str
    link: str | None  # only https:// sources become links


@dataclass(frozen=True)
class Assumptions:
    """Every check against every experiment at a glance, and what did not pass in full."""

    experiments: list[str]  # column heads: experiment ids
    rows: list[tuple[str, list[str]]]  # check title, status per experiment ("" not run)
    problems: list[dict[str, str]]  # warn and fail: experiment, title, status, evidence, hint
    passed: list[dict[str, str]]  # pass and skip, with their evidence
    # print: the same check, status and advice in several experiments as one row
    merged: list[dict[str, str]] = field(default_factory=list)

    @property
    def clean(self) -> list[str]:
        """The checks that passed, or had nothing to judge, in every experiment: in print one
        line names them instead of a row of "pass" each."""
        return [t for t, st in self.rows if all(x in ("pass", "skip", "") for x in st)]

    @property
    def flagged(self) -> list[tuple[str, list[str]]]:
        """The rows of the checks that warned or failed somewhere."""
        clean = set(self.clean)
        return [(t, st) for t, st in self.rows if t not in clean]


Pair = tuple[str, str]  # (name, text): a term and its definition


@dataclass(frozen=True)
class Methods:
    """The methods section: the metrics' definitions, the load as run, the statistics and the
    checks, each read from the module that implements it (``render.methods``)."""

    metric_intro: list[str]
    metrics: list[Pair]
    metric_notes: list[str]
    load: list[str]  # the load as run, a paragraph each
    overrides: list[Pair]  # (experiment id, its workload where it differs)
    stats_intro: list[str]
    rules: list[Pair]  # the verdict terms
    noise_intro: list[str]
    noise: list[Pair]
    noise_notes: list[str]
    measured: str  # what the run's noise model measured, and the allocation it calls for
    error_rate: str  # which false-alarm rate the verdicts hold
    ci_level: str  # "95%", "98.3%"
    sequential: list[str]  # adaptive repetitions' looks (none at a fixed count)
    checks_intro: list[str]
    checks: list[Pair]
    margin: str  # "3%"
    objective: str  # the objective's label


@dataclass(frozen=True)
class Report:
    header: Header
    objective: Objective
    level_head: str  # the level columns' heading: "C", or "level" where rates are levels
    # the level tables' columns after output tok/s (``levels.table_layout``): an
    # experiment's table, and on paper the table of every experiment
    level_table: dict[str, Any]
    compact_table: dict[str, Any]
    objective_at: str  # the objective's levels: "C=1, 8", "R=1/s, R=2/s"
    summary: str
    experiments: list[ExperimentView]
    measured: list[ExperimentView]
    assumptions: Assumptions
    series: list[Series]
    references: list[Reference]
    environment: dict[str, Any]
    methods: Methods
    campaign_file: dict[str, str]
    rerun: list[str]
    brief: Brief | None = None  # the first page: best, its cost, failures, expectations, next
    # print: one telemetry table, an experiment a row, its levels side by side
    telemetry_levels: list[Point] = field(default_factory=list)
    telemetry_overview: list[dict[str, Any]] = field(default_factory=list)
    telemetry_idle: str = ""  # which experiments' GPUs were mostly idle, in a sentence
    costs: list[dict[str, Any]] = field(default_factory=list)  # ``costs.cost_rows``
    cost_basis: str = ""  # the price and where it came from (``costs.hourly``)
    costs_print: list[dict[str, Any]] = field(default_factory=list)  # on paper: the choices
    roof_basis: list[str] = field(default_factory=list)  # ``costs.roof_basis``
    energy_replayed: str = ""  # ``costs.replayed``
