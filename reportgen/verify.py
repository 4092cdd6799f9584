"""`reportgen verify REPORT`: does a report still match the raw data it claims to summarise?

A report embeds the results it was rendered from and the sha256 of every raw table beside it
(``requests/*.parquet``, ``telemetry/*.parquet``). Verifying:

1. the raw tables: each one listed is there and has the same hash (none missing, none added);
2. every level summary recomputed from its requests (the same ``summarize``, with the stored
   level duration and the experiment's workload settings) against the embedded one, and
   every level's GPU telemetry summary from the telemetry table;
3. every per-level aggregate across repetitions, recomputed from those summaries;
4. every comparison in the decisions (objective against the parent and the baseline, every
   headline metric, the p99 bootstraps), recomputed from the recomputed numbers;
5. the report's own text: rendering the embedded results again gives the same HTML (so the
   page was not edited after rendering);
6. ``results.json`` beside the report, when there is one, holds the same results.

Each step says what it compared and what differed. Numbers agree when within a relative
1e-9 (floating-point summation order aside, recomputing gives the same bits).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reportgen import results as results_mod
from reportgen.analysis import decide as decide_mod
from reportgen.analysis.summary import by_level, summarize
from reportgen.observe import telemetry
from reportgen.render import chart_inputs, render_html
from reportgen.results.embed import extract, table_hashes

REL_TOL = 1e-9
SKIP_SUMMARY_KEYS = ("client",)  # the client's own CPU use: measured, not derivable


@dataclass
class Finding:
    step: str
    ok: bool
    detail: str


@dataclass
class Verification:
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.findings)

    def add(self, step: str, problems: Sequence[str], done: str) -> None:
        if problems:
            shown = "; ".join(problems[:5])
            more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
            self.findings.append(Finding(step, False, shown + more))
        else:
            self.findings.append(Finding(step, True, done))


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return bool(a == b)
    if isinstance(a, int | float) and isinstance(b, int | float):
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return math.isclose(fa, fb, rel_tol=REL_TOL, abs_tol=1e-12)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return set(a) == set(b) and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _diff_keys(
    stored: Mapping[str, Any], fresh: Mapping[str, Any], skip: Sequence[str] = ()
) -> list[str]:
    keys = set(stored) | set(fresh)
    return sorted(k for k in keys if k not in skip and not _close(stored.get(k), fresh.get(k)))


def verify(report: Path, run_dir: Path | None = None) -> Verification:
    """Check a report against the raw tables of its run (see the module docstring)."""
    page = report.read_text(encoding="utf-8")
    data = extract(page)
    res = data["results"]
    run_dir = run_dir or report.parent
    out = Verification()
    claimed: dict[str, str] = data.get("tables") or {}
    found = table_hashes(run_dir)
    _check_tables(out, claimed, found)
    fresh_levels, rows_of = _check_levels(out, res, run_dir, found)
    _check_telemetry(out, res, run_dir, found)
    _check_aggregates(out, res, fresh_levels)
    problems, compared = _decisions(res, fresh_levels, rows_of)
    out.add("comparisons", problems, f"{compared} comparison(s) recomputed")
    _check_page(out, page, res, run_dir, claimed)
    path = run_dir / results_mod.RESULTS
    if path.exists():
        same = _close(json.loads(path.read_text(encoding="utf-8")), json.loads(json.dumps(res)))
        out.add(
            "results.json",
            [] if same else ["differs from the results the report was rendered from"],
            "the same results as the report's",
        )
    return out


def _check_tables(out: Verification, claimed: Mapping[str, str], found: Mapping[str, str]) -> None:
    problems = [f"{k}: missing" for k in sorted(set(claimed) - set(found))]
    problems += [
        f"{k}: changed since the report"
        for k in sorted(claimed)
        if k in found and found[k] != claimed[k]
    ]
    problems += [f"{k}: not in the report" for k in sorted(set(found) - set(claimed))]
    out.add("raw tables", problems, f"{len(claimed)} table(s), each with the sha256 given")


Levels = dict[tuple[str, str], list[dict[str, Any]]]


def _check_levels(
    out: Verification, res: Mapping[str, Any], run_dir: Path, found: Mapping[str, str]
) -> tuple[Levels, dict[str, list[dict[str, Any]]]]:
    """Every level summary recomputed from its requests; returns the recomputed levels by
    (experiment, table) and each table's rows."""
    fresh: Levels = {}
    rows_of: dict[str, list[dict[str, Any]]] = {}
    problems = []
    runs = 0
    default_wl = (res.get("campaign") or {}).get("workload") or {}
    for e in res.get("experiments") or []:
        control = (e.get("control") or {}).get("levels") or []
        wl = e.get("workload") or default_wl
        for table, levels in ((e["id"], e.get("levels") or []), (f"{e['id']}~control", control)):
            if not levels:
                continue
            has = f"requests/{table}.parquet" in found
            rows = results_mod.request_records(run_dir, table) if has else []
            rows_of[table] = rows
            recomputed = []
            for lv in levels:
                recs = [
                    r
                    for r in rows
                    if r["concurrency"] == lv["concurrency"] and r["repetition"] == lv["repetition"]
                ]
                stored = lv["summary"]
                summary = summarize(
                    recs, float(stored["duration_s"]), slo=wl.get("slo"), trim=bool(wl.get("trim"))
                )
                summary["client"] = stored.get("client")
                runs += 1
                bad = _diff_keys(stored, summary, SKIP_SUMMARY_KEYS)
                if bad:
                    where = f"{table} C={lv['concurrency']} repetition {int(lv['repetition']) + 1}"
                    problems.append(f"{where}: {', '.join(bad)}")
                recomputed.append({**lv, "summary": summary})
            fresh[(e["id"], table)] = recomputed
    out.add("level summaries", problems, f"{runs} level run(s) recomputed from their requests")
    return fresh, rows_of


