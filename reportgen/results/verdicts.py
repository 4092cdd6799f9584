"""What was concluded: each assumption checked (``Check``), each comparison with its parent
or the baseline (``Comparison``), and the experiment's verdict (``Decision``)."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from reportgen.campaign.levels import Point, PointField, Rate
from reportgen.results.base import _AsGiven, _Model

CheckStatus = Literal["pass", "warn", "fail", "skip"]


class Check(_Model):
    """One assumption checked about an experiment's measurement."""

    id: str
    title: str
    status: CheckStatus
    evidence: str
    hint: str = ""
    invalidates: bool | None = None  # a campaign's own check: does its failure void the verdict


Verdict = Literal["better", "worse", "equivalent", "inconclusive"]


# saved only where set ("anchored" decisions): a run decided before keeps its form
TAIL_FIELDS = ("requests_needed", "runs_needed", "order_p", "eq_low", "eq_high", "eq_confidence")


class Comparison(_Model):
    """Child / parent of one metric at one level, with its interval and verdict
    (``analysis.decide``)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    metric: str
    concurrency: int
    rate: Rate = None
    ratio: float | None  # child / parent of the means (geometric)
    ci_low: float | None
    ci_high: float | None
    n_parent: int
    n_child: int
    verdict: Verdict
    mde: float | None = None  # smallest detectable ratio (> 1) at 80% power
    reps_needed: int | None = None  # inconclusive: repetitions per side that would decide
    paired: bool = False  # interleaved repetitions compared pair by pair
    # how (``analysis.decide``): "levels" or "pooled" (the run's noise model, by that method of
    # ``analysis.noise``), "welch" (each side's own spread: how runs were decided before the
    # noise model), "bootstrap" (p99 from the requests); None: "welch"
    method: str | None = None
    dof: float | None = None  # the interval's degrees of freedom
    confidence: float | None = (
        None  # the interval's level (below 0.95 never; above when sequential)
    )
    # "starts": more repetitions on one server cannot decide; "one start": a side ran on one
    # server start, and only more starts could
    limit: str | None = None
    # the largest relative change (either way) that the two one-sided tests' 90% interval
    # leaves possible: equivalent when within the margin ("levels" decisions; None before)
    bound: float | None = None
    # a tail with too few requests above its percentile for an interval ("anchored"
    # decisions): the requests a side that would give one, the child's runs whose order could
    # decide, and where every run of one side lay beyond the other's, the chance of that order
    requests_needed: int | None = None
    runs_needed: int | None = None
    order_p: float | None = None
    # the two one-sided tests' interval (at ``eq_confidence``, 90% for 5%) that "equivalent"
    # and ``bound`` rest on ("anchored" decisions)
    eq_low: float | None = None
    eq_high: float | None = None
    eq_confidence: float | None = None

    @model_serializer(mode="wrap")
    def _tail_fields(self, handler: SerializerFunctionWrapHandler) -> Any:
        """The fields of "anchored" decisions saved only where set: a run decided before them
        keeps its form."""
        out = handler(self)
        if isinstance(out, dict):
            for name in TAIL_FIELDS:
                if out.get(name) is None:
                    out.pop(name, None)
        return out

    @property
    def point(self) -> Point:
        return Point(self.concurrency, self.rate)


# ``Level.aborted`` of a level that ran to its end while its server failed (found after it)
FAILED_DURING = "ran to its end, but the server failed during it"


class NoiseRecord(_AsGiven):
    """What a decision records of the noise model it was taken with (``analysis.noise``):
    the spread of repetitions on one server and of server starts beyond it, as sds of log
    values, with what each was estimated from."""

    within_sd: float | None = None  # None: nothing was repeated on one server
    within_dof: float = 0.0  # the weight the pooled spread gets beside a comparison's own
    within_cells: int = 0
    within_total_dof: float | None = None  # None: recorded before it was
    between_sd: float | None = None  # None: no configuration was started twice
    between_dof: int = 0
    between_cells: int | None = None
    # per level, where the spread between starts is measured per level ("levels"); given
    # only then
    between_sd_by_level: dict[str, float | None] | None = None
    # "anchored": campaign.start_spread where it was set aside, the run's own starts
    # differing far more than it says; given only then
    start_spread_set_aside: float | None = None
    # with it: the statement's degrees of freedom kept beside the run's own (since 2026-12-07's
    # evening); None with a spread set aside: the run's own alone, as decided before
    set_aside_weight: int | None = None
    # "anchored": the lower tail of chi-square below which the stated spread gave way to the
    # run's own starts' upper bound (``noise.BELOW``; since 2026-12-07's night); None: it never did
    gives_way: float | None = None
    gave_way_at: list[str] | None = None  # the levels where it did; given only where it did
    # "anchored": level runs left out as held by a stall, each "EXPERIMENT C=.. repetition
    # K: X% worse than its configuration's other runs there"; given only where there were
    stalls: list[str] | None = None


class DriftLevel(_Model):
    """One level of an adoption or rejection taken again against the bracket's drift: the
    ratio to its parent with the drift's share taken out, and its interval."""

    level: str
    ratio: float
    ci_low: float
    ci_high: float


