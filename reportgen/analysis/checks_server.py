"""The assumption checks of what an experiment ran on (``checks`` lists them all).

The server, the GPUs and the host, the golden prompts' answers, and the campaign's own
checks: ``server_stable``, ``gpu_errors``, ``gpus_free_at_start``, ``host_matches``,
``outputs_sane``, ``outputs_varied``, ``baseline_agreement``, ``campaign_N`` and ``cuda_graphs``.

Imports ``analysis.text``, ``analysis.checks_levels`` (the status type), ``analysis.unjudged``
(the measured answers, as the verdict reads them) and the results model;
``observe.fingerprint`` for the host's comparison with ``host.expect``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from reportgen.analysis import text as text_mod
from reportgen.analysis.checks_levels import Status
from reportgen.analysis.unjudged import answers
from reportgen.load.records import RequestRecord
from reportgen.metrics import is_throughput
from reportgen.observe.environment import Environment, Gpus
from reportgen.results.model import Experiment, Point, sorted_points
from reportgen.results.verdicts import Check
from reportgen.tracebacks import gist

GPU_MEMORY_BUSY = 0.05  # share of a GPU's memory in use at start that means "not free"


def server_stable(entry: Experiment) -> Check:
    title = "Server ran without a crash or restart"
    reason = entry.reason or ""
    if not entry.levels:
        return Check(
            id="server_stable", title=title, status="skip", evidence="no level was measured"
        )
    kind = entry.failure.kind if entry.failure is not None else None
    if entry.status == "failed" and kind == "exited":
        return Check(
            id="server_stable",
            title=title,
            status="fail",
            evidence=reason,
            hint="read the end of the server log",
        )
    if entry.status == "failed" and kind == "fatal":
        # its process lived on, but it could no longer generate (a dead generation loop)
        return Check(
            id="server_stable",
            title=title,
            status="fail",
            evidence="the process stayed up but stopped generating: " + gist(reason),
            hint="read the server's first error and its traceback (decision log)",
        )
    problems: list[str] = []
    started: dict[int, float] = {}
    for lv in entry.all_levels():
        metrics = lv.engine_metrics or {}
        where = f"{lv.point.label} repetition {lv.repetition + 1}"
        back = sorted(k for k, v in (metrics.get("counters") or {}).items() if float(v) < 0)
        if back:
            problems.append(f"{where}: counter {back[0]} went back (the engine restarted)")
        start = (metrics.get("gauges") or {}).get("process_start_time_seconds")
        if start is not None:
            if lv.session in started and started[lv.session] != float(start):
                problems.append(f"{where}: the server process's start time changed")
            started.setdefault(lv.session, float(start))
    if problems:
        return Check(
            id="server_stable",
            title=title,
            status="fail",
            evidence="; ".join(problems[:3]),
            hint="the engine restarted itself mid-run: read the server log",
        )
    return Check(
        id="server_stable",
        title=title,
        status="pass",
        evidence="the server process stayed up through every level (checked after each), "
        "and its counters never went back",
    )


def answers_varied(rows: Sequence[RequestRecord], random_weights: bool = False) -> list[Check]:
    """``outputs_varied``: the measured requests' answers are not mostly a short string
    repeated (``analysis.text.outputs``), random weights or not: speculative decoding accepts
    nearly every draft of such text, and a speed measured on it says little of real text.
    Nothing where no answer text was kept."""
    seen = answers(rows)
    if not seen.answers:
        return []
    status: Status = "pass"
    hint = ""
    if seen.judged < text_mod.MIN_ANSWERS:
        status = "skip"
    elif seen.degenerate and random_weights:
        # by construction, on every experiment: said, not warned (nothing for the reader to
        # do; a verdict on speculative decoding or sampling over it is not judged anyway)
        status = "skip"
        hint = (
            "not judged: random weights give such text by construction "
            "(campaign.random_weights); a verdict on speculative decoding or sampling over it "
            "is not judged"
        )
    elif seen.degenerate:
        status = "warn"
        hint = (
            "the engine answered with looping text in this configuration: check its "
            "answers (golden prompts) before trusting its speed; a verdict on speculative "
            "decoding or sampling over it is not judged"
        )
    return [
        Check(
            id="outputs_varied",
            title="Answers are not a short string repeated",
            status=status,
            evidence=seen.said(),
            hint=hint,
        )
    ]


def probe_checks(
    entry: Experiment, baseline: Experiment | None, *, random_weights: bool = False
) -> list[Check]:
    """Golden prompts: each answer as expected and not degenerate; and as the baseline's.
    With ``random_weights`` only errors count against the answers, and agreement with the
    baseline's greedy answers is still judged."""
    title = "Outputs sane: golden prompts answered as expected"
    answers = list(entry.probes or [])
    if not answers:
        failed = entry.status != "ok"
        return [
            Check(
                id="outputs_sane",
                title=title,
                status="skip",
                evidence="no golden prompt was asked: the server failed before they were"
                if failed
                else "the campaign has no golden prompts",
                hint="" if failed else "add [[probe]] prompts with an expected answer (regex)",
            )
        ]
    bad: list[str] = []
    for i, a in enumerate(answers, 1):
        if a.error:
            bad.append(f"probe {i}: {a.error}")
            continue
        if random_weights:
            continue
        answer = a.answer or ""
        shown = answer if len(answer) <= 80 else answer[:77] + "..."
        if a.expect and not re.search(str(a.expect), answer):
            bad.append(f"probe {i}: {shown!r} does not match /{a.expect}/")
        for why in text_mod.problems(answer):
            bad.append(f"probe {i}: {why}")
    status: Status
    if random_weights and not bad:
        status = "skip"
        found = (
            f"{len(answers)} answer(s) received, not judged: the model has random weights "
            "(campaign.random_weights), so its text is meaningless by construction"
        )
    else:
        status = "fail" if bad else "pass"
        found = "; ".join(bad[:4]) or f"{len(answers)} of {len(answers)} answers as expected"
    out = [
        Check(
            id="outputs_sane",
            title=title,
            status=status,
            evidence=found,
            hint="the engine produced wrong or degenerate text in this configuration: its speed "
            "does not count"
            if bad
            else "",
        )
    ]
    if baseline is None or baseline is entry:
        return out
    theirs = list(baseline.probes or [])
    title = "Golden answers agree with the baseline's"
    pairs = [
        (i, text_mod.agreement(a.answer, b.answer))
        for i, (a, b) in enumerate(zip(answers, theirs, strict=False), 1)
        if a.answer is not None and b.answer is not None
    ]
    if not pairs:
        out.append(
            Check(
                id="baseline_agreement",
                title=title,
                status="skip",
                evidence="no answers to compare",
            )
        )
        return out
    differ = [(i, x) for i, x in pairs if x < 1]
    out.append(
        Check(
            id="baseline_agreement",
            title=title,
            status="warn" if differ else "pass",
            evidence="; ".join(f"probe {i}: same for {x:.0%} of the words" for i, x in differ)
            or f"{len(pairs)} answer(s) word for word the same",
            hint="greedy answers drifted from the baseline's: numerics changed (kernels, "
            "quantisation); read both answers before adopting"
            if differ
            else "",
        )
    )
    return out


