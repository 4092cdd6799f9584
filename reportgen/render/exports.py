"""The report's other shapes: a Markdown summary (for a pull request or a chat) and CSV tables.

Pure functions of a run's results (``results.model.Run``) and the view built from them: no
clock, no I/O, so the same results give the same bytes. Numbers in CSV are written in full
(Python's shortest round-trip form), not as the report formats them; empty cells are missing
values.

- ``levels.csv``: one row per level run (experiment, role, concurrency, repetition) with its
  summary: requests, errors, throughputs, achieved concurrency, each latency's mean, p50, p90
  and p99, the steady-state window its throughputs were trimmed to (empty: not trimmed) and the
  seconds between its clients' first requests (``stagger_s``; empty: an open loop).
- ``by_level.csv``: one row per experiment and level: each headline number's mean, standard
  deviation and count across repetitions.
- ``comparisons.csv``: every comparison in the decisions: experiment, against whom
  (``vs_parent`` or ``vs_baseline``), metric, level, ratio, interval, verdict, detectable
  change, repetitions to decide, paired or not.
- ``checks.csv``: every assumption check of every experiment.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Any

from reportgen.metrics import LATENCIES, PERCENTILES, STATS, THROUGHPUTS
from reportgen.render.content import Report
from reportgen.results.model import Experiment, Run

CSV_FILES = ("levels.csv", "by_level.csv", "comparisons.csv", "checks.csv")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if value == value else ""  # NaN: missing
    return str(value)


def _csv(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(header)
    for row in rows:
        w.writerow([_cell(v) for v in row])
    return out.getvalue()


def tables(run: Run) -> dict[str, str]:
    """Every CSV table by file name (see the module docstring)."""
    exps = run.experiments
    return {
        "levels.csv": _levels(exps),
        "by_level.csv": _by_level(exps),
        "comparisons.csv": _comparisons(exps),
        "checks.csv": _checks(exps),
    }


def _levels(exps: Sequence[Experiment]) -> str:
    counts = ("requests", "ok", "errors", "short_outputs", "input_tokens", "output_tokens")
    scalars = ("duration_s", *THROUGHPUTS, "power_w", "achieved_concurrency", "window_concurrency")
    header = ["experiment", "role", "concurrency", "request_rate", "repetition"]
    header += [*counts, *scalars] + [f"{m}_{s}" for m in LATENCIES for s in STATS]
    header += ["window_start_s", "window_end_s", "stagger_s"]
    rows = []
    for e in exps:
        runs = [("experiment", lv) for lv in e.levels]
        runs += [("control", lv) for lv in e.control.levels] if e.control else []
        for role, lv in runs:
            s = lv.summary
            rows.append(
                [e.id, role, lv.concurrency, lv.rate, lv.repetition]
                + [getattr(s, k) for k in counts]
                + [getattr(s, k) for k in scalars]
                + [s.value(m, st) for m in LATENCIES for st in STATS]
                + (list(s.window_s) if s.window_s and len(s.window_s) == 2 else [None, None])
                + [lv.stagger.step_s if lv.stagger else None]
            )
    return _csv(header, rows)


def _by_level(exps: Sequence[Experiment]) -> str:
    keys = list(THROUGHPUTS) + [f"{m}_{s}" for m in LATENCIES for s in PERCENTILES]
    header = ["experiment", "concurrency", "request_rate", "repetitions"] + [
        f"{k}_{part}" for k in keys for part in ("mean", "sd", "n")
    ]
    rows = []
    for e in exps:
        for agg in e.by_level:
            stats = [agg.stat(k) for k in keys]
            rows.append(
                [e.id, agg.concurrency, agg.rate, agg.repetitions]
                + [x for st in stats for x in (st.mean, st.sd, st.n)]
            )
    return _csv(header, rows)


def _comparisons(exps: Sequence[Experiment]) -> str:
    fields = ("metric", "concurrency", "rate", "ratio", "ci_low", "ci_high", "verdict", "n_parent",
              "n_child", "mde", "reps_needed", "paired")  # fmt: skip
    header = ["experiment", "against", "kind", *fields]
    rows = []
    base = exps[0].id if exps else None
    for e in exps:
        d = e.decision
        if d is None:
            continue
        metrics = d.metrics or {}
        for kind, against, found in (
            ("objective_vs_parent", d.stand_in or e.parent, d.vs_parent),
            ("objective_vs_baseline", base, d.vs_baseline),
            ("vs_parent", d.stand_in or e.parent, metrics.get("vs_parent") or []),
            ("vs_baseline", base, metrics.get("vs_baseline") or []),
        ):
            for c in found:
                rows.append([e.id, against, kind] + [getattr(c, f) for f in fields])
    return _csv(header, rows)


def _checks(exps: Sequence[Experiment]) -> str:
    fields = ("id", "title", "status", "evidence", "hint", "invalidates")
    rows = [[e.id] + [getattr(c, f) for f in fields] for e in exps for c in e.checks]
    return _csv(["experiment", *fields], rows)


def _md(text: str) -> str:
    """Text safe inside a Markdown table cell: no pipes or newlines breaking the row, and no
    markup or HTML taking effect (user text comes from campaign files and server logs)."""
    out = str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    for ch in "`*_[]<>#!":
        out = out.replace(ch, "\\" + ch)
    return out


def markdown(report: Report, pdf: bool = True) -> str:
    """A short summary for a pull request or a chat: status, the one-sentence conclusion, one
    row per experiment, and what failed or warned; ``pdf``: a report.pdf was written beside
    it."""
    h, obj = report.header, report.objective
    lines = [f"## {_md(h.title)}", ""]
    status = "complete" if h.complete else f"**INCOMPLETE** ({_md(h.incomplete_reason)})"
    sim = " (simulated engine)" if h.simulated else ""
    lines += [
        f"Run `{h.run_id}` · {status} · {_md(h.host)} · engine {_md(h.engine)}{sim} · "
        f"reportgen {_md(h.version)} · {_md(h.started)}",
        "",
        _md(report.summary),
        "",
    ]
    if h.resumed:
        lines += [f"Resumed: {_md(h.resumed)}.", ""]
    if h.external_notice:
        lines += [_md(h.external_notice), ""]
    if h.gpu_notice:
        lines += [_md(h.gpu_notice), ""]
    if report.brief is not None and report.brief.replication:
        lines += [_md(report.brief.replication), ""]
    levels = " / ".join(c.label for c in obj.levels)
    lines += [
        f"| # | experiment | verdict | `{obj.label}` at {levels} | vs baseline | latency vs "
        "baseline | achieved C |",
        "|---:|---|---|---|---|---|---|",
    ]
    for e in report.experiments:
        values = " / ".join(
            (cell.value + (f" {cell.sd}" if cell.sd else "")) or "–" for cell in e.objective
        )
        ratios = " / ".join(r or "–" for r in e.objective_ratio) if not e.is_baseline else "–"
        best = " (best)" if e.is_best else ""
        busy = " / ".join(a or "–" for a in e.objective_achieved) or "–"
        latency = " / ".join(x or "–" for x in e.latency_ratio) if any(e.latency_ratio) else "–"
        lines.append(
            f"| {e.index} | {_md(e.id)}{best} | {_md(e.verdict)}"
            f"{f' ({e.rests_on})' if e.rests_on else ''} | {values or '–'} | {ratios} "
            f"| {_md(latency)} | {busy} |"
        )
    problems = report.assumptions.merged  # a check alike in several experiments, once
    fails = [p for p in problems if p["status"] == "fail"]
    warns = [p for p in problems if p["status"] == "warn"]
    if fails or warns:
        lines += ["", "**Assumption checks**", ""]
        for p in fails + warns:
            lines.append(
                f"- {p['status']}: {_md(p['experiment'])}: {_md(p['title'])}: {_md(p['evidence'])}"
            )
    lines += [
        "",
        f"Objective: `{obj.label}`, {obj.direction} is better, margin {obj.margin}. "
        "Values are means ± standard deviation across repetitions; ratios, of geometric "
        "means, are against the baseline; achieved C is the mean number of requests in flight "
        "at each level (the target is C). Full report: report.html"
        + (" (report.pdf)." if pdf else "."),
        "",
    ]
    return "\n".join(lines)
