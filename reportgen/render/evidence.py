"""What the engine and the GPUs said during an experiment, as the report shows it: the
engine's own evidence (log lines, info endpoints, Prometheus counters, model files), its
speculative decoding, and the GPU telemetry by level.

These read the server log's evidence (``LogEvidence``), each level's GPU windows
(``GpuWindow``) and the parts still free-form (``engine_info``, ``engine_metrics``,
``model_files``: dicts as their collectors in ``reportgen.observe`` wrote them). Pure, like
``view``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from reportgen.render.fmt import NONE, fmt_num, level_cell
from reportgen.results.engine_log import LogEvidence
from reportgen.results.findings import Speculation
from reportgen.results.levels import GpuWindow, Level, Which, sampled
from reportgen.results.model import Experiment, Point

MAX_COUNTERS = 12  # engine counters shown per level; the rest are in results.json


def _run_label(lv: Level) -> str:
    return f"{lv.point.label} #{lv.repetition + 1}"


_KV_TOKENS = re.compile(r"KV cache size: ([\d,]+) tokens|#tokens: (\d+)", re.I)
_KV_SIZE = re.compile(r"K size: ([\d.]+) GB, V size: ([\d.]+) GB")


def kv_cache(e: Experiment, tokens_per_request: int | None = None) -> str:
    """The KV cache the engine said it allocated (its log's own line), in tokens and, with
    ``tokens_per_request`` (the workload's input plus output), how many such requests fit
    in it at once: what bounds concurrency before the batch limits do. "" when the log did
    not say."""
    line = e.log_evidence.line("kv_cache") if e.log_evidence else ""
    got = _KV_TOKENS.search(line)
    if got is None:
        return ""
    tokens = int((got.group(1) or got.group(2)).replace(",", ""))
    out = f"{tokens:,} tokens"
    size = _KV_SIZE.search(line)
    if size:
        out += f" ({float(size.group(1)) + float(size.group(2)):.1f} GB)"
    if tokens_per_request:  # prompts of exactly that length (random ones)
        out += (
            f", room for {tokens // tokens_per_request:,} requests of this workload's "
            f"{tokens_per_request:,} tokens at once"
        )
    return out + ", by the engine's log"


def engine_evidence(e: Experiment) -> dict[str, Any]:
    """The engine's own evidence: what its log said, its info endpoints, its counters by
    level, and its model files."""
    log = e.log_evidence or LogEvidence()
    found = [(str(k), str(v)) for k, v in log.found.items() if v]
    missing = [str(k) for k, v in log.found.items() if not v]
    metrics = []
    for lv in e.levels:
        em = lv.engine_metrics
        if not em:
            continue
        if "error" in em:
            text = f"unavailable ({em['error']})"
        else:
            items = sorted((em.get("counters") or {}).items())
            text = "; ".join(f"{k} +{fmt_num(v)}" for k, v in items[:MAX_COUNTERS])
            text = text or "no counter moved"
            if len(items) > MAX_COUNTERS:
                text += f"; and {len(items) - MAX_COUNTERS} more in results.json"
        metrics.append((_run_label(lv), text))
    info = e.engine_info or {}
    files = e.model_files or {}
    shown = e.log_tail or ""
    resolved = e.server_args_resolved or {}
    return {
        "present": bool(e.log_evidence or info or metrics or files),
        "server_args": [(str(k), str(v)) for k, v in sorted(resolved.items())],
        "found": found,
        "missing": missing,
        "warnings": log.warnings,
        "warning_lines": log.warning_lines,
        "errors": log.errors,
        "errors_at_stop": log.errors_at_stop,
        # the lines the failure's own excerpt (its first error, its traceback) already shows
        # are said there once
        "error_lines": [x for x in log.error_lines if x.strip() not in shown],
        "metrics": metrics,
        "info": json.dumps(info, indent=1, sort_keys=True, default=str)[:6000] if info else "",
        "model_files": [(str(k), str(v)) for k, v in (files.get("files") or {}).items()]
        + (
            [("quantization_config (sha256)", str(files["quantization_config_sha256"]))]
            if files.get("quantization_config_sha256")
            else []
        )
        + ([("model files", f"unavailable ({files['error']})")] if "error" in files else []),
    }


def spec_rows(found: Sequence[Speculation]) -> list[tuple[str, str, str, str]]:
    """Speculative decoding per level run (C, repetition, mean accepted length, acceptance
    rate), as the run's findings hold it (from the engine's counters or its gauge)."""
    return [
        (
            level_cell(s.point),
            str(s.repetition + 1),
            NONE if s.length is None else f"{s.length:.2f}",
            NONE if s.acceptance is None else f"{s.acceptance:.0%}",
        )
        for s in found
    ]


def spec_log(e: Experiment) -> str:
    """What the server log said of speculative decoding over the whole run, or ""."""
    got = e.log_evidence.spec_accept_length if e.log_evidence else None
    if not got:
        return ""
    return (
        f"the server log's acceptance length over {got.count} decode line(s): mean "
        f"{got.mean:.2f}, from {got.min:.2f} to {got.max:.2f}"
    )


def windows(e: Experiment) -> list[tuple[float, float, str]]:
    """Each level run's measured window (start, end, label) on the records' clock, for the
    telemetry chart; a level is labelled once, at its first repetition."""
    out = []
    for lv in e.levels:
        w = lv.window
        if w is not None and w.t0_monotonic:
            label = lv.point.label if lv.repetition == 0 else ""
            out.append((w.t0_monotonic, w.end, label))
    return out


def telemetry_note(e: Experiment) -> str:
    """Why an experiment has no telemetry, or how it was sampled."""
    info = e.telemetry
    if info is None:
        return ""
    if info.error:
        return info.error
    if info.rows:
        late = info.late_samples
        return f"sampled at {fmt_num(info.hz)} Hz, {info.rows} rows" + (
            f", {late} late samples" if late else ""
        )
    return ""


IDLE_UTIL = 30.0  # % mean GPU utilisation while measured, below which the GPU mostly waited


def telemetry_idle(e: Experiment) -> str:
    """A sentence when the GPU was mostly idle during the measured windows (every level's
    mean utilisation below ``IDLE_UTIL``): then the host, the client or the engine's kernel
    launches set the pace, not the GPU. Empty otherwise."""
    by_level: dict[Point, list[float]] = {}
    for lv in e.levels:
        for value in sampled(lv.telemetry or [], "util_gpu_pct", "mean"):
            by_level.setdefault(lv.point, []).append(value)
    if not by_level:
        return ""
    means = [sum(v) / len(v) for v in by_level.values()]
    if max(means) >= IDLE_UTIL:
        return ""
    low, high = min(means), max(means)
    span = f"{low:.0f}%" if round(low) == round(high) else f"{low:.0f}-{high:.0f}%"
    return (
        f"The GPU was mostly idle while measured: utilisation {span} by level (mean over each "
        "level's window). What set the pace was not the GPU's compute but what feeds it: "
        "the engine's kernel launches and scheduling, or the client."
    )


def telemetry_overview(exps: Sequence[Experiment], levels: Sequence[Point]) -> list[dict[str, Any]]:
    """One row per experiment with telemetry, its levels side by side (each level's runs and
    GPUs pooled, inside the measured windows): GPU utilisation and power (means) at each of
    ``levels``, the SM clock's range, the most memory used, the worst share of samples slowed
    and the clock events seen: the print report's one telemetry table."""
    rows = []
    for e in exps:
        per: dict[Point, list[GpuWindow]] = {}
        for lv in e.levels:
            if lv.aborted or (lv.summary.requests and not lv.summary.ok):
                continue  # not a measurement of the configuration
            per.setdefault(lv.point, []).extend(g for g in lv.telemetry or [] if g.samples)
        per = {c: gs for c, gs in per.items() if gs}
        if not per:
            continue
        every = [g for gs in per.values() for g in gs]

        def at_levels(name: str, per: dict[Point, list[GpuWindow]] = per) -> list[str]:
            out = []
            for c in levels:
                got = sampled(per.get(c, []), name, "mean")
                out.append(f"{sum(got) / len(got):.0f}" if got else NONE)
            return out

        memory = sampled(every, "mem_used_bytes", "max")
        low = min(sampled(every, "sm_clock_mhz", "min"), default=None)
        high = max(sampled(every, "sm_clock_mhz", "max"), default=None)
        slow = [g.slowdown_share for g in every if g.slowdown_share is not None]
        events = sorted({name for g in every for name in g.clock_events})
        rows.append(
            {
                "id": e.id,
                "gpus": str(max(len({g.gpu for g in gs}) for gs in per.values())),
                "util": at_levels("util_gpu_pct"),
                "power": at_levels("power_w"),
                "sm_clock": f"{fmt_num(low)}-{fmt_num(high)}" if low != high else fmt_num(low),
                "memory": f"{max(memory) / 1e9:.1f}" if memory else NONE,
                "slowdown": f"{max(slow):.0%}" if slow else NONE,
                "events": ", ".join(x.replace("_", " ") for x in events) or "none",
            }
        )
    return rows


def idle_overview(exps: Sequence[Experiment]) -> str:
    """``telemetry_idle`` for several experiments in one sentence ("" when none was idle)."""
    idle = [e.id for e in exps if telemetry_idle(e)]
    if not idle:
        return ""
    return (
        f"Mostly idle while measured (every level under {IDLE_UTIL:.0f}% utilisation): "
        + ", ".join(idle)
        + ". What set their pace was not the GPU's compute but what feeds it: the engine's "
        "kernel launches and scheduling, or the client."
    )


def telemetry_rows(e: Experiment) -> list[dict[str, Any]]:
    """One row per level and repetition, over all GPUs: mean of the GPUs' means, the lowest
    minimum and highest maximum, and for clock events the worst GPU's share; samples: the
    fewest of any GPU; output tokens per joule (and joules per token) where the GPUs' energy
    is known, and whether it came from their sampled power."""
    groups: dict[tuple[Point, int], list[list[GpuWindow]]] = {}
    per_j: dict[tuple[Point, int], list[float]] = {}
    for lv in e.levels:
        gpus = [g for g in lv.telemetry or [] if g.samples]
        if gpus:
            groups.setdefault((lv.point, lv.repetition), []).append(gpus)
        if lv.summary.output_tok_per_j is not None:
            per_j.setdefault((lv.point, lv.repetition), []).append(lv.summary.output_tok_per_j)
    rows = []
    for key, runs in groups.items():
        gpus = [g for run in runs for g in run]
        events: dict[str, float] = {}
        for g in gpus:
            for name, share in g.clock_events.items():
                events[name] = max(events.get(name, 0.0), share)
        slow = [g.slowdown_share for g in gpus if g.slowdown_share is not None]
        rows.append(
            {
                "concurrency": level_cell(key[0]),
                "repetition": str(key[1] + 1),
                "gpus": str(max(len(run) for run in runs)),
                **_gpu_cells(gpus),
                "slowdown": f"{max(slow):.0%}" if slow else "–",
                "events": ", ".join(
                    f"{name.replace('_', ' ')} {share:.0%}"
                    for name, share in sorted(events.items())
                )
                or "none",
                "samples": str(sum(min(g.samples for g in run) for run in runs)),
                # output tokens per joule and joules per output token ("" without energy)
                "tok_per_j": _per_joule(per_j.get(key, [])),
                "integrated": any(g.energy_from == "power integrated" for g in gpus),
            }
        )
    return rows


def _per_joule(values: Sequence[float]) -> str:
    if not values:
        return ""
    mean = sum(values) / len(values)
    return f"{fmt_num(mean)} ({fmt_num(1 / mean)})" if mean > 0 else NONE


def telemetry_gpu_rows(e: Experiment) -> list[dict[str, str]]:
    """One row per level, repetition and GPU, for an experiment that ran on more than one GPU
    (empty otherwise: ``telemetry_rows`` says it all for one): each GPU's SM clock (mean of
    its means, lowest minimum and highest maximum), memory clock, power, temperature,
    utilisation, the most memory it had in use, its share of samples slowed and its samples,
    over the level's measured windows."""
    groups: dict[tuple[Point, int], dict[int, list[GpuWindow]]] = {}
    for lv in e.levels:
        for g in lv.telemetry or []:
            if g.samples:
                groups.setdefault((lv.point, lv.repetition), {}).setdefault(g.gpu, []).append(g)
    if not any(len(by_gpu) > 1 for by_gpu in groups.values()):
        return []
    rows = []
    for (point, repetition), by_gpu in groups.items():
        for index, windows in sorted(by_gpu.items()):
            memory = sampled(windows, "mem_used_bytes", "max")
            slow = [w.slowdown_share for w in windows if w.slowdown_share is not None]
            rows.append(
                {
                    "concurrency": level_cell(point),
                    "repetition": str(repetition + 1),
                    "gpu": str(index),
                    **_gpu_cells(windows),
                    "mem_clock": fmt_num(_mean(sampled(windows, "mem_clock_mhz", "mean"))),
                    "memory": f"{max(memory) / 1e9:.1f}" if memory else NONE,
                    "slowdown": f"{max(slow):.0%}" if slow else NONE,
                    "samples": str(sum(w.samples for w in windows)),
                }
            )
    return rows


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _gpu_cells(windows: Sequence[GpuWindow]) -> dict[str, str]:
    """The SM clock (mean of the means, lowest minimum-highest maximum), power (mean / most),
    the hottest temperature and the mean utilisation over ``windows``."""

    def stat(name: str, which: Which) -> list[float]:
        return sampled(windows, name, which)

    return {
        "sm_clock": f"{fmt_num(_mean(stat('sm_clock_mhz', 'mean')))} "
        f"({fmt_num(min(stat('sm_clock_mhz', 'min'), default=None))}-"
        f"{fmt_num(max(stat('sm_clock_mhz', 'max'), default=None))})",
        "power": f"{fmt_num(_mean(stat('power_w', 'mean')))} / "
        f"{fmt_num(max(stat('power_w', 'max'), default=None))}",
        "temp": fmt_num(max(stat("temp_c", "max"), default=None)),
        "util": fmt_num(_mean(stat("util_gpu_pct", "mean"))),
    }


# A sentence of an error message that tells the reader what to do ("Try increasing
# `gpu_memory_utilization` ...", "Please use tensor.pin_memory() ..."): the engine's own advice.
_ADVICE = re.compile(
    r"(?:^|(?<=[.!:;]\s))((?:Try|Please|Consider|You (?:can|may|might|should)|"
    r"Increase|Decrease|Reduce|Lower|Raise|Set)\b[^\n]*?)(?:\.(?=\s|$)|\n|$)"
)
# where the KV cache, not the run, found no room: more memory for it (or less context) helps
_NO_KV_ROOM = (
    "no available memory for the cache blocks",
    "not enough memory",
    "larger than the maximum number of tokens that can be stored in kv cache",
    "insufficient memory for kv cache",
)


def engine_advice(*texts: str) -> str:
    """The first sentence in ``texts`` (an error, then its log) in which the engine or its
    libraries say what to do, without its final stop; "" where none does."""
    for text in texts:
        found = _ADVICE.search(text or "")
        if found:
            return " ".join(found.group(1).split())
    return ""


def failure_hint(reason: str, log: str = "") -> str:
    """What to change, given why an experiment failed (``reason``) and its server's first
    error (``log``): the engine's own advice where it gives some, quoted, else the fix its
    cause calls for where the cause is a known one ("" where it is not)."""
    advice = engine_advice(reason, log)
    if advice:
        return f"the error's own advice: \u201c{advice}\u201d"
    low = f"{reason}\n{log}".lower()
    if any(x in low for x in _NO_KV_ROOM):
        return (
            "no room left for the KV cache: give it more memory (gpu-memory-utilization, "
            "mem-fraction-static) or less to hold (max-model-len, context-length)"
        )
    if "out of memory" in low or "no gpu memory" in low:
        return (
            "out of GPU memory while it ran: lower the KV cache's share "
            "(gpu-memory-utilization, mem-fraction-static) or the batch limits "
            "(max-num-seqs, max-running-requests)"
        )
    if "unrecognized arguments" in low or "invalid choice" in low or "not a flag" in low:
        return "the engine rejected a flag: check it with reportgen validate"
    return ""
