"""`reportgen verify REPORT`: does a report still match the raw data it claims to summarise?

A report embeds the results it was rendered from and the sha256 of every raw table beside it
(``requests/*.parquet``, ``telemetry/*.parquet``). Verifying:

1. the raw tables: each one listed is there and has the same hash (none missing, none added);
2. every level summary recomputed from its requests (the same ``summarize``, with the stored
   level duration and the experiment's workload settings) against the embedded one, and
   every level's GPU telemetry summary from the telemetry table;
3. every per-level aggregate across repetitions, recomputed from those summaries;
4. every decision, recomputed from the recomputed numbers by the runner's own pure function
   (``analysis.verdict``): its verdict and explanation, and every comparison in it (objective
   against the parent and the baseline, every headline metric, the p99 bootstraps);
5. the report's own text: the page has the digest it carries (``results.embed.stamped``), so
   it was not edited after rendering, whichever version of reportgen rendered it; a page
   rendered before reports carried one is rendered again from its embedded results instead,
   which must give the same HTML;
6. ``results.json`` beside the report, when there is one, holds the same results.

Each step says what it compared and what differed. Numbers agree when within a relative
1e-9 (floating-point summation order aside, recomputing gives the same bits).
"""

from __future__ import annotations

import lzma
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reportgen import metrics
from reportgen import results as store
from reportgen.analysis import drift, findings, search, verdict
from reportgen.analysis.decide import point_of
from reportgen.analysis.summary import applied_slo, by_level, energy_rates, summarize, trims
from reportgen.errors import ResultsError
from reportgen.load.records import RequestRecord
from reportgen.observe import host, telemetry
from reportgen.render import chart_inputs, render_html
from reportgen.results import rundir
from reportgen.results.embed import (
    extract,
    stamped,
    table_hashes,
    without_data,
    without_digest,
)
from reportgen.results.levels import Level
from reportgen.results.model import Experiment, Run
from reportgen.results.verdicts import Comparison, Decision

REL_TOL = 1e-9


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


def _unkept(stored: Mapping[str, Any], fresh: Mapping[str, Any]) -> dict[str, Any]:
    """``fresh`` without the statistics of the grid a run's reportgen did not keep (p95
    before 2026-12-08): an aggregate's key, or a summary's latency statistic, absent where
    it was stored are not compared."""
    out = {}
    for k, v in fresh.items():
        if k not in stored and k in metrics.GRID:
            continue
        was = stored.get(k)
        if isinstance(v, Mapping) and isinstance(was, Mapping) and k in metrics.LATENCIES:
            v = {s: x for s, x in v.items() if s in was or s not in metrics.STATS}
        out[k] = v
    return out


def _diff_keys(
    stored: Mapping[str, Any], fresh: Mapping[str, Any], skip: Sequence[str] = ()
) -> list[str]:
    fresh = _unkept(stored, fresh)
    keys = set(stored) | set(fresh)
    return sorted(k for k in keys if k not in skip and not _close(stored.get(k), fresh.get(k)))


def verify(report: Path, run_dir: Path | None = None) -> Verification:
    """Check a report against the raw tables of its run (see the module docstring)."""
    try:
        page = rundir.read_bytes(report).decode("utf-8")
    except (OSError, EOFError, lzma.LZMAError, UnicodeDecodeError) as exc:
        raise ResultsError(
            f"{report}: cannot read it as a report ({exc}); give a report.html that "
            "`reportgen render` wrote, or its run directory"
        ) from None
    data = extract(page, str(report))
    raw = data["results"]
    run = store.parse(raw, f"{report}: the embedded results")
    run_dir = run_dir or report.parent
    out = Verification()
    claimed: dict[str, str] = data.get("tables") or {}
    found = table_hashes(run_dir)
    if claimed and not found:  # a report copied without its run: nothing to check against
        raise ResultsError(
            f"{report}: no raw tables in {run_dir} (requests/, telemetry/) to check it "
            "against; give its run directory with --run-dir RUN_DIR, or verify it where it "
            "was rendered"
        )
    _check_tables(out, claimed, found)
    fresh, rows_of = _check_levels(out, run, run_dir, found)
    _check_telemetry(out, run, run_dir, found)
    _check_aggregates(out, run, fresh)
    if any(e.search for e in run.experiments):
        _check_search(out, run, fresh, rows_of)
    legacy = raw.get("schema_version") != store.SCHEMA_VERSION
    problems, compared = _decisions(run, fresh, rows_of, legacy)
    out.add("decisions", problems, f"{compared} comparison(s) and their verdicts recomputed")
    if run.findings is not None:  # (a report rendered before findings has none)
        again = findings.findings(fresh)
        bad = _diff_keys(run.findings.model_dump(), again.model_dump())
        out.add(
            "findings",
            [f"{k} differs when taken again" for k in bad],
            "what the report states beyond the decisions, taken again from them",
        )
    _check_page(out, page, run, run_dir, claimed, raw.get("schema_version"))
    path = store.RunDir(run_dir).results
    if path.exists():
        saved = store.load(path)
        if saved.findings is None:  # a run recorded before findings: given them to render
            saved.findings = run.findings
        same = _close(saved.dump(), run.dump())
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


