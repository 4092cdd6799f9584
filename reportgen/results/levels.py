"""What a level measured: one level run (``Level``: its window, ``Summary``, telemetry,
engine counters, events, how it warmed up and how its clients started), a search's probes,
and a level's aggregate across its repetitions (``Aggregate``, a ``Stat`` per metric)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    create_model,
    field_serializer,
    model_serializer,
)

from reportgen import metrics
from reportgen.campaign.levels import Point, Rate
from reportgen.results.base import _AsGiven, _Model


class Sampled(_AsGiven):
    """A quantity GPU telemetry sampled over a window: mean, lowest and highest sample (None
    where no sample had it)."""

    mean: float | None = None
    min: float | None = None
    max: float | None = None


Which = Literal["mean", "min", "max"]


class GpuWindow(_AsGiven):
    """One GPU's telemetry over a level's measured window (``observe.telemetry.window``):
    how many samples and how often, its clocks (the SM clock's coefficient of variation while
    busy), power, temperature, utilisation and memory in use, the share of samples each
    clock-event reason was set, ``slowdown_share``: any reason that slowed the GPU, and the
    energy it used over the window (J) with where that came from."""

    gpu: int
    samples: int = 0
    hz: float | None = None
    sm_clock_mhz: Sampled = Field(default_factory=Sampled)
    sm_clock_cv_busy: float | None = None
    mem_clock_mhz: Sampled = Field(default_factory=Sampled)
    power_w: Sampled = Field(default_factory=Sampled)
    temp_c: Sampled = Field(default_factory=Sampled)
    util_gpu_pct: Sampled = Field(default_factory=Sampled)
    mem_used_bytes: Sampled = Field(default_factory=Sampled)
    clock_events: dict[str, float] = Field(default_factory=dict)
    slowdown_share: float | None = None
    # over the window: from NVML's energy counter ("counter"), else its sampled power
    # integrated ("power integrated"); absent in runs recorded before it was kept
    energy_j: float | None = None
    energy_from: str | None = None

    def value(self, name: str, which: Which) -> float | None:
        """The ``which`` of the sampled quantity ``name`` (``power_w``, ``util_gpu_pct``...)."""
        sampled = getattr(self, name)
        return getattr(sampled, which) if isinstance(sampled, Sampled) else None


def sampled(windows: Iterable[GpuWindow], name: str, which: Which) -> list[float]:
    """The ``which`` of ``name`` in each of ``windows`` that has it."""
    return [v for w in windows if (v := w.value(name, which)) is not None]


class HostWindow(_AsGiven):
    """The host's CPU over a level's measured window (``observe.host.window``): how long a fixed
    piece of Python work took (median and range of its samples, ms), the CPUs busy (mean, in
    cores) and the share the hypervisor took (mean and largest)."""

    samples: int = 0
    canary_ms: float | None = None
    canary_min_ms: float | None = None
    canary_max_ms: float | None = None
    busy_cores: float | None = None
    steal_share: float | None = None
    steal_max: float | None = None
    # the busiest processes over the window (``observe.host.busiest``): name, pid, group,
    # cores, and whether it is the client's; absent where the samples held no process times
    processes: list[dict[str, Any]] | None = None


class _Dist(_Model):
    """A latency's distribution over a level's requests (ms): each statistic of
    ``metrics.STATS`` (its mean and the grid's percentiles), generated from the registry;
    None where none was measured (or, in runs recorded before it was kept, that statistic:
    p95)."""

    @model_serializer(mode="wrap")
    def _without_unkept(self, handler: SerializerFunctionWrapHandler) -> Any:
        """No statistic the reportgen that recorded the run did not keep (one empty where
        the median is not): such a run read and saved again keeps its form."""
        out = handler(self)
        if isinstance(out, dict) and out.get("p50") is not None:
            for k in [k for k in metrics.STATS if k in out and out[k] is None]:
                out.pop(k)
        return out


if TYPE_CHECKING:

    class Dist(_Dist):
        def __init__(self, **stats: float | None) -> None: ...
        def __getattr__(self, stat: str) -> float | None: ...

else:
    Dist = create_model(
        "Dist",
        __base__=_Dist,
        __module__=__name__,
        __doc__=_Dist.__doc__,
        **{k: (float | None, None) for k in metrics.STATS},
    )


class ClientLoad(_Model):
    """The client's own load during a level: its CPU, and the share of its measured ceiling."""

    workers: int = 1
    cpu_s: float = 0.0
    cpu_util: float | None = None
    loop_lag_ms: dict[str, float] = Field(default_factory=dict)  # p50, p99, max
    preopen_s: float = 0.0  # connections opened before t0, outside the level
    ceiling_chunk_s: float | None = None
    load: float | None = None
    limited: bool | None = None


class Summary(_Model):
    """One level run's numbers (definitions in ``reportgen.analysis.summary``)."""

    requests: int = 0
    ok: int = 0
    errors: int = 0
    error_kinds: dict[str, int] = Field(default_factory=dict)
    short_outputs: int = 0
    silent_outputs: int = 0
    duration_s: float = 0.0
    window_s: list[float] | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    chunks: int = 0
    output_tokens_source: list[str] = Field(default_factory=list)
    output_tok_s: float | None = None
    total_tok_s: float | None = None
    req_s: float | None = None
    goodput_req_s: float | None = None
    # the GPUs' mean power over the window, from their energy (W; None without telemetry or
    # energy), and output tok/s over it (``analysis.summary.energy_rates``)
    power_w: float | None = None
    output_tok_per_j: float | None = None
    slo_attainment: float | None = None
    chunk_s: float | None = None
    achieved_concurrency: float | None = None
    # requests in flight, time-weighted, inside the window the throughputs count (``window_s``;
    # None: the whole level counts, or a reportgen before it kept this): the whole level's
    # mean above takes in the clients' ramp at the start and the drain at the end, which
    # with requests seconds long is a tenth of a 12-s level
    window_concurrency: float | None = None
    # an open loop's schedule as the client kept it: the span of its requests' scheduled send
    # times over the span of their actual sends (1.0: every request went when it was due; under
    # 1, the client or a concurrency cap held requests back, and the server saw less than the
    # offered rate). None for a closed loop, or a reportgen before it kept this.
    schedule_kept: float | None = None
    # the longest hold-up of a request that stalled in this run (s): its longest gap between
    # chunks, or its last chunk to the end of its response, over ``STALL_TIMES`` times the
    # run's median and ``STALL_FLOOR_S`` (``analysis.checks_stalls``); None where none did,
    # or a reportgen before it kept this. Such a run's numbers are the host's hold-up as
    # much as the server's: decisions leave it out where its measurement has another run.
    stall_s: float | None = None
    ttft_ms: Dist = Field(default_factory=Dist)
    itl_ms: Dist = Field(default_factory=Dist)
    itl_token_ms: Dist = Field(default_factory=Dist)
    tpot_ms: Dist = Field(default_factory=Dist)
    e2e_ms: Dist = Field(default_factory=Dist)
    client: ClientLoad | None = None

    @model_serializer(mode="wrap")
    def _stall_where_one(self, handler: SerializerFunctionWrapHandler) -> Any:
        """No ``stall_s`` where no request stalled: a run recorded before it keeps its form."""
        out = handler(self)
        if isinstance(out, dict) and "stall_s" in out and out["stall_s"] is None:
            del out["stall_s"]
        return out

    def value(self, metric: str, stat: str = "p50") -> float | None:
        """One number: a throughput as it is, a latency at ``stat`` (p50 by default)."""
        got = getattr(self, metric, None)
        if isinstance(got, Dist):
            got = getattr(got, stat, None)
        return None if got is None else float(got)

    @property
    def in_flight(self) -> float | None:
        """Requests in flight where they were counted: inside the window the throughputs
        count (``window_concurrency``), else over the whole level (``achieved_concurrency``)."""
        if self.window_concurrency is not None:
            return self.window_concurrency
        return self.achieved_concurrency


class SearchProbe(_Model):
    """One level a search ran (``analysis.search``): its concurrency, or its rate when the
    search is over request rates."""

    concurrency: int
    rate: Rate = None
    passed: bool
    # bound -> its value: a latency's percentile over the requests of every run (a search
    # that pooled, ``SearchRecord.pooled``), else the mean over the runs
    values: dict[str, float | None] = Field(default_factory=dict)
    error_share: float = 0.0
    # bound -> the 95% interval of that value (two runs or more): a bootstrap resampling the
    # runs for a pooled percentile, else the t interval of the mean
    intervals: dict[str, list[float]] = Field(default_factory=dict)
    near: bool = False  # a bound's value inside its interval: pass or fail within noise
    repeated: bool = False  # its repetitions ran once more, because it was near
    confirmed: bool = False  # run again at the end as a boundary's probe (``find_max.confirm``)
    runs: int = 0  # the level runs it was decided on (0: not recorded, before this field)

    @property
    def point(self) -> Point:
        return Point(self.concurrency, self.rate)


class SearchRecord(_Model):
    """``workload.find_max``: the bounds, every probe in order, the answer."""

    slo: str
    bounds: list[str] = Field(default_factory=list)
    probes: list[SearchProbe] = Field(default_factory=list)
    # the highest concurrency (or rate, searching rates) that passed below every failure
    best: float | None = None
    lowest_failure: float | None = None
    converged: bool = False
    # where the answer lies, noise allowed for (``Search.interval``): [highest sure pass,
    # lowest sure failure], None at an end the probes do not pin
    interval: list[float | None] | None = None
    start: float = 1
    max: float = 1024
    probes_allowed: int = 8
    over: Literal["concurrency", "request_rate"] = "concurrency"
    # latency bounds judged on the requests of each level's runs together (``analysis.search``);
    # False in a search recorded before: on the mean of the runs' own percentiles
    pooled: bool = False

    @field_serializer("best", "lowest_failure", "start", "max")
    def _whole(self, value: float | None) -> float | int | None:
        # a concurrency stays a whole number, as results.json had it
        return int(value) if value is not None and float(value).is_integer() else value

    @field_serializer("interval")
    def _whole_ends(self, value: list[float | None] | None) -> list[float | int | None] | None:
        return None if value is None else [self._whole(x) for x in value]


class Window(_Model):
    """A level's measured window on the records' clock (``time.perf_counter``), to cut
    telemetry and align other clocks."""

    t0_monotonic: float
    duration_s: float

    @property
    def end(self) -> float:
        return self.t0_monotonic + self.duration_s


class Stagger(_Model):
    """How a closed-loop level's clients started: client k (0-based) sent its first request
    k x ``step_s`` seconds after the level's start (0: all at once), ``step_s`` being one
    request time (``request_s``, the median measured in ``measured``) over the clients."""

    step_s: float = 0.0
    request_s: float | None = None  # the median request time the step came from (s)
    measured: str = ""  # where: "warm-up", "C=4 repetition 1"; "" when nothing was
    capped: bool = False  # shortened to spread the starts over at most a quarter of the level


class EngineEvent(_Model):
    """Something the engine did inside a measurement window that is not its steady state: a
    kernel compiled at run time, a recompilation, a graph captured, requests preempted. Found
    in the server's log (``line``) or its metrics (``line`` names the counter), or, a slump (the
    server's output far below the window's median for seconds with its load held), in the
    window's own token arrivals (``analysis.steady.slump``; ``line`` says it)."""

    kind: str  # the engine adapter's name for it: "jit", "recompile", "graph_capture", "slump"...
    line: str  # the log line (or "vllm:num_preemptions_total +3")
    at_s: float | None = None  # seconds after the level's start, where the line is timed


class Settle(_Model):
    """A level's own warm-up on one server (``workload.warmup``): its load until consecutive
    windows of output tokens (by arrival time) agreed, or its time ran out."""

    concurrency: int
    rate: Rate = None
    reason: Literal["steady", "max_s", "errors", "one pass"]  # why it ended
    duration_s: float = 0.0
    requests: int = 0  # finished (ok or not) before it ended; those in flight were abandoned
    errors: int = 0
    window_s: float = 0.0
    windows_tok_s: list[float] = Field(default_factory=list)  # output tok/s per window
    # time per output token (None: a window whose responses were not streamed)
    windows_tpot_ms: list[float | None] = Field(default_factory=list)
    spread: float | None = None  # (max - min) / mean over the last windows (the larger of both)
    request_s: float | None = None  # the warm median request time (staggers the level)

    @property
    def point(self) -> Point:
        return Point(self.concurrency, self.rate)


class Level(_Model):
    """One level (a concurrency, or a request rate) x repetition."""

    concurrency: int
    rate: Rate = None  # the level's request rate where rates are the levels (``Point``)
    repetition: int = 0
    session: int = 0  # the index of the server session that ran it
    started_at_unix: float | None = None
    window: Window | None = None
    summary: Summary = Field(default_factory=Summary)
    telemetry: list[GpuWindow] | None = None  # per GPU, over its window
    host: HostWindow | None = None  # the host's CPU over its window
    engine_metrics: dict[str, Any] | None = None  # Prometheus deltas over the level
    aborted: str | None = None  # why it was cut short (its server died), or FAILED_DURING
    stagger: Stagger | None = None  # closed loop: how its clients started (None: open loop)
    log_span: list[int] | None = None  # the server log's byte offsets at its start and end
    # decode steps its window's log said ran as a CUDA graph and without one (engines that
    # say so per step: ``Engine.graph_step``); None where the log says nothing of it
    graph_steps: list[int] | None = None
    # A duration level run until known (``workload.max_duration_s``): its interval's relative
    # width when its clients stopped, and the width it had to reach (the campaign's margin)
    known: list[float] | None = None
    events: list[EngineEvent] = Field(default_factory=list)  # inside its window
    # The events of a first attempt at this repetition, measured again because of them.
    remeasured: list[EngineEvent] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _without_unread_steps(self, handler: SerializerFunctionWrapHandler) -> Any:
        """No ``graph_steps`` where the log said none (runs recorded before it)."""
        out = handler(self)
        if isinstance(out, dict) and out.get("graph_steps", 0) is None:
            out.pop("graph_steps")
        return out

    @property
    def point(self) -> Point:
        return Point(self.concurrency, self.rate)

    @property
    def key(self) -> tuple[Point, int]:
        return (self.point, self.repetition)


def by_point(levels: Iterable[Level]) -> dict[Point, list[Level]]:
    """Level runs grouped by their level (concurrency and rate): the levels in the order they
    first ran, each one's runs in the order they ran. The one grouping every stage uses."""
    out: dict[Point, list[Level]] = {}
    for lv in levels:
        out.setdefault(lv.point, []).append(lv)
    return out


class Stat(_Model):
    """One number across a level's repetitions: their mean, sample sd and count."""

    mean: float | None = None
    sd: float | None = None
    n: int = 0


class _Aggregate(_Model):
    """One level across its repetitions (``analysis.summary.aggregate``): the counts here,
    then a ``Stat`` for every throughput and every (latency, percentile) of the registry
    (``metrics.GRID``: ``output_tok_s``, ``ttft_ms_p95``...), read by ``stat``."""

    concurrency: int
    rate: Rate = None
    repetitions: int = 0
    errors: int = 0
    requests: int = 0
    short_outputs: int = 0
    silent_outputs: int = 0
    client_load_max: float | None = None
    client_limited: int = 0

    @property
    def point(self) -> Point:
        return Point(self.concurrency, self.rate)

    def stat(self, name: str) -> Stat:
        """The Stat of a metric by its key (``output_tok_s``, ``ttft_ms_p99``...)."""
        got = getattr(self, name, None)
        return got if isinstance(got, Stat) else Stat()

    def mean(self, name: str) -> float | None:
        return self.stat(name).mean

    @property
    def all_failed(self) -> bool:
        """No request succeeded: its throughput is zero and its latencies unknown, not a
        measurement of the configuration."""
        return bool(self.requests) and self.errors == self.requests

    @model_serializer(mode="wrap")
    def _without_unkept(self, handler: SerializerFunctionWrapHandler) -> Any:
        """No percentile empty where its metric's median is not: a statistic the reportgen
        that recorded the run did not keep (p95 before 2026-12-08), so that such a run read
        and saved again keeps its form."""
        out = handler(self)
        if isinstance(out, dict):
            for m in metrics.LATENCIES:
                if (out.get(f"{m}_p50") or {}).get("n"):
                    for p in metrics.PERCENTILES:
                        if (out.get(f"{m}_{p}") or {}).get("n") == 0:
                            out.pop(f"{m}_{p}")
        return out


if TYPE_CHECKING:

    class Aggregate(_Aggregate):
        """(``_Aggregate`` with its grid's fields, each a ``Stat``.)"""

else:
    Aggregate = create_model(
        "Aggregate",
        __base__=_Aggregate,
        __module__=__name__,
        __doc__=_Aggregate.__doc__,
        **{k: (Stat, Field(default_factory=Stat)) for k in metrics.GRID},
    )


# -- one experiment --------------------------------------------------------------------------
