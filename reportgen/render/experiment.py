"""One experiment's section of the report, from its ``results.model.Experiment``: its
verdict and comparisons, its table by level against the baseline, the caveats next to the
numbers, its servers, probes and checks (the engine's and the GPUs' evidence: ``evidence``).

Pure, like ``view``.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from reportgen.analysis.explain import Said
from reportgen.campaign.workload import repetitions_bounds
from reportgen.render import evidence
from reportgen.render.content import (
    Comparison,
    ExperimentView,
    FlagChange,
    LevelRow,
    Objective,
)
from reportgen.render.evidence import failure_hint
from reportgen.render.fmt import (
    NONE,
    fmt_arg,
    fmt_bound,
    fmt_ci,
    fmt_duration,
    fmt_ratio,
    fmt_rests_on,
    fmt_time,
    level_cell,
)
from reportgen.render.levels import (
    achieved,
    by_level,
    cell,
    ci_caption,
    cut_short,
    error_kinds,
    level_notes,
    level_row,
    summaries_by_level,
    trim_notes,
    vs_baseline_table,
)
from reportgen.render.text import search_said
from reportgen.results import levels as results_levels
from reportgen.results import model, records
from reportgen.results import verdicts as results_verdicts
from reportgen.results.findings import GPU, LevelBound, Speculation, Uncovered
from reportgen.results.model import Point, sorted_points
from reportgen.results.records import value_text
from reportgen.tracebacks import DISTILLED_HEADING, gist

LOG_HEADING = "End of the server log"  # what log_tail is, unless the runner said otherwise


SETTLE_ENDS = {
    "steady": "steady",
    "max_s": "not steady by its time limit",
    "errors": "ended on errors",
    "one pass": "one pass (all at once)",
}


def warmups(e: model.Experiment) -> list[str]:
    """Each level's own warm-up on each server start, in a line per start."""
    out = []
    for s in e.sessions:
        if not s.settled:
            continue
        beside = "grown beside it" if e.control is not None and e.control.grown else "interleaved"
        who = {"prime": "priming start (nothing measured)", "control": f"{s.config} ({beside})"}
        parts = [
            f"{x.point.label} {x.duration_s:.1f} s, {x.requests} requests, "
            + SETTLE_ENDS.get(x.reason, x.reason)
            + (f" (last windows within {x.spread:.1%})" if x.spread is not None else "")
            for x in s.settled
        ]
        head = who.get(s.role, f"server start {s.index + 1}")
        out.append(f"{head}: " + "; ".join(parts))
    return out


def events(e: model.Experiment) -> list[str]:
    """Engine events inside measurement windows: those measured again, and those left."""
    out = []
    for lv in e.all_levels():
        where = f"{lv.point.label} repetition {lv.repetition + 1}"
        for ev in lv.remeasured[:3]:
            at = f" at {ev.at_s:.1f} s" if ev.at_s is not None else ""
            out.append(f"{where}: {ev.kind}{at} ({ev.line[:140]}); measured again")
        for ev in lv.events[:3]:
            at = f" at {ev.at_s:.1f} s" if ev.at_s is not None else ""
            out.append(f"{where}: {ev.kind}{at} ({ev.line[:140]}); still in the window")
    return out


def _reason_short(e: model.Experiment) -> str:
    """A failure's reason without the server's message where the excerpt below starts with
    it (a fatal line and its distilled traceback) or ends with it (the traceback's
    exception): said once, whole, there."""
    head, sep, message = (e.reason or "").partition(": ")
    lines = [x.strip() for x in (e.log_tail or "").splitlines() if x.strip()]
    if not sep or not message.strip() or e.log_heading != DISTILLED_HEADING or not lines:
        return ""
    said = message.strip()
    if not any(said.startswith(x[:60]) or x.startswith(said[:60]) for x in (lines[0], lines[-1])):
        return ""
    return f"{head}; the server's message and its traceback below."


PRINT_LOG_LINES = 6  # a log's end, in print
PRINT_TRACEBACK_LINES = 14  # a distilled traceback's innermost frames and exception, in print


