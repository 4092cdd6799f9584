"""What every part of the campaign schema shares: the metrics a campaign names, the engines,
the defaults the stages agree on, and the base model (unknown keys refused, values frozen)."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from reportgen import engines
from reportgen.metrics import NAMED, is_throughput

METRICS = NAMED
"""Metrics a campaign can name (``reportgen.metrics``). Throughputs: higher is better; latencies:
lower is better."""

DEFAULT_REQUESTS_PER_LEVEL = 64
DEFAULT_MARGIN = 0.03  # relative changes smaller than this are "equivalent"
ENGINES = engines.names()  # server.engine: one per module of reportgen.engines

ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
ArgValue = bool | int | float | str | list[bool | int | float | str] | dict[str, Any]
# A server's address: http(s)://host[:port][/path] (the path a prefix before /v1/...)
BASE_URL = r"^https?://[^/\s]+(/\S*)?$"
BaseUrl = Annotated[str, Field(pattern=BASE_URL)]


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
