"""The workload in words, one home for it: the one-line description (the report's header and
each experiment's own workload, ``plan``'s lengths and prompts) and the parts the methods
section says at length (how levels warm up, how clients start, what throughputs count).

A workload here is typed: ``plan``'s own, or a saved one read by
``results.as_run.workload_as_run`` (what the run that wrote it ran).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from reportgen.campaign import resolve_trim
from reportgen.campaign.prompts import PromptSource
from reportgen.campaign.workload import Workload, repetitions_bounds
from reportgen.results.model import Experiment, rate_text


def line(wl: Workload) -> str:
    """One line: API, levels, amount per level, repetitions, token sizes, warm-up, seed."""
    levels = "C=" + ", ".join(str(c) for c in wl.concurrency)
    rates = rates_of(wl)
    if rates is not None:
        levels = f"rates {', '.join(rate_text(r) for r in rates)} requests/s ({_cap(wl)})"
    if wl.requests_per_level is not None:
        amount = f"{wl.requests_per_level} requests"
    elif wl.duration_s is not None:
        amount = f"{wl.duration_s:g} s"
    else:
        amount = "unspecified amount"
    source = wl.prompts.source
    inputs = (
        f"{wl.input_tokens} input / "
        if source in ("random", "shared-prefix")
        else "dataset prompts, "
    )
    return (
        f"{wl.api} API, {levels}, {amount} per level × "
        f"{reps(wl.repetitions)} repetition(s), {inputs}"
        f"{wl.output_tokens} output tokens, "
        f"{wl.warmup_requests} warm-up requests, seed {wl.seed}"
        + (
            ", throughputs trimmed to the steady state"
            if resolve_trim(wl.trim, wl.duration_s)
            else ""
        )
        + prompt_source(wl.prompts)
        + lengths_said(wl)
        + load_mode(wl)
    )


def _cap(wl: Workload) -> str:
    """The in-flight cap of an open loop whose rates are the levels, in words."""
    caps = wl.concurrency or [0]
    return f"at most {caps[0]} in flight" if caps[0] else "no cap in flight"


def lengths_said(wl: Workload) -> str:
    """How lengths vary from request to request ("" where each is the workload's)."""
    src = wl.prompts
    out = ""
    ratio = float(wl.range_ratio or 0)
    if ratio:
        which = (
            "input and output lengths"
            if src.source in ("random", "shared-prefix")
            else "output lengths"
        )
        out += f", {which} drawn uniformly within ±{ratio:.0%} of these (range_ratio {ratio:g})"
    if src.answer_lengths:
        how = "by the tokenizer" if wl.tokenizer else "estimated as characters / 4"
        out += (
            f", each asking for as many output tokens as the dataset's own answer had ({how}), "
            f"at most {wl.output_tokens}"
        )
    return out


def rate_of(wl: Workload) -> float | None:
    """Its one request rate, or None (a closed loop, or rates as the levels: ``rates_of``)."""
    rate = wl.request_rate
    return None if rate is None or isinstance(rate, list) else float(rate)


def rates_of(wl: Workload) -> list[float] | None:
    """Its rates where they are the levels (``request_rate`` a list)."""
    rate = wl.request_rate
    return [float(r) for r in rate] if isinstance(rate, list) else None


def load_mode(wl: Workload) -> str:
    """What a one-line workload leaves out otherwise: open-loop rate and arrivals, streaming
    off, SLOs ("" for a streamed closed loop without SLOs)."""
    out = ""
    find = wl.find_max
    if find is not None and find.over == "request_rate":
        out += (
            f", the request rate searched from {find.start:g} up to "
            f"{find.max:g} requests/s ({wl.arrival} arrivals, "
            f"{_cap(wl)}) for the highest meeting {find.slo} (at most "
            f"{find.probes} levels)"
        )
    elif find is not None:
        out += (
            f", C searched from {find.start} up to {find.max} for the "
            f"highest meeting {find.slo} (at most {find.probes} levels)"
        )
    if wl.turns > 1:
        think = float(wl.think_s or 0)
        out += f", conversations of {wl.turns} turns (history re-sent" + (
            f", {think:g} s between turns)" if think else ")"
        )
    if wl.prompts.source == "trace":
        scale = float(wl.prompts.time_scale or 0.001)
        out += f", open loop at the trace's own times ({scale:g} s per unit), at most C in flight"
    rate = rate_of(wl)
    if rate == math.inf:
        out += ", open loop at an infinite rate (every request of a level at once)"
    elif rate:
        out += f", open loop at {rate:g} requests/s ({wl.arrival} arrivals)"
    elif rates_of(wl) is not None:
        out += f", open loop ({wl.arrival} arrivals; inf: every request at once)"
    shape = burstiness(wl)
    if shape is not None:
        out += f", arrival gaps gamma-distributed of shape {shape:g} (burstiness)"
    if not wl.stream:
        out += ", not streamed (no TTFT or ITL)"
    if wl.extra_body:
        out += f", each request also sending {pairs(wl.extra_body, ' = ')}"
    slo = slo_set(wl)
    if slo:
        out += ", SLO " + ", ".join(f"{k} ≤ {v:g}" for k, v in slo.items())
    return out


def burstiness(wl: Workload) -> float | None:
    """The gamma shape of an open loop's arrival gaps, where it is not a Poisson process's 1
    (None: a closed loop, or Poisson arrivals)."""
    shape = float(wl.burstiness)
    open_loop = rate_of(wl) or rates_of(wl) is not None
    return shape if shape != 1.0 and open_loop else None


def pairs(values: Mapping[str, Any], sep: str) -> str:
    """A table's keys and values in one line, by key: "seed = 3, top_p = 0.9"."""
    return ", ".join(f"{k}{sep}{v}" for k, v in sorted(values.items()))


def slo_set(wl: Workload) -> dict[str, float]:
    """Its SLOs that are set, by name."""
    return {k: v for k, v in wl.slo.model_dump().items() if v is not None}


def prompt_source(src: PromptSource) -> str:
    """The prompt source in a few words, for the one-line workload ("" for random prompts)."""
    source = src.source
    if source == "shared-prefix":
        return f", prompts sharing {src.groups} prefixes of {src.prefix_tokens} tokens"
    if source in ("sharegpt", "jsonl"):
        return f", {source} prompts from {src.path}"
    if source == "trace":
        return (
            f", the trace {src.path} replayed on time (its lengths, its shared "
            f"{src.block_tokens}-token blocks)"
        )
    if source == "fixed":
        return ", one fixed prompt"
    return ""


def level_warmup(wl: Workload) -> str:
    """How each level was warmed up before it was measured (``workload.warmup``)."""
    w = wl.warmup
    if not w.steady:
        return ""
    width = f"{w.window_s:g}-s" if w.window_s else "one-request-time (at least 0.25 s)"
    return (
        " Then, before each level's first repetition on each server, the level's own load "
        f"(its concurrency, or its rate) ran until its last {w.windows} "
        f"{width} windows agreed within {w.tolerance:.0%} on output tok/s "
        "(tokens counted by their arrival time) and on time per output token, or for at most "
        f"{w.max_s:g} s; its requests are discarded too, and the staggered start "
        "of that level's clients is timed from its warm request times. A level run whose "
        "window held an engine event (a kernel compiled at run time, a recompilation, a graph "
        "captured, a preemption: the server's log and metrics say so) was measured once more."
    )


def stagger(wl: Workload, exps: Sequence[Experiment]) -> str:
    """How the closed loop's clients started, from what the levels recorded."""
    if not wl.stagger:
        return (
            "Every client sent its first request at the level's start (workload.stagger = false)."
        )
    # one client has nothing to be staggered against
    staggers = [
        lv.stagger
        for e in exps
        for lv in e.all_levels()
        if lv.stagger is not None and lv.concurrency > 1
    ]
    if not staggers:
        return "Every client sent its first request at the level's start."
    text = (
        "Clients start staggered, so that they do not run in lockstep waves: client k (from 0) "
        "sends its first request k × T / C after the level's start, T being the median request "
        + (
            "time of the level's own warm-up once it was steady (warm, at that concurrency), "
            if any(x.measured.endswith(" warm-up") for x in staggers)
            else "time measured at the server's warm-up (without a warm-up, in the level run "
            "before), "
        )
        + "which spreads the first requests over about one request time as in the steady state"
    )
    measured = [x for x in staggers if x.request_s]
    if measured:
        times = sorted(float(x.request_s or 0) for x in measured)
        steps = sorted(x.step_s for x in measured)
        text += (
            f"; here T was {_span(times, 1, 's')} and the step between clients "
            f"{_span(steps, 1e3, 'ms')}"
        )
    if any(x.capped for x in staggers):
        text += "; where that would take more than a quarter of a duration level, the step is "
        text += "shortened to fit"
    text += "."
    if len(measured) < len(staggers):
        text += " A level with no request time measured before it started every client at once."
    return text


def _span(values: Sequence[float], scale: float, unit: str) -> str:
    low, high = values[0] * scale, values[-1] * scale
    same = f"{low:.3g}" == f"{high:.3g}"
    return f"{low:.3g} {unit}" if same else f"{low:.3g}–{high:.3g} {unit}"


def trim(wl: Workload) -> str:
    """What the throughputs count: the steady state or the whole level (``resolve_trim``)."""
    if resolve_trim(wl.trim, wl.duration_s):
        return (
            "Throughputs (output tok/s, total tok/s, req/s, goodput) are trimmed to each level "
            "run's steady state: from the moment the most requests were in flight to the last "
            "moment they still were, so the ramp-up and the drain are left out (workload.trim, "
            "on by default for duration levels); the notes under each level table give the "
            "windows. Latency percentiles count every request."
        )
    if wl.duration_s is not None:
        return (
            "Throughputs count each level's whole length, ramp-up and drain included "
            "(workload.trim = false)."
        )
    return (
        "Throughputs count each level's whole length, from its start to its last request's "
        "end, ramp-up and drain included: a level of few requests per client reads lower "
        "than the steady state, and its achieved concurrency below C says by how much "
        "(request-count levels are trimmed only with workload.trim = true)."
    )


def reps(value: Any) -> str:
    low, high = repetitions_bounds(value)
    return str(low) if low == high else f"{low} to {high} (adaptive)"
