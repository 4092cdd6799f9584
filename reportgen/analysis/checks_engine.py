"""The checks that read the engine's own counters against what the client saw: output tokens
(``token_agreement``), the prefix cache's hit rate (``prefix_cache``) and speculative decoding's
acceptance, its log beside its counters (``spec_agreement``); the server's CPU per output token
against its parent's (``server_cpu``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import fmean

from reportgen.results.engine_log import LogValues
from reportgen.results.levels import Level
from reportgen.results.model import Experiment, Point, sorted_points
from reportgen.results.verdicts import Check

DEFAULT_PREFIX_HIT = (0.0, 0.10)
TOKEN_BOUND = 0.02  # engine vs client output tokens


def _counter(level: Level, name: str | None) -> float | None:
    """Sum over a counter's series (every label set) of a level's change, or None."""
    if not name:
        return None
    counters = (level.engine_metrics or {}).get("counters")
    if not isinstance(counters, Mapping):
        return None
    values = [float(v) for k, v in counters.items() if str(k).split("{")[0] == name]
    # deltas leave out counters that did not move: a scrape that worked means zero
    return sum(values) if values else 0.0


def token_agreement(levels: Sequence[Level], counters: Mapping[str, str]) -> Check:
    title = "Engine and client count the same output tokens"
    name = counters.get("generation_tokens")
    worst: tuple[float, str] | None = None
    judged = 0
    for lv in levels:
        if "counters" not in (lv.engine_metrics or {}) or lv.summary.errors:
            continue
        server = _counter(lv, name)
        client = float(lv.summary.output_tokens)
        if server is None or client <= 0:
            continue
        judged += 1
        gap = abs(server / client - 1)
        where = (
            f"{lv.point.label} repetition {lv.repetition + 1}: engine {server:.0f}, "
            f"client {client:.0f}"
        )
        if worst is None or gap > worst[0]:
            worst = (gap, where)
    if not name:
        return Check(
            id="token_agreement",
            title=title,
            status="skip",
            evidence="the engine exports no token counter",
        )
    if worst is None:
        return Check(
            id="token_agreement",
            title=title,
            status="skip",
            evidence="no level with the engine's counters and no errors",
        )
    ok = worst[0] <= TOKEN_BOUND
    return Check(
        id="token_agreement",
        title=title,
        status="pass" if ok else "warn",
        evidence=f"{judged} level run(s), largest difference {worst[0]:.1%} ({worst[1]})",
        hint=""
        if ok
        else "the client's token counts (usage, tokenizer or chunks) differ from the engine's: "
        "set workload.tokenizer, or check that the engine reports usage",
    )


def prefix_cache(
    levels: Sequence[Level],
    counters: Mapping[str, str],
    expect: tuple[float, float] | None,
) -> Check:
    title = "Prefix-cache hit rate as expected"
    hits_name = counters.get("prefix_hits")
    queries_name = counters.get("prefix_queries") or counters.get("prompt_tokens")
    hits = queries = 0.0
    for lv in levels:
        h, q = _counter(lv, hits_name), _counter(lv, queries_name)
        if h is not None and q is not None:
            hits, queries = hits + h, queries + q
    if not hits_name or queries <= 0:
        read = hits_name and any(_counter(lv, hits_name) is not None for lv in levels)
        return Check(
            id="prefix_cache",
            title=title,
            status="skip",
            evidence="the engine looked up no prompt tokens in a prefix cache (prefix caching off)"
            if read
            else "the engine exports no prefix-cache counters",
        )
    rate = hits / queries
    said = f"{rate:.1%} of {queries:.0f} prompt tokens served from the prefix cache"
    if expect is None:
        return Check(
            id="prefix_cache",
            title=title,
            status="pass",
            evidence=said + " (no expectation: the prompts share text on purpose)",
        )
    lo, hi = expect
    ok = lo <= rate <= hi
    return Check(
        id="prefix_cache",
        title=title,
        status="pass" if ok else "warn",
        evidence=f"{said}; expected {lo:.0%} to {hi:.0%}",
        hint=""
        if ok
        else "prompts repeat across requests (cached prefill flatters TTFT and throughput): "
        "use more varied prompts, or set workload.prefix_cache_hit_rate if this is intended"
        if rate > hi
        else "the cache did not hit as the workload intends: is prefix caching enabled?",
    )


SPEC_AGREE = 0.2  # the log's mean acceptance length within this of the counters'


def spec_length(level: Level, counters: Mapping[str, str]) -> tuple[float | None, float | None]:
    """One level run's speculative decoding from the engine's counters: (mean accepted
    length, acceptance rate), 1 + accepted / draft rounds and accepted / proposed, or the
    engine's acceptance-length gauge; None where it exported neither, or where nothing was
    speculated (SGLang exports its gauge as 0 then: a length is at least one token a step)."""
    drafts = _counter(level, counters.get("spec_drafts"))
    proposed = _counter(level, counters.get("spec_draft_tokens"))
    accepted = _counter(level, counters.get("spec_accepted"))
    gauge_name = counters.get("spec_accept_length")
    gauges = (level.engine_metrics or {}).get("gauges") or {}
    gauge = next((float(v) for k, v in gauges.items() if str(k).split("{")[0] == gauge_name), None)
    gauge = gauge if gauge is not None and gauge >= 1 else None
    length = 1 + accepted / drafts if drafts and accepted is not None else gauge
    rate = accepted / proposed if proposed and accepted is not None else None
    return length, rate


def spec_agreement(
    levels: Sequence[Level], counters: Mapping[str, str], log: LogValues | None
) -> list[Check]:
    """The server log's own acceptance length (vLLM's "Mean acceptance length", SGLang's
    "accept len") against the one its counters give over the levels; nothing when either is
    missing (no speculative decoding)."""
    lengths = [x for x in (spec_length(lv, counters)[0] for lv in levels) if x is not None]
    if not lengths or not log or not log.count:
        return []
    from_counters = sum(lengths) / len(lengths)
    from_log = log.mean
    off = abs(from_log / from_counters - 1) if from_counters else math.inf
    return [
        Check(
            id="spec_agreement",
            title="The log's acceptance length agrees with the counters'",
            status="pass" if off <= SPEC_AGREE else "warn",
            evidence=f"log: mean {from_log:.2f} over {log.count} line(s); counters: mean "
            f"{from_counters:.2f} over {len(lengths)} level run(s) ({off:.0%} apart; bound "
            f"{SPEC_AGREE:.0%})",
            hint=""
            if off <= SPEC_AGREE
            else "the log's lines also cover the warm-up and the time between levels; a gap "
            "this large says one of the two is not what it seems",
        )
    ]


CPU_BOUND = 0.2  # the server's CPU per output token, an experiment against its parent
# ... judged only where the server kept a quarter of a core busy: below that its CPU is mostly
# its own idle work (health and metrics answers), which tokens do not pace
CPU_BUSY = 0.25


def server_cpu(
    entry: Experiment, parent: Experiment | None, same: bool, counters: Mapping[str, str]
) -> list[Check]:
    """``server_cpu``: at each level both ran, the server's CPU per output token (its process
    CPU counter, the engine's ``server_cpu``: vLLM's API server, SGLang's tokenizer and
    detokenizer, over the output tokens the client counted; the mean of its level runs)
    against its parent's. Where the configuration is the parent's own (an A/A copy, the
    bracket) and they differ by more than ``CPU_BOUND`` at a level where both kept
    ``CPU_BUSY`` of a core busy, the host side of the same server ran at another speed: warn,
    since the difference it measured may be the host's. Elsewhere it is said, not judged (a
    change may move it). None where either has no CPU counter. (Not in the module's glossary,
    so that reports rendered before it render again byte for byte.)"""
    name = counters.get("server_cpu")
    if parent is None or not name:
        return []
    mine, theirs = _cpu_by_point(entry, name), _cpu_by_point(parent, name)
    common = sorted_points(set(mine) & set(theirs))
    if not common:
        return []
    said, apart = [], []
    for p in common:
        (per_token, busy), (theirs_per_token, theirs_busy) = mine[p], theirs[p]
        ratio = per_token / theirs_per_token
        line = (
            f"{p.label}: {per_token:.3f} CPU-seconds per 1,000 output tokens against "
            f"{theirs_per_token:.3f} for {parent.id} (x{ratio:.2f})"
        )
        said.append(line)
        if min(busy, theirs_busy) >= CPU_BUSY and abs(math.log(ratio)) > math.log1p(CPU_BOUND):
            apart.append(line)
    warn = same and bool(apart)
    return [
        Check(
            id="server_cpu",
            title="The server's CPU per output token matches its parent's",
            status="warn" if warn else "pass",
            evidence="; ".join(apart if warn else said),
            hint="the same configuration's server spent more (or less) CPU on each token than "
            f"in {parent.id}'s runs: its host side ran at another speed (other work on the "
            "host, another CPU), and the GPU waits on it, so part of the difference measured "
            "is the host's; measure both again, or on more starts (campaign.starts)"
            if warn
            else "",
        )
    ]


def _cpu_by_point(e: Experiment, name: str) -> dict[Point, tuple[float, float]]:
    """At each level: the CPU-seconds per 1,000 output tokens and the cores kept busy, each
    the mean of its level runs that moved the counter ``name``."""
    got: dict[Point, list[tuple[float, float]]] = {}
    for lv in e.levels:
        cpu, s = _counter(lv, name), lv.summary
        if cpu and s.output_tokens and s.duration_s:
            got.setdefault(lv.point, []).append((cpu / s.output_tokens * 1000, cpu / s.duration_s))
    return {p: (fmean(t for t, _ in v), fmean(b for _, b in v)) for p, v in got.items()}
