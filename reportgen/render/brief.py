"""The report's first page: what a reviewer asks first, answered from the run's numbers.

- **The best configuration** and the command that starts it, or why there is none.
- **Per level**, best against the baseline: the objective and the latencies a user feels (TTFT
  and ITL, p50 and p99), each with the verdict's uncertainty in words: "better" only where the
  interval clears the margin, "no clear change" where it does not decide.
- **Failures**, one line each: the engine's own reason where the log gave one.
- **Expectations**: each experiment's stated expectation against what it measured, as far as
  its words say a direction ("slower at C=64", "equivalent"); the reading is shown, so a reader
  can check it.
- **What to try next**, from the numbers: repetitions that would decide an open verdict, a
  spread between server starts that stands in the way, a latency the best configuration pays.

Pure, like ``view``: strings out, already formatted.
"""

from __future__ import annotations

import math
import shlex
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reportgen import metrics
from reportgen.analysis import unjudged
from reportgen.analysis.welch import values_by_level
from reportgen.metrics import REGISTRY
from reportgen.render import costs
from reportgen.render.content import Brief, BriefCell
from reportgen.render.evidence import failure_hint, kv_cache
from reportgen.render.expectations import PROSE, PROSE_HINT, expectations
from reportgen.render.experiment import request_tokens
from reportgen.render.fmt import NONE, fmt_rests_on
from reportgen.render.levels import samples, summaries_by_level
from reportgen.render.text import search_answer, search_over_rates
from reportgen.results.findings import METHOD, UNKNOWN, LevelBound
from reportgen.results.model import Experiment, Point, Run, sorted_points
from reportgen.results.verdicts import Comparison
from reportgen.tracebacks import gist

# The first page's latencies beside the objective: (aggregate key, the comparison's metric or
# None where none is made, label, lower is better). Per token, not per chunk: with several
# tokens to a streamed chunk (speculative decoding) the time between chunks rises while the
# time per output token falls; ITL, per chunk, is shown where it is explained.
LATENCIES = tuple(
    (
        f"{m.name}_{stat}",
        m.name if stat == "p50" and m.headline else f"{m.name}_p99" if m.tail else None,
        m.labelled(stat),
        True,
    )
    for m in (REGISTRY["ttft_ms"], REGISTRY["tpot_ms"], REGISTRY["e2e_ms"])
    for stat in ("p50", "p99")
)


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "–"
    if abs(value) >= 1000:
        return f"{value:,.0f}{unit}"
    if abs(value) >= 100:
        return f"{value:.0f}{unit}"
    if abs(value) >= 10:
        return f"{value:.1f}{unit}"
    return f"{value:.2f}{unit}"


def _words(c: Comparison | None, level: str) -> tuple[str, str, str]:
    """The verdict of one comparison in words, its colour class and its interval."""
    if c is None or c.ratio is None:
        return "no interval", "none", ""
    ci = ""
    if c.ci_low is not None and c.ci_high is not None:
        ci = f"{level} CI {c.ci_low:.2f}–{c.ci_high:.2f}"
    said = {
        "better": "better",
        "worse": "worse",
        "equivalent": "within the margin",
        "inconclusive": "no clear change",
    }.get(str(c.verdict), str(c.verdict))
    rests = fmt_rests_on(c)  # "equivalent": the bound it rests on, beside the wider interval
    return said, str(c.verdict), f"{ci}; {rests}" if ci and rests else ci or rests


def _level_label(c: Comparison | None) -> str:
    conf = getattr(c, "confidence", None) if c is not None else None
    return f"{float(conf):.1%}".replace(".0%", "%") if conf else "95%"


def _find(comps: Sequence[Comparison], metric: str, level: Point) -> Comparison | None:
    return next((c for c in comps if c.metric == metric and c.point == level), None)


