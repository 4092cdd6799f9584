"""Engine events inside a measurement window: the engine saying, in its log or its metrics,
that it was not in its steady state while a level was measured.

vLLM 0.26 prints "Triton kernel JIT compilation during inference: fused_moe_kernel. This
causes a latency spike; consider extending warmup to cover this shape/config." when a kernel
is compiled for a batch shape it meets for the first time; torch prints its recompilations;
a graph captured after start-up stalls every stream; a preempted request is recomputed.
Each engine adapter names the lines (``Engine.event_patterns``) and the counter
(``counters`` role "preemptions"). A level's window is the part of the server's log written
between its start and its end (byte offsets, ``Level.log_span``), so nothing depends on the
log's clock; where a line carries a time (vLLM's "12-02 21:18:55", SGLang's "[2026-12-02
21:18:55]"), the event is placed on the level's timeline.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from reportgen.engines import Engine
from reportgen.results.levels import EngineEvent

MOST = 20  # events kept per window (a storm of recompilations is one finding)
LINE_CHARS = 300
# "[2026-12-02 21:18:55]" or "[2026-12-02 21:18:55.123]" (SGLang, the simulator)
_FULL = re.compile(r"\[?(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?")
# "INFO 12-02 21:18:55" (vLLM: month-day, no year)
_SHORT = re.compile(r"\b[A-Z]+ (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\b")


def graph_steps(engine: Engine, text: str) -> list[int] | None:
    """Decode steps a window's log says ran as a CUDA graph and without one ([with,
    without]); None where the engine says nothing per step or the window holds no step."""
    if not engine.graph_step:
        return None
    rx = re.compile(engine.graph_step)
    found = [m.group(1) for ln in text.splitlines() if (m := rx.search(ln))]
    if not found:
        return None
    with_graph = sum(1 for x in found if x == "True")
    return [with_graph, len(found) - with_graph]


def line_time(line: str, year: int) -> float | None:
    """The Unix time a log line says it was written (local time, as engines print it), or
    None where it carries none."""
    m = _FULL.search(line)
    try:
        if m is not None:
            y, mo, d, h, mi, sec = (int(x) for x in m.groups()[:6])
            frac = float("0." + m.group(7)) if m.group(7) else 0.0
            return dt.datetime(y, mo, d, h, mi, sec).timestamp() + frac
        m = _SHORT.search(line)
        if m is not None:
            mo, d, h, mi, sec = (int(x) for x in m.groups())
            return dt.datetime(year, mo, d, h, mi, sec).timestamp()
    except ValueError:  # not a date after all
        return None
    return None


def in_log(engine: Engine, text: str, started_at_unix: float | None) -> list[EngineEvent]:
    """The events in ``text`` (a window's part of the log), each timed from the level's start
    where its line has a time."""
    if not engine.event_patterns or not text:
        return []
    patterns = [(kind, re.compile(p)) for kind, p in engine.event_patterns]
    year = dt.datetime.fromtimestamp(started_at_unix or 0).year
    out: list[EngineEvent] = []
    for line in text.splitlines():
        for kind, pattern in patterns:
            if pattern.search(line):
                at = line_time(line, year)
                since = None if at is None or started_at_unix is None else at - started_at_unix
                out.append(EngineEvent(kind=kind, line=line.strip()[:LINE_CHARS], at_s=since))
                break
        if len(out) >= MOST:
            break
    return out


def in_metrics(engine: Engine, deltas: Mapping[str, Any] | None) -> list[EngineEvent]:
    """A preemption counter that grew over the level (its Prometheus deltas)."""
    name = dict(engine.counters).get("preemptions")
    if name is None or not deltas or "counters" not in deltas:
        return []
    grew = sum(
        float(v)
        for k, v in (deltas.get("counters") or {}).items()
        if k == name or k.startswith(name + "{")
    )
    if grew <= 0:
        return []
    return [EngineEvent(kind="preemption", line=f"{name} +{grew:g}")]
