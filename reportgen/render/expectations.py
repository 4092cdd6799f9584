"""Each experiment's expectation (its ``expect`` text) read and judged against what was
measured: which metric, levels and direction it names, and whether the measurement met it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from reportgen.analysis.unjudged import expects_failure
from reportgen.metrics import REGISTRY, is_throughput
from reportgen.render.content import Expectation
from reportgen.render.fmt import fmt_bound
from reportgen.results.model import Experiment, Point, Run, sorted_points
from reportgen.results.verdicts import Comparison

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
        re.compile(
            r"\b(lower|fewer|less|shorter|reduced?|falls?|drops?|cuts?|halves"
            r"|down by|(goes|went|comes|came) down)\b",
            re.I,
        ),
    ),
    (
        "up",
        re.compile(
            r"\b(higher|longer|grows?|rises?|increases?|doubles?|up by|(goes|went) up)\b",
            re.I,
        ),
    ),
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


LABELS = {  # what an expectation's clause can speak of, as its reading names it
    **{m: REGISTRY[m].labelled() for m in ("ttft_ms", "itl_ms", "e2e_ms", "output_tok_s")},
    # ITL p99 is never compared: read, then "not shown"
    **{f"{m}_p99": REGISTRY[m].labelled("p99") for m in ("ttft_ms", "e2e_ms", "itl_ms")},
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
    up_is_better = higher_is_better if metric == "objective" else is_throughput(metric)
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
    throughput = "objective" if not objective or is_throughput(objective) else "output_tok_s"
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


def _structured(expects: Sequence[dict[str, object]], levels: Sequence[Point]) -> list[Read]:
    """Structured expectations (``campaign.schema.Expect``) as readings: each its metric,
    verdict and levels (``at``, else every objective level); "fails" is no reading."""
    out = []
    for x in expects:
        verdict = str(x.get("verdict"))
        if verdict == "fails":
            continue
        at = x.get("at")
        named = [Point(int(c)) for c in at] if isinstance(at, list) else list(levels)
        out.append(Read(str(x.get("metric") or "objective"), verdict, named))
    return out


def _comparisons(e: Experiment, metric: str, objective: str) -> list[Comparison]:
    """``e``'s comparisons with its parent on one metric family ("objective": the run's)."""
    d = e.decision
    if d is None:
        return []
    if metric == "objective" or metric == objective.removesuffix("_p50"):
        return list(d.vs_parent)
    return [c for c in (d.metrics or {}).get("vs_parent") or [] if c.metric == metric]


def expectations(run: Run) -> list[Expectation]:
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
        if e.expects:  # as written: nothing to read
            reading = _structured(e.expects, levels)
            wanted = any(x.get("verdict") == "fails" for x in e.expects)
        else:
            reading = _reading(e.expect, levels, run.higher_is_better, metric)
            wanted = expects_failure(e.expect)
        said = "; ".join(r.said() for r in reading)
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
            + (f" ({fmt_bound(c.bound)})" if c.verdict == "equivalent" and c.bound else "")
            for c in sorted(comps, key=lambda x: x.point.order)
            if c.ratio is not None and (c.point in levels or not levels)
        ]
        if parts:
            label = "" if family == "objective" else f"{LABELS.get(family, family)}: "
            out.append(label + ", ".join(parts))
    return "; ".join(out) or "no comparison"
