"""From a results dict to what the report shows: plain dataclasses with numbers already formatted.

Pure: no I/O, no clock, no randomness. The template only places these strings; every decision
about what to say (which levels, which ratio, what a missing value looks like) is made here so
it can be tested without HTML. Times come from the results file, never from the renderer's
clock, so the same results always give the same report.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reportgen import engines
from reportgen.analysis.summary import THROUGHPUTS, all_failed
from reportgen.render import text
from reportgen.render.fmt import (
    NONE,
    fmt_arg,
    fmt_ci,
    fmt_duration,
    fmt_num,
    fmt_ratio,
    fmt_stat,
    fmt_time,
)

SIMULATED_NOTICE = (
    "Simulated engine: these numbers come from reportgen's built-in simulator "
    "(reportgen sim), not from a real inference engine or GPU."
)

# Columns of the per-experiment table by level, after output tok/s, in the template's order.
LEVEL_COLUMNS = (
    "total_tok_s",
    "req_s",
    "ttft_ms_p50",
    "ttft_ms_p90",
    "ttft_ms_p99",
    "itl_ms_p50",
    "itl_ms_p90",
    "itl_ms_p99",
    "e2e_ms_p50",
    "e2e_ms_p99",
)

# Series drawn in the charts (section 5): by_level keys.
CHART_KEYS = (
    "output_tok_s",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "itl_ms_p50",
    "itl_ms_p99",
    "tpot_ms_p50",
)


# -- the view model ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Header:
    title: str
    name: str
    description: str
    run_id: str
    started: str
    finished: str
    duration: str
    created: str  # ISO time for the PDF's metadata: when the run finished (or started)
    version: str
    status: str
    complete: bool
    incomplete_reason: str
    simulated: bool
    simulated_notice: str
    engine: str
    host: str = ""  # "hostname: 8 x NVIDIA H200" (or why the GPUs are unknown)
    resumed: str = ""  # when the run was continued with --resume, and what it kept


@dataclass(frozen=True)
class Objective:
    metric: str
    key: str  # the by_level key: the metric itself for throughputs, its p50 for latencies
    label: str  # what the report calls it: "output_tok_s" or "ttft_ms p50"
    levels: list[int]
    direction: str
    margin: str


@dataclass(frozen=True)
class Comparison:
    concurrency: int
    ratio: str
    ci: str
    verdict: str
    n: str
    detectable: str  # the smallest change the noise let it see, "±4.1%"
    decide_with: str  # inconclusive: repetitions per side that would decide, else ""
    metric: str = ""


@dataclass(frozen=True)
class FlagChange:
    key: str
    before: str
    after: str
    kind: str  # added | removed | changed


@dataclass(frozen=True)
class Cell:
    value: str
    sd: str = ""


def _cell(level: Mapping[str, Any], key: str) -> Cell:
    """A level's statistic, mean and sd; "all failed" where no request of it succeeded (its
    throughput is zero, and its latencies unknown: not a measurement of the configuration)."""
    if all_failed(level):
        return Cell("all failed")
    return Cell(*fmt_stat(level.get(key)))


@dataclass(frozen=True)
class LevelRow:
    concurrency: int
    label: str  # "this" or "baseline"
    is_baseline: bool
    output: Cell
    ratio: str  # output tok/s relative to the baseline at this level
    cells: list[Cell]
    errors: str


@dataclass(frozen=True)
class Experiment:
    index: int
    anchor: str
    id: str
    status: str
    verdict: str
    is_baseline: bool
    is_best: bool
    parent: str
    based_on: str
    why: str
    expect: str
    flag_diff: list[FlagChange]
    vs_parent: list[Comparison]
    vs_baseline: list[Comparison]
    explanation: str
    reason: str
    log_tail: str
    log_heading: str  # what log_tail is: "End of the server log" unless the runner said
    cut_short: list[str]  # levels ended early because the server died
    log_file: str
    warnings: list[str]
    started: str
    finished: str
    command: str
    env: list[tuple[str, str]]
    objective: list[Cell]  # the objective metric at each objective level
    objective_ratio: list[str]  # ... relative to the baseline there (from vs_baseline)
    levels: list[LevelRow]
    notes: list[str]  # measurement caveats by level: client-limited, short outputs, goodput
    telemetry: list[dict[str, str]]  # per level and repetition, during the measured window
    telemetry_levels: list[dict[str, str]]  # the same per level, repetitions pooled (print)
    telemetry_windows: list[tuple[float, float, str]]  # (start, end, label), records' clock
    telemetry_note: str  # why there is none, or how it was sampled
    gpu_errors: list[str]  # error counters that grew during the experiment
    evidence: dict[str, Any]  # the engine's own: log lines, info endpoints, metrics, model
    all_metrics: list[Comparison]  # every headline metric against the parent
    checks: list[dict[str, str]]  # assumption checks: id, title, status, evidence, hint
    # Every headline metric against the baseline: metric labels, then per level its cells
    # (ratio with interval, verdict)
    baseline_metrics: list[str] = field(default_factory=list)
    baseline_table: list[tuple[int, list[tuple[str, str, str]]]] = field(default_factory=list)
    # Speculative decoding, where the engine reported it: per level run (C, repetition,
    # mean accepted length, acceptance rate), and what its log said over the whole run
    spec: list[tuple[str, str, str, str]] = field(default_factory=list)
    spec_log: str = ""
    paired: bool = False  # compared with interleaved runs of its parent, pair by pair
    servers: str = ""  # how many server launches, and how they were arranged
    probes: list[tuple[str, str, str]] = field(default_factory=list)  # prompt, expect, answer


@dataclass(frozen=True)
class Series:
    """One successful experiment's numbers for the charts (raw floats, not strings)."""

    id: str
    index: int  # 1-based, as numbered in the report's tables
    is_baseline: bool
    is_best: bool
    levels: list[int]
    mean: dict[str, list[float | None]]
    sd: dict[str, list[float | None]]
    untrusted: bool = False  # ran, but a check invalidated its numbers (verdict "failed")