def _log_print(tail: str, heading: str) -> str:
    """The log excerpt as print shows it; the HTML report keeps the whole.

    - The end of a log (``LOG_HEADING``): its last ``PRINT_LOG_LINES``, where the server died.
    - From a fatal line on: its first ``PRINT_LOG_LINES``.
    - A distilled traceback: the server's message where the exception at its end does not
      repeat it, the heading, and the last ``PRINT_TRACEBACK_LINES`` (the innermost frames
      and the exception, whole)."""
    lines = tail.splitlines()
    if heading != DISTILLED_HEADING:
        if len(lines) <= PRINT_LOG_LINES:
            return tail
        more = f"[{len(lines) - PRINT_LOG_LINES} more lines in the HTML report]"
        if heading == LOG_HEADING:
            return "\n".join([more, *lines[-PRINT_LOG_LINES:]])
        return "\n".join([*lines[:PRINT_LOG_LINES], more])
    start = next((i for i, x in enumerate(lines) if x.startswith("Traceback")), None)
    if start is None or len(lines) - start - 1 <= PRINT_TRACEBACK_LINES:
        return tail
    body = lines[start + 1 :]
    kept = body[-PRINT_TRACEBACK_LINES:]
    # the innermost part of the message ("...: CUDA out of memory"), found in the exception?
    core = gist(" ".join(lines[:start]), 80).rstrip("…").split(": ")[-1][:40]
    head = [] if not core or core in " ".join(kept) else lines[:start]
    return "\n".join(
        [
            *head,
            lines[start],
            f"  [{len(body) - len(kept)} more lines of outer frames: in the HTML report]",
            *kept,
        ]
    )


def request_tokens(e: model.Experiment) -> int | None:
    """The tokens one request of ``e``'s workload holds, its input and output lengths, where
    its prompts are that long (random ones; not a dataset's, not a cached shared prefix's)."""
    wl = e.ran_workload
    if wl is None or wl.prompts.source != "random":
        return None
    return wl.input_tokens + wl.output_tokens


def _ran(start: str | None, end: str | None) -> str:
    """When an experiment ran: "2026-11-30 05:14:50 to 05:16:53 UTC (2 min 3 s)", the end's
    date said only where it differs."""
    if not start:
        return NONE
    begun, ended = fmt_time(start), fmt_time(end)
    if not end:
        return f"from {begun}"
    if begun[:10] == ended[:10]:
        begun, ended = begun.removesuffix(" UTC"), ended[11:]
    return f"{begun} to {ended} ({fmt_duration(start, end)})"


def _ran_on(where: records.RanOn | None) -> str:
    """Where an experiment ran when not here (``Experiment.ran_on``), in a phrase."""
    if where is None:
        return ""
    node, job, nodes = where.node, where.slurm_job, where.nodes
    if nodes and len(nodes) > 1:  # one server across a job's nodes
        many = f"{len(nodes)} nodes, {', '.join(nodes)}, rank 0 on {nodes[0]}"
        return f"{many} (Slurm job {job})" if job else many
    if node or job:
        return f"{where.name} (Slurm job {job})" if job else str(node)
    return where.host or ""


def _before_failure(decision: results_verdicts.Decision | None) -> str:
    levels = decision.before_failure if decision else None
    if not levels:
        return ""
    said = ", ".join(Point.of(c).label for c in levels)
    return (
        f"The levels it finished before it failed ({said}) are compared above and drawn in "
        "the charts, but decide nothing: the configuration did not hold up under the "
        "campaign's load."
    )