def _cells(
    run: Run, best: Experiment, base: Experiment, key: str, metric: str
) -> list[tuple[Point, list[BriefCell]]]:
    comps = list((best.decision.metrics or {}).get("vs_baseline") or []) if best.decision else []
    objective = list(best.decision.vs_baseline) if best.decision else []
    levels = sorted_points(a.point for a in best.by_level if base.aggregate(a.point))
    out = []
    for level in [c for c in levels if run.decides(c)] or levels:
        b, x = base.aggregate(level), best.aggregate(level)
        if b is None or x is None:
            continue
        row = []
        for k, m, _label, _lower in [(key, metric, "", False), *LATENCIES]:
            bv, xv = b.mean(k), x.mean(k)
            comp = None
            if m is not None:
                comp = _find(objective if k == key else comps, m, level)
            words, css, ci = _words(comp, _level_label(comp))
            # where the ratio is one of geometric means over repetitions, those means: the
            # numbers the ratio is made of (a p99's ratio is of the requests', by bootstrap)
            if comp is not None and comp.ratio is not None and not comp.metric.endswith("_p99"):
                gb, gx = _geomean(base, comp), _geomean(best, comp)
                if gb is not None and gx is not None:
                    bv, xv = gb, gx
            # the comparison's own ratio (of geometric means) where there is one
            value = comp.ratio if comp is not None and comp.ratio is not None else None
            if value is None and bv and xv is not None:
                value = xv / bv
            ratio = "–" if value is None else f"×{value:.2f}"
            row.append(BriefCell(_fmt(bv), _fmt(xv), ratio, words, css, ci))
        out.append((level, row))
    return out


def _geomean(e: Experiment, c: Comparison) -> float | None:
    """The geometric mean of ``e``'s repetitions of ``c``'s metric at its level, as the
    comparison took them (``analysis.welch.values_by_level``)."""
    got = [v for v in values_by_level(e.levels, c.metric).get(c.point, []) if v > 0]
    return statistics.geometric_mean(got) if got else None


def _unjudged(run: Run) -> list[tuple[str, str]]:
    """The experiments whose numbers are no verdict, each with why in a few words."""
    out = []
    for e in run.experiments:
        why = e.decision.unjudged if e.decision is not None else None
        if why:
            parent = e.parent or "its parent"
            out.append((e.id, "; ".join(unjudged.short(u, parent) for u in why)))
    return out


def _failed(run: Run) -> list[tuple[str, str]]:
    """The experiments that failed, each with the gist of why."""
    return [
        (e.id, gist(e.reason or e.status or "", 240))
        for e in run.experiments
        if run.outcome(e) == "failed"
    ]


def _unfinished(run: Run) -> list[tuple[str, str]]:
    """The experiments a run that stopped early did not finish: interrupted (why), or not
    started."""
    out = []
    for e in run.experiments:
        said = run.outcome(e)
        if said == "interrupted":
            out.append((e.id, gist(e.reason or "interrupted", 240)))
        elif said == "not started":
            out.append((e.id, "not started: the run stopped before it"))
    return out