@dataclass(frozen=True)
class Reference:
    name: str
    metric: str
    concurrency: str
    value: str
    gpus: str
    per_gpu: str
    measured: str  # this run's best configuration at the same metric and level
    measured_per_gpu: str  # ... divided by this host's GPUs (throughputs only)
    versus: str  # measured per GPU / the reference per GPU (throughputs), or measured / value
    conditions: str
    source: str
    link: str | None  # only https:// sources become links


@dataclass(frozen=True)
class Assumptions:
    """Every check against every experiment at a glance, and what did not pass in full."""

    experiments: list[str]  # column heads: experiment ids
    rows: list[tuple[str, list[str]]]  # check title, status per experiment ("" not run)
    problems: list[dict[str, str]]  # warn and fail: experiment, title, status, evidence, hint
    passed: list[dict[str, str]]  # pass and skip, with their evidence


@dataclass(frozen=True)
class Report:
    header: Header
    objective: Objective
    summary: str
    experiments: list[Experiment]
    ok_experiments: list[Experiment]
    assumptions: Assumptions
    series: list[Series]
    references: list[Reference]
    environment: dict[str, Any]
    methods: dict[str, Any]
    campaign_file: dict[str, str]
    rerun: list[str]


def build(results: Mapping[str, Any]) -> Report:
    """The whole report's content from a loaded results.json."""
    camp = results.get("campaign") or {}
    info = camp.get("campaign") or {}
    objective = _objective(info, camp.get("workload") or {})
    exps = list(results.get("experiments") or [])
    baseline = exps[0] if exps else None
    best = results.get("best")
    engine_name = str((results.get("engine") or {}).get("name") or "")
    counters = dict(engines.ENGINES[engine_name].counters) if engine_name in engines.ENGINES else {}
    views = [_experiment(i, e, baseline, best, objective, counters) for i, e in enumerate(exps)]
    cf = results.get("campaign_file") or {}
    path = str(cf.get("path") or "campaign.toml")
    return Report(
        header=_header(results, info),
        objective=objective,
        summary=_summary_sentence(exps, best, objective),
        experiments=views,
        ok_experiments=[v for v in views if v.status == "ok"],
        assumptions=_assumptions(views),
        series=[
            _series(i + 1, e, e is baseline, e.get("id") == best)
            for i, e in enumerate(exps)
            if e.get("status") == "ok" and e.get("by_level")
        ],
        references=_references(
            camp.get("reference") or [],
            exps,
            best,
            len(((results.get("environment") or {}).get("gpus") or {}).get("devices") or []),
        ),
        environment=text.environment(results.get("environment") or {}),
        methods=text.methods(
            camp.get("workload") or {},
            exps,
            info.get("margin"),
            objective.label,
            interleave=bool(info.get("interleave")),
        ),
        campaign_file={
            "path": path,
            "sha256": str(cf.get("sha256") or NONE),
            "text": str(cf.get("text") or ""),
        },
        rerun=[
            f"reportgen run {shlex.quote(path)}",
            f"reportgen render {shlex.quote(_run_dir_hint(info, results))}",
        ],
    )