def section(
    i: int,
    e: model.Experiment,
    baseline: model.Experiment | None,
    best: str | None,
    objective: Objective,
    outcome: str,
    said: Said | None = None,
    engine: str = "",
    bounds: Sequence[LevelBound] = (),
    graphs: Sequence[Uncovered] = (),
    speculation: Sequence[Speculation] = (),
) -> ExperimentView:
    """The ``i``-th (0-based) experiment's section; ``outcome``: what became of it
    (``Run.outcome``); ``said``: its decision in words (``explain``); ``bounds``, ``graphs``
    and ``speculation``: what bounded each of its levels, those run partly without CUDA
    graphs, and speculative decoding in each level run (the run's findings)."""
    decision = e.decision
    is_baseline = e is baseline
    mine, base = by_level(e), by_level(baseline)
    my_runs, base_runs = summaries_by_level(e), summaries_by_level(baseline)
    rows: list[LevelRow] = []
    for c in sorted_points(mine):
        rows.append(
            level_row(
                c, mine[c], "this", is_baseline, base.get(c), my_runs.get(c), base_runs.get(c)
            )
        )
        if not is_baseline and c in base:
            rows.append(level_row(c, base[c], "baseline", True, None, base_runs.get(c)))
    vs_parent = decision.vs_parent if decision else []
    vs_baseline = decision.vs_baseline if decision else []
    metrics = (decision.metrics if decision else None) or {}
    baseline_metrics, baseline_table = vs_baseline_table(metrics.get("vs_baseline") or [])
    baseline_ci = ci_caption(metrics.get("vs_baseline") or [])
    judged = not (decision and decision.unjudged)  # else no repetitions would decide it
    ratio_at = {c.point: c.ratio for c in vs_baseline}
    return ExperimentView(
        index=i + 1,
        anchor=f"exp-{i + 1}",  # not the id: ids are user text and need not be valid anchors
        id=e.id,
        status=outcome if outcome == "not started" else e.status,
        verdict=outcome,
        rests_on=fmt_bound(b) if decision and (b := decision.equivalent_bound) else "",
        is_baseline=is_baseline,
        is_best=e.id == best,
        parent=e.parent or "",
        stand_in=(decision.stand_in if decision else None) or "",
        based_on=e.based_on or "",
        why=e.why,
        expect=e.expect or "",
        flag_diff=_flag_diff(e.flag_diff),
        also_changed=[
            FlagChange(c.key, value_text(c.before), value_text(c.after), "changed")
            for c in e.also_changed
        ],
        bound_by="; ".join(f"{b.point.label} {b.said}" for b in bounds),
        bound_elsewhere=any(b.by != GPU for b in bounds),
        graphs="; ".join(u.said for u in graphs),
        vs_parent=comparisons(vs_parent, judged),
        vs_baseline=comparisons(vs_baseline, judged),
        explanation=said.text if said else "",
        conclusion=said.short if said and e.parent else "",
        reason=e.reason or "",
        hint=failure_hint(e.reason or "", e.log_tail or ""),
        reason_short=_reason_short(e),
        before_failure=_before_failure(decision),
        ran_on=_ran_on(e.ran_on),
        warmups=warmups(e),
        events=events(e),
        log_tail=e.log_tail or "",
        log_heading=e.log_heading or LOG_HEADING,
        log_print=_log_print(e.log_tail or "", e.log_heading or LOG_HEADING),
        cut_short=cut_short(e),
        log_file=e.log_file or "",
        warnings=list(e.warnings),
        started=fmt_time(e.started_at),
        finished=fmt_time(e.finished_at),
        ran=_ran(e.started_at, e.finished_at),
        kv_cache=evidence.kv_cache(e, request_tokens(e)),
        command=shlex.join(e.command),
        base_url=e.base_url or "",
        search=search_said(e.search) if e.search else "",
        env=[(str(k), str(v)) for k, v in sorted(e.env.items())],
        objective=[cell(mine.get(c), objective.key) for c in objective.levels],
        objective_ratio=[fmt_ratio(ratio_at[c]) if c in ratio_at else "" for c in objective.levels],
        latency_ratio=[  # each decided change's
            ""
            if is_baseline or outcome not in ("adopted", "rejected", "equivalent")
            else latency_effect(metrics.get("vs_baseline") or [], c, mine.get(c), base.get(c))
            for c in objective.levels
        ],
        objective_achieved=[achieved(my_runs[c]) if c in my_runs else "" for c in objective.levels],
        levels=rows,
        notes=level_notes(mine, error_kinds(e)),
        trims=trim_notes(my_runs),
        telemetry=evidence.telemetry_rows(e),
        telemetry_windows=evidence.windows(e),
        telemetry_note=evidence.telemetry_note(e),
        telemetry_idle=evidence.telemetry_idle(e),
        telemetry_gpus=evidence.telemetry_gpu_rows(e),
        gpu_errors=[str(x) for x in (e.gpu_counters or {}).get("new_errors") or []],
        evidence=evidence.engine_evidence(e),
        all_metrics=comparisons(metrics.get("vs_parent") or []),
        checks=[
            {
                "id": c.id,
                "title": c.title,
                "status": c.status,
                "evidence": c.evidence,
                "hint": c.hint,
            }
            for c in e.checks
        ],
        paired=bool(decision and decision.paired),
        servers=_servers(
            e.sessions,
            grown=e.control is not None and e.control.grown,
            more=(e.more_start, e.more_open),
        ),
        repetitions=adaptive_note(e),
        spec=evidence.spec_rows(speculation),
        spec_log=evidence.spec_log(e),
        baseline_metrics=baseline_metrics,
        baseline_table=baseline_table,
        baseline_ci=baseline_ci,
        probes=[
            (p.prompt, str(p.expect or ""), p.answer if p.answer is not None else p.error or "")
            for p in e.probes or []
        ],
    )


