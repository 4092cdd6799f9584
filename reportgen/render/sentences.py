"""The report's sentences about the whole run: the summary (the best configuration against the
baseline, or why there is none), what choosing it and confirming it say, and the interval
level and false-alarm rate the methods section states."""

from __future__ import annotations

import math
from collections.abc import Sequence

from reportgen.metrics import THROUGHPUTS
from reportgen.render import text
from reportgen.render.content import Objective
from reportgen.render.fmt import fmt_bound, fmt_ci, fmt_num, fmt_ratio, fmt_rests_on
from reportgen.render.levels import by_level
from reportgen.results import model
from reportgen.results.model import Point, Run, sorted_points
from reportgen.results.verdicts import ci_label, level_label


def _lone_sentence(e: model.Experiment, objective: Objective) -> str:
    """A run of one configuration: its objective at each level, compared with nothing."""
    levels = by_level(e)
    said = [
        f"{fmt_num(mean)} at {c.label}"
        for c in sorted_points(levels)
        if (mean := levels[c].stat(objective.key).mean) is not None
    ]
    if not said:
        return f"One configuration ({e.id}) was run, and nothing was measured."
    found = f" {text.search_said(e.search)}" if e.search else ""
    return f"{e.id} measured {objective.label} " + ", ".join(said) + "." + found


def _summary_sentence(run: Run, objective: Objective) -> str:
    """One sentence: the best configuration against the baseline on the objective metric."""
    baseline, best = run.baseline, run.best
    if baseline is None:
        return "The results hold no experiments."
    if not baseline.ok:
        measured = sorted_points(a.point for a in baseline.by_level if a.requests)
        if measured:
            return (
                f"The baseline ({baseline.id}) was {baseline.status} after measuring "
                + ", ".join(c.label for c in measured)
                + ": with the baseline unfinished, nothing was compared with it."
            )
        return (
            f"The baseline ({baseline.id}) has no measurements "
            f"({baseline.status}), so nothing could be compared with it."
        )
    if len(run.experiments) == 1:  # a benchmark of one configuration: nothing to compare
        return _lone_sentence(baseline, objective)
    if not best or best == baseline.id:
        others = [e for e in run.experiments if e.role == "experiment" and e is not baseline]
        decided = sum(e.decision is not None for e in others)
        outcomes = [run.outcome(e) for e in others]
        stopped, waiting, later, unjudged = (
            outcomes.count(w) for w in ("interrupted", "not started", "pending", "not judged")
        )
        tail = (
            f"{decided} tried, none adopted over it"
            if decided
            else "none finished beyond it"
            if stopped or waiting or later
            else "none was tried beyond it"
        )
        tail += "".join(
            f"; {n} {what}"
            for n, what in (
                (unjudged, "not judged (each decision says why)"),
                (stopped, "interrupted"),
                (waiting, "not started"),
                (later, "still to run"),
            )
            if n
        )
        tail += "."
        return (
            f"No experiment beat the baseline ({baseline.id}) on {objective.label}"
            f"{_at_levels(objective.levels)}: {tail}"
        )
    chosen = run.experiment(best)
    comps = chosen.decision.vs_baseline if chosen and chosen.decision else []
    if not comps:
        return (
            f"{best} is the best configuration, but it shares no objective level with the "
            f"baseline to compare at."
        )
    decided = all(c.verdict == "better" for c in comps)
    parts = []
    for n, c in enumerate(comps):
        ci = (
            "no interval: one repetition"
            if c.ci_low is None
            else f"{ci_label(c)} {fmt_ci(c.ci_low, c.ci_high)}"
        )
        whose = f" the baseline's {objective.label}" if n == 0 else ""
        said = "" if decided else f", {c.verdict}"
        if not decided and fmt_rests_on(c):
            said += f": {fmt_rests_on(c)}"
        parts.append(f"{fmt_ratio(c.ratio)} ({ci}{said}){whose} at {c.point.label}")
    joined = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    if decided:
        verb = "delivers" if objective.metric in THROUGHPUTS else "has"
        return f"{best} {verb} {joined}.{_chosen(run)}"
    return (
        f"{best} is the best configuration adopted; against the baseline it measured {joined}: "
        f"only a level marked better is beyond the margin at that confidence.{_chosen(run)}"
    )


def _chosen(run: Run) -> str:
    """What choosing the best among several does to its gain, in a sentence: measured again
    where ``campaign.confirm`` ran (``_confirmation`` says how), else shrunk for the choice
    (``analysis.selection``), else nothing."""
    if any(e.role == "confirm" and e.decision for e in run.experiments):
        return ""
    found = run.findings.best_gain if run.findings else None
    if found is None or found.best != run.best:
        return ""
    sign = 1 if run.higher_is_better else -1
    said, was = math.exp(sign * found.shrunk), math.exp(sign * found.score)
    if f"{said:.2f}" == f"{was:.2f}":
        return ""  # the campaign's changes spread so widely that choosing cost nothing
    return (
        f" Chosen as the best of {found.experiments} compared experiments, its gain is likely "
        f"overstated (the winner's curse): shrunk for that choice, x{said:.2f} rather than "
        f"x{was:.2f} over the objective's levels (empirical Bayes, the campaign's changes "
        f"spreading by about {math.expm1(found.tau):.1%}); campaign.confirm = true measures it "
        "again."
    )