def _run_dir_hint(info: Mapping[str, Any], results: Mapping[str, Any]) -> str:
    return f"output/{info.get('name', '<campaign>')}/{results.get('run_id', '<run-id>')}"


def _header(results: Mapping[str, Any], info: Mapping[str, Any]) -> Header:
    status = str(results.get("status") or "unknown")
    reason = results.get("status_reason")
    if not reason:
        reason = {
            "running": "the run had not finished when these results were last saved "
            "(it is still running, or it stopped without recording why)",
            "incomplete": "the run stopped before every experiment had finished",
        }.get(status, f"the run's status is {status!r}")
    engine = results.get("engine") or {}
    started, finished = results.get("started_at"), results.get("finished_at")
    return Header(
        title=str(info.get("title") or info.get("name") or "reportgen report"),
        name=str(info.get("name") or NONE),
        description=str(info.get("description") or ""),
        run_id=str(results.get("run_id") or NONE),
        started=fmt_time(started),
        finished=fmt_time(finished) if finished else "not finished",
        duration=fmt_duration(started, finished)
        + (" from start to end, pauses included" if results.get("resumed") else ""),
        created=str(finished or started or ""),
        version=str(results.get("reportgen_version") or NONE),
        status=status,
        complete=status == "complete",
        incomplete_reason=str(reason),
        simulated=bool(engine.get("simulated")),
        simulated_notice=SIMULATED_NOTICE,
        engine=str(engine.get("name") or NONE),
        host=_host_line(results.get("environment") or {}),
        resumed="; ".join(_resumed(x) for x in results.get("resumed") or []),
    )


def _resumed(x: Mapping[str, Any]) -> str:
    """One --resume: when, what it kept, and what the campaign file had changed since."""
    kept = ", ".join(x.get("kept") or []) or "nothing"
    text = f"{fmt_time(x.get('at'))} (run {x.get('after') or 'unfinished'}; kept {kept}"
    changed = x.get("campaign_changed")
    if changed:
        text += "; campaign file changed after them"
        if changed.get("added"):
            text += ": added " + ", ".join(changed["added"])
        if changed.get("removed"):
            text += ("; " if changed.get("added") else ": ") + "removed "
            text += ", ".join(changed["removed"])
    return text + ")"


def _host_line(env: Mapping[str, Any]) -> str:
    """The machine in a phrase: its name and its GPUs, counted by model."""
    host = env.get("host") or {}
    gpus = env.get("gpus") or {}
    names: dict[str, int] = {}
    for d in gpus.get("devices") or []:
        name = str(d.get("name") or "GPU")
        names[name] = names.get(name, 0) + 1
    if names:
        what = ", ".join(f"{n} x {name}" for name, n in names.items())
    else:
        what = "no GPU seen" + (f" ({gpus['error']})" if gpus.get("error") else "")
    cpu = host.get("cpu_model")
    parts = [str(host.get("hostname") or "host"), what] + ([str(cpu)] if cpu else [])
    return f"{parts[0]}: " + "; ".join(parts[1:])


def _objective(info: Mapping[str, Any], workload: Mapping[str, Any]) -> Objective:
    obj = info.get("objective") or {}
    metric = str(obj.get("metric") or "output_tok_s")
    throughput = metric in THROUGHPUTS
    levels = list(obj.get("concurrency") or workload.get("concurrency") or [])
    direction = obj.get("direction") or ("higher" if metric.endswith("_s") else "lower")
    margin = info.get("margin")
    return Objective(
        metric=metric,
        key=metric if throughput else f"{metric}_p50",
        label=metric if throughput else f"{metric} p50",
        levels=[int(c) for c in levels],
        direction=str(direction),
        margin=NONE if margin is None else f"{float(margin):.0%}",
    )


