"""The prose parts of the report: methods, environment, workload descriptions.

The workloads (the campaign's and an experiment's own) and the environment (the host's
fingerprint) are free-form dicts in the results, as the campaign file and
``observe.fingerprint`` give them.

Metric definitions and verdict rules are read from the docstrings of the analysis modules that
implement them, so the report and the code cannot drift apart: change the definition where the
number is computed and the next report says the new thing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reportgen.analysis import checks, decide, noise, sequential, summary
from reportgen.analysis.verdict import FUTILITY_DOF
from reportgen.campaign.schema import Workload
from reportgen.render.fmt import field_rows
from reportgen.results.model import Experiment, rate_text

# the schema's own default, for results that left the key out (render had 0, the schema 4)
WARMUP_REQUESTS = Workload.model_fields["warmup_requests"].default

Pair = tuple[str, str]


@dataclass(frozen=True)
class Doc:
    """A docstring split into plain paragraphs and ``- name: text`` bullets."""

    paragraphs: list[str]
    bullets: list[Pair]


def parse_doc(doc: str | None) -> Doc:
    """Paragraphs and bullets of a module docstring, with reST backticks removed.

    Empty when docstrings are stripped (python -OO); the template then points to the source.
    """
    paragraphs: list[str] = []
    bullets: list[Pair] = []
    for block in re.split(r"\n\s*\n", doc or ""):
        in_bullet = False
        lines: list[str] = []
        for raw in block.splitlines():
            line = raw.strip()
            if line.startswith("- ") and ":" in line:
                name, rest = line[2:].split(":", 1)
                bullets.append((_plain(name), rest.strip()))
                in_bullet = True
                continue
            if in_bullet and line:  # an indented continuation of the bullet above
                name, body = bullets[-1]
                bullets[-1] = (name, f"{body} {line}")
                continue
            if line:
                lines.append(line)
        if lines:
            paragraphs.append(_plain(" ".join(lines)))
    return Doc(paragraphs, [(n, _plain(t)) for n, t in bullets])


def _plain(s: str) -> str:
    """Docstring markup out: reST literals (````x````) and bold (``**x**``)."""
    return s.replace("``", "").replace("**", "").strip()


def workload(wl: Mapping[str, Any]) -> str:
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
        f"{_reps(wl.get('repetitions', 1))} repetition(s), {inputs}"
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


def _level_warmup(wl: Mapping[str, Any]) -> str:
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


def _stagger(wl: Mapping[str, Any], exps: Sequence[Experiment]) -> str:
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


def _trim(wl: Mapping[str, Any]) -> str:
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


VERDICT_TERMS = ("equivalent", "better / worse", "inconclusive", "mde", "reps_needed")


def _reps(value: Any) -> str:
    low, high = sequential.bounds(value)
    return str(low) if low == high else f"{low} to {high} (adaptive)"


def noise_line(decisions: Sequence[Any]) -> str:
    """What the last pooled decision's noise model measured, in a sentence."""
    last = next((d.noise for d in reversed(decisions) if d is not None and d.noise), None)
    if not last:
        return ""
    within, between = last.get("within_sd"), last.get("between_sd")
    parts = []
    if within is not None:
        total = last.get("within_total_dof")
        groups = f"{last.get('within_cells', 0)} groups" + (
            f" with {total:.0f} degrees of freedom" if total is not None else ""
        )
        parts.append(
            f"repetitions on one server spread by {within:.1%} (sd of log values, from "
            f"{groups}; they agree enough to weigh as {last.get('within_dof', 0):.0f} degrees "
            "of freedom beside each comparison's own)"
        )
    by_level = last.get("between_sd_by_level") or {}
    if by_level:
        said = ", ".join(f"{v:.1%} at {k}" for k, v in by_level.items() if v is not None)
        parts.append(
            f"server starts of one configuration by {said} beyond that "
            f"(moderated towards each other; {last.get('between_dof', 0)} degree(s) of freedom)"
        )
    elif between is not None:
        parts.append(
            f"server starts of one configuration by {between:.1%} beyond that "
            f"({last.get('between_dof', 0)} degree(s) of freedom)"
        )
    else:
        parts.append(
            "the spread between server starts was not measured (no configuration was started "
            "twice), so verdicts assume it is nothing"
        )
    said = "Measured in this run, for the objective: " + "; ".join(parts) + "."
    methods = {d.method for d in decisions if d is not None and d.noise}
    if "pooled" in methods:
        said += (
            " These verdicts were taken by the earlier method: the spread between starts pooled"
            " over levels, and Welch-Satterthwaite degrees of freedom even where a side ran on"
            " one start (`reportgen render --redecide` takes them again as described above)."
        )
    return said