# -- the GPUs and the host ---------------------------------------------------------------------


def gpu_state_checks(entry: Experiment, environment: Environment | None) -> list[Check]:
    """Error counters around the experiment and the GPUs' state when the run began."""
    out = []
    counters = entry.gpu_counters or {}
    if "new_errors" in counters:
        new = list(counters["new_errors"])
        out.append(
            Check(
                id="gpu_errors",
                title="No new GPU errors",
                status="pass" if not new else "fail",
                evidence="; ".join(new) or "ECC, remapped rows, PCIe replays, XID: no change",
                hint=""
                if not new
                else "check the GPU (nvidia-smi -q) before trusting these numbers",
            )
        )
    else:
        out.append(
            Check(
                id="gpu_errors",
                title="No new GPU errors",
                status="skip",
                evidence=str(counters.get("error") or "no GPU error counters"),
            )
        )

    gpus = environment.gpus if environment is not None else Gpus()
    busy = [
        f"GPU {d.index}: PID {p.get('pid')}"
        for d in gpus.devices
        if isinstance(d.processes, list)
        for p in d.processes
        if isinstance(p, Mapping)
    ]
    for d in gpus.devices:
        used, total = d.memory_used_bytes, d.memory_total_bytes
        known = isinstance(used, int | float) and isinstance(total, int | float) and total > 0
        if known and used / total > GPU_MEMORY_BUSY:
            busy.append(
                f"GPU {d.index}: {used / 2**30:.1f} of {total / 2**30:.0f} GiB memory in use"
            )
    if gpus.available and entry.base_url:
        out.append(
            Check(
                id="gpus_free_at_start",
                title="GPUs free when the run began",
                status="skip",
                evidence=f"the server was already running ({entry.base_url}): reportgen did "
                "not start it, so its GPUs were busy with it, or it runs elsewhere",
            )
        )
    elif gpus.available:
        out.append(
            Check(
                id="gpus_free_at_start",
                title="GPUs free when the run began",
                status="pass" if not busy else "warn",
                evidence="; ".join(busy) or "no other process on any GPU, memory free",
                hint="" if not busy else "another process shared the GPUs: stop it and rerun",
            )
        )
    return out