LIMITS = {  # ``Comparison.limit``: what would decide, where repetitions would not
    "starts": "more starts",
    "one start": "a second start",
}


def _decide_with(c: results_verdicts.Comparison) -> str:
    """The repetitions that would decide ``c``, or what would where repetitions would not."""
    if c.reps_needed:
        return str(c.reps_needed)
    if c.requests_needed:  # a tail without an interval: requests a side that would give one
        return f"{c.requests_needed:,} requests"
    return LIMITS.get(c.limit or "", "")


def latency_effect(
    items: Sequence[results_verdicts.Comparison],
    level: Point,
    mine: results_levels.Aggregate | None,
    base: results_levels.Aggregate | None,
) -> str:
    """A change's latency effect at ``level`` against the baseline, as page one gives it
    beside its throughput's: TTFT p99 from its comparison (with the verdict where one was
    decided), TPOT p50 as the ratio of the levels' means (compared with no interval):
    "TTFT p99 2.40× worse, TPOT 1.15×"; "" where neither is known."""
    parts = []
    c = next((x for x in items if x.metric == "ttft_ms_p99" and x.point == level), None)
    if c is not None and c.ratio is not None:
        said = f" {c.verdict}" if c.verdict in ("better", "worse") else ""
        parts.append(f"TTFT p99 {fmt_ratio(c.ratio)}{said}")
    a = mine.mean("tpot_ms_p50") if mine is not None else None
    b = base.mean("tpot_ms_p50") if base is not None else None
    if a and b:
        parts.append(f"TPOT {fmt_ratio(a / b)}")
    return ", ".join(parts)


def comparisons(
    items: Sequence[results_verdicts.Comparison], decides: bool = True
) -> list[Comparison]:
    """The comparisons as the tables show them; ``decides``: False where no count of
    repetitions would make them a verdict (an experiment not judged), which is not offered."""
    return [
        Comparison(
            concurrency=level_cell(c.point),
            ratio=fmt_ratio(c.ratio),
            ci=fmt_ci(c.ci_low, c.ci_high),
            verdict=c.verdict,
            n=f"{c.n_parent} vs {c.n_child}",
            detectable=f"±{(c.mde - 1) * 100:.1f}%" if c.mde else "–",
            decide_with=_decide_with(c) if decides else "",
            metric=c.metric,
            rests_on=fmt_rests_on(c),
        )
        for c in items
    ]


def _flag_diff(items: Sequence[records.FlagChange]) -> list[FlagChange]:
    return [
        FlagChange(
            f.key,
            "(added)" if f.kind == "added" else fmt_arg(f.before),
            "(removed)" if f.kind == "removed" else fmt_arg(f.after),
            f.kind,
        )
        for f in items
    ]