def error_rate(alpha: float, scope: str, experiments: int, levels: int) -> str:
    """Which false-alarm rate the verdicts hold, in a sentence: ``alpha`` for each
    experiment or for the campaign (over its ``experiments`` compared), shared by the
    objective's ``levels``."""
    each = alpha / max(1, experiments) if scope == "campaign" else alpha
    shared = f", shared by the objective's {levels} levels" if levels > 1 else ""
    if scope == "campaign":
        return (
            f"False alarms are held for the campaign as a whole (campaign.alpha_scope = "
            f'"campaign"): a campaign whose {experiments} compared experiments all change '
            f"nothing holds a wrong call (one adopted or rejected) with probability at most "
            f"{alpha:.0%}, each experiment decided at {each:.2%} (Bonferroni){shared}."
        )
    return (
        f"False alarms are held for each experiment: one no different from its parent is "
        f"adopted or rejected with probability at most {alpha:.0%}{shared}. Over a campaign "
        f"of {experiments} such experiments the chance of some wrong call is higher, up to "
        f"{min(1.0, alpha * experiments):.0%}; "
        'campaign.alpha_scope = "campaign" holds it for the whole campaign instead.'
        if experiments > 1
        else f"False alarms are held for each experiment: one no different from its parent is "
        f"adopted or rejected with probability at most {alpha:.0%}{shared}."
    )


METHOD_NAMES = {
    "levels": "with the run's noise model (the spread between starts per level)",
    "pooled": "with the run's noise model (the spread between starts pooled over levels, "
    "as reportgen took decisions before 2026-12)",
    "welch": "by each comparison's own repetitions (Welch)",
}


def redecided(
    records: Sequence[Mapping[str, Any]], now: Mapping[str, str], best: str | None
) -> str:
    """``render --redecide`` (or ``--recheck``) in a sentence: when, by what, and which
    verdicts the run's first decisions gave otherwise. ``now``: experiment id -> verdict;
    ``best``: the best configuration now."""
    if not records:
        return ""
    first, last = records[0], records[-1]
    before = first.get("verdicts_before") or {}
    # runs decided before the noise model had only Welch's method
    method = METHOD_NAMES.get(str(first.get("method_before") or "welch"), "")
    changed = [f"{k} {v} (now {now[k]})" for k, v in before.items() if k in now and now[k] != v]
    how = (
        "its assumption checks taken again first, with this reportgen's engine adapters "
        "(`render --recheck`)"
        if any("checks_before" in r for r in records)
        else "`render --redecide`"
    )
    first_said = (
        f"as the run first took them, {method}, "
        + ("they differed in " + "; ".join(changed) if changed else "every verdict was the same")
        + (
            f"; the best was {first.get('best_before')} (now {best})"
            if first.get("best_before") != best
            else ""
        )
    )
    by = METHOD_NAMES.get(str(last.get("method")), "")
    return (
        f" The decisions were taken again on {str(last.get('at', ''))[:10]} by reportgen "
        f"{last.get('reportgen_version', '?')} {by}, {how}; "
        f"{first_said}."
    )