def _comparisons(items: Sequence[Mapping[str, Any]]) -> list[Comparison]:
    return [
        Comparison(
            concurrency=int(c.get("concurrency", 0)),
            ratio=fmt_ratio(c.get("ratio")),
            ci=fmt_ci(c.get("ci_low"), c.get("ci_high")),
            verdict=str(c.get("verdict") or "inconclusive"),
            n=f"{c.get('n_parent', '?')} vs {c.get('n_child', '?')}",
            detectable=f"±{(c['mde'] - 1) * 100:.1f}%" if c.get("mde") else "–",
            decide_with=str(c["reps_needed"]) if c.get("reps_needed") else "",
            metric=str(c.get("metric") or ""),
        )
        for c in items
    ]


def _flag_diff(items: Sequence[Mapping[str, Any]]) -> list[FlagChange]:
    out = []
    for f in items:
        kind = str(f.get("kind") or "changed")
        before = "(added)" if kind == "added" else fmt_arg(f.get("before"))
        after = "(removed)" if kind == "removed" else fmt_arg(f.get("after"))
        out.append(FlagChange(str(f.get("key")), before, after, kind))
    return out


def _by_level(e: Mapping[str, Any] | None) -> dict[int, Mapping[str, Any]]:
    return {int(lv["concurrency"]): lv for lv in (e or {}).get("by_level") or []}


def _mean(level: Mapping[str, Any] | None, key: str) -> float | None:
    value = ((level or {}).get(key) or {}).get("mean")
    return None if value is None else float(value)


def _level_row(
    c: int, level: Mapping[str, Any], label: str, is_baseline: bool, base: Mapping[str, Any] | None
) -> LevelRow:
    mine, theirs = _mean(level, "output_tok_s"), _mean(base, "output_tok_s")
    ratio = NONE if is_baseline or mine is None or not theirs else fmt_ratio(mine / theirs)
    return LevelRow(
        concurrency=c,
        label=label,
        is_baseline=is_baseline,
        output=_cell(level, "output_tok_s"),
        ratio=ratio,
        cells=[_cell(level, key) for key in LEVEL_COLUMNS],
        errors=f"{level.get('errors', 0)}/{level.get('requests', 0)}",
    )


def _experiment(
    i: int,
    e: Mapping[str, Any],
    baseline: Mapping[str, Any] | None,
    best: str | None,
    objective: Objective,
    counters: Mapping[str, str] | None = None,
) -> Experiment:
    decision = e.get("decision") or {}
    status = str(e.get("status") or "pending")
    is_baseline = e is baseline
    mine, base = _by_level(e), _by_level(baseline)
    rows: list[LevelRow] = []
    for c in sorted(mine):
        rows.append(_level_row(c, mine[c], "this", is_baseline, base.get(c)))
        if not is_baseline and c in base:
            rows.append(_level_row(c, base[c], "baseline", True, None))
    vs_base = {int(c.get("concurrency", 0)): c for c in decision.get("vs_baseline") or []}
    return Experiment(
        index=i + 1,
        anchor=f"exp-{i + 1}",  # not the id: ids are user text and need not be valid anchors
        id=str(e.get("id")),
        status=status,
        verdict=str(
            decision.get("verdict") or ("pending" if status in ("pending", "running") else status)
        ),
        is_baseline=is_baseline,
        is_best=e.get("id") == best,
        parent=str(e.get("parent") or ""),
        based_on=str(e.get("based_on") or ""),
        why=str(e.get("why") or ""),
        expect=str(e.get("expect") or ""),
        flag_diff=_flag_diff(e.get("flag_diff") or []),
        vs_parent=_comparisons(decision.get("vs_parent") or []),
        vs_baseline=_comparisons(decision.get("vs_baseline") or []),
        explanation=str(decision.get("explanation") or ""),
        reason=str(e.get("reason") or ""),
        log_tail=str(e.get("log_tail") or ""),
        log_heading=str(e.get("log_heading") or "End of the server log"),
        cut_short=_cut_short(e),
        log_file=str(e.get("log_file") or ""),
        warnings=[str(w) for w in e.get("warnings") or []],
        started=fmt_time(e.get("started_at")),
        finished=fmt_time(e.get("finished_at")),
        command=shlex.join(str(a) for a in e.get("command") or []),
        env=[(str(k), str(v)) for k, v in sorted((e.get("env") or {}).items())],
        objective=[_cell(mine.get(c, {}), objective.key) for c in objective.levels],
        objective_ratio=[
            fmt_ratio(vs_base[c].get("ratio")) if c in vs_base else "" for c in objective.levels
        ],
        levels=rows,
        notes=_level_notes(mine, _error_kinds(e)),
        telemetry=_telemetry_rows(e),
        telemetry_levels=_telemetry_rows(e, pooled=True),
        telemetry_windows=_windows(e),
        telemetry_note=_telemetry_note(e),
        gpu_errors=[str(x) for x in (e.get("gpu_counters") or {}).get("new_errors") or []],
        evidence=_evidence(e),
        all_metrics=_comparisons((decision.get("metrics") or {}).get("vs_parent") or []),
        checks=[
            {k: str(c.get(k) or "") for k in ("id", "title", "status", "evidence", "hint")}
            for c in e.get("checks") or []
        ],
        paired=bool(decision.get("paired")),
        servers=_servers(e),
        spec=_spec_rows(e, counters or {}),
        spec_log=_spec_log(e),
        **_baseline_table((decision.get("metrics") or {}).get("vs_baseline") or []),
        probes=[
            (
                str(p.get("prompt") or ""),
                str(p.get("expect") or ""),
                str(p.get("answer") if p.get("answer") is not None else p.get("error") or ""),
            )
            for p in e.get("probes") or []
        ],
    )