Rows = dict[str, list[RequestRecord]]


def _check_levels(
    out: Verification, run: Run, run_dir: Path, found: Mapping[str, str]
) -> tuple[Run, Rows]:
    """Every level summary recomputed from its requests; returns the run with the
    recomputed summaries in place of the stored ones, and each table's rows."""
    fresh = run.model_copy(deep=True)
    rows_of: Rows = {}
    problems = []
    runs = 0
    for e in fresh.experiments:
        wl = e.workload or run.default_workload
        control = e.control.levels if e.control else []
        for table, levels in ((e.table, e.levels), (e.control_table, control)):
            if not levels:
                continue
            has = f"requests/{table}.parquet" in found
            rows = store.read_requests(run_dir, table) if has else []
            rows_of[table] = rows
            for lv in levels:
                recs = [r for r in rows if (point_of(r), r.repetition) == lv.key]
                stored = lv.summary
                lv.summary = summarize(
                    recs,
                    stored.duration_s,
                    slo=_slo_of(wl, recs),
                    trim=trims(wl),  # as the run resolved it (on for duration levels)
                    client=stored.client,  # the client's own CPU use: measured, not derivable
                )
                # from its GPU windows (recomputed from theirs by _check_telemetry)
                lv.summary.power_w, lv.summary.output_tok_per_j = energy_rates(lv)
                runs += 1
                # a key a later reportgen added is not in older results: not compared there
                later = [
                    k for k in ("window_concurrency", "schedule_kept")
                    if getattr(stored, k) is None
                ]  # fmt: skip
                if stored.stall_s is None:  # (decided without it: a run recorded before)
                    lv.summary.stall_s = None
                bad = _diff_keys(stored.model_dump(), lv.summary.model_dump(), skip=later)
                if bad:
                    where = f"{table} {lv.point.label} repetition {lv.repetition + 1}"
                    problems.append(f"{where}: {', '.join(bad)}")
    out.add("level summaries", problems, f"{runs} level run(s) recomputed from their requests")
    return fresh, rows_of


def _slo_of(workload: Mapping[str, Any], recs: Sequence[RequestRecord]) -> dict[str, Any]:
    """The SLOs the run judged a level by: ``applied_slo``, except for a non-streamed level
    recorded before reportgen stopped taking the end of the response for its first token
    (its records carry that first token): such a run applied its TTFT and TPOT SLOs to it."""
    if workload.get("stream") is False and any(r.first_token is not None for r in recs):
        return dict(workload.get("slo") or {})
    return applied_slo(workload)


LATER_KEYS = ("energy_j", "energy_from")  # GPU window keys runs recorded before lack


def _as_kept(fresh: dict[str, Any], kept: dict[str, Any]) -> dict[str, Any]:
    """A recomputed GPU window without the keys added since the kept one was recorded."""
    return {k: v for k, v in fresh.items() if k in kept or k not in LATER_KEYS}


def _check_telemetry(out: Verification, run: Run, run_dir: Path, found: Mapping[str, str]) -> None:
    """Each level's GPU and host windows recomputed from the samples saved beside them."""

    def gpu(lv: Level) -> Any:
        return None if lv.telemetry is None else [g.model_dump() for g in lv.telemetry]

    def cpu(lv: Level) -> Any:
        return None if lv.host is None else lv.host.model_dump()

    kinds = (  # (folder, what a window is, its line's title, reading, summarising, kept)
        ("telemetry", "GPU telemetry", "telemetry windows", store.telemetry_records,
         telemetry.window, gpu),
        ("host", "host CPU", "host CPU windows", store.host_records, host.window, cpu),
    )  # fmt: skip
    for folder, name, title, records, summarise, kept_of in kinds:
        problems = []
        windows = 0
        for e in run.experiments:
            if f"{folder}/{e.table}.parquet" not in found:
                continue
            rows = records(run_dir, e.table)
            for lv in e.all_levels():
                w = lv.window
                if w is None or not w.t0_monotonic:
                    continue  # a level the runner could not place on the samples' clock
                fresh = summarise(rows, w.t0_monotonic, w.end)
                windows += 1
                kept = kept_of(lv)
                if isinstance(kept, list) and isinstance(fresh, list) and len(kept) == len(fresh):
                    fresh = [_as_kept(f, k) for f, k in zip(fresh, kept, strict=True)]
                if not (kept is None and fresh in (None, [])) and (
                    kept is None or not _close(kept, fresh)
                ):
                    where = f"{e.id} {lv.point.label} repetition {lv.repetition + 1}"
                    problems.append(f"{where}: {name} window")
        if windows or problems:
            out.add(title, problems, f"{windows} window(s) recomputed")


