"""Variance estimates pooled and combined: Smyth's (2004) empirical Bayes prior for sample
variances ("moderated t", limma), and Welch-Satterthwaite degrees of freedom for a sum of
variance estimates. The noise model (``analysis.noise``) uses both."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def prior(variances: np.ndarray, dofs: np.ndarray) -> tuple[float | None, float]:
    """Smyth's (2004) prior variance and degrees of freedom from sample variances and their
    degrees of freedom; the plain pooled variance where there are fewer than three cells or
    they agree better than chance (the prior's weight is then capped at the cells' total)."""
    from scipy import special

    if variances.size == 0:
        return None, 0.0
    total = float(dofs.sum())
    pooled = float((variances * dofs).sum() / total)
    keep = variances > 0
    if keep.sum() < 3:
        return pooled, total
    s2, d = variances[keep], dofs[keep]
    e = np.log(s2) - special.digamma(d / 2) + np.log(d / 2)
    mean_e = float(e.mean())
    excess = float(e.var(ddof=1) - special.polygamma(1, d / 2).mean())
    if excess <= 0:
        return pooled, total
    half = trigamma_inverse(excess)
    d0 = min(2 * half, total)
    s0 = math.exp(mean_e + float(special.digamma(d0 / 2)) - math.log(d0 / 2))
    return s0, d0


def trigamma_inverse(y: float) -> float:
    """x with trigamma(x) = y (trigamma falls from +inf to 0 on (0, inf))."""
    from scipy import optimize, special

    def f(x: float) -> float:
        return float(special.polygamma(1, x)) - y

    hi = 1.0
    while f(hi) > 0:
        hi *= 2
    lo = hi / 2
    while f(lo) < 0 and lo > 1e-8:
        lo /= 2
    return float(optimize.brentq(f, lo, hi))


def satterthwaite(parts: Sequence[tuple[float, float]]) -> float | None:
    """Welch-Satterthwaite degrees of freedom of a sum of variance estimates (value, dof);
    None when the sum is zero or a part with weight has no degrees of freedom."""
    total = sum(v for v, _ in parts)
    if total <= 0:
        return None
    denom = 0.0
    for v, d in parts:
        if v > 0:
            if d <= 0:
                return None
            denom += v * v / d
    return total * total / denom if denom > 0 else None
