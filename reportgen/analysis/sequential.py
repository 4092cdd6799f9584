"""Adaptive repetitions: looking at a comparison after every repetition without crying wolf.

With ``workload.repetitions = { min = 2, max = 8 }`` a level's comparison is looked at after
``min`` repetitions and after each one added, up to ``max``; a level whose verdict is decided
gets no more. Looking again and again at a 95% interval and stopping when it first excludes 1
would call an identical configuration different far more often than one time in twenty. So
every look uses Pocock's (1977) group-sequential boundary: one nominal level for all looks,
chosen so that the chance that *any* look crosses it, when nothing changed, is the stated
5%. The looks are at information fractions n_k / max (n_k the repetitions at look k); their
test statistics are correlated as sqrt(n_i / n_j), and the boundary comes from that
multivariate normal (drawn as 400,000 seeded random walks). The parent's repetitions are
fixed when it is not interleaved, which correlates the looks more strongly still: the
boundary is then conservative, never lax.

A fixed count (``repetitions = 3``) is one look at the plain 95%.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from reportgen.campaign.workload import repetitions_bounds
from reportgen.results.verdicts import level_label as level_label


def looks(low: int, high: int) -> tuple[int, ...]:
    """The repetition counts at which a level's comparison is looked at."""
    return tuple(range(low, high + 1))


@lru_cache(maxsize=64)
def pocock_confidence(schedule: tuple[int, ...], confidence: float = 0.95) -> float:
    """The confidence of each look's interval so that, over all of ``schedule``'s looks, an
    identical configuration is called different with probability 1 - ``confidence``."""
    from scipy import stats

    if len(schedule) <= 1:
        return confidence
    alpha = 1 - confidence
    n = np.asarray(schedule, dtype=float)
    # The looks' statistics as a random walk seen at n_k steps (seeded: the same boundary
    # every time), and the boundary the largest of them crosses with probability alpha.
    rng = np.random.default_rng(0)
    steps = np.diff(np.concatenate([[0.0], n]))
    walk = np.cumsum(rng.standard_normal((PATHS, n.size)) * np.sqrt(steps), axis=1)
    largest = np.abs(walk / np.sqrt(n)).max(axis=1)
    z = float(np.quantile(largest, 1 - alpha))
    return 1 - 2 * (1 - float(stats.norm.cdf(z)))


PATHS = 400_000


def confidence_for(repetitions: object, confidence: float = 0.95) -> float:
    """The per-look confidence for a workload's ``repetitions`` (an int, or a min/max table
    as recorded in the results)."""
    low, high = repetitions_bounds(repetitions)
    return pocock_confidence(looks(low, high), confidence) if high > low else confidence
