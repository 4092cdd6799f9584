"""From a run's results (``results.model.Run``) to what the report shows: the ``content``
dataclasses, with numbers already formatted.

Pure: no I/O, no clock, no randomness. The template only places these strings; every decision
about what to say (which levels, which ratio, what a missing value looks like) is made here,
in ``experiment`` (one experiment's section) and in ``evidence`` (the engine's and the GPUs'),
so it can be tested without HTML. Times come from the results file, never from the
renderer's clock, so the same results always give the same report.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from reportgen import metrics
from reportgen.analysis.explain import explain
from reportgen.campaign.schema import Reference as CampaignReference
from reportgen.metrics import THROUGHPUTS
from reportgen.render import brief, costs, evidence, methods, text
from reportgen.render.content import (
    Assumptions,
    ExperimentView,
    Objective,
    Reference,
    Report,
    Series,
)
from reportgen.render.experiment import section
from reportgen.render.fmt import (
    NONE,
    fmt_num,
    fmt_ratio,
    level_head,
)
from reportgen.render.header import SIMULATED_NOTICE, header, run_dir_hint
from reportgen.render.levels import by_level, table_layout
from reportgen.render.sentences import (
    _at_levels,
    _ci_level,
    _confirmation,
    _error_rate,
    _summary_sentence,
)
from reportgen.results import model
from reportgen.results.as_run import references_as_run
from reportgen.results.model import Point, Run, sorted_points

__all__ = ["CHART_KEYS", "SIMULATED_NOTICE", "Report", "Series", "build"]


# Series drawn in the charts (section 5): Aggregate keys.
CHART_KEYS = (
    "output_tok_s",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "itl_ms_p50",
    "itl_ms_p99",
    "tpot_ms_p50",
    "output_tok_per_j",
)


def build(run: Run) -> Report:
    """The whole report's content from a run's results."""
    objective = _objective(run)
    exps = run.experiments
    baseline = run.baseline
    views = [
        section(
            i,
            e,
            baseline,
            run.best,
            objective,
            run.outcome(e),
            explain(run, e, e.decision) if e.decision else None,
            run.engine.name,
            run.findings.bounds.get(e.id, []) if run.findings else [],
            run.findings.graphs.get(e.id, []) if run.findings else [],
            run.findings.speculation.get(e.id, []) if run.findings else [],
        )
        for i, e in enumerate(exps)
    ]
    path = run.campaign_file.path or "campaign.toml"
    levels = sorted_points(lv.point for e in exps for lv in e.levels)
    env = run.fingerprint
    gpus = env.gpus.devices
    cost = costs.table(run)
    return Report(
        header=header(run),
        objective=objective,
        level_head=level_head(levels),
        level_table=table_layout(),
        compact_table=table_layout(compact=True),
        objective_at=_at_levels(objective.levels).removeprefix(" at "),
        summary=_summary_sentence(run, objective) + _confirmation(run),
        experiments=views,
        # by level: every experiment that measured a level (a failed one's, up to its failure)
        measured=[v for v in views if v.status == "ok" or v.levels],
        telemetry_levels=levels,
        telemetry_overview=evidence.telemetry_overview(exps, levels),
        telemetry_idle=evidence.idle_overview(exps),
        costs=cost.rows,
        costs_print=_printed_costs(run, cost.rows),
        roof_basis=cost.roof_basis,
        energy_replayed=costs.replayed(run),
        cost_basis=cost.basis,
        assumptions=_assumptions(views),
        series=[
            series_of(i + 1, e, e is baseline, e.id == run.best)
            for i, e in enumerate(exps)
            if _drawn(e)
        ],
        references=_references(references_as_run(run.campaign.get("reference")), run, len(gpus)),
        environment=text.environment(env),
        methods=methods.methods(
            run.workload,
            exps,
            run.margin,
            objective.label,
            interleave=run.settings.interleave,
            starts=run.settings.starts,
            measured=text.noise_line([e.decision for e in run.experiments])
            + text.start_prior_line(run.start_prior)
            + text.allocation_line(run.findings.allocation if run.findings else None)
            + text.redecided(
                run.redecided,
                {e.id: e.decision.verdict for e in run.experiments if e.decision},
                run.best,
            ),
            ci_level=_ci_level(run),
            error=_error_rate(run),
        ),
        campaign_file={
            "path": path,
            "sha256": run.campaign_file.sha256 or NONE,
            "text": run.campaign_file.text,
        },
        rerun=[
            f"reportgen run {shlex.quote(path)}",
            f"reportgen render {shlex.quote(run_dir_hint(run))}",
        ],
        brief=brief.build(run, cost),
    )


def _objective(run: Run) -> Objective:
    metric = run.metric
    throughput = metric in THROUGHPUTS
    return Objective(
        metric=metric,
        key=metrics.key(metric),
        label=metric if throughput else f"{metric} p50",
        levels=_objective_levels(run),
        direction="higher" if run.higher_is_better else "lower",
        margin=f"{run.margin:.0%}",
    )


def _objective_levels(run: Run) -> list[Point]:
    """The levels the first page shows the objective at: the objective's, else the
    campaign's workload's (its rates, where they are the levels)."""
    named = run.objective_levels
    if named:
        return [Point(c) for c in named]
    wl = run.workload
    if wl.find_max is not None:  # a search: its levels are the probes it ran
        return run.objective_points(lv.point for e in run.experiments for lv in e.levels)
    rates, caps = wl.request_rate, wl.concurrency
    if isinstance(rates, list) and caps:
        return [p for r in rates if run.decides(p := Point(int(caps[0]), float(r)))]
    return [Point(int(c)) for c in caps]


def _assumptions(views: Sequence[ExperimentView]) -> Assumptions:
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
    for (title, st, said, hint), ids in grouped.items():
        who = "every experiment" if len(ids) == len(checked) > 1 else ", ".join(ids)
        problems.append(
            {
                "experiment": who,
                "title": title,
                "status": st,
                "evidence": said,
                "hint": hint,
            }
        )
    problems.sort(key=lambda p: p["status"] != "fail")  # failures first, then in order
    number = {v.id: v.index for v in views}
    merged = _merged(problems, number, every=len(checked))
    return Assumptions([v.id for v in checked], rows, problems, passed, merged)


MERGED_SHOWN = 3  # on paper, a check alike in many experiments gives the evidence of these


def _merged(
    problems: Sequence[dict[str, str]], number: Mapping[str, int], every: int = 0
) -> list[dict[str, str]]:
    """The same check with the same status and advice in several experiments, as one row:
    what their evidence shares said once, what differs named by experiment, for the first
    ``MERGED_SHOWN`` of them (print, and page one of the Markdown). A check that warns on
    every one of the ``every`` experiments checked (the run's model or host, not a change)
    is said once, as "every experiment"."""
    groups: dict[tuple[str, str, str], list[dict[str, str]]] = {}
    for p in problems:
        groups.setdefault((p["title"], p["status"], p["hint"]), []).append(p)
    out = []
    for (title, st, hint), found in groups.items():
        if len(found) == 1:
            one = found[0]
            out.append(
                {**one, "experiment": _who(found, number), "evidence": _cut(one["evidence"])}
            )
            continue
        head, mids, tail = _factor([p["evidence"] for p in found])
        # experiments apart by "; ", or by " | " where their own parts are "; "-separated
        sep = " | " if any("; " in m for m in mids) else "; "
        said = sep.join(
            f"{_who([p], number)}: {m}"
            for p, m in zip(found[:MERGED_SHOWN], mids[:MERGED_SHOWN], strict=True)
        )
        if len(found) > MERGED_SHOWN:
            said += f"{sep}{len(found) - MERGED_SHOWN} more alike (each in the HTML report)"
        ids = {i for p in found for i in p["experiment"].split(", ")}
        out.append(
            {
                "experiment": "every experiment"
                if every > 1 and len(ids) == every
                else _who(found, number),
                "title": title,
                "status": st,
                "evidence": _cut(f"{head}{said}{tail}"),
                "hint": hint,
            }
        )
    return out


PRINTED_EVIDENCE = 360  # characters of a check's evidence on paper, cut between clauses


def _cut(evidence: str) -> str:
    """A check's evidence as print shows it: whole, or past ``PRINTED_EVIDENCE`` characters
    cut at the last clause ("; ") that fits, saying the rest is on screen."""
    if len(evidence) <= PRINTED_EVIDENCE:
        return evidence
    at = evidence.rfind("; ", 0, PRINTED_EVIDENCE)
    kept = evidence[: at if at > PRINTED_EVIDENCE // 2 else PRINTED_EVIDENCE].rstrip(" ;,|")
    return f"{kept}; … (the rest in the HTML report)"


def _who(found: Sequence[dict[str, str]], number: Mapping[str, int]) -> str:
    """The experiments of a merged row: their ids, or past ``MERGED_SHOWN`` of them their
    numbers in the report ("7 experiments: 2-6, 8, 9"), which the narrow column holds."""
    ids = [i for p in found for i in p["experiment"].split(", ")]
    if len(ids) <= MERGED_SHOWN or not all(i in number for i in ids):
        return ", ".join(ids)
    spans: list[list[int]] = []
    for n in sorted(number[i] for i in ids):
        if spans and n == spans[-1][-1] + 1:
            spans[-1].append(n)
        else:
            spans.append([n])
    said = ", ".join(f"{s[0]}-{s[-1]}" if len(s) > 2 else ", ".join(map(str, s)) for s in spans)
    return f"{len(ids)} experiments: {said}"


def _balanced(text: str) -> bool:
    return text.count("(") == text.count(")")


def _factor(texts: Sequence[str]) -> tuple[str, list[str], str]:
    """Texts as (what they all start with, what differs, what they all end with). The head
    ends at a ": " after a label of words alone (never after a key such as "C=1" or "probe
    1", whose values differ), the tail starts at "; " or " (", neither inside brackets nor
    past the first clause; otherwise either is empty."""
    first = texts[0]
    n = 0
    while n < len(first) and all(len(t) > n and t[n] == first[n] for t in texts):
        n += 1
    head = ""
    for colon in re.finditer(r": ", first[:n]):
        candidate = first[: colon.end()]
        label = re.split(r"[:,;] ", candidate[:-2])[-1]
        if "; " in candidate or not _balanced(candidate) or re.search(r"=|\d\s*$", label):
            break
        head = candidate
    rest = [t[len(head) :] for t in texts]
    m = 0
    shortest = min(len(t) for t in rest)
    while m < shortest and all(t[len(t) - 1 - m] == rest[0][len(rest[0]) - 1 - m] for t in rest):
        m += 1
    common = rest[0][len(rest[0]) - m :] if m else ""
    tail = ""
    for found in re.finditer(r"; | \(", common):
        candidate = common[found.start() :]
        one_aside = candidate.startswith(" (") and candidate.find(")") == len(candidate) - 1
        if _balanced(candidate) and (candidate.startswith("; ") or one_aside):
            tail = candidate
            break
    mids = [t[: len(t) - len(tail)] if tail else t for t in rest]
    if tail.startswith(" (") and any("(" in x for x in mids):
        return head, rest, ""  # an aside that may belong to the last of several
    return head, mids, tail


def _drawn(e: model.Experiment) -> bool:
    """Whether an experiment gets a line in the charts: it succeeded, or it failed after
    finishing some levels (those are drawn, dashed, as "failed")."""
    return bool(e.by_level) and (e.ok or bool(e.finished_before_failure()))


def _printed_costs(run: Run, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cost table's rows on paper: the baseline's, the best's and the cheapest's (the
    configurations a reader chooses between); the HTML report has every experiment's. None
    for a lone configuration with neither a price nor a roofline: page one's cost line gives
    its tokens per joule at each level, all such a table would say."""
    if len(run.experiments) == 1 and not any(r.get("priced") or r.get("roofline") for r in rows):
        return []
    chosen = {run.baseline.id if run.baseline else "", run.best or ""}
    cheap = brief.cheapest_choice(run)
    if cheap is not None:
        chosen.add(cheap.id)
    return [r for r in rows if r["id"] in chosen]


def series_of(index: int, e: model.Experiment, is_baseline: bool, is_best: bool) -> Series:
    """One experiment's numbers for the charts (the report's, and ``diff``'s of both runs)."""
    levels = by_level(e)
    if not e.ok:  # only the levels it finished before its server failed
        keep = set(e.finished_before_failure())
        levels = {c: a for c, a in levels.items() if c in keep}
    order = sorted_points(levels)
    return Series(
        id=e.id,
        index=index,
        is_baseline=is_baseline,
        is_best=is_best,
        levels=order,
        mean={k: [levels[c].mean(k) for c in order] for k in CHART_KEYS},
        sd={k: [levels[c].stat(k).sd for c in order] for k in CHART_KEYS},
        untrusted=e.ok and e.decision is not None and e.decision.verdict == "failed",
        partial=not e.ok,
        stopped="failed" if e.status == "failed" else "interrupted",
    )


def _references(refs: Sequence[CampaignReference], run: Run, host_gpus: int = 0) -> list[Reference]:
    """Published numbers (the campaign's ``reference`` tables) next to this run's best.
    Throughputs are compared per GPU (a server's tokens per second over its GPUs); latencies
    as they are."""
    chosen = by_level(run.experiment(run.best))
    out = []
    for r in refs:
        value, gpus = float(r.value or 0), int(r.gpus or 1)
        metric, level = str(r.metric), r.concurrency
        # compared per GPU: a rate (tokens per joule are the GPUs' together already)
        throughput = metric in THROUGHPUTS and metric.endswith("_s")
        agg = chosen.get(Point(int(level))) if level is not None else None
        measured = agg.mean(metrics.key(metric)) if agg is not None else None
        mine = measured / host_gpus if measured is not None and throughput and host_gpus else None
        theirs = value / gpus if throughput else value
        versus = (mine if throughput else measured) or None
        source = str(r.source or "")
        out.append(
            Reference(
                name=str(r.name or ""),
                metric=metric,
                concurrency=NONE if level is None else str(level),
                value=fmt_num(value),
                gpus=str(gpus),
                per_gpu=fmt_num(value / gpus) if throughput else NONE,
                measured=fmt_num(measured),
                measured_per_gpu=fmt_num(mine) if throughput else NONE,
                versus=fmt_ratio(versus / theirs) if versus and theirs else NONE,
                conditions=str(r.conditions or ""),
                source=source,
                link=source if source.startswith("https://") else None,
            )
        )
    return out
