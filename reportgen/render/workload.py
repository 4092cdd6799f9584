"""The workload in words, one home for it: the one-line description (the report's header and
each experiment's own workload, ``plan``'s lengths and prompts) and the parts the methods
section says at length (how levels warm up, how clients start, what throughputs count).

A workload here is a saved one: the campaign's ``Workload`` as dumped in the results (a
dict), read with the defaults of the reportgen that wrote it where a key is missing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from reportgen.analysis import sequential, summary
from reportgen.campaign.workload import Workload
from reportgen.results.model import Experiment, rate_text

# the schema's own default, for results that left the key out (render had 0, the schema 4)
WARMUP_REQUESTS = Workload.model_fields["warmup_requests"].default


def line(wl: Mapping[str, Any]) -> str:
    """One line: API, levels, amount per level, repetitions, token sizes, warm-up, seed."""
    levels = "C=" + ", ".join(str(c) for c in wl.get("concurrency") or [])
    rates = rates_of(wl)
    if rates is not None:
        caps = wl.get("concurrency") or [0]
        cap = f"at most {caps[0]} in flight" if caps[0] else "no cap in flight"
        levels = f"rates {', '.join(rate_text(r) for r in rates)} requests/s ({cap})"
    if wl.get("requests_per_level") is not None:
        amount = f"{wl['requests_per_level']} requests"
    elif wl.get("duration_s") is not None:
        amount = f"{wl['duration_s']:g} s"
    else:
        amount = "unspecified amount"
    source = (wl.get("prompts") or {}).get("source", "random")
    inputs = (
        f"{wl.get('input_tokens', '?')} input / "
        if source in ("random", "shared-prefix")
        else "dataset prompts, "
    )
    return (
        f"{wl.get('api', 'chat')} API, {levels}, {amount} per level × "
        f"{reps(wl.get('repetitions', 1))} repetition(s), {inputs}"
        f"{wl.get('output_tokens', '?')} output tokens, "
        f"{wl.get('warmup_requests', WARMUP_REQUESTS)} warm-up requests, seed {wl.get('seed', 0)}"
        + (", throughputs trimmed to the steady state" if summary.trims(wl) else "")
        + prompt_source(wl.get("prompts") or {})
        + lengths_said(wl)
        + load_mode(wl)
    )


def lengths_said(wl: Mapping[str, Any]) -> str:
    """How lengths vary from request to request ("" where each is the workload's)."""
    src = wl.get("prompts") or {}
    out = ""
    ratio = float(wl.get("range_ratio") or 0)
    if ratio:
        which = (
            "input and output lengths"
            if src.get("source", "random") in ("random", "shared-prefix")
            else "output lengths"
        )
        out += f", {which} drawn uniformly within ±{ratio:.0%} of these (range_ratio {ratio:g})"
    if src.get("answer_lengths"):
        how = "by the tokenizer" if wl.get("tokenizer") else "estimated as characters / 4"
        out += (
            f", each asking for as many output tokens as the dataset's own answer had ({how}), "
            f"at most {wl.get('output_tokens', '?')}"
        )
    return out


def rate_of(wl: Mapping[str, Any]) -> float | None:
    """A saved workload's one request rate (saved as "inf" when infinite), or None (a closed
    loop, or rates as the levels: ``rates_of``)."""
    rate = wl.get("request_rate")
    return None if rate is None or isinstance(rate, list) else float(rate)


def rates_of(wl: Mapping[str, Any]) -> list[float] | None:
    """A saved workload's rates where they are the levels (``request_rate`` a list)."""
    rate = wl.get("request_rate")
    return [float(r) for r in rate] if isinstance(rate, list) else None


def load_mode(wl: Mapping[str, Any]) -> str:
    """What a one-line workload leaves out otherwise: open-loop rate and arrivals, streaming
    off, SLOs ("" for a streamed closed loop without SLOs)."""
    out = ""
    find = wl.get("find_max")
    if find and find.get("over") == "request_rate":
        caps = wl.get("concurrency") or [0]
        cap = f"at most {caps[0]} in flight" if caps[0] else "no cap in flight"
        out += (
            f", the request rate searched from {find.get('start', 1):g} up to "
            f"{find.get('max', 1024):g} requests/s ({wl.get('arrival', 'poisson')} arrivals, "
            f"{cap}) for the highest meeting {find.get('slo')} (at most "
            f"{find.get('probes', 8)} levels)"
        )
    elif find:
        out += (
            f", C searched from {find.get('start', 1)} up to {find.get('max', 1024)} for the "
            f"highest meeting {find.get('slo')} (at most {find.get('probes', 8)} levels)"
        )
    turns = int(wl.get("turns") or 1)
    if turns > 1:
        think = float(wl.get("think_s") or 0)
        out += f", conversations of {turns} turns (history re-sent" + (
            f", {think:g} s between turns)" if think else ")"
        )
    if (wl.get("prompts") or {}).get("source") == "trace":
        scale = float((wl.get("prompts") or {}).get("time_scale") or 0.001)
        out += f", open loop at the trace's own times ({scale:g} s per unit), at most C in flight"
    rate = rate_of(wl)
    if rate == math.inf:
        out += ", open loop at an infinite rate (every request of a level at once)"
    elif rate:
        out += f", open loop at {rate:g} requests/s ({wl.get('arrival', 'poisson')} arrivals)"
    elif rates_of(wl) is not None:
        out += f", open loop ({wl.get('arrival', 'poisson')} arrivals; inf: every request at once)"
    if wl.get("stream") is False:
        out += ", not streamed (no TTFT or ITL)"
    slo = {k: v for k, v in (wl.get("slo") or {}).items() if v is not None}
    if slo:
        out += ", SLO " + ", ".join(f"{k} ≤ {v:g}" for k, v in slo.items())
    return out


def prompt_source(src: Mapping[str, Any]) -> str:
    """The prompt source in a few words, for the one-line workload ("" for random prompts)."""
    source = src.get("source", "random")
    if source == "shared-prefix":
        return (
            f", prompts sharing {src.get('groups', 8)} prefixes of "
            f"{src.get('prefix_tokens', '?')} tokens"
        )
    if source in ("sharegpt", "jsonl"):
        return f", {source} prompts from {src.get('path')}"
    if source == "trace":
        return (
            f", the trace {src.get('path')} replayed on time (its lengths, its shared "
            f"{src.get('block_tokens', 512)}-token blocks)"
        )
    if source == "fixed":
        return ", one fixed prompt"
    return ""


def level_warmup(wl: Mapping[str, Any]) -> str:
    """How each level was warmed up before it was measured (``workload.warmup``)."""
    w = wl.get("warmup") or {}
    if not w or w.get("steady") is False:
        return ""
    width = f"{w['window_s']:g}-s" if w.get("window_s") else "one-request-time (at least 0.25 s)"
    return (
        " Then, before each level's first repetition on each server, the level's own load "
        f"(its concurrency, or its rate) ran until its last {w.get('windows', 3)} "
        f"{width} windows agreed within {w.get('tolerance', 0.05):.0%} on output tok/s "
        "(tokens counted by their arrival time) and on time per output token, or for at most "
        f"{w.get('max_s', 120):g} s; its requests are discarded too, and the staggered start "
        "of that level's clients is timed from its warm request times. A level run whose "
        "window held an engine event (a kernel compiled at run time, a recompilation, a graph "
        "captured, a preemption: the server's log and metrics say so) was measured once more."
    )


def stagger(wl: Mapping[str, Any], exps: Sequence[Experiment]) -> str:
    """How the closed loop's clients started, from what the levels recorded."""
    if wl.get("stagger") is False:
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


def trim(wl: Mapping[str, Any]) -> str:
    """What the throughputs count: the steady state or the whole level (``summary.trims``)."""
    if summary.trims(wl):
        return (
            "Throughputs (output tok/s, total tok/s, req/s, goodput) are trimmed to each level "
            "run's steady state: from the moment the most requests were in flight to the last "
            "moment they still were, so the ramp-up and the drain are left out (workload.trim, "
            "on by default for duration levels); the notes under each level table give the "
            "windows. Latency percentiles count every request."
        )
    if wl.get("duration_s") is not None:
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
    low, high = sequential.bounds(value)
    return str(low) if low == high else f"{low} to {high} (adaptive)"