def methods(
    wl: Mapping[str, Any],
    exps: Sequence[Experiment],
    margin: float | None,
    objective_label: str,
    interleave: bool = False,
    starts: int = 1,
    measured: str = "",
    ci_level: str = "95%",
    error: str = "",
) -> dict[str, Any]:
    """Metric definitions, load settings, statistics and the assumption checks, for the
    methods section; ``wl``: the campaign's workload, ``exps``: the experiments, whose own
    workloads are listed where they differ from it."""
    metric_doc = parse_doc(summary.__doc__)
    stats_doc = parse_doc(decide.__doc__)
    checks_doc = parse_doc(checks.__doc__)
    low, high = sequential.bounds(wl.get("repetitions") or 1)
    noise_doc = parse_doc(noise.__doc__)
    seq_doc = parse_doc(sequential.__doc__)
    if wl.get("requests_per_level") is not None:
        amount = f"{wl['requests_per_level']} requests per level"
    else:
        amount = f"{wl.get('duration_s', '?')} s per level"
    rate = rate_of(wl)
    if (wl.get("prompts") or {}).get("source") == "trace":
        amount = (
            f"the trace's first {wl['requests_per_level']} requests per level"
            if wl.get("requests_per_level") is not None
            else f"the trace's first {wl.get('duration_s', '?')} s per level"
        )
        loop = (
            "Open loop, replaying a trace: each request is sent at its own timestamp, whether "
            "or not earlier ones have finished; the concurrency level C caps the requests in "
            "flight (a request that must wait is timed from when it is actually sent)."
        )
    elif rates_of(wl) is not None:
        caps = wl.get("concurrency") or [0]
        cap = (
            f"at most {caps[0]} requests in flight (a request that must wait is timed from "
            "when it is actually sent)"
            if caps[0]
            else "with no cap on the requests in flight"
        )
        loop = (
            "Open loop with the request rate as the level: at each level's rate R, requests "
            f"arrive R per second ({wl.get('arrival', 'poisson')} arrivals, seeded; R = inf: "
            f"every request of the level at its start), whether or not earlier ones have "
            f"finished, {cap}."
        )
    elif rate == float("inf"):
        loop = (
            "Open loop at an infinite rate: every request of a level is sent at its start, "
            "the concurrency level C capping the requests in flight (a request that must wait "
            "is timed from when it is actually sent)."
        )
    elif rate:
        loop = (
            f"Open loop: requests arrive at {rate:g} per second ({wl.get('arrival', 'poisson')} "
            f"arrivals, seeded), whether or not earlier ones have finished; the concurrency "
            f"level C caps the requests in flight (a request that must wait is timed from when "
            f"it is actually sent)."
        )
    else:
        loop = (
            "Closed loop: at concurrency C, C clients each send a request and send the next as "
            "soon as the previous one ends, so C requests are in flight (apart from the start "
            "and the end of a level). " + _stagger(wl, exps)
        )
    turns = int(wl.get("turns") or 1)
    if turns > 1:
        think = float(wl.get("think_s") or 0)
        loop += (
            f" Each client holds a conversation of {turns} turns at a time: every turn sends "
            "the turns before it with the answers the server gave them (the history grows "
            "as a chat's does), "
            + (f"{think:g} s after the previous answer" if think else "as soon as the "
               "previous answer ends")
            + "; a level's requests count turns, and a turn that fails ends its conversation."
        )  # fmt: skip
    src = wl.get("prompts") or {}
    source = src.get("source", "random")
    prompts_text = {
        "shared-prefix": f"prompts are synthetic and share prefixes: each begins with one of "
        f"{src.get('groups', 8)} seeded prefixes of {src.get('prefix_tokens', '?')} tokens "
        "(the same in every experiment), drawn per request, then its own text",
        "random": "prompts are synthetic"
        + (
            " and exactly that long by the campaign's tokenizer"
            if wl.get("tokenizer")
            else ", their length approximated in words and corrected after warm-up from the "
            "server's reported prompt tokens"
        ),
        "sharegpt": "prompts are the first human turns of a ShareGPT-format dataset",
        "jsonl": "prompts come from a JSONL dataset",
        "fixed": "every request sends the same fixed prompt",
        "trace": "requests replay a trace: each sent at its timestamp, with its input and "
        "output lengths, its prompt synthetic text made of its hash_ids blocks (a block the "
        "same text wherever it appears, so requests share what the trace says they share)",
    }.get(source, "prompts are synthetic")
    sizes = (
        f"{wl.get('input_tokens', '?')} input tokens and {wl.get('output_tokens', '?')} "
        "output tokens requested per request"
        if source in ("random", "shared-prefix")
        # a dataset's prompts are as long as they are: input_tokens does not apply
        else f"{wl.get('output_tokens', '?')} output tokens requested per request, the "
        "prompts as long as they are"
    ) + lengths_said(wl)
    load = [
        f"{loop} {amount}; {wl.get('api', 'chat')} API; {sizes}; {prompts_text}; drawn from "
        f"seed {wl.get('seed', 0)}, the same for every experiment.",
        f"Warm-up: {wl.get('warmup_requests', WARMUP_REQUESTS)} requests after the server is "
        "ready and before the first level; they are excluded from every number."
        + _level_warmup(wl),
        (
            f"Repetitions: each level is run {low} time(s); a repetition's summary is one "
            if low == high
            else f"Repetitions: adaptive, {low} to {high}: each level is run {low} times, then "
            "the objective's levels whose verdict is still open get one more repetition at a "
            + (
                "time, each round on a fresh server with the parent's configuration run again "
                "beside it on a fresh server of its own (the parent grows with the experiment: "
                "its added runs join its own in the comparison), until decided, at "
                f"{high}, or once no count within {high} would decide (a futility stop, from "
                f"{FUTILITY_DOF} degrees of freedom of a level's interval); a repetition's "
                "summary is one "
                if any(e.control is not None and e.control.grown for e in exps)
                else "time, each round on a fresh server, until decided or at "
                f"{high}; a repetition's summary is one "
            )
        )
        + "observation. Tables show the mean across repetitions and ± its sample standard "
        "deviation; chart error bars are the same standard deviation; ratios are of "
        "geometric means (the mean of log values), the same number wherever a ratio appears.",
        f"Request timeout: {wl.get('request_timeout_s', '?')} s.",
    ]
    if interleave:
        load.append(
            "Interleaved: each experiment's repetitions alternated with fresh runs of its "
            "parent's configuration (parent, experiment, experiment, parent, ...), each on a "
            "fresh server, and the comparison with the parent is paired by repetition."
        )
    elif wl.get("fresh_server"):
        load.append("A fresh server was started and warmed up for every repetition.")
    if starts > 1 and low >= 2 and not wl.get("fresh_server") and not interleave:
        load.append(
            f"Each experiment's repetitions were split over {min(starts, low)} server starts "
            "(in order: the first repetitions of every level on one server, the rest on the "
            "next), so the run measures how much two starts of one configuration differ "
            "(memory placement, clocks, compiled-kernel caches), which repetitions on one "
            "server never show, and no verdict rests on one start."
        )
    if any(s.role == "prime" for e in exps for s in e.sessions):
        load.append(
            "Priming: the baseline's configuration was started once before the baseline and "
            "every level warmed up on it until steady, then stopped, and nothing it measured "
            "is used: engines compile kernels per batch shape at first use and keep them on "
            "disk, so without it the first configuration measured on a fresh machine pays "
            "for compilations every later one is spared."
        )
    bracket = next((e for e in exps if e.role == "bracket"), None)
    if bracket is not None:
        load.append(
            f"Bracketing: the baseline's configuration was measured again after every "
            f"experiment ({bracket.id}) and compared with the baseline's first measurement: "
            "what differs between the two is the host's or the engine's drift over the "
            "campaign (said with the decisions), and it is one more start of the baseline for "
            "the noise model."
        )
    if wl.get("stream") is False:
        load.append(
            "Responses were not streamed: a response arrives whole, so time to first token "
            "and inter-token latency are not measured (shown as –), and an SLO on them is "
            "not applied."
        )
    load.append(_trim(wl))
    if wl.get("duration_s") and not wl.get("request_rate"):
        least = float(wl["duration_s"])
        most = float(wl.get("max_duration_s") or 3 * least) if "max_duration_s" in wl else least
        if most > least:
            load.append(
                f"Duration levels ran at least {least:g} s and on, up to {most:g} s, until "
                "their output tok/s was known within the margin: the 95% interval of the mean "
                "of their windows (one request time long, tokens counted by arrival) narrower "
                "than the margin; then their clients stopped and the requests in flight "
                "finished."
            )
    slo = {k: v for k, v in (wl.get("slo") or {}).items() if v is not None}
    if slo:
        load.append(
            "Goodput counts requests meeting every SLO: "
            + ", ".join(f"{k} ≤ {v:g}" for k, v in slo.items())
            + "."
        )
    overrides = [
        (e.id, workload(e.workload)) for e in exps if e.workload and _differs(e.workload, wl)
    ]
    margin_text = "–" if margin is None else f"{float(margin):.0%}"
    return {
        "metric_intro": metric_doc.paragraphs[1:2],
        "metrics": metric_doc.bullets,
        "metric_notes": metric_doc.paragraphs[2:],
        "load": load,
        "overrides": overrides,
        # a paragraph that introduces a list ("Verdicts against the campaign's margin m:")
        # would dangle here: its list is given below, with the verdict terms
        "stats_intro": [
            p
            for p in stats_doc.paragraphs[1:]
            if not p.startswith("How the ") and not p.endswith(":")
        ],
        "rules": [(n, t) for n, t in stats_doc.bullets if n in VERDICT_TERMS],
        "noise_intro": noise_doc.paragraphs[1:2],
        "noise": noise_doc.bullets,
        "noise_notes": noise_doc.paragraphs[2:],
        "measured": measured,
        "error_rate": error,
        "ci_level": ci_level,
        "sequential": seq_doc.paragraphs[1:2] if high > low else [],
        "checks_intro": checks_doc.paragraphs[1:],
        "checks": checks_doc.bullets,
        "margin": margin_text,
        "objective": objective_label,
    }


