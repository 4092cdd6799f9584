"""Each experiment's expectation judged against what was measured: a structured one
(``campaign.schema.Expect``: its verdict, metric and levels) as written; one in prose is
shown, not read (words are no contract: "within noise", "no longer slower" and "most at
C=64" were misread when they were), with how to write it so that it is judged."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reportgen.metrics import REGISTRY
from reportgen.render.content import Expectation
from reportgen.render.fmt import fmt_bound
from reportgen.results.model import Experiment, Point, Run, sorted_points
from reportgen.results.verdicts import Comparison

LABELS = {  # what an expectation's clause can speak of, as its reading names it
    **{m: REGISTRY[m].labelled() for m in ("ttft_ms", "itl_ms", "e2e_ms", "output_tok_s")},
    # ITL p99 is never compared: read, then "not shown"
    **{f"{m}_p99": REGISTRY[m].labelled("p99") for m in ("ttft_ms", "e2e_ms", "itl_ms")},
}

# A prose expectation's "read" cell: shown as written, judged only once structured
PROSE = "not read (prose)"
# said once under the table where a row is one
PROSE_HINT = "Prose is shown, not read: written as expect = { verdict, at, metric } it is judged."


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


def _structured(expects: Sequence[dict[str, object]], levels: Sequence[Point]) -> list[Read]:
    """Structured expectations (``campaign.schema.Expect``) as readings: each its metric,
    verdict and levels (``at``, else every objective level); "fails" is no reading."""
    out = []
    for x in expects:
        verdict = str(x.get("verdict"))
        if verdict == "fails":
            continue
        at, rates = x.get("at"), x.get("rate")
        if isinstance(rates, list):
            wanted = {float(r) for r in rates}
            named = [p for p in levels if p.rate is not None and p.rate in wanted]
        elif isinstance(at, list):
            named = [Point(int(c)) for c in at]
        else:
            named = list(levels)
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
        unfinished = _unfinished(outcome)
        if not e.expects:  # prose: shown, not read
            what = unfinished or (_failed(e) if failed else _measured(e, metric, levels))
            out.append(Expectation(e.id, e.expect, PROSE, what, "not judged"))
            continue
        reading = _structured(e.expects, levels)
        wanted = any(x.get("verdict") == "fails" for x in e.expects)
        said = "; ".join(r.said() for r in reading)
        if unfinished:
            read = "fails" if wanted else said or "–"
            out.append(Expectation(e.id, e.expect, read, unfinished, "not judged"))
            continue
        measured = _measured(e, metric, levels, reading)
        if wanted and not failed:
            out.append(Expectation(e.id, e.expect, "fails", f"it ran: {measured}", "not met"))
            continue
        if failed:
            out.append(
                Expectation(
                    e.id,
                    e.expect,
                    "fails" if wanted else "runs" + (f", then {said}" if said else ""),
                    _failed(e, measured),
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


def _unfinished(outcome: str) -> str:
    """What an experiment that did not finish was (``Run.outcome``), else ""."""
    if outcome == "interrupted":
        return "interrupted before it finished"
    return outcome if outcome in ("not started", "pending", "running") else ""


def _failed(e: Experiment, measured: str = "") -> str:
    """How ``e`` failed, and what its finished levels measured before (``measured``)."""
    where = "it failed" + (f" ({e.reason.split(':')[0]})" if e.reason else "")
    before = f"; before that, {measured}" if e.decision and e.decision.before_failure else ""
    return where + (before if measured else "")


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