def _next_steps(
    run: Run,
    best: Experiment | None,
    cells: Sequence[tuple[Point, list[BriefCell]]],
    columns: Sequence[str],
) -> list[str]:
    out = []
    open_: list[tuple[str, Point, int]] = []
    held: dict[str, list[str]] = {"starts": [], "one start": []}  # Comparison.limit -> ids
    for e in run.experiments:
        if e.decision is None or e.role != "experiment" or e.decision.verdict == "failed":
            continue  # more repetitions of a failed configuration decide nothing
        if e.decision.unjudged:
            continue  # nor of one that is not judged (another load, an expected failure)
        for c in e.decision.vs_parent:
            if c.verdict == "inconclusive" and c.reps_needed:
                open_.append((e.id, c.point, int(c.reps_needed)))
            limit = getattr(c, "limit", None)
            if limit in held:
                held[str(limit)].append(e.id)
    decidable = sorted(
        ((n, eid, lvl) for eid, lvl, n in open_ if n <= 12), key=lambda x: (x[0], x[1], x[2].order)
    )
    if decidable:
        seen: dict[str, tuple[int, Point]] = {}
        for n, eid, lvl in decidable:
            seen.setdefault(eid, (n, lvl))
        said = ", ".join(
            f"{eid} (about {n} repetitions a side at {lvl.label})"
            for eid, (n, lvl) in list(seen.items())[:4]
        )
        out.append(
            f"Open verdicts within reach: {said} would decide; with workload.repetitions = "
            "{ min = 3, max = 12 } a run adds repetitions only where a verdict is open."
        )
    for limit, head, tail in (
        (
            "starts",
            "The spread between server starts decides nothing for ",
            ": more server starts (campaign.starts) or interleaved runs (campaign.interleave) "
            "help, more repetitions on one server do not.",
        ),
        (
            "one start",
            "Undecided because a side ran on one server start: ",
            ". One start's own speed cannot be told apart from a change: campaign.starts = 2 "
            "(the default) measures each experiment on two.",
        ),
    ):
        if held[limit]:
            out.append(head + ", ".join(sorted(set(held[limit]))) + tail)
    if best is not None:
        worse = [
            f"{columns[j]} at {lvl.label} ({cell.baseline} → {cell.best})"
            for lvl, row in cells
            for j, cell in enumerate(row)
            if j > 0 and cell.css == "worse"
        ]
        if worse:
            out.append(
                f"{best.id} pays in latency: "
                + ", ".join(worse[:3])
                + "; check it against the latency the service must meet (workload.slo)."
            )
        if run.settings.confirm is not True and best is not run.baseline:
            out.append(
                f"Run {best.id} again with its changes taken out one at a time "
                "(campaign.confirm = true) to see whether each still pays with the others in."
            )
    for e in run.experiments:
        if run.outcome(e) == "failed" and (hint := failure_hint(e.reason or "", e.log_tail or "")):
            out.append(f"{e.id}: {hint}")
    return out


def detectable(run: Run) -> str:
    """What the run could tell apart, per objective level: the smallest change that each
    experiment's comparison of the objective with its parent would have decided four times in
    five (``Comparison.mde``), their range and their median set against the margin. Where the
    median is wider than the margin, what would narrow it: more server starts where the
    spread between starts alone keeps it wider (the last decision's noise model, at the
    campaign's starts per side), else about how many repetitions a side (an interval narrows
    as the square root of the repetitions while the noise stays as measured)."""
    by: dict[Point, list[Comparison]] = {}
    last = None
    for e in run.experiments:
        d = e.decision
        if d is None or e.role != "experiment" or d.verdict in ("failed", "baseline"):
            continue
        last = d.noise or last
        for c in d.vs_parent:
            if c.mde and c.mde > 1 and run.decides(c.point):
                by.setdefault(c.point, []).append(c)
    if not by:
        return ""
    edge = math.log1p(run.margin)
    parts: list[str] = []
    wider: dict[str, list[str]] = {}  # what would narrow it -> the levels it would
    for point in sorted(by, key=lambda p: p.order):
        mdes = sorted((c.mde or 1.0) - 1 for c in by[point])
        low, high, mid = mdes[0], mdes[-1], statistics.median(mdes)
        n = int(statistics.median(min(c.n_parent, c.n_child) for c in by[point]))
        parts.append(
            f"{point.label} ±{_pct(mid)}"
            + ("" if _pct(low) == _pct(high) else f" ({_pct(low)}-{_pct(high)})")
        )
        if math.log1p(mid) <= edge:
            continue
        between = (last.between_sd_by_level or {}).get(point.label) if last else None
        between = between if between is not None else (last.between_sd if last else None)
        starts = max(1, run.settings.starts)
        k = math.ceil(n * (math.log1p(mid) / edge) ** 2)
        if between is not None and _Z * between * math.sqrt(2 / starts) > edge:
            remedy = "more server starts (campaign.starts), not repetitions"
        elif k <= METHOD.max_reps:
            remedy = f"about {k} repetitions a side"
        else:
            remedy = (
                f"more than {METHOD.max_reps} repetitions a side, so a steadier measurement "
                "(longer levels, more server starts) rather than more of them"
            )
        wider.setdefault(remedy, []).append(point.label)
    said = (
        "Smallest change this run could decide (at 80% power, each experiment against its "
        f"parent; the median, then the range): {'; '.join(parts)}, against a margin of "
        f"{_pct(run.margin)}."
    )
    if wider:
        said += (
            " A true change of the margin's size would likely go undecided where the median is "
            "wider; to see one, "
            + "; ".join(f"at {', '.join(levels)}: {remedy}" for remedy, levels in wider.items())
            + "."
        )
    return said