def _bracket_said(verdict: str, ratio: str) -> str:
    """The baseline measured again at the end (``campaign.bracket``) against the first, in
    words: whether the campaign's host drifted between them."""
    again = "the baseline measured again at the end"
    if verdict == "equivalent":
        return f"{again} is equivalent to the first{ratio}: no drift"
    if verdict in ("adopted", "rejected"):
        return f"{again} differs from the first{ratio}: the host drifted during the campaign"
    if verdict == "failed":
        return f"{again} failed"
    return f"{again} neither matches nor differs from the first{ratio}: drift cannot be ruled out"


def _against_fresh(run: Run, e: model.Experiment) -> str:
    """confirm-best against the baseline measured beside it (``campaign.anchors``: the
    bracket), in a clause: its gain where nothing chose it ("" where not so compared)."""
    d = e.decision
    base = run.baseline.id if run.baseline else None
    near = any(
        x.role == "bracket" or (x.role == "anchor" and x.parent in (None, base))
        for x in run.experiments
    )  # (the baseline's configuration measured again, not another parent's)
    if d is None or not d.vs_baseline or not near or not run.settings.anchors:
        return ""
    said = ", ".join(
        f"{fmt_ratio(c.ratio)} at {c.point.label}" for c in d.vs_baseline if c.ratio is not None
    )
    return f", and {said} against the baseline measured again beside it (its gain unchosen)"


def _confirmation(run: Run) -> str:
    """The confirmation runs of ``campaign.confirm``, in a sentence ("" without them)."""
    parts = []
    for e in run.experiments:
        d = e.decision
        if e.role == "experiment" or d is None:
            continue
        first = next(iter(d.vs_parent), None)
        ratio = f" ({fmt_ratio(first.ratio)} at {first.point.label})" if first else ""
        if (b := d.equivalent_bound) is not None:  # the bound "equivalent" rests on, beside it
            beyond = f"{fmt_bound(b)} at any level"
            ratio = f"{ratio[:-1]}; {beyond})" if ratio else f" ({beyond})"
        if e.role == "bracket":
            parts.append(_bracket_said(d.verdict, ratio))
        elif e.role == "anchor":
            base = run.baseline.id if run.baseline else None
            what = e.parent if e.parent and e.parent != base else "the baseline"
            parts.append(f"{what} measured again as {e.id}: {d.verdict}{ratio}")
        elif e.role == "confirm":
            fresh = _against_fresh(run, e)
            parts.append(f"run again, the best configuration measured {d.verdict}{ratio}{fresh}")
        elif d.verdict == "rejected":
            parts.append(f"{e.leaves_out} still pays (without it: worse{ratio})")
        elif d.verdict == "equivalent":
            parts.append(f"{e.leaves_out} no longer pays (without it: equivalent{ratio})")
        elif d.verdict == "adopted":
            parts.append(f"{e.leaves_out} now hurts (without it: better{ratio})")
        elif d.verdict == "failed":
            parts.append(f"{e.id} failed")
        else:
            parts.append(f"whether {e.leaves_out} still pays cannot be told{ratio}")
    return (" Confirmation: " + "; ".join(parts) + ".") if parts else ""


def _error_rate(run: Run) -> str:
    """The false-alarm rate the run's verdicts hold (``text.error_rate``)."""
    compared = [e for e in run.experiments if e.role == "experiment"][1:]
    held = run.findings.error if run.findings else None
    if not compared or held is None:
        return ""
    levels = run.objective_count({lv.point for e in compared for lv in e.levels})
    cost = None if held.mde is None or held.mde_each is None else (held.mde, held.mde_each)
    return text.error_rate(
        run.settings.alpha,
        run.settings.alpha_scope,
        held.compared,
        levels,
        fallback=held.fallback,
        cost=cost,
    )


def _ci_level(run: Run) -> str:
    """The objective intervals' level: "95%", or the per-look level of adaptive
    repetitions."""
    levels = [
        c.confidence
        for e in run.experiments
        if e.decision is not None
        for c in e.decision.vs_parent
        if c.confidence
    ]
    return level_label(max(levels)) if levels else "95%"


def _at_levels(levels: Sequence[Point]) -> str:
    if not levels:
        return ""
    if all(p.rate is None for p in levels):
        return f" at C={', '.join(str(p.concurrency) for p in levels)}"
    return " at " + ", ".join(p.label for p in levels)