def _check_aggregates(out: Verification, run: Run, fresh: Run) -> None:
    problems = []
    groups = 0
    for e, again in zip(run.experiments, fresh.experiments, strict=True):
        stored = {a.point: a for a in e.by_level}
        for agg in by_level(again.levels):
            groups += 1
            had = stored.get(agg.point)
            bad = _diff_keys(had.model_dump() if had else {}, agg.model_dump())
            if bad:
                problems.append(f"{e.id} {agg.point.label}: {', '.join(bad)}")
    out.add("aggregates across repetitions", problems, f"{groups} level(s)")


def _check_search(out: Verification, run: Run, fresh: Run, rows_of: Rows) -> None:
    """A find_max search taken again (``analysis.search``) from the recomputed summaries of
    its probes and their requests: each probe's pass or fail and numbers, and the answer."""
    problems = []
    for e, again in zip(run.experiments, fresh.experiments, strict=True):
        if e.search is None:
            continue
        rec = e.search
        cap = rec.probes[0].concurrency if rec.probes else 0
        look = search.Search(search.parse(rec.slo), over=rec.over, cap=cap, pooled=rec.pooled)
        rows = rows_of.get(e.table, [])
        for probe in rec.probes:
            where = probe.point
            runs = search.search_runs(
                [lv for lv in again.levels if lv.point == where],
                [r for r in rows if point_of(r) == where],
            )
            got = look.record(
                look.at(probe), runs, repeated=probe.repeated, confirmed=probe.confirmed
            )
            if got.passed != probe.passed or not _close(got.values, probe.values):
                problems.append(f"{e.id} {where.label}: passed {got.passed}, {got.values}")
        # (a search recorded before its answer had an interval has none to check)
        names = ("best", "lowest_failure") + (("interval",) if rec.interval is not None else ())
        for name in names:
            if getattr(look, name) != getattr(e.search, name):
                problems.append(
                    f"{e.id}: {name} {getattr(look, name)}, not {getattr(e.search, name)}"
                )
    out.add("load searches", problems, "each probe and the answer taken again")


def _check_page(
    out: Verification,
    page: str,
    run: Run,
    run_dir: Path,
    claimed: Mapping[str, str],
    version: object,
) -> None:
    """The page against the digest it carries; a page without one (rendered before reports
    carried it) rendered again from its embedded results: the same HTML, byte for byte. A
    page of an older schema embeds its results as that schema had them, and the page
    rendered again embeds them as this one does: all but that block must be the same."""
    digest = stamped(page)
    if digest is not None:
        out.add(
            "report text",
            []
            if digest
            else ["the page does not have the digest it carries: it was edited after rendering"],
            "the page has the sha256 digest it carries: as rendered",
        )
        return
    telemetry, latencies = chart_inputs(run_dir, run)
    # a page rendered before findings were saved: its findings taken again to render it,
    # the results it embeds left as they were
    shown = run if run.findings is not None else findings.attach(run.model_copy(deep=True))
    again = without_digest(render_html(shown, telemetry, claimed, latencies, embedded=run))
    current = version == store.SCHEMA_VERSION
    # the data block compared as data: a large one is gzipped, whose bytes may differ between
    # zlib builds while what it holds does not
    same = without_data(again) == without_data(page) and (
        not current or again == page or extract(again) == extract(page)
    )
    done = (
        "rendering the embedded results again gives the same HTML, byte for byte"
        if current
        else f"rendering the embedded results again gives the same HTML (its data embedded as "
        f"schema {version}, read through the migration)"
    )
    out.add(
        "report text",
        []
        if same
        else [
            "rendering the embedded results again gives different HTML: the page was edited, "
            "or rendered by another reportgen version"
        ],
        done,
    )