def _assumptions(views: Sequence[Experiment]) -> Assumptions:
    titles: dict[str, str] = {}  # check id -> title, in the order first seen
    for v in views:
        for c in v.checks:
            titles.setdefault(c["id"], c["title"])
    checked = [v for v in views if v.checks]
    seen = {(v.id, c["id"]): c["status"] for v in checked for c in v.checks}
    rows = [(t, [seen.get((v.id, cid), "") for v in checked]) for cid, t in titles.items()]
    problems: list[dict[str, str]] = []
    passed: list[dict[str, str]] = []
    grouped: dict[tuple[str, str, str, str], list[str]] = {}  # the same finding, once
    for v in checked:
        for c in v.checks:
            if c["status"] in ("warn", "fail"):
                key = (c["title"], c["status"], c["evidence"], c["hint"])
                grouped.setdefault(key, []).append(v.id)
            else:
                passed.append({"experiment": v.id, **c})
    for (title, st, evidence, hint), ids in grouped.items():
        who = "every experiment" if len(ids) == len(checked) > 1 else ", ".join(ids)
        problems.append(
            {
                "experiment": who,
                "title": title,
                "status": st,
                "evidence": evidence,
                "hint": hint,
            }
        )
    return Assumptions([v.id for v in checked], rows, problems, passed)


def _spec_rows(
    e: Mapping[str, Any], counters: Mapping[str, str]
) -> list[tuple[str, str, str, str]]:
    """Speculative decoding per level run, from the engine's counters (accepted over draft
    rounds and draft tokens) or its acceptance-length gauge."""
    rows = []
    for lv in e.get("levels") or []:
        em = lv.get("engine_metrics") or {}

        def total(role: str, em: Mapping[str, Any] = em) -> float | None:
            name = counters.get(role)
            got = [
                float(v)
                for k, v in (em.get("counters") or {}).items()
                if name and str(k).split("{")[0] == name
            ]
            return sum(got) if got else None

        drafts, proposed, accepted = (
            total("spec_drafts"), total("spec_draft_tokens"), total("spec_accepted")
        )  # fmt: skip
        gauge = next(
            (
                float(v)
                for k, v in (em.get("gauges") or {}).items()
                if counters.get("spec_accept_length") == str(k).split("{")[0]
            ),
            None,
        )
        length = 1 + accepted / drafts if drafts and accepted is not None else gauge
        rate = accepted / proposed if proposed and accepted is not None else None
        if length is None and rate is None:
            continue
        rows.append(
            (
                str(lv.get("concurrency")),
                str(int(lv.get("repetition", 0)) + 1),
                NONE if length is None else f"{length:.2f}",
                NONE if rate is None else f"{rate:.0%}",
            )
        )
    return rows


def _spec_log(e: Mapping[str, Any]) -> str:
    got = (e.get("log_evidence") or {}).get("spec_accept_length")
    if not got:
        return ""
    return (
        f"the server log's acceptance length over {got['count']} decode line(s): mean "
        f"{got['mean']:.2f}, from {got['min']:.2f} to {got['max']:.2f}"
    )


