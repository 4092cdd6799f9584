"""How numbers, ratios, intervals and times look in the report: one place, so a value reads
the same in the summary, the tables and the PDF (and tests can compute the expected text).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import TYPE_CHECKING, Any

from reportgen.results.differences import flatten
from reportgen.results.model import Point
from reportgen.results.verdicts import level_label

if TYPE_CHECKING:
    from reportgen.results.levels import Stat
    from reportgen.results.verdicts import Comparison

NONE = "–"  # an en dash: a value that was not measured, rather than a zero


def fmt_num(value: float | None) -> str:
    """Three or four significant figures, thousands separated: 4.31, 187.9, 1,373."""
    if value is None or not math.isfinite(value):
        return NONE
    size = abs(value)
    if size >= 1000:
        return f"{value:,.0f}"
    if size >= 10:
        return f"{value:,.1f}"
    return f"{value:,.2f}"


def fmt_ratio(ratio: float | None) -> str:
    return NONE if ratio is None or not math.isfinite(ratio) else f"{ratio:.2f}×"


def fmt_ci(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "no interval"
    return f"{low:.2f}–{high:.2f}"


def fmt_bound(bound: float) -> str:
    """The largest change a comparison leaves possible, as said beside "equivalent"."""
    return f"no change beyond {bound:.1%}"


def fmt_rests_on(c: Comparison) -> str:
    """What an "equivalent" comparison rests on, to print beside the word: the largest change
    it leaves possible and, where recorded, the two one-sided tests' interval that shows it
    ("no change beyond 1.8%; 90% TOST 0.985–1.018"); the interval the tables show is wider
    (95% or more) and may reach past the margin. "" for any other verdict."""
    if c.verdict != "equivalent" or c.bound is None:
        return ""
    text = fmt_bound(c.bound)
    low, high, conf = c.eq_low, c.eq_high, c.eq_confidence
    if low is not None and high is not None and conf:
        text += f"; {level_label(conf)} TOST {low:.3f}–{high:.3f}"
    return text


def fmt_time(stamp: str | None) -> str:
    """'2026-11-29T15:13:04Z' -> '2026-11-29 15:13:04 UTC'; anything else is shown as given."""
    if not stamp:
        return NONE
    return stamp.replace("T", " ").replace("Z", " UTC") if stamp.endswith("Z") else stamp


def fmt_duration(start: str | None, end: str | None) -> str:
    try:
        seconds = (_parse(end) - _parse(start)).total_seconds()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return NONE
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def _parse(stamp: str) -> dt.datetime:
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")


def fmt_arg(value: Any) -> str:
    """A flag value as a person would type it: true, 3, "a b" stays a b, lists as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    return json.dumps(value, sort_keys=True)


def fmt_stat(stat: Stat | None) -> tuple[str, str]:
    """A statistic across repetitions (``results.model.Stat``) as (mean, '±sd' or '')."""
    if stat is None:
        return NONE, ""
    return fmt_num(stat.mean), ("" if stat.sd is None else f"±{fmt_num(stat.sd)}")


def field_rows(data: Any) -> list[tuple[str, str]]:
    """(dotted key, text) pairs of a nested fingerprint, for tables: a field its collector
    could not read (``{"error": why}``) shows as "unavailable: why", an empty one as "-"."""

    def unread_or_empty(v: Any) -> bool:
        return isinstance(v, dict) and (not v or set(v) == {"error"})

    return [(k, _field_text(v)) for k, v in flatten(data, leaf=unread_or_empty).items()]


def _field_text(value: Any) -> str:
    if isinstance(value, dict):
        return f"unavailable: {value['error']}" if value else "-"
    if isinstance(value, list):
        return ", ".join(str(x) for x in value) or "-"
    return "-" if value is None else str(value)


def level_cell(point: Point) -> str:
    """A level in a table's level column: its concurrency (the column says C), or a rate
    level's label (``R=2/s``)."""
    return str(point)


def level_head(points: Any) -> str:
    """The level column's heading: C where every level is a concurrency, else "level"."""
    return "level" if any(Point.of(p).rate is not None for p in points) else "C"
