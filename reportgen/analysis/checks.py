"""Assumption checks: what must hold for an experiment's numbers to mean what they seem to.

Each check reads what a run already recorded (level summaries, request records, telemetry
windows, error counters, the engine's counters and log, the golden prompts' answers) and gives
``pass``, ``warn``, ``fail`` or ``skip`` with its evidence (the numbers it looked at) and a
hint (what to do). A failure of ``request_errors``, ``output_lengths``, ``gpu_errors``,
``host_matches``, ``server_stable`` or ``outputs_sane`` makes the
experiment's verdict "failed", whatever its numbers say.

- ``request_errors``: failed requests, at most 1% (pass), 5% (warn), more (fail).
- ``output_lengths``: requests that returned fewer tokens than asked: none (pass), up to 5%
  (warn), more (fail: the engine did not do the work that was measured).
- ``repetition_spread``: coefficient of variation of output tok/s across repetitions at each
  level, at most ``cv_bound`` (warn beyond: the ratio intervals will be wide).
- ``client_headroom``: no level ran above 80% of the client's measured ceiling (warn).
- ``gpu_throttling``: share of telemetry samples with a slowdown reason (power or thermal
  caps, hardware slowdown) during measured windows: none (pass), otherwise warn with the
  reasons.
- ``clock_stability``: SM clock coefficient of variation while busy at most 5% (warn beyond).
- ``gpu_errors``: no new ECC, remapped-row, PCIe-replay or XID errors (fail otherwise).
- ``gpus_free_at_start``: no other process on the GPUs when the run began (warn).
- ``cuda_graphs``: the engine's log says CUDA graph capture finished (engines that print it).
- ``telemetry``: GPU telemetry was recorded for every window (warn when unavailable).
- ``host_matches``: the host matched the campaign's ``host.expect`` (a run on a host that does
  not is refused before it starts; this records that it was checked, and against what).
- ``steady_state``: within each level run's steady part, requests that started in its first
  half decode as fast as those of its second half (median time per output token within 10%,
  or the difference not significant by a Mann-Whitney test at 5%); otherwise the server was
  still warming up, or drifting, while it was measured (warn).
- ``token_agreement``: the output tokens the engine counted (its Prometheus counter, per
  level) agree with the client's count within 2% (warn beyond: throughput in tokens is off).
- ``prefix_cache``: the share of prompt tokens the engine served from its prefix cache during
  levels is in the campaign's expected range (``workload.prefix_cache_hit_rate``; default at
  most 10% unless the prompt is fixed): a high rate makes prefill look cheaper than it is.
- ``server_stable``: the server did not exit, crash or restart during the levels (its
  counters never went back and its start time never changed); fail otherwise.
- ``outputs_sane``: every golden prompt (``[[probe]]``) got an answer that matches its
  ``expect`` and does not look degenerate (``analysis.text``); fail otherwise.
- ``baseline_agreement``: the golden prompts' answers agree with the baseline's, word for
  word (greedy decoding of the same model should; warn where they drift).
- ``campaign_N``: the campaign's own checks (a log line that must or must not appear, a bound
  on a metric); a failure invalidates the verdict only when the check says ``invalidates``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from reportgen.analysis import text as text_mod
from reportgen.analysis.summary import metric_value, steady_window

INVALIDATING = (
    "request_errors",
    "output_lengths",
    "gpu_errors",
    "host_matches",
    "server_stable",
    "outputs_sane",
)
CV_BOUND = 0.05
CLOCK_CV_BOUND = 0.05
STEADY_BOUND = 0.10  # early vs late median TPOT
TOKEN_BOUND = 0.02  # engine vs client output tokens
DEFAULT_PREFIX_HIT = (0.0, 0.10)
GPU_MEMORY_BUSY = 0.05  # share of a GPU's memory in use at start that means "not free"


def _check(cid: str, title: str, status: str, evidence: str, hint: str = "") -> dict[str, Any]:
    return {"id": cid, "title": title, "status": status, "evidence": evidence, "hint": hint}


def _share(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def run_checks(
    entry: Mapping[str, Any],
    environment: Mapping[str, Any] | None = None,
    *,
    log_patterns: Sequence[str] = (),
    cv_bound: float = CV_BOUND,
    host_expect: Mapping[str, Any] | None = None,
    rows: Sequence[Mapping[str, Any]] | None = None,
    counters: Mapping[str, str] | None = None,
    prefix_expect: tuple[float, float] | None = DEFAULT_PREFIX_HIT,
    baseline: Mapping[str, Any] | None = None,
    random_weights: bool = False,
) -> list[dict[str, Any]]:
    """Every check for one experiment (see the module docstring). ``log_patterns``: the
    engine's pattern names, so a check of a line the engine never prints is skipped;
    ``rows``: the experiment's request records; ``counters``: the engine's Prometheus counter
    names by role (``engines.Engine.counters``); ``prefix_expect``: the expected range of the
    prefix-cache hit rate (None: no expectation); ``baseline``: the baseline's entry, for
    comparing golden answers (None for the baseline itself); ``random_weights``: the model's
    text is meaningless by construction, so golden answers are not judged."""
    levels = list(entry.get("levels") or [])
    by_level = list(entry.get("by_level") or [])
    out = [] if not levels else _measurement_checks(entry, levels, by_level, cv_bound)
    if levels:
        out.append(steady_state(rows or []))
        out.append(token_agreement(levels, counters or {}))
        out.append(prefix_cache(levels, counters or {}, prefix_expect))
    out.append(server_stable(entry))
    out += probe_checks(entry, baseline, random_weights=random_weights)
    out += _gpu_state_checks(entry, environment)
    out.append(_host_check(environment, host_expect))
    out += _campaign_checks(entry)
    found = (entry.get("log_evidence") or {}).get("found") or {}
    if "cuda_graph_captured" in log_patterns and entry.get("status") == "ok":
        line = found.get("cuda_graph_captured")
        out.append(
            _check(
                "cuda_graphs",
                "CUDA graph capture finished before measuring",
                "pass" if line else "warn",
                line or "no capture line in the server log",
                "" if line else "graphs may have been disabled or captured during the run",
            )
        )
    return out


def _measurement_checks(
    entry: Mapping[str, Any],
    levels: list[Mapping[str, Any]],
    by_level: list[Mapping[str, Any]],
    cv_bound: float,
) -> list[dict[str, Any]]:
    """The checks that need measured levels."""
    out = []

    requests = sum(int(lv["summary"].get("requests", 0)) for lv in levels)
    errors = sum(int(lv["summary"].get("errors", 0)) for lv in levels)
    share = _share(errors, requests)
    status = "pass" if share <= 0.01 else "warn" if share <= 0.05 else "fail"
    out.append(
        _check(
            "request_errors",
            "Requests succeeded",
            status,
            f"{errors} of {requests} requests failed ({share:.1%})",
            "" if status == "pass" else "read the error kinds per level and the server log",
        )
    )

    short = sum(int(lv["summary"].get("short_outputs", 0)) for lv in levels)
    silent = sum(int(lv["summary"].get("silent_outputs", 0)) for lv in levels)
    share = _share(short, requests)
    status = "pass" if short == 0 else "warn" if share <= 0.05 else "fail"
    found = f"{short} of {requests} requests returned fewer tokens than asked ({share:.1%})"
    todo = "" if status == "pass" else "the engine stopped early: check that it honours "
    todo += "" if status == "pass" else "ignore_eos / min_tokens"
    if silent:
        status = "warn" if status == "pass" else status
        found += (
            f"; {silent} streamed no text although the engine counted their tokens: their "
            "time to first token and inter-token latencies are unknown, and left out"
        )
        todo += ("; " if todo else "") + (
            "read one such answer: text in a field the client does not read, or tokens "
            "that decode to nothing (special tokens)"
        )
    out.append(_check("output_lengths", "Outputs as long as requested", status, found, todo))

    worst: tuple[float, int] | None = None
    for agg in by_level:
        tok = agg.get("output_tok_s") or {}
        mean, sd = tok.get("mean"), tok.get("sd")
        if mean and sd is not None and int(tok.get("n") or 0) > 1:
            cv = sd / mean
            if worst is None or cv > worst[0]:
                worst = (cv, int(agg.get("concurrency", 0)))
    if worst is None:
        out.append(
            _check(
                "repetition_spread",
                "Repetitions agree",
                "skip",
                "fewer than two repetitions per level",
                "set workload.repetitions to 3 or more",
            )
        )
    else:
        ok = worst[0] <= cv_bound
        out.append(
            _check(
                "repetition_spread",
                "Repetitions agree",
                "pass" if ok else "warn",
                f"largest coefficient of variation of output tok/s: {worst[0]:.1%} at "
                f"C={worst[1]} (bound {cv_bound:.0%})",
                "" if ok else "more repetitions, or find what varies (clocks, other load)",
            )
        )

    limited = sum(int(agg.get("client_limited") or 0) for agg in by_level)
    out.append(
        _check(
            "client_headroom",
            "Client not saturated",
            "pass" if limited == 0 else "warn",
            f"{limited} level run(s) above 80% of the client's measured ceiling",
            "" if limited == 0 else "more workload.workers, or a bigger client host",
        )
    )

    windows = [w for lv in levels for w in lv.get("telemetry") or []]
    tele = entry.get("telemetry") or {}
    if not windows:
        reason = tele.get("error") or "no samples fell inside the measured windows"
        out.append(_check("telemetry", "GPU telemetry recorded", "warn", reason,
                          "install nvidia-ml-py and run where NVML works"))  # fmt: skip
        for cid, title in (("gpu_throttling", "GPUs not throttled"),
                           ("clock_stability", "Clocks stable")):  # fmt: skip
            out.append(_check(cid, title, "skip", "no GPU telemetry"))
    else:
        out.append(
            _check(
                "telemetry",
                "GPU telemetry recorded",
                "warn" if tele.get("error") else "pass",
                tele.get("error") or f"{len(windows)} GPU windows summarised",
            )
        )
        slow = max(float(w.get("slowdown_share") or 0) for w in windows)
        reasons = sorted(
            {
                name
                for w in windows
                for name in (w.get("clock_events") or {})
                if name not in ("gpu_idle", "applications_clocks_setting", "sync_boost")
            }
        )
        out.append(
            _check(
                "gpu_throttling",
                "GPUs not throttled",
                "pass" if slow == 0 else "warn",
                f"at most {slow:.0%} of a window's samples slowed"
                + (f" ({', '.join(reasons)})" if reasons else ""),
                ""
                if slow == 0
                else "power or thermal caps shaped these numbers: say so when comparing",
            )
        )
        cvs = [float(w["sm_clock_cv_busy"]) for w in windows if w.get("sm_clock_cv_busy")]
        top = max(cvs) if cvs else 0.0
        out.append(
            _check(
                "clock_stability",
                "Clocks stable",
                "pass" if top <= CLOCK_CV_BOUND else "warn",
                f"largest SM clock coefficient of variation while busy: {top:.1%}",
                ""
                if top <= CLOCK_CV_BOUND
                else "clocks moved during windows: lock them or "
                "compare only runs with the same behaviour",
            )
        )

    return out


def _gpu_state_checks(
    entry: Mapping[str, Any], environment: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """Error counters around the experiment and the GPUs' state when the run began."""
    out = []
    counters = entry.get("gpu_counters") or {}
    if "new_errors" in counters:
        new = list(counters["new_errors"])
        out.append(
            _check(
                "gpu_errors",
                "No new GPU errors",
                "pass" if not new else "fail",
                "; ".join(new) or "ECC, remapped rows, PCIe replays, XID: no change",
                "" if not new else "check the GPU (nvidia-smi -q) before trusting these numbers",
            )
        )
    else:
        out.append(_check("gpu_errors", "No new GPU errors", "skip",
                          str(counters.get("error") or "no GPU error counters")))  # fmt: skip

    gpus = (environment or {}).get("gpus") or {}
    busy = [
        f"GPU {d.get('index')}: PID {p.get('pid')}"
        for d in gpus.get("devices") or []
        if isinstance(d.get("processes"), list)
        for p in d["processes"]
    ]
    for d in gpus.get("devices") or []:
        used, total = d.get("memory_used_bytes"), d.get("memory_total_bytes")
        known = isinstance(used, int | float) and isinstance(total, int | float) and total > 0
        if known and used / total > GPU_MEMORY_BUSY:
            busy.append(
                f"GPU {d.get('index')}: {used / 2**30:.1f} of {total / 2**30:.0f} GiB memory in use"
            )
    if gpus.get("available"):
        out.append(
            _check(
                "gpus_free_at_start",
                "GPUs free when the run began",
                "pass" if not busy else "warn",
                "; ".join(busy) or "no other process on any GPU, memory free",
                "" if not busy else "another process shared the GPUs: stop it and rerun",
            )
        )

    return out