def _decisions(run: Run, fresh: Run, rows_of: Rows, legacy: bool) -> tuple[list[str], int]:
    """Every decision taken again by ``verdict.decide_experiment`` on the recomputed numbers,
    and the best configuration chosen again from them (``drift.best_after``). ``legacy``:
    results of an older schema, whose decisions may lack what later ones record."""
    problems: list[str] = []
    compared = 0
    fresh.best = None
    for e, again in zip(run.experiments, fresh.experiments, strict=True):
        stored = e.decision
        if stored is None:
            continue  # not decided yet: pending, running or interrupted
        again.decision = verdict.decide_experiment(
            fresh,
            again,
            rows_of,
            method=stored.method,
            alpha=stored.alpha,
            # a failed experiment decided before its finished levels were compared
            before_failure=stored.verdict != "failed" or stored.before_failure is not None,
            # an experiment not judged (another load, an expected failure that did not
            # happen): as the run decided, where it recorded it
            unjudged_rule=stored.unjudged is not None,
            # a stated spread set aside without its weight kept: as decided before
            aside_weight=verdict.aside_weight(stored),
            # the stated spread never giving way to starts far closer: as decided before
            gives_way=verdict.gives_way(stored),
        )
        fresh.best = drift.best_after(fresh, again)
    drift.drift_check(fresh)  # adoptions the bracket's drift could explain, withdrawn
    for e, again in zip(run.experiments, fresh.experiments, strict=True):
        stored, got = e.decision, again.decision
        if stored is None or got is None:
            continue
        problems += _compare_decisions(run.metric, e, stored, got, legacy)
        compared += len(got.vs_parent) + len(got.vs_baseline)
        compared += sum(len(v) for v in (got.metrics or {}).values()) if stored.metrics else 0
    if fresh.best != run.best:
        problems.append(f"best: {run.best!r} in the report, {fresh.best!r} from the decisions")
    return problems, compared


def _compare_decisions(
    metric: str, e: Experiment, stored: Decision, got: Decision, legacy: bool
) -> list[str]:
    out = []
    # the structure, not the words (``explain`` makes them from it, in today's wording)
    if stored.verdict != got.verdict:
        out.append(f"{e.id}: the verdict would be {got.verdict!r} ({got.explanation})")
    if stored.before_failure is not None and stored.before_failure != got.before_failure:
        out.append(f"{e.id}: the levels compared before it failed would be {got.before_failure}")
    withdrawn = [d.drift is not None and d.drift.withdrawn for d in (stored, got)]
    if withdrawn[0] != withdrawn[1]:
        said = "withdrawn" if withdrawn[1] else "kept"
        out.append(f"{e.id}: against the bracket's drift its verdict would be {said}")
    if stored.unjudged is not None and stored.unjudged != got.unjudged:
        why = [f"{u.kind} {u.changes}" for u in got.unjudged or []]
        out.append(f"{e.id}: not judged because of {why or 'nothing'}, not as recorded")
    if (stored.paired is not None or not legacy) and stored.paired != got.paired:
        out.append(f"{e.id}: paired is {stored.paired}, but the runs say {got.paired}")
    for name in ("vs_parent", "vs_baseline"):
        out += _compare_lists(
            f"{e.id} {name} ({metric})", getattr(stored, name), getattr(got, name)
        )
    if stored.metrics is not None or not legacy:
        # runs of older versions compared the objective only: their metrics are absent
        stored_metrics, got_metrics = stored.metrics or {}, got.metrics or {}
        for name in sorted(set(stored_metrics) | set(got_metrics)):
            out += _compare_lists(
                f"{e.id} {name} (every metric)",
                stored_metrics.get(name, []),
                got_metrics.get(name, []),
            )
    return out


def _compare_lists(
    where: str, stored: Sequence[Comparison], fresh: Sequence[Comparison]
) -> list[str]:
    got = {(c.metric, c.point): c.model_dump() for c in fresh}
    had = {(c.metric, c.point): c.model_dump() for c in stored}
    out = []
    for key in sorted(set(had) | set(got), key=lambda k: (k[0], k[1].order)):
        a, b = had.get(key), got.get(key)
        if a is None or b is None:
            why = "not in the report" if a is None else "no longer computable"
            out.append(f"{where} {key[0]} {key[1].label}: {why}")
            continue
        bad = _diff_keys(a, b)
        if bad:
            out.append(f"{where} {key[0]} {key[1].label}: {', '.join(bad)}")
    return out
