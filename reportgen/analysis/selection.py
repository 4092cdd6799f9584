"""The best configuration's gain, allowing for how it was chosen.

The best is the adopted experiment with the highest objective score against the baseline (the
mean of its log ratios at the objective's levels). Chosen as the highest of several noisy
estimates, its estimate is biased upwards: the winner's curse. Two answers, said in that
order of preference:

- **confirmation**: ``campaign.confirm`` measures the best configuration again after the
  campaign; that second measurement was not used to choose it, so its ratio to the baseline
  carries no selection bias.
- **shrunken estimate**: each compared experiment's score d_i (standard error se_i) is taken as
  a true effect drawn from N(0, tau^2) plus its noise, tau^2 estimated from the campaign itself
  (the method of moments: the mean of d_i^2 - se_i^2, at least 0), and the best's score is
  shrunk to its posterior mean d x tau^2 / (tau^2 + se^2) (empirical Bayes, as in Efron and
  Morris 1975). Changes that mostly do nothing give a small tau and a strong shrinkage; three
  compared experiments at least, or no shrunken estimate is given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from reportgen.results.model import Run
from reportgen.results.verdicts import Comparison

MIN_EXPERIMENTS = 3  # fewer, and tau^2 is not estimated


def log_se(c: Comparison) -> float | None:
    """The standard error of a comparison's log ratio, from its interval, its level and its
    degrees of freedom; None where it has no interval."""
    from scipy import stats

    if not (c.ratio and c.ci_low and c.ci_high and c.dof and c.confidence):
        return None
    t = float(stats.t.ppf(0.5 + c.confidence / 2, c.dof))
    return math.log(c.ci_high / c.ci_low) / (2 * t)


@dataclass(frozen=True)
class Score:
    """One compared experiment's objective score against the baseline: the mean log ratio
    (its sign turned where lower is better) and its standard error."""

    id: str
    score: float
    se: float


@dataclass(frozen=True)
class Shrunk:
    """The best's score shrunk towards no change, and what it took."""

    score: float
    tau: float  # the spread of true effects the campaign suggests (log scale)
    experiments: int


def shrink(best: Score, scores: Sequence[Score]) -> Shrunk | None:
    """The best's score shrunk (see the module's description); None with fewer than
    ``MIN_EXPERIMENTS`` scores."""
    if len(scores) < MIN_EXPERIMENTS:
        return None
    excess = sum(s.score**2 - s.se**2 for s in scores) / len(scores)
    tau2 = max(0.0, excess)
    weight = tau2 / (tau2 + best.se**2) if tau2 + best.se**2 > 0 else 0.0
    return Shrunk(best.score * weight, math.sqrt(tau2), len(scores))


def scores(run: Run) -> list[Score]:
    """Every compared experiment's objective score against the baseline (the campaign's own
    experiments, decided and not failed, with an interval at every objective level)."""
    out = []
    base = run.baseline
    for e in run.experiments:
        d = e.decision
        if e.role != "experiment" or d is None or base is None or e.id == base.id:
            continue
        if d.verdict in ("failed", "baseline") or not d.vs_baseline:
            continue
        logs = [math.log(c.ratio) for c in d.vs_baseline if c.ratio]
        ses = [log_se(c) for c in d.vs_baseline]
        if len(logs) != len(d.vs_baseline) or any(s is None for s in ses):
            continue
        score = sum(logs) / len(logs)
        out.append(
            Score(
                e.id,
                score if run.higher_is_better else -score,
                sum(s for s in ses if s is not None) / len(ses),
            )
        )
    return out


def best_shrunk(run: Run) -> tuple[Score, Shrunk] | None:
    """The best configuration's score and its shrunken one; None where there is no best
    beyond the baseline, or too few compared experiments."""
    found = scores(run)
    best = next((s for s in found if s.id == run.best), None)
    if best is None:
        return None
    shrunk = shrink(best, found)
    return None if shrunk is None else (best, shrunk)
