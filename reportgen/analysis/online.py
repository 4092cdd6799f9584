"""The campaign's false alarms held online: the fallback procedure.

A campaign decides its experiments one after another, each before the next starts (the next
may build on it), so a rule for the campaign as a whole must set each experiment's rate from
what was decided before it, never from what comes after (Holm's step-down needs every result
at once). ``alpha_scope = "campaign"`` uses the fallback procedure (Wiens 2003; as an online
rule, Tian and Ramdas 2021, "Online control of the familywise error rate"): of a campaign's
k compared experiments, experiment i is decided at

    alpha_i = alpha / k + (alpha_(i-1) where experiment i - 1 was adopted or rejected, else 0)

so the share of a change that found something passes on to the next, and the chance that any
change which does nothing is adopted or rejected stays at most alpha whatever the experiments'
dependence (it is a shortcut of a closed test of weighted Bonferroni tests). Where every change
does nothing it is Bonferroni's alpha / k; each real finding buys the next experiment more
power. Only the campaign's own experiments count (not the bracket, confirmations or
re-measurements of the baseline, which are compared with a configuration they repeat).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from reportgen.results.model import Experiment, Run
from reportgen.results.verdicts import Comparison

SINCE = "anchored"  # the first ``Decision.method`` whose rates were set so (Bonferroni before)
FOUND = ("adopted", "rejected")  # a verdict that rejects "this change does nothing"


def compared(run: Run) -> int:
    """k: the campaign's compared experiments (its experiments but the baseline)."""
    return max(1, len(run.campaign.get("experiment") or []) - 1)


def fallback(verdicts: Sequence[str | None], alpha: float, k: int) -> list[float]:
    """The rate each of the campaign's compared experiments is decided at, in order, given
    the verdicts of those before it (``verdicts[i]``: experiment i's; one more rate than
    verdicts: the next one's)."""
    out = [alpha / k]
    for v in verdicts:
        out.append(alpha / k + (out[-1] if v in FOUND else 0.0))
    return out


def rate_for(run: Run, entry: Experiment) -> float:
    """``entry``'s rate by the fallback procedure, from the verdicts of the campaign's
    experiments decided before it (an experiment that is not one of the campaign's own, a
    bracket or a confirmation: the rate of the campaign's next, which it does not change)."""
    alpha, k = run.settings.alpha, compared(run)
    before: list[str | None] = []
    for e in run.experiments:
        if e.id == entry.id:
            break
        if e.role != "experiment" or e.id == getattr(run.baseline, "id", None):
            continue
        before.append(e.decision.verdict if e.decision else None)
    return fallback(before, alpha, k)[-1]


@dataclass(frozen=True)
class PowerCost:
    """What holding false alarms for the campaign cost: the smallest change the objective's
    comparisons could detect (80% power; the median over them, as a ratio above 1) at the
    rates they were decided at, and at the per-experiment rate."""

    mde: float
    mde_each: float
    comparisons: int


def power_cost(run: Run) -> PowerCost | None:
    """``PowerCost`` over the objective's comparisons with the parent that have an interval
    (None where there are none, or no campaign-wide rule)."""
    if run.settings.alpha_scope != "campaign":
        return None
    now: list[float] = []
    each: list[float] = []
    for e in run.experiments:
        d = e.decision
        if d is None or d.alpha is None or e.role != "experiment":
            continue
        for c in d.vs_parent:
            got = _at(c, d.alpha, run.settings.alpha)
            if got is not None:
                now.append(got[0])
                each.append(got[1])
    if not now:
        return None
    return PowerCost(float(np.median(now)), float(np.median(each)), len(now))


def _at(c: Comparison, decided: float, alpha: float) -> tuple[float, float] | None:
    """(mde as decided, at the experiment's rate ``decided``; mde at the per-experiment rate
    ``alpha``, shared over the levels the same way) of ``c``."""
    from scipy.stats import t

    if c.mde is None or c.dof is None or c.confidence is None or c.mde <= 1 or decided <= 0:
        return None
    power = float(t.ppf(0.8, c.dof))
    used = float(t.ppf(0.5 + c.confidence / 2, c.dof))
    se = math.log(c.mde) / (used + power)
    share = (1 - c.confidence) / decided  # of the experiment's rate, this interval's
    each = float(t.ppf(1 - alpha * share / 2, c.dof))
    return c.mde, math.exp((each + power) * se)