# a change a two-sided 95% interval tells from none four times in five, in standard errors
_Z = statistics.NormalDist().inv_cdf(0.975) + statistics.NormalDist().inv_cdf(METHOD.power)


@dataclass(frozen=True)
class Cheapest:
    id: str
    per_j: float  # geometric mean of its output tokens per joule over ``levels``
    best: str
    best_per_j: float
    levels: list[Point]
    objective: float  # its objective against the best's (geometric mean; above 1: better)


def cheapest_choice(run: Run) -> Cheapest | None:
    """The configuration that meets the objective for the least energy a token, where it is
    not the best: among the experiments that finished (not a failed check's), those whose
    objective is within the campaign's margin of the best's or better (the geometric mean of
    its ratios at the objective's levels, from the means of their repetitions), the one with
    the most output tokens per joule over those levels (their geometric mean). On one host a
    price makes the fastest the cheapest in money: energy is what tells them apart. None
    without energy, or where the best is the cheapest (within the campaign's margin)."""
    best = run.experiment(run.best) if run.best else run.baseline
    if best is None:
        return None
    levels = sorted({a.point for a in best.by_level if run.decides(a.point)})
    key = metrics.key(run.metric)

    def geo(e: Experiment, name: str) -> float | None:
        got = {a.point: a.mean(name) for a in e.by_level}
        values = [got.get(p) for p in levels]
        if not levels or not all(v is not None and v > 0 for v in values):
            return None
        return statistics.geometric_mean([float(v) for v in values if v])

    mine = geo(best, key)
    scores: dict[str, tuple[float, float]] = {}  # (tokens per joule, objective vs the best)
    for e in run.experiments:
        if not e.ok or e.role != "experiment" or (e.decision and e.decision.verdict == "failed"):
            continue
        per_j, objective = geo(e, "output_tok_per_j"), geo(e, key)
        if per_j is None or objective is None or mine is None:
            continue
        ratio = objective / mine if run.higher_is_better else mine / objective
        if ratio >= 1 - run.margin:
            scores[e.id] = (per_j, ratio)
    if best.id not in scores or len(scores) < 2:
        return None
    low = max(scores, key=lambda k: scores[k][0])
    if low == best.id or scores[low][0] < scores[best.id][0] * (1 + run.margin):
        return None  # the best is the cheapest, or as cheap within the campaign's margin
    return Cheapest(low, scores[low][0], best.id, scores[best.id][0], levels, scores[low][1])


def cost_line(run: Run, table: costs.Table | None = None) -> str:
    """What the configuration to run costs a token at the objective's levels: its output
    tokens per joule, and with a price what a million output tokens cost (the cost and
    efficiency table's numbers, ``table``: made here where not given); empty with neither."""
    table = costs.table(run) if table is None else table
    chosen = run.best or (run.baseline.id if run.baseline else None)
    rows = [r for r in table.rows if r["id"] == chosen]
    energy = [r for r in rows if r["energy"]]
    priced = [r for r in rows if r["priced"] and r["out_cost"] != NONE]
    said = []
    if energy:
        said.append(
            f"{_listed([r['per_j'] for r in energy])} output tokens per joule at "
            f"{_listed([r['label'] for r in energy])}"
        )
    if priced:
        said.append(
            f"{_listed([r['out_cost'] for r in priced])} {table.currency} per million output "
            "tokens at "
            f"{_listed([r['label'] for r in priced])} (at {table.basis})"
        )
    return f"What {chosen} costs: {'; '.join(said)}." if said else ""


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def cheapest(run: Run) -> str:
    """``cheapest_choice`` in a sentence for the first page; empty where there is none."""
    c = cheapest_choice(run)
    if c is None:
        return ""
    at = ", ".join(str(p) for p in c.levels)
    return (
        f"Cheapest in energy: {c.id}, at {c.per_j:.3g} output tokens per joule against "
        f"{c.best_per_j:.3g} for {c.best} (x{c.per_j / c.best_per_j:.2f}), its "
        f"{run.metric} x{c.objective:.2f} the best's, within the {run.margin:.0%} margin "
        f"(geometric means over {at} of the means of repetitions, not a verdict); the cost and "
        "efficiency table has its numbers level by level."
    )


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%" if x < 0.1 else f"{100 * x:.0f}%"