def _baseline_table(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every headline metric's comparison with the baseline, as a level-by-metric table."""
    metrics: list[str] = []
    cells: dict[tuple[int, str], tuple[str, str, str]] = {}
    for c in items:
        name = str(c.get("metric") or "")
        if name not in metrics:
            metrics.append(name)
        ci = fmt_ci(c.get("ci_low"), c.get("ci_high"))
        verdict = str(c.get("verdict") or "")
        cells[(int(c.get("concurrency", 0)), name)] = (fmt_ratio(c.get("ratio")), ci, verdict)
    levels = sorted({c for c, _ in cells})
    labels = [m.replace("_p99", " p99") if m.endswith("_p99") else (
        m if m.endswith("_s") else f"{m} p50") for m in metrics]  # fmt: skip
    return {
        "baseline_metrics": labels,
        "baseline_table": [
            (c, [cells.get((c, m), (NONE, "", "")) for m in metrics]) for c in levels
        ],
    }


def _servers(e: Mapping[str, Any]) -> str:
    """How the experiment's servers were launched, in a phrase ("" for one launch)."""
    sessions = list(e.get("sessions") or [])
    if len(sessions) <= 1:
        return ""
    mine = [x for x in sessions if x.get("role") == "experiment"]
    control = [x for x in sessions if x.get("role") == "control"]
    text = f"{len(mine)} launches of this configuration, one per repetition"
    if control:
        order = " ".join("P" if x.get("role") == "control" else "E" for x in sessions)
        text += (
            f", interleaved with {len(control)} of its parent's ({order}; P: parent, "
            "E: this experiment)"
        )
    return text


def _evidence(e: Mapping[str, Any]) -> dict[str, Any]:
    log = e.get("log_evidence") or {}
    found = [(str(k), str(v)) for k, v in (log.get("found") or {}).items() if v]
    missing = [str(k) for k, v in (log.get("found") or {}).items() if not v]
    metrics = []
    for lv in e.get("levels") or []:
        em = lv.get("engine_metrics")
        if not em:
            continue
        if "error" in em:
            text = f"unavailable ({em['error']})"
        else:
            items = sorted((em.get("counters") or {}).items())
            text = "; ".join(f"{k} +{fmt_num(v)}" for k, v in items[:12]) or "no counter moved"
            if len(items) > 12:
                text += f"; and {len(items) - 12} more in results.json"
        metrics.append((f"C={lv.get('concurrency')} #{int(lv.get('repetition', 0)) + 1}", text))
    info = e.get("engine_info") or {}
    files = e.get("model_files") or {}
    resolved = e.get("server_args_resolved") or {}
    return {
        "present": bool(log or info or metrics or files),
        "server_args": [(str(k), str(v)) for k, v in sorted(resolved.items())],
        "found": found,
        "missing": missing,
        "warnings": int(log.get("warnings") or 0),
        "warning_lines": [str(x) for x in log.get("warning_lines") or []],
        "errors": int(log.get("errors") or 0),
        "error_lines": [str(x) for x in log.get("error_lines") or []],
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


def _windows(e: Mapping[str, Any]) -> list[tuple[float, float, str]]:
    levels = list(e.get("levels") or [])
    out = []
    for lv in levels:
        w = lv.get("window") or {}
        if w.get("t0_monotonic"):
            t0 = float(w["t0_monotonic"])
            first = int(lv.get("repetition", 0)) == 0  # label a level once, at its first run
            label = f"C={lv.get('concurrency')}" if first else ""
            out.append((t0, t0 + float(w.get("duration_s") or 0), label))
    return out


def _telemetry_note(e: Mapping[str, Any]) -> str:
    info = e.get("telemetry") or {}
    if info.get("error"):
        return str(info["error"])
    if info.get("rows"):
        late = info.get("late_samples") or 0
        return f"sampled at {fmt_num(info.get('hz'))} Hz, {info['rows']} rows" + (
            f", {late} late samples" if late else ""
        )
    return ""


def _telemetry_rows(e: Mapping[str, Any], pooled: bool = False) -> list[dict[str, str]]:
    """One row per level and repetition (``pooled``: per level, its repetitions together),
    over all GPUs: mean of the GPUs' means, the lowest minimum and highest maximum, and for
    clock events the worst GPU's share; samples: the fewest of any GPU, summed over runs."""
    groups: dict[tuple[Any, int], list[list[dict[str, Any]]]] = {}
    for lv in e.get("levels") or []:
        gpus = [g for g in lv.get("telemetry") or [] if g.get("samples")]
        if gpus:
            rep = 0 if pooled else int(lv.get("repetition", 0))
            groups.setdefault((lv.get("concurrency"), rep), []).append(gpus)
    rows = []
    for key, runs in groups.items():
        gpus = [g for run in runs for g in run]

        def stat(name: str, which: str, gpus: list[dict[str, Any]] = gpus) -> list[float]:
            return [float(v) for g in gpus if (v := (g.get(name) or {}).get(which)) is not None]

        def mean(xs: list[float]) -> float | None:
            return sum(xs) / len(xs) if xs else None

        events: dict[str, float] = {}
        for g in gpus:
            for name, share in (g.get("clock_events") or {}).items():
                events[name] = max(events.get(name, 0.0), float(share))
        slow = [float(g["slowdown_share"]) for g in gpus if g.get("slowdown_share") is not None]
        rows.append(
            {
                "concurrency": str(key[0]),
                "repetition": str(len(runs)) if pooled else str(key[1] + 1),
                "gpus": str(max(len(run) for run in runs)),
                "sm_clock": f"{fmt_num(mean(stat('sm_clock_mhz', 'mean')))} "
                f"({fmt_num(min(stat('sm_clock_mhz', 'min'), default=None))}-"
                f"{fmt_num(max(stat('sm_clock_mhz', 'max'), default=None))})",
                "power": f"{fmt_num(mean(stat('power_w', 'mean')))} / "
                f"{fmt_num(max(stat('power_w', 'max'), default=None))}",
                "temp": fmt_num(max(stat("temp_c", "max"), default=None)),
                "util": fmt_num(mean(stat("util_gpu_pct", "mean"))),
                "slowdown": f"{max(slow):.0%}" if slow else "–",
                "events": ", ".join(
                    f"{name.replace('_', ' ')} {share:.0%}"
                    for name, share in sorted(events.items())
                )
                or "none",
                "samples": str(sum(min(int(g["samples"]) for g in run) for run in runs)),
            }
        )
    return rows


def _error_kinds(e: Mapping[str, Any]) -> dict[int, dict[str, int]]:
    """Failed requests by level and kind ("HTTP 429", "timeout"...), repetitions pooled."""
    out: dict[int, dict[str, int]] = {}
    for lv in e.get("levels") or []:
        kinds = out.setdefault(int(lv.get("concurrency", 0)), {})
        for kind, n in ((lv.get("summary") or {}).get("error_kinds") or {}).items():
            kinds[kind] = kinds.get(kind, 0) + int(n)
    return out


def _cut_short(e: Mapping[str, Any]) -> list[str]:
    """Levels ended early because their server died: when, and why."""
    return [
        f"C={lv.get('concurrency')} repetition {int(lv.get('repetition', 0)) + 1}: cut short "
        f"after {float((lv.get('window') or {}).get('duration_s') or 0):.1f} s "
        f"({lv['aborted']}); requests in flight then are not counted."
        for lv in e.get("levels") or []
        if lv.get("aborted")
    ]


def _level_notes(
    levels: Mapping[int, Mapping[str, Any]], error_kinds: Mapping[int, Mapping[str, int]]
) -> list[str]:
    """Caveats a reader must see next to the numbers they qualify."""
    notes: list[str] = []
    for c in sorted(levels):
        lv = levels[c]
        if lv.get("client_limited"):
            load = lv.get("client_load_max")
            share = f" (up to {load:.0%} of its measured ceiling)" if load is not None else ""
            notes.append(
                f"C={c}: client-limited in {lv['client_limited']} of {lv.get('repetitions', '?')}"
                f" repetition(s){share}; these numbers may describe the load generator rather "
                "than the server. Raise workload.workers or use a bigger client host."
            )
        if lv.get("errors"):
            found = sorted((error_kinds.get(c) or {}).items(), key=lambda kv: -kv[1])
            kinds = ", ".join(f"{k} ({n})" for k, n in found)
            notes.append(
                f"C={c}: {lv['errors']} of {lv.get('requests', '?')} request(s) failed"
                + (f": {kinds}" if kinds else "")
                + "; the numbers count only those that succeeded."
            )
        if lv.get("silent_outputs"):
            notes.append(
                f"C={c}: {lv['silent_outputs']} request(s) streamed no text although the "
                "engine counted their tokens; their latencies are left out."
            )
        if lv.get("short_outputs"):
            notes.append(
                f"C={c}: {lv['short_outputs']} request(s) returned fewer output tokens than "
                "asked; the engine may ignore ignore_eos/min_tokens."
            )
        goodput = (lv.get("goodput_req_s") or {}).get("mean")
        if goodput is not None:
            notes.append(f"C={c}: goodput {fmt_num(goodput)} req/s (requests meeting every SLO).")
    return notes


def _series(index: int, e: Mapping[str, Any], is_baseline: bool, is_best: bool) -> Series:
    levels = _by_level(e)
    order = sorted(levels)
    return Series(
        id=str(e.get("id")),
        index=index,
        is_baseline=is_baseline,
        is_best=is_best,
        levels=order,
        mean={k: [_mean(levels[c], k) for c in order] for k in CHART_KEYS},
        sd={k: [(levels[c].get(k) or {}).get("sd") for c in order] for k in CHART_KEYS},
        untrusted=(e.get("decision") or {}).get("verdict") == "failed",
    )


def _summary_sentence(
    exps: Sequence[Mapping[str, Any]], best: str | None, objective: Objective
) -> str:
    """One sentence: the best configuration against the baseline on the objective metric."""
    if not exps:
        return "The results hold no experiments."
    baseline = exps[0]
    if baseline.get("status") != "ok":
        return (
            f"The baseline ({baseline.get('id')}) has no measurements "
            f"({baseline.get('status')}), so nothing could be compared with it."
        )
    if not best or best == baseline.get("id"):
        tried = len(exps) - 1
        tail = "none was tried beyond it." if not tried else f"{tried} tried, none adopted over it."
        return (
            f"No experiment beat the baseline ({baseline.get('id')}) on {objective.label}"
            f"{_at_levels(objective.levels)}: {tail}"
        )
    chosen = next((e for e in exps if e.get("id") == best), None)
    comps = ((chosen or {}).get("decision") or {}).get("vs_baseline") or []
    if not comps:
        return (
            f"{best} is the best configuration, but it shares no objective level with the "
            f"baseline to compare at."
        )
    verb = "delivers" if objective.metric in THROUGHPUTS else "has"
    parts = []
    for n, c in enumerate(comps):
        ci = (
            "no interval: one repetition"
            if c.get("ci_low") is None
            else f"95% CI {fmt_ci(c.get('ci_low'), c.get('ci_high'))}"
        )
        whose = f" the baseline's {objective.label}" if n == 0 else ""
        parts.append(f"{fmt_ratio(c.get('ratio'))} ({ci}){whose} at C={c.get('concurrency')}")
    joined = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{best} {verb} {joined}."


def _at_levels(levels: Sequence[int]) -> str:
    return f" at C={', '.join(map(str, levels))}" if levels else ""


def _references(
    refs: Sequence[Mapping[str, Any]],
    exps: Sequence[Mapping[str, Any]],
    best: str | None,
    host_gpus: int = 0,
) -> list[Reference]:
    """Published numbers next to this run's best. Throughputs are compared per GPU (a
    server's tokens per second over its GPUs); latencies as they are."""
    chosen = _by_level(next((e for e in exps if e.get("id") == best), None))
    out = []
    for r in refs:
        value, gpus = float(r.get("value") or 0), int(r.get("gpus") or 1)
        metric, level = str(r.get("metric")), r.get("concurrency")
        throughput = metric in THROUGHPUTS
        key = metric if throughput else f"{metric}_p50"
        measured = _mean(chosen.get(int(level)), key) if level is not None else None
        mine = measured / host_gpus if measured is not None and throughput and host_gpus else None
        theirs = value / gpus if throughput else value
        versus = (mine if throughput else measured) or None
        source = str(r.get("source") or "")
        out.append(
            Reference(
                name=str(r.get("name") or ""),
                metric=metric,
                concurrency=NONE if level is None else str(level),
                value=fmt_num(value),
                gpus=str(gpus),
                per_gpu=fmt_num(value / gpus) if throughput else NONE,
                measured=fmt_num(measured),
                measured_per_gpu=fmt_num(mine) if throughput else NONE,
                versus=fmt_ratio(versus / theirs) if versus and theirs else NONE,
                conditions=str(r.get("conditions") or ""),
                source=source,
                link=source if source.startswith("https://") else None,
            )
        )
    return out
