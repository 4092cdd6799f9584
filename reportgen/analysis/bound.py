"""What bounded each level: the GPU, the server's CPU, or the client.

A level's throughput is set by whichever part saturates first. On a GPU-bound level the GPU
ran kernels nearly all of its measured window (NVML's utilisation, the share of time a kernel
ran); where it sat idle a tenth of the window or more, something fed it too slowly: an engine
process on the CPU (vLLM's API server or engine core, SGLang's tokenizer or scheduler, single
Python processes that stream every token) near one full core, or the client at its ceiling.
Such a level's result belongs to this host's CPU: the same GPU behind a faster or less busy
CPU gives another number, which is how an A/A comparison on another host came out x1.13.

Read from what every level recorded: its GPU windows (``observe.telemetry``), the busiest
processes over its window (``observe.host.busiest``; for runs recorded before those, the
engine's own ``process_cpu_seconds_total`` counters, per token made, times the level's rate)
and the client's load (``ClientLoad``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from reportgen.results.findings import CLIENT, GPU, SERVER_CPU, UNKNOWN, LevelBound
from reportgen.results.levels import Level
from reportgen.results.model import Experiment, Point, sorted_points

GPU_BUSY = 90.0  # % utilisation over the window at or above which the GPU set the pace
# cores: a single-threaded engine process near its limit (a Python process that streams
# tokens rarely shows a full core: it waits on its sockets and the GIL between them)
PROCESS_SATURATED = 0.75
CLIENT_LOAD = 0.8  # share of the client's measured ceiling at or above which it set the pace

Bound = LevelBound  # (the finding: ``results.findings.LevelBound``)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


CPU_COUNTER = "process_cpu_seconds_total"
TOKENS_COUNTER = "generation_tokens_total"


def engine_cpu(lv: Level) -> dict[str, float]:
    """The cores each engine process used while serving ``lv``, from the engine's own CPU
    counters over the level (scraped around it, so per token made, times the level's output
    rate): vLLM's API server (the process serving /metrics), SGLang's tokenizer and
    detokenizer (by their ``component`` label). Empty where the level has none."""
    counters = (lv.engine_metrics or {}).get("counters") or {}
    tokens = sum(v for k, v in counters.items() if TOKENS_COUNTER in k.split("{")[0])
    rate = lv.summary.output_tok_s
    if not tokens or not rate:
        return {}
    out = {}
    for key, cpu_s in counters.items():
        name, _, labels = key.partition("{")
        if not name.endswith(CPU_COUNTER):
            continue
        m = re.search(r'component="([^"]+)"', labels)
        out[m.group(1) if m else "API server"] = float(cpu_s) / tokens * rate
    return out


def bounds(e: Experiment) -> list[Bound]:
    """Each of ``e``'s levels' limit, over its runs (levels cut short left out); a level
    with neither GPU nor host samples is left out."""
    out = []
    for point in sorted_points({lv.point for lv in e.levels}):
        runs = [lv for lv in e.levels if lv.point == point and not lv.aborted]
        busy = _mean(
            [
                g.util_gpu_pct.mean
                for lv in runs
                for g in lv.telemetry or []
                if g.samples and g.util_gpu_pct.mean is not None
            ]
        )
        cores: dict[str, list[float]] = {}
        for lv in runs:
            sampled = (lv.host.processes if lv.host else None) or []
            for p in sampled:
                if not p.get("client"):
                    cores.setdefault(str(p.get("name")), []).append(float(p.get("cores") or 0))
            if not sampled:
                for name, used in engine_cpu(lv).items():
                    cores.setdefault(name, []).append(used)
        process, process_cores = None, None
        if cores:
            process, got = max(cores.items(), key=lambda kv: sum(kv[1]) / len(runs))
            process_cores = sum(got) / len(runs)
        loads = [lv.summary.client.load for lv in runs if lv.summary.client]
        load = max((x for x in loads if x is not None), default=None)
        limited = any(lv.summary.client.limited for lv in runs if lv.summary.client)
        if busy is None and process is None:
            continue
        if limited or (load is not None and load >= CLIENT_LOAD):
            by = CLIENT
        elif busy is not None and busy >= GPU_BUSY:
            by = GPU
        elif process_cores is not None and process_cores >= PROCESS_SATURATED:
            by = SERVER_CPU
        else:
            by = UNKNOWN
        out.append(
            LevelBound(
                concurrency=point.concurrency,
                rate=point.rate,
                by=by,
                gpu_busy=busy,
                process=process,
                process_cores=process_cores,
                client_load=load,
            )
        )
    return out


def host_specific(e: Experiment, parent: Experiment | None, points: Sequence[Point]) -> list[Bound]:
    """Of ``points``, the levels where ``e`` or ``parent`` was bound by the server's CPU or
    the client (``Bound.host_specific``): a verdict there holds for this host's CPU."""
    out: dict[Point, Bound] = {}
    for side in (e, parent):
        if side is None:
            continue
        for b in bounds(side):
            if b.point in points and b.host_specific and b.point not in out:
                out[b.point] = b
    return [out[p] for p in sorted_points(out)]


def host_specific_said(e: Experiment, parent: Experiment | None, points: Sequence[Point]) -> str:
    """``host_specific`` in a sentence ("" where every such level was bound by the GPU or
    not known)."""
    found = host_specific(e, parent, points)
    if not found:
        return ""
    where = "; ".join(f"{b.point.label}: {b.said}" for b in found)
    return (
        f" Not bound by the GPU at {', '.join(b.point.label for b in found)} ({where}): the "
        "result there holds for this host's CPU, and a faster or less busy one may differ."
    )