def _check_telemetry(
    out: Verification, res: Mapping[str, Any], run_dir: Path, found: Mapping[str, str]
) -> None:
    problems = []
    windows = 0
    for e in res.get("experiments") or []:
        if f"telemetry/{e['id']}.parquet" not in found:
            continue
        rows = results_mod.telemetry_records(run_dir, str(e["id"]))
        control = (e.get("control") or {}).get("levels") or []
        for lv in list(e.get("levels") or []) + list(control):
            w = lv.get("window") or {}
            if "telemetry" not in lv or not w.get("t0_monotonic"):
                continue
            t0 = float(w["t0_monotonic"])
            fresh = telemetry.window(rows, t0, t0 + float(w["duration_s"]))
            windows += 1
            if not _close(lv["telemetry"], fresh):
                where = f"{e['id']} C={lv['concurrency']} repetition {int(lv['repetition']) + 1}"
                problems.append(f"{where}: GPU telemetry window")
    if windows or problems:
        out.add("telemetry windows", problems, f"{windows} window(s) recomputed")


def _check_aggregates(out: Verification, res: Mapping[str, Any], fresh_levels: Levels) -> None:
    problems = []
    groups = 0
    for e in res.get("experiments") or []:
        fresh = {
            int(a["concurrency"]): a for a in by_level(fresh_levels.get((e["id"], e["id"]), []))
        }
        stored = {int(a["concurrency"]): a for a in e.get("by_level") or []}
        for c, agg in fresh.items():
            groups += 1
            bad = _diff_keys(stored.get(c) or {}, agg)
            if bad:
                problems.append(f"{e['id']} C={c}: {', '.join(bad)}")
    out.add("aggregates across repetitions", problems, f"{groups} level(s)")


def _check_page(
    out: Verification,
    page: str,
    res: Mapping[str, Any],
    run_dir: Path,
    claimed: Mapping[str, str],
) -> None:
    telemetry, latencies = chart_inputs(run_dir, res)
    again = render_html(res, telemetry, claimed, latencies)
    out.add(
        "report text",
        []
        if again == page
        else [
            "rendering the embedded results again gives different HTML: the page was edited, "
            "or rendered by another reportgen version"
        ],
        "rendering the embedded results again gives the same HTML, byte for byte",
    )


def _decisions(
    res: Mapping[str, Any],
    fresh_levels: Mapping[tuple[str, str], list[dict[str, Any]]],
    rows_of: Mapping[str, list[dict[str, Any]]],
) -> tuple[list[str], int]:
    info = (res.get("campaign") or {}).get("campaign") or {}
    obj = info.get("objective") or {}
    metric = str(obj.get("metric") or "output_tok_s")
    direction = obj.get("direction") or ("higher" if metric.endswith("_s") else "lower")
    margin = float(info.get("margin") or 0.03)
    exps = list(res.get("experiments") or [])
    by_id = {e["id"]: e for e in exps}
    problems: list[str] = []
    compared = 0
    if not exps:
        return problems, 0
    base = exps[0]
    for e in exps[1:]:
        decision = e.get("decision") or {}
        if not decision.get("vs_parent") and not decision.get("vs_baseline"):
            continue
        mine = fresh_levels.get((e["id"], e["id"]), [])
        paired = bool(decision.get("paired"))
        parent_table = f"{e['id']}~control" if paired else str(e.get("parent"))
        parent_key = (e["id"], parent_table) if paired else (parent_table, parent_table)
        sides = {
            "vs_parent": (fresh_levels.get(parent_key, []), parent_table, paired),
            "vs_baseline": (fresh_levels.get((base["id"], base["id"]), []), base["id"], False),
        }
        for name, (theirs, table, pair) in sides.items():
            other = by_id.get(table) if not pair else {"status": "ok"}
            if (other or {}).get("status") != "ok":
                theirs = []  # the runner compares only with a side that finished
            got = decide_mod.compare_experiments(
                theirs, mine, metric, margin=margin, higher_is_better=direction == "higher",
                concurrency=obj.get("concurrency"), paired=pair,
            )  # fmt: skip
            problems += _compare_lists(
                f"{e['id']} {name} ({metric})", decision.get(name) or [], got
            )
            compared += len(got)
            stored_all = (decision.get("metrics") or {}).get(name)
            if stored_all is None:
                continue
            every = decide_mod.headline_comparisons(theirs, mine, margin=margin, paired=pair)
            every += decide_mod.tail_comparisons(
                rows_of.get(table, []), rows_of.get(e["id"], []), margin=margin
            )
            problems += _compare_lists(f"{e['id']} {name} (every metric)", stored_all, every)
            compared += len(every)
    return problems, compared


def _compare_lists(
    where: str, stored: Sequence[Mapping[str, Any]], fresh: Sequence[decide_mod.Comparison]
) -> list[str]:
    got = {(c.metric, c.concurrency): c.as_dict() for c in fresh}
    had = {(str(c.get("metric")), int(c.get("concurrency") or 0)): c for c in stored}
    out = []
    for key in sorted(set(had) | set(got)):
        a, b = had.get(key), got.get(key)
        if a is None or b is None:
            why = "not in the report" if a is None else "no longer computable"
            out.append(f"{where} {key[0]} C={key[1]}: {why}")
            continue
        bad = _diff_keys(a, b)
        if bad:
            out.append(f"{where} {key[0]} C={key[1]}: {', '.join(bad)}")
    return out
