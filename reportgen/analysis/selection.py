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
  compared experiments at least, or no shrunken estimate is given. The scores share the
  baseline's measurement (or, with ``campaign.anchors``, its measurements nearest in time), so
  their errors are not independent: a baseline that read slow lifts every score alike. Each
  score's variance is split into its own side's share and the baseline side's (by the runs
  each side had, ``Comparison.n_parent`` and ``n_child``), scores against the same baseline
  measurements share that part, and the best's posterior mean is taken from every score
  together: tau^2 times the best's row of (diag(tau^2 + own^2) + shared)^-1 d. Where the
  others all read high, part of the best's gain is the baseline's.
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
    # the share of se^2 that is the baseline side's, and the baseline measurements it was
    # compared with (scores against the same ones share that error); 0: taken as independent
    base_share: float = 0.0
    against: tuple[str, ...] = ()


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
    if tau2 == 0.0 or not any(s.base_share for s in scores) or best not in scores:
        weight = tau2 / (tau2 + best.se**2) if tau2 + best.se**2 > 0 else 0.0
        return Shrunk(best.score * weight, math.sqrt(tau2), len(scores))
    return Shrunk(_joint(best, scores, tau2), math.sqrt(tau2), len(scores))


def _joint(best: Score, scores: Sequence[Score], tau2: float) -> float:
    """The best's posterior mean from every score together, their baseline errors shared
    (see the module's description)."""
    import numpy as np

    d = np.array([s.score for s in scores])
    se2 = np.array([s.se**2 for s in scores])
    base = se2 * np.array([min(1.0, max(0.0, s.base_share)) for s in scores])
    cov = np.diag(tau2 + se2 - base)
    for i, a in enumerate(scores):
        for j, b in enumerate(scores):
            both = set(a.against) & set(b.against)
            if both:
                overlap = len(both) / math.sqrt(len(a.against) * len(b.against))
                cov[i, j] += math.sqrt(base[i] * base[j]) * overlap
    k = list(scores).index(best)
    return float(tau2 * np.linalg.solve(cov, d)[k])


def score_of(
    exp_id: str, found: Sequence[Comparison], against: Sequence[str], higher_is_better: bool
) -> Score | None:
    """An experiment's objective score from its comparisons with the baseline ``found`` (the
    mean log ratio, its sign turned where lower is better; the mean standard error; the
    baseline side's share of the variance, from the runs each side had), compared with the
    baseline measurements ``against``; None where a level has no interval."""
    logs = [math.log(c.ratio) for c in found if c.ratio]
    ses = [log_se(c) for c in found]
    if not found or len(logs) != len(found) or any(x is None for x in ses):
        return None
    shares = [(1 / c.n_parent) / (1 / c.n_parent + 1 / c.n_child) for c in found
              if c.n_parent and c.n_child]  # fmt: skip
    score = sum(logs) / len(logs)
    return Score(
        exp_id,
        score if higher_is_better else -score,
        sum(x for x in ses if x is not None) / len(ses),
        sum(shares) / len(shares) if shares else 0.0,
        tuple(against),
    )


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
        # the baseline measurements its baseline side was (``campaign.anchors``), else the
        # baseline's own
        on_base = e.parent == base.id and not d.stand_in and not d.paired
        against = d.baseline_against or (d.measured_against if on_base else None) or [base.id]
        found = score_of(e.id, d.vs_baseline, against, run.higher_is_better)
        if found is not None:
            out.append(found)
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
