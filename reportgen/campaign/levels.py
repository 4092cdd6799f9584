"""Where a level sits: its concurrency, and its request rate where rates are the levels.

A workload's levels are its ``concurrency`` list (a closed loop's clients, or, with one
``request_rate``, the caps on requests in flight), or, where ``request_rate`` is a list, its
rates at one cap. ``Point`` names one; results.json writes a concurrency as the number it
always was and a rate level as ``[cap, rate]``.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, NamedTuple

from pydantic import BeforeValidator, PlainSerializer


def rate_text(rate: float) -> str:
    """A request rate as the report writes it: ``2``, ``0.5``, ``inf``."""
    return "inf" if math.isinf(rate) else f"{rate:g}"


def _rate_in(value: Any) -> float | None:
    return None if value is None else float(value)  # "inf" (JSON has no infinity) too


def rate_out(rate: float | None) -> float | str | None:
    return "inf" if rate is not None and math.isinf(rate) else rate


# A swept request rate: JSON keeps infinity as "inf"; None: not a rate level.
Rate = Annotated[float | None, BeforeValidator(_rate_in), PlainSerializer(rate_out)]


class Point(NamedTuple):
    """One level of load: ``concurrency`` (a closed loop's clients, or an open loop's cap on
    requests in flight, 0 for none), and ``rate`` where the workload's ``request_rate`` is a
    list, whose every rate is a level (None: the concurrency is the level, in a closed loop
    or at the workload's one rate). Levels of one experiment differ in one of the two."""

    concurrency: int
    rate: float | None = None

    @property
    def label(self) -> str:
        """``C=8``, or ``R=2/s`` for a rate level (its cap is the workload's, said once)."""
        if self.rate is None:
            return f"C={self.concurrency}"
        return f"R={rate_text(self.rate)}/s"

    def __str__(self) -> str:
        """As a table's level column shows it: ``8`` (the column says C), or ``R=2/s``."""
        return str(self.concurrency) if self.rate is None else self.label

    @property
    def order(self) -> tuple[int, float]:
        """A sort key for points of different kinds (rate levels after closed ones)."""
        return (self.concurrency, -1.0 if self.rate is None else self.rate)

    @classmethod
    def parse(cls, text: str) -> Point | None:
        """The point a label names (``C=8``, ``R=2/s``; a rate level's cap unknown: 0)."""
        got = re.fullmatch(r"C=(\d+)|R=([0-9.e+-]+|inf)/s", text.strip())
        if got is None:
            return None
        return cls(int(got[1])) if got[1] else cls(0, float(got[2]))

    @classmethod
    def of(cls, value: Any) -> Point:
        """From results.json: a concurrency (``8``), or ``[cap, rate]`` for a rate level."""
        if isinstance(value, cls):
            return value
        if isinstance(value, list | tuple):
            return cls(int(value[0]), _rate_in(value[1] if len(value) > 1 else None))
        return cls(int(value))

    def dump(self) -> int | list[Any]:
        return self.concurrency if self.rate is None else [self.concurrency, rate_out(self.rate)]


def point_of(record: Any) -> Point:
    """The level a request record belongs to (a table's missing rate reads back as NaN)."""
    rate = record.rate
    return Point(int(record.concurrency), None if rate is None or math.isnan(rate) else float(rate))


def sorted_points(points: Any) -> list[Point]:
    return sorted({Point.of(p) for p in points}, key=lambda p: p.order)


# A point in results.json: a concurrency as before, ``[cap, rate]`` for a rate level.
PointField = Annotated[Point, BeforeValidator(Point.of), PlainSerializer(Point.dump)]
