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

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from reportgen.render.content import Brief, BriefCell, Expectation
from reportgen.render.evidence import failure_hint, kv_cache
from reportgen.render.experiment import request_tokens
from reportgen.render.levels import samples, summaries_by_level
from reportgen.results.model import Experiment, Point, Run, sorted_points
from reportgen.results.verdicts import Comparison
from reportgen.tracebacks import gist

# (aggregate key, comparison metric or None, label, lower is better)
LATENCIES = (
    ("ttft_ms_p50", "ttft_ms", "TTFT p50", True),
    ("ttft_ms_p99", "ttft_ms_p99", "TTFT p99", True),
    ("itl_ms_p50", "itl_ms", "ITL p50", True),
    ("itl_ms_p99", None, "ITL p99", True),
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
    return said, str(c.verdict), ci


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
    levels = [a.point for a in best.by_level if base.aggregate(a.point)]
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
            # the comparison's own ratio (of geometric means) where there is one
            value = comp.ratio if comp is not None and comp.ratio is not None else None
            if value is None and bv and xv is not None:
                value = xv / bv
            ratio = "–" if value is None else f"×{value:.2f}"
            row.append(BriefCell(_fmt(bv), _fmt(xv), ratio, words, css, ci))
        out.append((level, row))
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


_FAILS = re.compile(r"\b(fails?|should fail|will fail|expected to fail)\b", re.I)
_NEGATED = re.compile(r"\b(not|no longer|never|no|n't|without)\s+(\w+\s+)?$", re.I)


def _expects_failure(text: str) -> bool:
    """Whether an expectation says the experiment fails ("Fails at start", "should fail"),
    not that it no longer does ("should not fail") or what a failure was ("the capture that
    fails")."""
    for m in _FAILS.finditer(text):
        before = text[: m.start()]
        if _NEGATED.search(before) or re.search(r"\b(that|which)\s+$", before, re.I):
            continue
        return True
    return False


# Words that say a verdict whatever the metric ("slower", "better") ...
_VERDICT_WORDS = (
    ("worse", re.compile(r"\b(slower|worse|costs?|hurts?|regress(es|ion)?)\b", re.I)),
    ("better", re.compile(r"\b(faster|better|quicker|speeds? up|gains?|improves?)\b", re.I)),
    (
        "equivalent",
        re.compile(
            r"\b(equivalent|no change|unchanged|the same|about the same|at about)\b"
            r"|(?<!twice )(?<!times )\bas fast\b",
            re.I,
        ),
    ),
)
# ... and words that say which way a value moves ("lower TTFT", "several times the throughput"),
# better or worse by the metric's direction.
_VALUE_WORDS = (
    (
        "down",
        re.compile(r"\b(lower|fewer|less|shorter|reduced?|falls?|drops?|cuts?|halves)\b", re.I),
    ),
    ("up", re.compile(r"\b(higher|longer|grows?|rises?|increases?|doubles?)\b", re.I)),
)
# "several times slower": how much, not which way; alone ("several times the throughput",
# "twice as fast"), up, for the objective only ("cuts TTFT 3x" is not up)
_TIMES = re.compile(r"\b((several|many|\d+(\.\d+)?) ?(x|times)|twice)\b", re.I)
# "no slower than", "not worse": a bound, not a direction
_BOUND = re.compile(
    r"\b(no longer|no|not|never)\s+(\w+\s+)?"
    r"(slower|faster|worse|better|higher|lower|grows?|rises?|drops?|falls?)\b",
    re.I,
)
# What a clause speaks of: (family, pattern); a clause naming none speaks of the objective.
_METRICS = (
    ("ttft_ms", re.compile(r"TTFT|time to first|first[- ]token", re.I)),
    (
        "itl_ms",
        re.compile(r"\bITL\b|TPOT|inter-token|time per (output )?token|per[- ]token", re.I),
    ),
    ("e2e_ms", re.compile(r"latenc|end-to-end|\bE2E\b", re.I)),
    ("throughput", re.compile(r"throughput|tok(ens)?(/| per )s(ec(ond)?)?|tok/s", re.I)),
)
LABELS = {
    "ttft_ms": "TTFT p50",
    "itl_ms": "ITL p50",
    "e2e_ms": "E2E p50",
    "ttft_ms_p99": "TTFT p99",
    "e2e_ms_p99": "E2E p99",
    "itl_ms_p99": "ITL p99",  # never compared: read, then "not shown"
    "output_tok_s": "output tok/s",
}
_LEVELS = re.compile(r"C\s*=\s*(\d+(?:\s*(?:,|and|or)\s*(?:C\s*=\s*)?\d+)*)", re.I)
_RATES = re.compile(r"\bR\s*=\s*(\d+(?:\.\d+)?|inf)\b", re.I)
# "most at C=64", "more so at C=64": where an effect is largest, not the only place it is
_EMPHASIS = re.compile(
    r"\b(most|more so|especially|above all)\s+(at|with|for|where|when)\b[^,;]*", re.I
)
# A clause about the server's start speaks of something no level measures: it is not read.
_ASIDE = re.compile(r"\bstarts?\b|start-up", re.I)


@dataclass(frozen=True)
class Read:
    """One clause of an expectation: which metric, which way, at which levels."""

    metric: str  # "objective", or a headline latency ("ttft_ms", "itl_ms", "e2e_ms")
    direction: str  # better | worse | equivalent
    levels: list[Point]

    def said(self) -> str:
        what = "" if self.metric == "objective" else f"{LABELS[self.metric]} "
        if all(p.rate is None for p in self.levels):
            return f"{what}{self.direction} at C={','.join(str(p) for p in self.levels)}"
        return f"{what}{self.direction} at {', '.join(p.label for p in self.levels)}"


def _levels_named(clause: str, levels: Sequence[Point]) -> list[Point]:
    """The levels a clause names: C=64 (or C=1, 4 and 16), R=2 (a rate level), or the lowest
    or highest ("lower concurrency", "higher rates")."""
    named: list[Point] = []
    for group in _LEVELS.findall(clause):
        wanted = {int(x) for x in re.findall(r"\d+", group)}
        named += [p for p in levels if p.rate is None and p.concurrency in wanted]
    rates = {float(x) for x in _RATES.findall(clause)}
    named += [p for p in levels if p.rate is not None and p.rate in rates]
    low = re.search(r"\blow(er)? (concurrenc|rate|load)", clause, re.I)
    high = re.search(r"\bhigh(er)? (concurrenc|rate|load)", clause, re.I)
    order = sorted_points(levels)
    if order and low:
        named.append(order[0])
    if order and high:
        named.append(order[-1])
    return sorted_points(named)


def _families(text: str) -> list[str]:
    """The metrics a piece of text names ("inter-token latency" is ITL, not end-to-end)."""
    found = [m for m, rx in _METRICS if rx.search(text)]
    if "e2e_ms" in found and len(found) > 1 and not re.search(r"end-to-end|\bE2E\b", text, re.I):
        found.remove("e2e_ms")
    return found


def _direction(piece: str, metric: str, higher_is_better: bool) -> str | None:
    """The one direction a piece of an expectation states about ``metric``, or None."""
    if _BOUND.search(piece):
        return None
    piece = re.sub(r"\bno longer\b", "", piece, flags=re.I)  # not "longer"
    said = {d for d, rx in _VERDICT_WORDS if rx.search(piece)}
    moves = {d for d, rx in _VALUE_WORDS if rx.search(piece)}
    if not said and not moves and _TIMES.search(piece) and metric == "objective":
        moves = {"up"}
    up_is_better = higher_is_better if metric == "objective" else metric.endswith("_s")
    said |= {"better" if (m == "up") == up_is_better else "worse" for m in moves}
    # one direction, or none: "about the same, or lower" states two
    return next(iter(said)) if len(said) == 1 else None


def _reading(
    text: str, levels: Sequence[Point], higher_is_better: bool = True, objective: str = ""
) -> list[Read]:
    """What an expectation says, clause by clause: a clause (or, where it names several
    metrics or directions, each part of it between commas, "but" and "while") that states one
    direction about one metric. A part naming no level speaks of its clause's levels, a
    clause naming none of every level; asides in brackets and where an effect is largest
    ("most at C=64") are not read as levels. ``objective``: the run's metric; a clause about
    throughput is about it when it is one, else about output tok/s."""
    out: list[Read] = []
    throughput = "objective" if not objective or objective.endswith("_s") else "output_tok_s"
    text = re.sub(r"\([^)]*\)", "", text)
    for clause in re.split(r"[;.]\s+|\.$", text):
        if not clause.strip() or _ASIDE.search(clause):
            continue
        clause = _EMPHASIS.sub("", clause)
        families = _families(clause)
        pieces = re.split(r",\s*|\s+\b(?:but|while|whereas)\b\s+", clause)
        if any(p.strip().lower().startswith("or ") for p in pieces[1:]):
            continue  # alternatives ("about the same, or lower"): no one reading
        several = (
            len(families) > 1
            or len({d for p in pieces if (d := _direction(p, "objective", higher_is_better))}) > 1
        )
        pieces = pieces if several else [clause]
        clause_levels = _levels_named(clause, levels) or list(levels)
        for piece in pieces:
            found = _families(piece)
            if len(found) > 1:
                continue
            family = found[0] if found else (families[0] if len(families) == 1 else "objective")
            metric = throughput if family == "throughput" else family
            if metric in ("ttft_ms", "e2e_ms", "itl_ms") and re.search(
                r"\bp99\b|tail", piece, re.I
            ):
                metric += "_p99"  # compared from the requests (tails.tail_comparisons)
            direction = _direction(piece, metric, higher_is_better)
            if direction is None:
                continue
            named = _levels_named(piece, levels) if len(pieces) > 1 else clause_levels
            out.append(Read(metric, direction, named or clause_levels))
    return out


def _comparisons(e: Experiment, metric: str, objective: str) -> list[Comparison]:
    """``e``'s comparisons with its parent on one metric family ("objective": the run's)."""
    d = e.decision
    if d is None:
        return []
    if metric == "objective" or metric == objective.removesuffix("_p50"):
        return list(d.vs_parent)
    return [c for c in (d.metrics or {}).get("vs_parent") or [] if c.metric == metric]


def _expectations(run: Run) -> list[Expectation]:
    out = []
    measured_levels = sorted_points(a.point for e in run.experiments for a in e.by_level)
    named = [Point(int(c)) for c in (run.objective.get("concurrency") or [])]
    levels = named + [p for p in measured_levels if p.rate is not None and run.decides(p)]
    levels = levels or measured_levels
    metric = str(run.objective.get("metric") or "output_tok_s")
    for e in run.experiments:
        if not e.expect or e.role != "experiment" or e is run.baseline:
            continue
        outcome = run.outcome(e)
        failed = outcome == "failed"
        reading = _reading(e.expect, levels, run.higher_is_better, metric)
        said = "; ".join(r.said() for r in reading)
        wanted = _expects_failure(e.expect)
        if outcome in ("interrupted", "not started", "pending", "running"):
            what = "interrupted before it finished" if outcome == "interrupted" else outcome
            read = "fails" if wanted else said or "–"
            out.append(Expectation(e.id, e.expect, read, what, "not judged"))
            continue
        measured = _measured(e, metric, levels, reading)
        if wanted and not failed:
            out.append(Expectation(e.id, e.expect, "fails", f"it ran: {measured}", "not met"))
            continue
        if failed:
            where = "it failed" + (f" ({e.reason.split(':')[0]})" if e.reason else "")
            before = (
                f"; before that, {measured}" if e.decision and e.decision.before_failure else ""
            )
            out.append(
                Expectation(
                    e.id,
                    e.expect,
                    "fails" if wanted else "runs" + (f", then {said}" if said else ""),
                    where + before,
                    "met" if wanted else "not met",
                )
            )
            continue
        if not reading or e.decision is None:
            out.append(Expectation(e.id, e.expect, "no direction stated", measured, "not judged"))
            continue
        hits = misses = unknown = 0
        for r in reading:
            comps = _comparisons(e, r.metric, metric)
            for c in r.levels:
                comp = next((x for x in comps if x.point == c), None)
                got = str(comp.verdict) if comp else "none"
                if got == r.direction:
                    hits += 1
                elif got in ("inconclusive", "none"):
                    unknown += 1
                else:
                    misses += 1
        judged = (
            "met"
            if hits and not misses and not unknown
            else "not met"
            if misses and not hits
            else "not shown"
            if unknown and not hits and not misses
            else "partly met"
        )
        out.append(Expectation(e.id, e.expect, said, measured, judged))
    return out


def _measured(
    e: Experiment, metric: str, levels: Sequence[Point], reading: Sequence[Read] = ()
) -> str:
    """What ``e`` measured against its parent: the objective at its levels, and each latency
    its expectation speaks of."""
    if e.decision is None:
        return "–"
    families = ["objective"] + [
        m for m in dict.fromkeys(r.metric for r in reading) if m != "objective"
    ]
    out = []
    for family in families:
        comps = _comparisons(e, family, metric)
        parts = [
            f"{c.point.label}: ×{c.ratio:.2f} {c.verdict}"
            for c in sorted(comps, key=lambda x: x.point.order)
            if c.ratio is not None and (c.point in levels or not levels)
        ]
        if parts:
            label = "" if family == "objective" else f"{LABELS.get(family, family)}: "
            out.append(label + ", ".join(parts))
    return "; ".join(out) or "no comparison"


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
        if not run.info.get("confirm") and best is not run.baseline:
            out.append(
                f"Run {best.id} again with its changes taken out one at a time "
                "(campaign.confirm = true) to see whether each still pays with the others in."
            )
    for eid, reason in _failed(run):
        hint = failure_hint(reason)
        if hint:
            out.append(f"{eid}: {hint}")
    return out


def build(run: Run) -> Brief:
    metric = str(run.objective.get("metric") or "output_tok_s")
    key = metric if metric.endswith("_s") else f"{metric}_p50"
    base = run.baseline
    best = next((e for e in run.experiments if e.id == run.best), None)
    columns = [metric, *(f"{label} (ms)" for _, _, label, _ in LATENCIES)]
    failed = _failed(run)
    if best is None or base is None or best is base:
        line = (
            "No configuration finished."
            if base is None
            else f"{base.id} is the only configuration measured: nothing to compare it with."
            if len(run.experiments) == 1
            else "No experiment was adopted: the baseline stays the configuration to run."
        )
        cmd = shlex.join(base.command) if base is not None and base.command else ""
        return Brief(
            best="",
            best_line=line,
            command=cmd,
            base_url=(base.base_url or "") if base is not None else "",
            columns=columns,
            levels=[],
            failed=failed,
            unfinished=_unfinished(run),
            expectations=_expectations(run),
            next_steps=_next_steps(run, None, [], columns),
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
        samples=[samples(runs.get(level) or []) for level, _ in cells],
        expectations=_expectations(run),
        next_steps=_next_steps(run, best, cells, columns),
        kv_cache=kv_cache(best, request_tokens(best)),
    )