def _differs(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return any(a.get(k) != b.get(k) for k in set(a) | set(b))


def _value(v: Any) -> str:
    """A fingerprint field: collectors record ``{"error": why}`` when they could not read it."""
    if isinstance(v, Mapping) and "error" in v:
        return f"unavailable ({v['error']})"
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list | tuple):
        return ", ".join(_value(x) for x in v)
    if isinstance(v, Mapping):  # a group of fields: "key: value" pairs
        return "; ".join(f"{k}: {_value(x)}" for k, x in v.items()) or "–"
    return str(v)


HOST_FIELDS: tuple[Pair, ...] = (
    ("hostname", "hostname"),
    ("cpu_model", "CPU"),
    ("cpu_count", "CPUs"),
    ("cpu_affinity", "CPUs usable by the run"),
    ("cpu_mhz_now", "CPU MHz (now)"),
    ("cpu_max_mhz", "CPU max MHz"),
    ("frequency_governor", "frequency governor"),
    ("turbo", "turbo / boost"),
    ("numa_nodes", "NUMA nodes (CPUs)"),
    ("memory_gib", "memory (GiB)"),
    ("os", "OS"),
    ("kernel", "kernel"),
    ("machine", "architecture"),
    ("virtualization", "virtualised by"),
    ("python", "Python"),
    ("container", "container"),
    ("cgroup_limits", "cgroup limits"),
)