# the configuration to run where nothing was adopted: its objective, then these, per level
PLAIN = ("ttft_ms_p99", "tpot_ms_p50", "e2e_ms_p99")
PLAIN_LABELS = ("TTFT p99 (ms)", "TPOT p50 (ms)", "E2E p99 (ms)")


def replication_line(run: Run) -> str:
    """Whether earlier runs of the campaign in the history store replicated this run's
    verdicts (``Run.replications``), in a sentence: per judged experiment, each earlier run
    by its GPUs and day, its ratio to the baseline at the objective's levels against this
    run's, and whether it lies inside this run's interval everywhere; "" where none did."""
    found = run.replications or []
    if not found:
        return ""
    by: dict[str, list[str]] = {}
    for r in found:
        then = ", ".join(f"×{lv.then:.2f}" for lv in r.levels)
        now = ", ".join(f"×{lv.now:.2f}" for lv in r.levels)
        where = f"{r.gpus or 'another host'} {r.started_at[:10]}".strip()
        if r.replicated:
            said = f"{where} replicated: {then} against {now}"
        else:
            apart = [lv.point.label for lv in r.levels if not lv.within]
            said = (
                f"{where} did not: {then} against {now} (outside this run's interval at "
                f"{', '.join(apart)})"
            )
        by.setdefault(r.experiment, []).append(said)
    levels = ", ".join(lv.point.label for lv in found[0].levels)
    parts = [f"{exp}: {'; '.join(said)}" for exp, said in by.items()]
    return (
        f"Earlier runs of this campaign in the history, each change's ratio to the baseline at "
        f"{levels} then against now: {'. '.join(parts)}."
    )


def _pooled_bounds(e: Experiment) -> dict[Point, dict[str, float]]:
    """Per level a search probed, its bounds' values where the search took them over every
    repetition's requests pooled (``SearchRecord.pooled``), keyed as the aggregates are
    ("ttft_ms_p99"): what page one shows for them, so that it says what the search judged
    and the latency distributions show; {} for a search that took means over runs."""
    record = e.search
    if record is None or not getattr(record, "pooled", False):
        return {}
    from reportgen.campaign.bounds import parse

    out: dict[Point, dict[str, float]] = {}
    for probe in record.probes:
        for said, value in probe.values.items():
            (b,) = parse(said)  # as the search wrote it: "ttft_ms.p99<200"
            if value is not None and b.stat is not None:
                out.setdefault(probe.point, {})[f"{b.metric}_{b.stat}"] = float(value)
    return out


def _answer(e: Experiment, bounds: Sequence[LevelBound]) -> str:
    """A search's answer, its first clause (the highest level meeting the bounds) and what
    bounded that level (``analysis.bound``, where known), for page one; the experiment's
    section has the whole of it (what it measured there, the level that failed above it,
    the probes run again)."""
    record = e.search
    if record is None:
        return ""
    said = search_answer(record)
    rates = search_over_rates(record)
    found = {(b.point.rate if rates else b.point.concurrency): b for b in bounds}

    def at(x: float | None) -> LevelBound | None:
        b = found.get(x) if x is not None else None
        return None if b is None or b.by == UNKNOWN else b

    here, above = at(record.best), at(record.lowest_failure)
    if here is not None:
        said += f" (bound there by the {here.said})"
    if above is not None:
        said += f"; at {above.point.label}, which did not, the {above.said} set the pace"
    return f"{said}."


