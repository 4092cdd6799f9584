"""How to split an experiment's repetitions over server starts, from what a run measured.

A configuration's mean over k server starts of m repetitions each has variance
s_b^2 / k + s^2 / (k m) (s_b: the spread between starts, s: between repetitions on one
server, as the noise model measures them), and costs k (c_start + m c_rep) of GPU time
(c_start: a start until ready with its warm-ups; c_rep: one repetition of every level).
For a given GPU time the variance is least at m* = sqrt(c_start s^2 / (c_rep s_b^2))
repetitions a start: two-stage sampling's optimum (Cochran 1977, "Sampling Techniques",
section 10.6). Where starts differ much more than repetitions do, m* is near 1 (one
repetition per start, ``campaign.starts`` equal to the repetitions); where a start costs much
more than a repetition (a large model's load), or starts differ no more than repetitions,
more repetitions a start. Two starts stay the least: they are what measures s_b at all.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from statistics import fmean

from reportgen.campaign.workload import repetitions_range
from reportgen.results.model import Run
from reportgen.results.verdicts import NoiseRecord


@dataclass(frozen=True)
class Allocation:
    start_s: float  # a server start until ready, with its first and level warm-ups
    repetition_s: float  # one repetition of every level
    within_sd: float
    between_sd: float  # the objective's levels' spread between starts, together
    repetitions: int  # the campaign's (least) repetitions an experiment
    starts: int  # campaign.starts as it ran

    @property
    def per_start(self) -> float | None:
        """m*: the repetitions a start that make a mean surest for its GPU time; None where
        starts differ no more than repetitions on one server do (any number does)."""
        if self.between_sd <= 0:
            return None
        return math.sqrt(
            self.start_s * self.within_sd**2 / (self.repetition_s * self.between_sd**2)
        )

    @property
    def suggested_starts(self) -> int:
        """``campaign.starts`` for the campaign's repetitions at m* a start, at least two."""
        m = self.per_start
        if m is None:
            return min(2, self.repetitions)
        return max(min(2, self.repetitions), min(self.repetitions, round(self.repetitions / m)))

    def cost_variance(self, per_start: float) -> float:
        """Variance times GPU time of a mean at ``per_start`` repetitions a start (the same
        for any number of starts, so allocations compare at equal GPU time)."""
        return (self.between_sd**2 + self.within_sd**2 / per_start) * (
            self.start_s + per_start * self.repetition_s
        )

    @property
    def narrower(self) -> float:
        """How much narrower an interval is for the same GPU time at the suggested starts than
        at this run's (a fraction; 0 where they are the same)."""
        now = self.repetitions / max(1, min(self.starts, self.repetitions))
        then = self.repetitions / self.suggested_starts
        return 1 - math.sqrt(self.cost_variance(then) / self.cost_variance(now))


def allocation(run: Run) -> Allocation | None:
    """What this run says of its allocation: its measured start and repetition costs and the
    last decision's noise model for the objective. None where reportgen started no server,
    nothing ran twice on one server, or the spread between starts was not measured."""
    noise = next(
        (e.decision.noise for e in reversed(run.experiments) if e.decision and e.decision.noise),
        None,
    )
    if noise is None or noise.within_sd is None:
        return None
    between = _between_sd(noise)
    if between is None:
        return None
    starts: list[float] = []
    reps: dict[tuple[str, int, int], float] = defaultdict(float)
    for e in run.experiments:
        for s in e.sessions:
            if s.role == "prime" or s.ready_s is None:
                continue
            starts.append(
                s.ready_s
                + (s.warmup.duration_s if s.warmup else 0.0)
                + sum(x.duration_s for x in s.settled)
            )
        for lv in e.levels:
            if not lv.aborted:
                reps[(e.id, lv.session, lv.repetition)] += lv.summary.duration_s
    spent = [v for v in reps.values() if v > 0]
    if not starts or not spent:
        return None
    return Allocation(
        start_s=fmean(starts),
        repetition_s=fmean(spent),
        within_sd=noise.within_sd,
        between_sd=between,
        repetitions=repetitions_range(run.workload.repetitions)[0],
        starts=run.settings.starts,
    )


def _between_sd(noise: NoiseRecord) -> float | None:
    """The spread between starts over the levels that measured it (the root of their mean
    variance), else the pooled one."""
    by_level = [v for v in (noise.between_sd_by_level or {}).values() if v is not None]
    if by_level:
        return math.sqrt(fmean(v * v for v in by_level))
    return noise.between_sd
