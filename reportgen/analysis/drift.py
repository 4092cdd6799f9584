"""The bracket's drift check: the baseline measured again at the end of the campaign says how
far the host drifted over it, and a verdict the drift could explain (an adoption, or a
rejection) is withdrawn; the best configuration chosen again after it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime

from reportgen.analysis import decide, moderated, selection
from reportgen.analysis.explain import explain
from reportgen.load.records import RequestRecord
from reportgen.results.model import Experiment, Run
from reportgen.results.verdicts import Drift, DriftLevel

Rows = Mapping[str, Sequence[RequestRecord]]  # a request table's name -> its rows


def _middle(e: Experiment) -> float | None:
    """The middle of an experiment's time on the host (seconds since the epoch)."""
    if not e.started_at or not e.finished_at:
        return None
    a = datetime.fromisoformat(e.started_at).timestamp()
    return (a + datetime.fromisoformat(e.finished_at).timestamp()) / 2


def drift_check(run: Run) -> list[str]:
    """After the bracket (the baseline's configuration measured again at the end) is
    decided: every adoption and rejection taken again with the drift it measured taken out,
    in proportion to the time between the experiment and its parent (the drift taken as
    steady over the campaign), with both intervals' uncertainty. One whose gain (or loss) no
    level still shows is withdrawn (inconclusive, said why) and the best chosen again: a host
    that sped up makes later experiments look better, one that slowed down, worse. Returns the
    ids withdrawn. Interleaved comparisons are left as they are: their drift cancels; so are
    those against a stand-in for the parent (``unjudged.stand_in``) and those against the
    baseline as measured nearest in time (``campaign.anchors``). A bracket not judged
    against the baseline (measured on another machine, another model build) measured no
    drift of this host: nothing is taken again."""
    from scipy import stats

    end = next((e for e in run.experiments if e.role == "bracket" and e.decision), None)
    base = run.baseline
    if end is None or base is None or end.decision is None:
        return []
    if end.decision.method in (None, "pooled"):
        return []  # decided before the check existed
    if end.decision.unjudged:
        return []  # measured on another machine or model build: not the host's drift
    drift = {c.point: c for c in end.decision.vs_parent if selection.log_se(c)}
    t0, t1 = _middle(base), _middle(end)
    if not drift or t0 is None or t1 is None or t1 <= t0:
        return []
    withdrawn = []
    for e in run.experiments:
        d = e.decision
        if e.role != "experiment" or d is None or d.paired or d.stand_in or d.measured_against:
            # (beside its parent, against its configuration on its own machine, or against
            # the baseline as measured nearest in time: ``campaign.anchors``)
            continue
        if d.verdict not in ("adopted", "rejected"):
            continue
        shows = "better" if d.verdict == "adopted" else "worse"
        parent = run.experiment(e.parent)
        tp, tc = (_middle(parent) if parent else None), _middle(e)
        if tp is None or tc is None:
            continue
        share = min(1.0, max(0.0, (tc - tp) / (t1 - t0)))
        levels, still = [], False
        for c in d.vs_parent:
            at = drift.get(c.point)
            se_c, se_d = selection.log_se(c), (selection.log_se(at) if at else None)
            if c.verdict != shows or at is None or se_c is None or se_d is None:
                continue
            assert c.ratio and at.ratio and c.dof and at.dof and c.confidence
            diff = math.log(c.ratio) - share * math.log(at.ratio)
            a, b = se_c**2, (share * se_d) ** 2
            dof = moderated.satterthwaite([(a, c.dof), (b, at.dof)]) or c.dof
            t = float(stats.t.ppf(0.5 + c.confidence / 2, dof))
            se = math.sqrt(a + b)
            lo, hi = math.exp(diff - t * se), math.exp(diff + t * se)
            shown = decide.judge_interval(math.exp(diff), lo, hi, run.margin, run.higher_is_better)
            still = still or shown == shows
            levels.append(
                DriftLevel(level=c.point.label, ratio=math.exp(diff), ci_low=lo, ci_high=hi)
            )
        if not levels:
            continue
        record = Drift(bracket=end.id, share=share, levels=levels, withdrawn=not still)
        if still:
            e.decision = d.model_copy(update={"drift": record})
            continue
        d = d.model_copy(update={"verdict": "inconclusive", "drift": record})
        e.decision = d.model_copy(update={"explanation": explain(run, e, d).text})
        withdrawn.append(e.id)
    if withdrawn:  # a withdrawn rejection changes no best, but choosing again costs nothing
        choose_best(run)
    return withdrawn


def choose_best(run: Run) -> None:
    """The best configuration chosen again from the run's decisions, in the campaign's order
    (``best_after``), after some were taken again."""
    run.best = None
    for e in run.experiments:
        run.best = best_after(run, e)


def score(run: Run, entry: Experiment) -> float:
    """The objective score against the baseline (0 for the baseline itself, -inf without
    a ratio): the mean log ratio, its sign turned when lower is better."""
    if run.baseline is not None and entry.id == run.baseline.id:
        return 0.0
    decision = entry.decision
    ratios = [c.ratio for c in (decision.vs_baseline if decision else []) if c.ratio]
    if not ratios:
        return -math.inf
    s = sum(math.log(x) for x in ratios) / len(ratios)
    return s if run.higher_is_better else -s


def best_after(run: Run, entry: Experiment) -> str | None:
    """Which experiment is best once ``entry`` is decided: the baseline to begin with, then
    an adopted experiment whose score beats the best so far."""
    decision = entry.decision
    if decision is None or entry.role != "experiment":
        return run.best  # confirmations and leave-one-out runs never change the best
    if decision.verdict == "baseline":
        return entry.id
    if decision.verdict != "adopted":
        return run.best
    current = run.experiment(run.best)
    if current is None or score(run, entry) > score(run, current):
        return entry.id
    return run.best
