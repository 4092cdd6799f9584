"""What a run's analysis found, beyond each experiment's decision, as typed data saved with
the run (``Run.findings``): the report formats these and computes none of them; ``run
--json`` and ``verify`` read them too. ``analysis.findings`` computes them from the run."""

from __future__ import annotations

from pydantic import Field

from reportgen.results.base import _Model


class AllocationFinding(_Model):
    """How this run's repetitions would best be split over server starts
    (``analysis.allocation``): a start's and a repetition's measured cost (s), the spreads
    within and between starts, the repetitions and starts as it ran, the repetitions a start
    that make a mean surest for its GPU time (None: starts differed no more than repetitions),
    the starts that suggests, and how much narrower an interval would be for the same GPU
    time there (a fraction)."""

    start_s: float
    repetition_s: float
    within_sd: float
    between_sd: float
    repetitions: int
    starts: int
    per_start: float | None = None
    suggested_starts: int
    narrower: float


class MethodFinding(_Model):
    """The method's parameters as this run used them: the power a detectable change is
    stated at, the most repetitions a side the report calls reachable, the degrees of
    freedom before adaptive repetitions may stop for futility, and the share of a closed
    loop's concurrency below which its achieved load is marked low."""

    power: float
    max_reps: int
    futility_dof: int
    achieved_share: float


# The method's parameters now: the analysis decides by them, a run saves them with its
# findings, and a run recorded before findings were saved was decided by these too.
METHOD = MethodFinding(power=0.8, max_reps=200, futility_dof=8, achieved_share=0.9)


class Findings(_Model):
    """A run's findings (``analysis.findings.findings``)."""

    method: MethodFinding = Field(default_factory=lambda: METHOD.model_copy())
    allocation: AllocationFinding | None = None
