"""The metrics reportgen measures, in one registry: name, unit, direction, label, the statistics
kept for each, and the roles each plays (a campaign may name it, it is compared beyond the
objective, its p99 is compared from the requests).

Every stage reads these from here: the campaign schema (which metrics an objective, an
expectation or a bound may name), the summaries (what a level run keeps), the verdicts (the
headline and tail comparisons), ``diff``, and the report's tables and labels. Definitions of
each are in ``reportgen.analysis.summary``.
"""

from __future__ import annotations

from dataclasses import dataclass

# The grid of statistics every latency carries, addressed as (metric, statistic): its
# percentiles over a level run's requests (and their mean across repetitions in an aggregate),
# and its mean. Adding a quantile is one entry here.
PERCENTILES = ("p50", "p90", "p95", "p99")
STATS = ("mean", *PERCENTILES)  # a latency's statistics in one level run's summary


def quantile(stat: str) -> float:
    """A percentile statistic's quantile in percent (``p95``: 95.0)."""
    return float(stat.removeprefix("p"))


@dataclass(frozen=True)
class Metric:
    name: str  # its key in summaries, results and campaign files
    label: str  # how tables name it ("TTFT", "output tok/s")
    unit: str  # "ms", "tok/s", "req/s"
    throughput: bool  # one number per level run, higher is better; else a latency
    named: bool = True  # a campaign may name it (objective, find_max bounds)
    headline: bool = False  # compared at every level beyond the objective (at p50 if a latency)
    tail: bool = False  # its p99 compared too, from the requests (``analysis.tails``)
    # its columns in an experiment's level table, in the registry's order: a latency's
    # statistics, a throughput's ("",) for its one number; () for none. ``compact``: those of
    # the table of every experiment on paper (None: the same)
    table: tuple[str, ...] = ()
    compact: tuple[str, ...] | None = None

    @property
    def higher_is_better(self) -> bool:
        return self.throughput

    @property
    def key(self) -> str:
        """Its headline number's key among an ``Aggregate``'s statistics: a throughput as it
        is, a latency's p50."""
        return self.name if self.throughput else f"{self.name}_p50"

    def labelled(self, stat: str | None = "p50", unit: bool = False) -> str:
        """Its label with a latency's statistic (``TTFT p50``), and with ``unit`` its unit
        (``TTFT p50 (ms)``); a throughput's label is its unit already (``output tok/s``)."""
        text = self.label if self.throughput or stat is None else f"{self.label} {stat}"
        return f"{text} ({self.unit})" if unit and not self.throughput else text


REGISTRY: dict[str, Metric] = {
    m.name: m
    for m in (
        # (output tok/s leads the level table on its own, with its spread and ratio)
        Metric("output_tok_s", "output tok/s", "tok/s", True, headline=True),
        Metric("total_tok_s", "total tok/s", "tok/s", True, table=("",)),
        Metric("req_s", "req/s", "req/s", True, headline=True, table=("",)),
        Metric("goodput_req_s", "goodput req/s", "req/s", True),
        # output tokens over the GPUs' energy in the window (``analysis.summary.energy_rates``),
        # known at each level's end: an objective where NVML sees the server's GPUs
        Metric("output_tok_per_j", "output tok/J", "tok/J", True),
        Metric(
            "ttft_ms",
            "TTFT",
            "ms",
            False,
            headline=True,
            tail=True,
            table=("p50", "p90", "p99"),
            compact=("p50", "p99"),
        ),
        Metric(
            "itl_ms",
            "ITL",
            "ms",
            False,
            headline=True,
            table=("p50", "p90", "p99"),
            compact=("p50", "p99"),
        ),
        # ITL per token: a chunk's gap spread over the tokens it carried (summary only)
        Metric("itl_token_ms", "ITL per token", "ms", False, named=False),
        Metric("tpot_ms", "TPOT", "ms", False, table=("p50",)),
        Metric("e2e_ms", "E2E", "ms", False, headline=True, tail=True, table=("p50", "p99")),
    )
}

THROUGHPUTS = tuple(m.name for m in REGISTRY.values() if m.throughput)
LATENCIES = tuple(m.name for m in REGISTRY.values() if not m.throughput)
NAMED = tuple(m.name for m in REGISTRY.values() if m.named)  # what a campaign may name
# compared beyond the objective at every level: (metric, higher is better)
HEADLINE = tuple((m.name, m.higher_is_better) for m in REGISTRY.values() if m.headline)
TAILS = tuple(m.name for m in REGISTRY.values() if m.tail)  # p99 compared from the requests
# every number an aggregate across repetitions keeps, by key: each throughput, then each
# (latency, percentile)
GRID = (*THROUGHPUTS, *(f"{m}_{p}" for m in LATENCIES for p in PERCENTILES))


@dataclass(frozen=True)
class Column:
    """One column of the level table: its key among an aggregate's numbers, the metric's
    label and unit (its group's heading), the statistic ("" for a throughput's one number),
    and whether it starts its metric's group."""

    key: str
    metric: str
    label: str
    unit: str
    stat: str
    first: bool


def columns(compact: bool = False) -> list[Column]:
    """The level table's columns after output tok/s, from the registry (``Metric.table``;
    ``compact``: the table of every experiment on paper, ``Metric.compact``)."""
    out = []
    for m in REGISTRY.values():
        stats = m.compact if compact and m.compact is not None else m.table
        for i, s in enumerate(stats):
            key = m.name if not s else f"{m.name}_{s}"
            out.append(Column(key, m.name, m.label, m.unit, s, i == 0))
    return out


def is_throughput(metric: str) -> bool:
    """A throughput (one number per level run, higher is better); every other metric is a
    latency (a distribution per level run, compared at a percentile). A name outside the
    registry reads by its suffix: per second (``*_s``) is a throughput."""
    m = REGISTRY.get(metric)
    return m.throughput if m is not None else metric.endswith("_s")


def key(metric: str) -> str:
    """A metric's headline number among an ``Aggregate``'s statistics (``Metric.key``)."""
    return metric if is_throughput(metric) else f"{metric}_p50"