def reached(ex: Mapping[str, Any]) -> str:
    """How a run reached the host that measured (``executor.*.record``), in a phrase."""
    here = f" from {ex['from']}" if ex.get("from") else ""
    python = f"; Python {ex['python']}" if ex.get("python") else ""
    if ex.get("kind") == "slurm":
        asked = ", ".join(
            x
            for x in (
                f"partition {ex['partition']}" if ex.get("partition") else "",
                f"{ex['gpus']} GPUs" if ex.get("gpus") is not None else "",
                f"time limit {ex['time']}" if ex.get("time") else "",
            )
            if x
        )
        return (
            f"as Slurm job steps{here}" + (f" ({asked})" if asked else "") + python
            + "; the host below is the node that answered the preflight, and each "
            "experiment says the node it ran on"
        )  # fmt: skip
    rtt = f"; SSH round trip {ex['ssh_rtt_ms']:g} ms" if ex.get("ssh_rtt_ms") else ""
    return f"over SSH: {ex.get('host')}{here}{rtt}{python}"


def environment(env: Mapping[str, Any]) -> dict[str, Any]:
    """Host, software and GPUs as (label, value) rows, every value a string."""
    host = env.get("host") or {}
    sw = env.get("software") or {}
    gpus = env.get("gpus") or {}
    rg = sw.get("reportgen") or {}
    software = [
        ("reportgen", _value(rg.get("version"))),
        (
            "reportgen commit",
            _value(rg.get("commit")) + (" (uncommitted changes)" if rg.get("dirty") else ""),
        ),
    ]
    if "installed_packages_count" in sw:
        software.append(
            (
                "installed Python packages",
                f"{sw.get('installed_packages_count')} (list sha256 "
                f"{sw.get('installed_packages_sha256')})",
            )
        )
    stack = sw.get("torch_stack")
    if stack:
        software.append(("torch stack (reportgen's Python)", _value(stack)))
    for repo in sw.get("repos") or []:
        if isinstance(repo, Mapping):
            state = (
                f"unavailable ({repo['error']})"
                if "error" in repo
                else f"{repo.get('commit')}"
                + (
                    f" ({repo.get('changed_files')} uncommitted changes)"
                    if repo.get("dirty")
                    else ""
                )
            )
            software.append((f"repository {repo.get('path')}", state))
    # reportgen's own row is above: a source checkout has no installed distribution, which
    # the package list would call "not installed" beside its version.
    packages = [
        (str(k), "not installed" if v is None else _value(v))
        for k, v in (sw.get("packages") or {}).items()
        if not (k == "reportgen" and rg.get("version"))
    ]
    env_vars = [(str(k), _value(v)) for k, v in sorted((sw.get("env") or {}).items())]
    known = {k for k, _ in HOST_FIELDS}
    host_rows = [(label, _value(host.get(k))) for k, label in HOST_FIELDS if k in host]
    host_rows += [(str(k), _value(v)) for k, v in sorted(host.items()) if k not in known]
    if isinstance(env.get("executor"), Mapping):
        host_rows.insert(0, ("reached", reached(env["executor"])))
    devices = []
    for d in gpus.get("devices") or []:
        mem = d.get("memory_total_bytes")
        devices.append(
            {
                "index": _value(d.get("index")),
                "name": _value(d.get("name")),
                "cc": _value(d.get("compute_capability")),
                "memory": f"{mem / 1024**3:.1f}" if isinstance(mem, int | float) else _value(mem),
                "power": _value(d.get("power_limit_w")),
                "uuid": _value(d.get("uuid")),
            }
        )
    return {
        "host": host_rows,
        "software": software,
        "packages": packages,
        "env": env_vars,
        "gpu_available": bool(gpus.get("available")),
        "gpu_reason": str(gpus.get("reason") or "no reason recorded"),
        "gpu_rows": [
            ("driver", _value(gpus.get("driver"))),
            ("CUDA driver", _value(gpus.get("cuda_driver_version") or gpus.get("cuda_driver"))),
            ("count", _value(gpus.get("count", len(devices)))),
        ],
        "devices": devices,
        "device_details": [
            {"index": _value(d.get("index")), "rows": field_rows(d)}
            for d in gpus.get("devices") or []
        ],
        "topology": [
            {
                "gpus": " - ".join(str(g) for g in t.get("gpus") or []),
                "ancestor": _value(t.get("common_ancestor")),
                **{
                    k: _value((t.get("p2p") or {}).get(k))
                    for k in ("read", "write", "nvlink", "atomics")
                },
            }
            for t in gpus.get("topology") or []
            if isinstance(t, dict)
        ],
    }