class Drift(_Model):
    """An adoption or rejection taken again after the campaign against the drift its bracket
    measured (``analysis.drift.drift_check``)."""

    bracket: str  # the experiment that measured the baseline's configuration again
    share: float  # the part of the drift that fell between the parent and the experiment
    levels: list[DriftLevel]
    withdrawn: bool  # the gain (or loss) no longer shows at any level: made inconclusive


class Unjudged(_Model):
    """Why an experiment's numbers are not a verdict on it (``analysis.unjudged``): it runs
    another load than its parent ("load", with what changed: "output_tokens 256 -> 64"), its
    expectation says it fails and it ran ("expected failure"), or it changes speculative
    decoding or sampling over degenerate answers ("degenerate outputs": the flags, and what
    the answers were), it ran on other GPUs than its parent ("machine": their UUIDs), or on
    another build of the same model folder ("model build": the files that changed)."""

    kind: Literal["load", "expected failure", "degenerate outputs", "machine", "model build"]
    changes: list[str] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)  # "degenerate outputs": whose, and how


DecisionVerdict = Literal["adopted", "rejected", "equivalent", "inconclusive", "failed", "baseline"]


class Decision(_Model):
    """What the campaign concluded about one experiment against its parent."""

    verdict: DecisionVerdict
    explanation: str
    vs_parent: list[Comparison] = Field(default_factory=list)
    vs_baseline: list[Comparison] = Field(default_factory=list)
    paired: bool | None = None  # compared with interleaved runs of the parent
    # one of ``analysis.noise.METHODS`` ("levels", "pooled"); None: "welch" (decided before
    # the noise model)
    method: str | None = None
    noise: NoiseRecord | None = None  # the objective's noise model then
    # the false-alarm rate it was decided at (``campaign.alpha``, over the campaign's
    # experiments with ``alpha_scope = "campaign"``); None: 5% (decided before it was recorded)
    alpha: float | None = None
    # an adoption taken again after the campaign against the drift its bracket measured;
    # None: not checked
    drift: Drift | None = None
    # Every headline metric, by side ("vs_parent", "vs_baseline"): not only the objective.
    metrics: dict[str, list[Comparison]] | None = None
    # A failed experiment: the levels it finished before it failed, compared as above (the
    # verdict stays "failed"); None: not compared (as reportgen did before).
    before_failure: list[PointField] | None = None
    # Why it is not judged (its verdict then "inconclusive"); []: judged; None: decided before
    # reportgen told (a verdict of an older run is verified as it was taken), or not compared
    # (the baseline, a failure); left out of results.json then, as older runs have it
    unjudged: list[Unjudged] | None = None
    # The experiment whose runs stood in for the parent's (``analysis.unjudged.stand_in``):
    # the parent's configuration measured again on this experiment's GPUs, the parent's own
    # runs being on others; None: the parent's own (or interleaved) runs. Left out of
    # results.json where None, as older runs have it.
    stand_in: str | None = None
    # The measurements of the baseline's configuration its parent side was (``campaign.
    # anchors``: the one nearest in time, or the two as near), where the run measured it
    # again during the campaign; None: the parent's own runs. Left out of results.json where
    # None, as older runs have it.
    measured_against: list[str] | None = None
    # The same for its baseline side where that is not its parent side (a parent other than
    # the baseline, ``based_on = "best"``): the baseline's measurements it was compared with.
    # Left out of results.json where None, as older runs have it.
    baseline_against: list[str] | None = None

    @property
    def equivalent_bound(self) -> float | None:
        """Where the verdict is "equivalent": the largest change its objective levels leave
        possible (the bound it rests on); None for any other verdict, or none recorded."""
        bounds = [c.bound for c in self.vs_parent if c.bound is not None]
        return max(bounds) if self.verdict == "equivalent" and bounds else None

    @model_serializer(mode="wrap")
    def _unjudged_where_told(self, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(self)
        if isinstance(out, dict):
            for key in ("unjudged", "stand_in", "measured_against", "baseline_against"):
                if key in out and out[key] is None:
                    del out[key]
        return out


class Redecision(_AsGiven):
    """``render --redecide`` (or ``--recheck``): when a run's decisions were taken again, by
    which reportgen and method, and what they were before. Saved with the keys it was given
    only (older records lack some), so that a run read and saved again keeps its form."""

    at: str
    reportgen_version: str = "?"
    method: str | None = None
    method_before: str | None = None  # absent: "welch" (decided before the noise model)
    verdicts_before: dict[str, str] = Field(default_factory=dict)
    best_before: str | None = None
    # ``--recheck``: each experiment's assumption checks' statuses before they were taken again
    checks_before: dict[str, dict[str, str]] | None = None


def level_label(confidence: float) -> str:
    """ "95%", or "98.6%" for a per-look level."""
    pct = confidence * 100
    return f"{pct:.0f}%" if math.isclose(pct, round(pct), abs_tol=0.05) else f"{pct:.1f}%"


def ci_label(c: Comparison) -> str:
    """ "95% CI", or the per-look level of adaptive repetitions ("98.5% CI")."""
    return f"{level_label(c.confidence or 0.95)} CI"