def host_check(environment: Environment | None, expect: Mapping[str, Any] | None) -> Check:
    title = "Host as the campaign expects"
    wanted = {k: v for k, v in (expect or {}).items() if v is not None}
    if not wanted:
        return Check(
            id="host_matches",
            title=title,
            status="skip",
            evidence="the campaign sets no host.expect",
            hint="set host.expect (GPU count, compute capability, name) so a wrong host is refused",
        )
    problems = (environment.gpus if environment is not None else Gpus()).mismatches(wanted)
    said = ", ".join(f"{k} = {v}" for k, v in sorted(wanted.items()))
    return Check(
        id="host_matches",
        title=title,
        status="fail" if problems else "pass",
        evidence="; ".join(problems) or f"matched {said}",
    )


# -- the campaign's own checks and the engine's log ------------------------------------------


def campaign_checks(entry: Experiment) -> list[Check]:
    """The campaign's own checks: a log line that must appear or must not, a bound on a
    metric (fail when not held; skip when there is nothing to judge). Each says whether its
    failure invalidates the verdict (``invalidates``)."""
    found = entry.log_evidence.found if entry.log_evidence else {}
    out = []
    for i, c in enumerate(entry.campaign_checks):
        if c.get("metric"):
            title, status, evidence = _metric_bound(entry, c)
        else:
            title, status, evidence = _log_line(c, found.get(f"campaign:{i}"))
        out.append(
            Check(
                id=f"campaign_{i}",
                title=str(c.get("description") or title),
                status=status,
                evidence=evidence,
                invalidates=bool(c.get("invalidates")),
            )
        )
    return out


def _log_line(c: Mapping[str, Any], line: str | None) -> tuple[str, Status, str]:
    """A campaign check of the server's log: ``line``, the first that matched, if one did."""
    must = c.get("log_contains")
    pattern = must or c.get("log_absent")
    if must:
        title = f"log shows /{pattern}/"
        return (title, "pass", str(line)) if line else (title, "fail", "no log line matched")
    title = f"log never shows /{pattern}/"
    return (title, "fail", str(line)) if line else (title, "pass", "no log line matched")


def _metric_bound(entry: Experiment, c: Mapping[str, Any]) -> tuple[str, Status, str]:
    """A campaign bound on a metric: the mean across repetitions of each level."""
    metric, stat = str(c["metric"]), str(c.get("stat") or "p50")
    name = metric if is_throughput(metric) else f"{metric} {stat}"
    lo, hi = c.get("min"), c.get("max")
    bound = " and ".join(
        x
        for x in (f">= {lo:g}" if lo is not None else "", f"<= {hi:g}" if hi is not None else "")
        if x
    )
    title = f"{name} {bound}"
    wanted = c.get("concurrency")
    per_level: dict[Point, list[float]] = {}
    for lv in entry.levels:
        v = lv.summary.value(metric, stat)
        if v is not None and math.isfinite(v):
            per_level.setdefault(lv.point, []).append(v)
    judged = {
        k: sum(per_level[k]) / len(per_level[k])
        for k in sorted_points(per_level)
        if not wanted or k.concurrency in wanted
    }
    if not judged:
        return title, "skip", "no measured level to judge"
    bad = [
        f"{k.label}: {v:.4g}"
        for k, v in judged.items()
        if (hi is not None and v > hi) or (lo is not None and v < lo)
    ]
    if bad:
        return title, "fail", "outside the bound at " + ", ".join(bad)
    shown = ", ".join(f"C={k}: {v:.4g}" for k, v in judged.items())
    return title, "pass", shown


def cuda_graphs(
    entry: Experiment, log_patterns: Sequence[str], graphs_off: str | None = None
) -> list[Check]:
    """Whether the engine's log says CUDA graph capture finished: for engines that print it,
    and experiments that ran. ``graphs_off``: the flags by which the experiment turned graphs
    off on purpose (``engines.Engine.graphs_disabled``): nothing to warn about then."""
    if "cuda_graph_captured" not in log_patterns or entry.status != "ok" or entry.base_url:
        return []  # (a server reportgen did not start: its log is not here)
    found = entry.log_evidence.found if entry.log_evidence else {}
    line = found.get("cuda_graph_captured")
    disabled = found.get("cuda_graph_disabled")
    status: Status
    if line:
        status, evidence, hint = "pass", str(line), ""
    elif graphs_off:
        status, hint = "skip", ""
        evidence = f"CUDA graphs turned off on purpose ({graphs_off}): no capture expected"
    elif disabled:
        status, evidence = "warn", f"the engine turned CUDA graphs off itself: {disabled}"
        hint = (
            "another setting of this experiment rules graphs out: its numbers include "
            "kernel-launch overhead that the configurations with graphs avoid"
        )
    else:
        status, evidence = "warn", "no capture line in the server log"
        hint = "graphs may have been disabled or captured during the run"
    return [
        Check(
            id="cuda_graphs",
            title="CUDA graph capture finished before measuring",
            status=status,
            evidence=evidence,
            hint=hint,
        )
    ]