def build(run: Run, table: costs.Table | None = None) -> Brief:
    """The first page; ``table``: the run's cost and efficiency table where the caller made
    it already (``costs.table``)."""
    metric = str(run.objective.get("metric") or "output_tok_s")
    key = metrics.key(metric)
    base = run.baseline
    best = next((e for e in run.experiments if e.id == run.best), None)
    columns = [metric, *(f"{label} (ms)" for _, _, label, _ in LATENCIES)]
    failed = _failed(run)
    found = run.findings.bounds if run.findings else {}
    if best is None or base is None or best is base:
        line = (
            "No configuration finished."
            if base is None
            else f"{base.id} is the only configuration measured: nothing to compare it with."
            + (f" {_answer(base, found.get(base.id, []))}" if base.search else "")
            if len(run.experiments) == 1
            else "No experiment was adopted: the baseline stays the configuration to run."
        )
        cmd = shlex.join(base.command) if base is not None and base.command else ""
        plain = []
        pooled = _pooled_bounds(base) if base is not None else {}
        if base is not None:
            levels = sorted_points(a.point for a in base.by_level)  # a search's: probe order
            for level in [c for c in levels if run.decides(c)] or levels:
                agg = base.aggregate(level)
                if agg is not None:
                    mine = pooled.get(level, {})
                    row = [_fmt(mine[k] if k in mine else agg.mean(k)) for k in (key, *PLAIN)]
                    plain.append((level, row))
        by_search = [
            PLAIN_LABELS[PLAIN.index(k)].split(" (")[0]
            for k in sorted({k for v in pooled.values() for k in v if k in PLAIN})
        ]
        return Brief(
            plain=plain,
            plain_columns=[metric, *PLAIN_LABELS],
            plain_note=(
                f"{', '.join(by_search)}: over "
                "every repetition's requests pooled, as the search judged each level (and as "
                "the latency distributions show them); the other columns: means over the "
                "repetitions"
                if by_search
                else ""
            ),
            best="",
            best_line=line,
            command=cmd,
            base_url=(base.base_url or "") if base is not None else "",
            columns=columns,
            levels=[],
            failed=failed,
            unfinished=_unfinished(run),
            unjudged=_unjudged(run),
            **_expected(run),
            next_steps=_next_steps(run, None, [], columns),
            detect=detectable(run),
            cheapest=cheapest(run),
            cost=cost_line(run, table),
            replication=replication_line(run),
        )
    cells = _cells(run, best, base, key, metric)
    # (they import this module)
    runs = summaries_by_level(best)
    parent = best.parent or base.id
    line = (
        f"{best.id} is the best configuration: adopted against {parent}"
        + (
            ""
            if parent == base.id
            else ", itself built on the baseline"
            + ("" if base.id == "baseline" else f" ({base.id})")
        )
        + "."
    )
    return Brief(
        best=best.id,
        best_line=line,
        command=shlex.join(best.command) if best.command else "",
        base_url=best.base_url or "",
        columns=columns,
        levels=cells,
        failed=failed,
        unfinished=_unfinished(run),
        unjudged=_unjudged(run),
        samples=[samples(runs.get(level) or []) for level, _ in cells],
        **_expected(run),
        next_steps=_next_steps(run, best, cells, columns),
        kv_cache=kv_cache(best, request_tokens(best)),
        detect=detectable(run),
        cheapest=cheapest(run),
        cost=cost_line(run, table),
        replication=replication_line(run),
    )


def _expected(run: Run) -> dict[str, Any]:
    """The expectations' table, and how a prose one is judged where the table holds one."""
    found = expectations(run)
    return {
        "expectations": found,
        "expect_hint": PROSE_HINT if any(x.reading == PROSE for x in found) else "",
    }