def _servers(
    sessions: Sequence[model.Session],
    grown: bool = False,
    more: tuple[str | None, str | None] = (None, None),
) -> str:
    """How the experiment's servers were launched, in a phrase ("" for one launch);
    ``grown``: its parent's ran beside its adaptive rounds (``Control.grown``); ``more``: why
    it was started once more (``Experiment.more_start``, ``Experiment.more_open``)."""
    if len(sessions) <= 1:
        return ""
    mine = [x for x in sessions if x.role == "experiment"]
    control = [x for x in sessions if x.role == "control"]
    text = f"{len(mine)} launches of this configuration, one per repetition"
    apart, inside = more
    why = []
    if apart:
        first = len(mine) - 1 - bool(inside)
        why.append(f"its first {first} spread more than the other configurations' starts ({apart})")
    if inside:
        why.append(
            "it was still inconclusive with its ratio inside the margin, where one more start "
            f"could show it equivalent ({inside})"
        )
    if why:
        last = "the last" if len(why) == 1 else "the last two"
        text += f", {last} because " + " and because ".join(why)
    if control and grown:
        text += (
            f", and {len(control)} more of its parent's beside its added repetitions (compared "
            "with the parent's own runs and these together)"
        )
    elif control:
        order = " ".join("P" if x.role == "control" else "E" for x in sessions)
        text += (
            f", interleaved with {len(control)} of its parent's ({order}; P: parent, "
            "E: this experiment)"
        )
    return text


def adaptive_note(e: model.Experiment) -> str:
    """Adaptive repetitions in words: how many each level got and why, and the GPU time this
    saved against ``max`` everywhere ("" for a fixed count)."""
    low, high = repetitions_bounds(e.repetitions_asked)
    if high <= low or not e.looks:
        return ""
    got: dict[Point, int] = {}
    seconds: dict[Point, list[float]] = {}
    for lv in e.levels:
        got[lv.point] = got.get(lv.point, 0) + 1
        seconds.setdefault(lv.point, []).append(lv.summary.duration_s)
    final = {c.point: c.verdict for c in (e.decision.vs_parent if e.decision else [])}
    parts = []
    for c in sorted_points(got):
        opened = [look.repetitions for look in e.looks if c in look.open]
        if not opened:
            why = f"no more needed after {low}"
        elif got[c] >= high and c in e.looks[-1].open:
            why = f"still open at the maximum ({high})"
        elif final.get(c) == "inconclusive":  # the futility stop (``verdict.still_open``)
            why = (
                f"open after {', '.join(map(str, opened))}, stopped at {got[c]}: no count "
                f"within {high} would decide it"
            )
        else:
            why = f"open after {', '.join(map(str, opened))}, decided at {got[c]}"
        parts.append(f"{c.label}: {got[c]} ({why})")
    grown = e.control is not None and e.control.grown
    per_round = 2 if grown else 1  # the parent's start beside each round, when grown
    saved_runs = sum(max(0, high - n) for n in got.values()) * per_round
    level_s = sum(max(0, high - got[c]) * (sum(v) / len(v)) for c, v in seconds.items() if v)
    level_s *= per_round
    rounds = max(0, len(e.looks) - 1)
    starts = [x.ready_s or 0.0 for x in e.sessions if x.role in ("experiment", "control")]
    start_s = (high - low - rounds) * per_round * (sum(starts) / len(starts) if starts else 0.0)
    total = level_s + start_s
    minutes = f"{total / 60:.1f} GPU minutes" if total >= 60 else f"{total:.0f} GPU seconds"
    return (
        f"{low} to {high}, adaptive: "
        + "; ".join(parts)
        + f". Against {high} everywhere this saved {saved_runs} level run(s) and "
        f"{(high - low - rounds) * per_round} server start(s)"
        + (", its parent's beside it counted" if grown else "")
        + f", about {minutes} at this experiment's pace (levels, then starts to ready)."
    )