def _holds_differ(bound: str, ci: Sequence[float]) -> bool:
    """Whether a bound (as written, ``ttft_ms.p99<500``) holds at one end of an interval and
    not at the other."""
    from reportgen.campaign.bounds import parse

    (b,) = parse(bound)
    return b.holds(ci[0]) != b.holds(ci[1])


def search_said(record: Any) -> str:
    """A search's answer in a sentence (``workload.find_max``): the highest concurrency, or
    request rate, meeting the bounds."""
    bounds = " and ".join(record.bounds) or record.slo
    n = len(record.probes)
    rates = getattr(record, "over", "concurrency") == "request_rate"
    what = "request rate" if rates else "concurrency"

    def at(x: Any) -> str:
        return f"R={rate_text(float(x))}/s" if rates else f"C={int(float(x))}"

    def where(p: Any) -> float:
        return float(p.rate) if rates and p.rate is not None else float(p.concurrency)

    low = record.lowest_failure
    failed = next((p for p in record.probes if low is not None and where(p) == low), None)
    why = ""
    if failed is not None:
        over = [f"{k} {v:.4g}" for k, v in failed.values.items() if v is not None] + (
            [f"{failed.error_share:.0%} errors"] if failed.error_share > 0.01 else []
        )
        why = f"; {at(low)} did not ({', '.join(over)})"
    if record.best is None:
        head = f"No {what} probed met {bounds}" + (f" ({at(low)} and above fail)" if low else "")
    else:
        head = f"The highest {what} meeting {bounds} is {at(record.best)}" + why
    near = [p for p in record.probes if getattr(p, "near", False)]
    note = ""
    if near:
        said = []
        for p in near[:2]:
            bound, (lo, hi) = next(
                (k, v) for k, v in p.intervals.items() if v and _holds_differ(k, v)
            )
            again = ", after its repetitions ran again" if p.repeated else ""
            said.append(
                f"{at(where(p))} {'passed' if p.passed else 'failed'} within noise ({bound}: 95% "
                f"interval {lo:.4g}-{hi:.4g} over its repetitions on one server{again})"
            )
        note = "; " + "; ".join(said)
    if record.converged:
        tail = f", found in {n} probes."
    elif low is None:
        tail = f"; the {n} probes allowed ran out before {at(record.max)}, the most to try."
    elif record.best is None:
        tail = f"; the {n} probes allowed ran out before one passed."
    else:
        tail = (
            f"; the {n} probes allowed ran out with the answer between {at(record.best)} and "
            f"{at(low)}."
        )
    return head + note + tail