def _host_check(
    environment: Mapping[str, Any] | None, expect: Mapping[str, Any] | None
) -> dict[str, Any]:
    from reportgen.observe.fingerprint import host_mismatches

    wanted = {k: v for k, v in (expect or {}).items() if v is not None}
    if not wanted:
        return _check("host_matches", "Host as the campaign expects", "skip",
                      "the campaign sets no host.expect", "set host.expect (GPU count, "
                      "compute capability, name) so a wrong host is refused")  # fmt: skip
    problems = host_mismatches(dict(wanted), dict((environment or {}).get("gpus") or {}))
    said = ", ".join(f"{k} = {v}" for k, v in sorted(wanted.items()))
    return _check(
        "host_matches",
        "Host as the campaign expects",
        "fail" if problems else "pass",
        "; ".join(problems) or f"matched {said}",
    )


def _campaign_checks(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The campaign's own checks: a log line that must appear or must not, a bound on a
    metric (fail when not held; skip when there is nothing to judge)."""
    found = (entry.get("log_evidence") or {}).get("found") or {}
    out = []
    for i, c in enumerate(entry.get("campaign_checks") or []):
        if c.get("metric"):
            got = _metric_bound(entry, c)
        else:
            line = found.get(f"campaign:{i}")
            must = c.get("log_contains")
            pattern = must or c.get("log_absent")
            title = f"log shows /{pattern}/" if must else f"log never shows /{pattern}/"
            if must:
                status, evidence = ("pass", line) if line else ("fail", "no log line matched")
            else:
                status, evidence = ("fail", line) if line else ("pass", "no log line matched")
            got = (title, status, str(evidence))
        title, status, evidence = got
        chk = _check(f"campaign_{i}", str(c.get("description") or title), status, evidence)
        chk["invalidates"] = bool(c.get("invalidates"))
        out.append(chk)
    return out


def _metric_bound(entry: Mapping[str, Any], c: Mapping[str, Any]) -> tuple[str, str, str]:
    """A campaign bound on a metric: the mean across repetitions of each level."""
    metric, stat = str(c["metric"]), str(c.get("stat") or "p50")
    name = metric if metric.endswith("_s") else f"{metric} {stat}"
    lo, hi = c.get("min"), c.get("max")
    bound = " and ".join(
        x
        for x in (f">= {lo:g}" if lo is not None else "", f"<= {hi:g}" if hi is not None else "")
        if x
    )
    title = f"{name} {bound}"
    wanted = c.get("concurrency")
    per_level: dict[int, list[float]] = {}
    for lv in entry.get("levels") or []:
        v = metric_value(lv["summary"], metric, stat)
        if v is not None and math.isfinite(v):
            per_level.setdefault(int(lv["concurrency"]), []).append(v)
    judged = {k: sum(v) / len(v) for k, v in sorted(per_level.items()) if not wanted or k in wanted}
    if not judged:
        return title, "skip", "no measured level to judge"
    bad = [
        f"C={k}: {v:.4g}"
        for k, v in judged.items()
        if (hi is not None and v > hi) or (lo is not None and v < lo)
    ]
    if bad:
        return title, "fail", "outside the bound at " + ", ".join(bad)
    shown = ", ".join(f"C={k}: {v:.4g}" for k, v in judged.items())
    return title, "pass", shown


def steady_state(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Early against late requests of each level run's steady part (see the module doc)."""
    title = "Warm-up done: early and late requests of a level agree"
    runs: dict[tuple[int, int], list[Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("status") == "ok" and r.get("start") is not None and r.get("end") is not None:
            runs.setdefault((int(r["concurrency"]), int(r["repetition"])), []).append(r)
    worst: tuple[float, str, float] | None = None  # (|log ratio|, where, ratio)
    judged = 0
    for (c, rep), recs in sorted(runs.items()):
        window = steady_window(recs)
        if window is None:
            continue
        inside = sorted(
            (r for r in recs if window[0] <= float(r["start"]) and float(r["end"]) <= window[1]),
            key=lambda r: float(r["start"]),
        )
        tpot = [_tpot(r) for r in inside]
        tpot_ok = [(float(r["start"]), t) for r, t in zip(inside, tpot, strict=True) if t]
        half = len(tpot_ok) // 2
        if half < 4:
            continue
        early = [t for _, t in tpot_ok[:half]]
        late = [t for _, t in tpot_ok[-half:]]
        judged += 1
        ratio = float(np.median(late) / np.median(early))
        p = float(stats.mannwhitneyu(early, late).pvalue)
        if abs(ratio - 1) > STEADY_BOUND and p < 0.05:
            size = abs(math.log(ratio))
            if worst is None or size > worst[0]:
                worst = (size, f"C={c} repetition {rep + 1}", ratio)
    if not judged:
        return _check("steady_state", title, "skip",
                      "no level run had 8 or more requests inside its steady part")  # fmt: skip
    if worst is None:
        return _check(
            "steady_state",
            title,
            "pass",
            f"{judged} level run(s): median time per output token of the first and second "
            f"half of each steady part within {STEADY_BOUND:.0%} (or not significantly apart)",
        )
    _, where, ratio = worst
    return _check(
        "steady_state",
        title,
        "warn",
        f"{where}: later requests decoded at x{ratio:.2f} the time per token of earlier ones "
        "(Mann-Whitney p < 0.05)",
        "raise workload.warmup_requests (the server was still warming up)"
        if ratio < 1
        else "the server slowed during the level: look for throttling, memory growth or "
        "another load",
    )


def _tpot(r: Mapping[str, Any]) -> float | None:
    n = int(r.get("output_tokens") or 0)
    first = r.get("first_token")
    if n < 2 or first is None or first != first:  # None, or NaN read back from a table
        return None
    return (float(r["end"]) - float(first)) / (n - 1)


def _counter(level: Mapping[str, Any], name: str | None) -> float | None:
    """Sum over a counter's series (every label set) of a level's change, or None."""
    if not name:
        return None
    counters = (level.get("engine_metrics") or {}).get("counters")
    if not isinstance(counters, Mapping):
        return None
    values = [float(v) for k, v in counters.items() if str(k).split("{")[0] == name]
    # deltas leave out counters that did not move: a scrape that worked means zero
    return sum(values) if values else 0.0


def token_agreement(
    levels: Sequence[Mapping[str, Any]], counters: Mapping[str, str]
) -> dict[str, Any]:
    title = "Engine and client count the same output tokens"
    name = counters.get("generation_tokens")
    worst: tuple[float, str] | None = None
    judged = 0
    for lv in levels:
        summary = lv["summary"]
        if "counters" not in (lv.get("engine_metrics") or {}) or summary.get("errors"):
            continue
        server = _counter(lv, name)
        client = float(summary.get("output_tokens") or 0)
        if server is None or client <= 0:
            continue
        judged += 1
        gap = abs(server / client - 1)
        where = (
            f"C={lv['concurrency']} repetition {int(lv.get('repetition', 0)) + 1}: engine "
            f"{server:.0f}, client {client:.0f}"
        )
        if worst is None or gap > worst[0]:
            worst = (gap, where)
    if not name:
        return _check("token_agreement", title, "skip", "the engine exports no token counter")
    if worst is None:
        return _check("token_agreement", title, "skip",
                      "no level with the engine's counters and no errors")  # fmt: skip
    ok = worst[0] <= TOKEN_BOUND
    return _check(
        "token_agreement",
        title,
        "pass" if ok else "warn",
        f"{judged} level run(s), largest difference {worst[0]:.1%} ({worst[1]})",
        ""
        if ok
        else "the client's token counts (usage, tokenizer or chunks) differ from the engine's: "
        "set workload.tokenizer, or check that the engine reports usage",
    )


def prefix_cache(
    levels: Sequence[Mapping[str, Any]],
    counters: Mapping[str, str],
    expect: tuple[float, float] | None,
) -> dict[str, Any]:
    title = "Prefix-cache hit rate as expected"
    hits_name = counters.get("prefix_hits")
    queries_name = counters.get("prefix_queries") or counters.get("prompt_tokens")
    hits = queries = 0.0
    for lv in levels:
        h, q = _counter(lv, hits_name), _counter(lv, queries_name)
        if h is not None and q is not None:
            hits, queries = hits + h, queries + q
    if not hits_name or queries <= 0:
        return _check("prefix_cache", title, "skip",
                      "the engine exports no prefix-cache counters")  # fmt: skip
    rate = hits / queries
    said = f"{rate:.1%} of {queries:.0f} prompt tokens served from the prefix cache"
    if expect is None:
        return _check("prefix_cache", title, "pass", said + " (no expectation: fixed prompt)")
    lo, hi = expect
    ok = lo <= rate <= hi
    return _check(
        "prefix_cache",
        title,
        "pass" if ok else "warn",
        f"{said}; expected {lo:.0%} to {hi:.0%}",
        ""
        if ok
        else "prompts repeat across requests (cached prefill flatters TTFT and throughput): "
        "use more varied prompts, or set workload.prefix_cache_hit_rate if this is intended"
        if rate > hi
        else "the cache did not hit as the workload intends: is prefix caching enabled?",
    )


def server_stable(entry: Mapping[str, Any]) -> dict[str, Any]:
    title = "Server ran without a crash or restart"
    reason = str(entry.get("reason") or "")
    if not entry.get("levels"):
        return _check("server_stable", title, "skip", "no level was measured")
    if entry.get("status") == "failed" and re.search(r"server exited|crash", reason):
        return _check("server_stable", title, "fail", reason,
                      "read the end of the server log")  # fmt: skip
    problems: list[str] = []
    started: dict[Any, float] = {}
    control = (entry.get("control") or {}).get("levels") or []
    for lv in list(entry.get("levels") or []) + list(control):
        metrics = lv.get("engine_metrics") or {}
        where = f"C={lv['concurrency']} repetition {int(lv.get('repetition', 0)) + 1}"
        back = sorted(k for k, v in (metrics.get("counters") or {}).items() if float(v) < 0)
        if back:
            problems.append(f"{where}: counter {back[0]} went back (the engine restarted)")
        start = (metrics.get("gauges") or {}).get("process_start_time_seconds")
        session = lv.get("session", 0)
        if start is not None:
            if session in started and started[session] != float(start):
                problems.append(f"{where}: the server process's start time changed")
            started.setdefault(session, float(start))
    if problems:
        return _check("server_stable", title, "fail", "; ".join(problems[:3]),
                      "the engine restarted itself mid-run: read the server log")  # fmt: skip
    return _check("server_stable", title, "pass",
                  "the server process stayed up through every level (checked after each), "
                  "and its counters never went back")  # fmt: skip


def probe_checks(
    entry: Mapping[str, Any], baseline: Mapping[str, Any] | None, *, random_weights: bool = False
) -> list[dict[str, Any]]:
    """Golden prompts: each answer as expected and not degenerate; and as the baseline's.
    With ``random_weights`` only errors count against the answers, and agreement with the
    baseline's greedy answers is still judged."""
    title = "Outputs sane: golden prompts answered as expected"
    answers = list(entry.get("probes") or [])
    if not answers:
        return [_check("outputs_sane", title, "skip", "the campaign has no golden prompts",
                       "add [[probe]] prompts with an expected answer (regex)")]  # fmt: skip
    bad: list[str] = []
    for i, a in enumerate(answers, 1):
        if a.get("error"):
            bad.append(f"probe {i}: {a['error']}")
            continue
        if random_weights:
            continue
        answer = str(a.get("answer") or "")
        shown = answer if len(answer) <= 80 else answer[:77] + "..."
        if a.get("expect") and not re.search(str(a["expect"]), answer):
            bad.append(f"probe {i}: {shown!r} does not match /{a['expect']}/")
        for why in text_mod.problems(answer):
            bad.append(f"probe {i}: {why}")
    if random_weights and not bad:
        status, found = (
            "skip",
            (
                f"{len(answers)} answer(s) received, not judged: the model has random weights "
                "(campaign.random_weights), so its text is meaningless by construction"
            ),
        )
    else:
        status = "fail" if bad else "pass"
        found = "; ".join(bad[:4]) or f"{len(answers)} of {len(answers)} answers as expected"
    out = [
        _check(
            "outputs_sane",
            title,
            status,
            found,
            "the engine produced wrong or degenerate text in this configuration: its speed "
            "does not count"
            if bad
            else "",
        )
    ]
    theirs = list((baseline or {}).get("probes") or [])
    if baseline is None or baseline is entry:
        return out
    title = "Golden answers agree with the baseline's"
    pairs = [
        (i, text_mod.agreement(str(a.get("answer")), str(b.get("answer"))))
        for i, (a, b) in enumerate(zip(answers, theirs, strict=False), 1)
        if a.get("answer") is not None and b.get("answer") is not None
    ]
    if not pairs:
        out.append(_check("baseline_agreement", title, "skip", "no answers to compare"))
        return out
    differ = [(i, x) for i, x in pairs if x < 1]
    out.append(
        _check(
            "baseline_agreement",
            title,
            "warn" if differ else "pass",
            "; ".join(f"probe {i}: same for {x:.0%} of the words" for i, x in differ)
            or f"{len(pairs)} answer(s) word for word the same",
            "greedy answers drifted from the baseline's: numerics changed (kernels, "
            "quantisation); read both answers before adopting"
            if differ
            else "",
        )
    )
    return out


def invalidated(checks: Sequence[Mapping[str, Any]], evidence: bool = False) -> list[str]:
    """The failed checks that make an experiment's verdict "failed" (their titles, and with
    ``evidence`` what each found)."""
    return [
        str(c["title"]) + (f" ({c['evidence']})" if evidence and c.get("evidence") else "")
        for c in checks
        if c["status"] == "fail" and (c["id"] in INVALIDATING or c.get("invalidates"))
    ]
