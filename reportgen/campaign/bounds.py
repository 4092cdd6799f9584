"""Latency and throughput bounds as a campaign writes them (``workload.find_max.slo``):
``metric.stat<value`` joined by commas, ``ttft_ms.p99<500,itl_ms.p99<50``; a throughput has no
stat (``output_tok_s>1000``), a latency without one is its median."""

from __future__ import annotations

import re
from dataclasses import dataclass

from reportgen.metrics import NAMED, PERCENTILES, STATS, is_throughput

_BOUND = re.compile(
    r"^\s*(?P<metric>[a-z_][a-z0-9_]*)(?:\.(?P<stat>" + "|".join(STATS) + r"))?\s*"
    r"(?P<op><=|>=|<|>)\s*(?P<value>[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*$"
)
_SAID = ", ".join(PERCENTILES) + " or mean"  # the statistics a latency bound may name
LATENCIES = tuple(m for m in NAMED if not is_throughput(m))
THROUGHPUTS = tuple(m for m in NAMED if is_throughput(m))


@dataclass(frozen=True)
class Bound:
    metric: str
    stat: str | None  # one of metrics.STATS for a latency; None for a throughput
    op: str
    value: float

    def __str__(self) -> str:
        name = f"{self.metric}.{self.stat}" if self.stat else self.metric
        return f"{name}{self.op}{self.value:g}"

    def holds(self, seen: float) -> bool:
        return {
            "<": seen < self.value,
            "<=": seen <= self.value,
            ">": seen > self.value,
            ">=": seen >= self.value,
        }[self.op]


def parse(text: str) -> list[Bound]:
    """``ttft_ms.p99<500,itl_ms.p99<50`` as bounds; ValueError saying what is wrong."""
    out = []
    for part in text.split(","):
        m = _BOUND.match(part)
        if m is None:
            raise ValueError(
                f"{part.strip()!r} is not a bound: write metric.stat<value, e.g. "
                f"ttft_ms.p99<500 (stat: {_SAID}; or a throughput, output_tok_s>1000)"
            )
        metric, stat = m["metric"], m["stat"]
        if metric in LATENCIES:
            stat = stat or "p50"
        elif metric in THROUGHPUTS:
            if stat:
                raise ValueError(f"{part.strip()!r}: {metric} is one number per level, no .{stat}")
        else:
            raise ValueError(
                f"{part.strip()!r}: unknown metric {metric!r}; one of "
                + ", ".join(LATENCIES + THROUGHPUTS)
            )
        out.append(Bound(metric, stat, m["op"], float(m["value"])))
    return out
