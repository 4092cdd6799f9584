"""The words of a decision, made from what it records: ``explain`` says an experiment's
verdict from its ``Decision`` (verdict, comparisons, noise model, drift check), the
experiment (its flags, role, checks, failure) and its parent. Nothing reads them back:
``verify`` compares a decision's structure, and a decision an earlier reportgen took is said
in today's words."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from reportgen.analysis import adopt, bound, engine_config, graphs, unjudged
from reportgen.analysis import noise as noise_mod
from reportgen.analysis.checks import invalidated
from reportgen.analysis.sides import sides
from reportgen.results.model import Experiment, Point, Run, sorted_points
from reportgen.results.verdicts import Decision, NoiseRecord

BASELINE = "The reference every other experiment is compared with."


@dataclass(frozen=True)
class Said:
    """A decision in words, in the parts the report shows apart: what changed from the
    parent, the objective at each level (the report's tables show both), and the rest."""

    change: str = ""
    levels: str = ""
    conclusion: str = ""
    flags: bool = False  # ``change`` lists the flags that changed

    @property
    def short(self) -> str:
        """What the report's tables beside it do not show (the flags that changed, the ratio
        and interval at each level); "" where there is no per-level part to leave out."""
        if not self.levels:
            return ""
        return " ".join(
            p.strip() for p in ("" if self.flags else self.change, self.conclusion) if p.strip()
        )

    @property
    def text(self) -> str:
        return self.change + self.levels + self.conclusion


def explain(run: Run, entry: Experiment, decision: Decision) -> Said:
    """``decision`` on ``entry`` (an experiment of ``run``) in words."""
    if decision.verdict == "baseline":
        return Said(conclusion=BASELINE)
    broken = invalidated(entry.checks, evidence=True)
    if entry.ok and decision.verdict == "failed" and broken:
        return Said(
            conclusion=f"{entry.id}'s numbers cannot be trusted, whatever they say: failed "
            + "; ".join(broken)
            + ". See the assumptions checked."
        )
    if not entry.ok:
        return Said(conclusion=_failed(entry, decision))
    parent_side, _ = sides(run, entry, stand_ins=decision.stand_in is not None)
    # what the verdict compared with: the parent, or what stood in for it on this machine
    parent_id = decision.stand_in or entry.parent or (parent_side.id if parent_side else "")
    if parent_side is None or not parent_side.ok:
        return Said(
            conclusion=f"its parent {parent_id} failed, so there is nothing to compare with."
        )
    legacy = decision.method not in noise_mod.METHODS  # decided by each comparison's runs
    if decision.unjudged:
        return _unjudged(run, entry, decision, parent_id, legacy)
    verdict, levels, rest = adopt.decide(
        entry.id,
        parent_id,
        decision.vs_parent,
        run.metric,
        run.margin,
        between_sd=decision.noise.between_sd if decision.noise else None,
        legacy=legacy,
    )
    change, flags = _change(run, entry, entry.parent or parent_id, legacy)
    also = engine_config.said(entry.also_changed)
    base = run.baseline.id if run.baseline else None
    rest += meaning(entry, verdict, base) + (f" {also}" if also else "")
    if decision.stand_in and entry.parent:
        rest += (
            f" {entry.parent} was measured on other GPUs than {entry.id}, so its "
            f"configuration measured again on {entry.id}'s ({decision.stand_in}) stands in "
            "for it: one machine on both sides."
        )
    near = [i for i in decision.measured_against or [] if i != parent_id]
    if near:
        rest += (
            f" Compared with {parent_id} as measured nearest in time: "
            + " and ".join(near)
            + f" ({parent_id}'s configuration started again), so the host's drift since "
            f"{parent_id}'s first measurement is not in the ratio."
        )
    if decision.paired:
        rest += (
            f" Compared pair by pair with {parent_id}'s configuration run "
            "alternately with it (interleaved)."
        )
    elif entry.control is not None and entry.control.error:
        rest += (
            f" The interleaved runs of {parent_id} failed ({entry.control.error}), "
            "so its earlier runs were used."
        )
    rest += _withdrawn(entry, decision, verdict)
    rest += _set_aside(run, entry, decision)
    rest += _gave_way(run, entry, decision)
    rest += _stalls(entry, decision)
    compared = sorted_points({Point(c.concurrency, c.rate) for c in decision.vs_parent})
    parent_exp = run.experiment(parent_side.id)
    rest += bound.host_specific_said(entry, parent_exp, compared)
    rest += graphs.uncovered_said(entry, parent_exp, run.engine.name, compared)
    return Said(change, levels, rest, flags)


def _stalls(entry: Experiment, decision: Decision) -> str:
    """Level runs of this experiment or of what it was compared with, left out as held by a
    stall (``noise.stalls``), in a sentence ("" where none)."""
    noise = decision.noise
    near = {entry.id, entry.parent or "", *(decision.measured_against or [])}
    held = [s for s in (noise.stalls or []) if s.split(" ", 1)[0] in near] if noise else []
    if not held:
        return ""
    by_spread = (
        f"a run worse than its configuration's others at that level by more than "
        f"{noise_mod.STALL_SDS:g} times how much such runs differ"
    )
    if any(": a request in it stalled" in s for s in held):  # (``noise.request_stalls``)
        by_spread = (
            "a run one of whose requests was held up far beyond the run's others, as its "
            f"requests show, or {by_spread}"
        )
    return f" Left out as held by a stall ({by_spread}): {'; '.join(held)}."


def _said_before(run: Run, entry: Experiment, holds: Callable[[NoiseRecord], bool]) -> bool:
    """Whether a decision before ``entry``'s in the run recorded noise that ``holds``: a
    sentence said once a run is said there, not again."""
    for e in run.experiments:
        if e.id == entry.id:
            return False
        if e.decision and e.decision.noise and holds(e.decision.noise):
            return True
    return False


def _set_aside(run: Run, entry: Experiment, decision: Decision) -> str:
    """The stated spread between starts set aside (``noise._stated``), in a sentence that
    says what to do; said once a run, at the first decision it applies to ("" elsewhere)."""
    noise = decision.noise
    stated = noise.start_spread_set_aside if noise is not None else None
    if noise is None or stated is None or noise.between_sd is None:
        return ""
    if _said_before(run, entry, lambda n: bool(n.start_spread_set_aside)):
        return ""
    return (
        f" Server starts of one configuration differed by about {math.expm1(noise.between_sd):.1%}"
        f" here, far more than campaign.start_spread ({stated:.1%}) says, so the run's own "
        f"spread is taken instead, weighed as the statement was ({noise.between_dof} degrees "
        "of freedom in all): set start_spread near what this host shows, or measure the "
        "baseline again more often (campaign.anchors)."
    )


def _gave_way(run: Run, entry: Experiment, decision: Decision) -> str:
    """The stated spread between starts giving way to what the run's starts allow
    (``noise._stated``'s ``below``), in a sentence; said once a run, at the first decision it
    applies to ("" elsewhere)."""
    noise = decision.noise
    if noise is None or not noise.gave_way_at or noise.gives_way is None:
        return ""
    if _said_before(run, entry, lambda n: bool(n.gave_way_at)):
        return ""
    prior = run.start_prior
    source = (
        "earlier runs measured (reportgen run --history)"
        if prior is not None and prior.levels
        else f"campaign.start_spread ({run.settings.start_spread:.1%}) says"
    )
    at = ", ".join(noise.gave_way_at)
    return (
        f" Server starts of one configuration differed far less than {source} at {at}, "
        "so the spread between starts taken there is the "
        f"largest the run's starts allow (their {1 - noise.gives_way:.0%} upper bound), "
        "weighed as the statement was."
    )


def _change(run: Run, entry: Experiment, parent_id: str, legacy: bool) -> tuple[str, bool]:
    """What changed from the parent in a sentence, and whether it lists flags."""
    parent = run.experiment(parent_id)
    parent_url = parent.base_url if parent is not None else None
    if entry.base_url or parent_url:
        return adopt.what_changed_unknown(entry.id, entry.base_url, parent_id, parent_url), False
    same = not legacy and noise_mod.same_config(parent, entry)
    return adopt.what_changed(parent_id, entry.flag_diff, same), bool(entry.flag_diff)


def _unjudged(
    run: Run, entry: Experiment, decision: Decision, parent_id: str, legacy: bool
) -> Said:
    """An experiment not judged (``analysis.unjudged``): why, and its ratios to the parent
    for the record, without the repetitions that would decide them (none would)."""
    change, flags = _change(run, entry, parent_id, legacy)
    said = [unjudged.reason(u, parent_id) for u in decision.unjudged or []]
    prefix = "Not judged: "  # said once, before the first reason
    why = " ".join(
        s if i == 0 or not s.startswith(prefix) else "And " + s[len(prefix) :]
        for i, s in enumerate(said)
    )
    ratios = ", ".join(
        f"{c.point.label} x{c.ratio:.2f}" for c in decision.vs_parent if c.ratio is not None
    )
    record = f" Its {run.metric} against {parent_id}, for the record: {ratios}." if ratios else ""
    return Said(change, "", why + record, flags)


def _failed(entry: Experiment, decision: Decision) -> str:
    why = f"{entry.id} failed: {entry.reason}"
    if not decision.before_failure:
        return why
    why = why.rstrip() + ("" if why.rstrip().endswith(".") else ".")
    said = ", ".join(c.label for c in decision.before_failure)
    return (
        f"{why} The levels it finished before that ({said}) are compared, but "
        "decide nothing: the configuration did not hold up under the campaign's load."
    )


def _withdrawn(entry: Experiment, decision: Decision, verdict: str) -> str:
    """The drift check's withdrawal (``drift.drift_check``) in a sentence, "" where none:
    ``verdict`` is the one taken before it."""
    drift = decision.drift
    if drift is None or not drift.withdrawn:
        return ""
    said = "; ".join(
        f"{x.level}: x{x.ratio:.2f} ({x.ci_low:.2f}-{x.ci_high:.2f})" for x in drift.levels
    )
    return (
        f" {verdict.capitalize()} when decided, then withdrawn: {drift.bracket} measured "
        f"the baseline's configuration again at the end, and with the drift it saw taken out "
        f"({drift.share:.0%} of it fell between {entry.parent} and {entry.id}) the "
        f"{'gain' if verdict == 'adopted' else 'loss'} no longer shows ({said})."
    )


def meaning(entry: Experiment, verdict: str, baseline: str | None = None) -> str:
    """What a leave-one-out, confirmation or re-measurement verdict says, in a sentence (""
    otherwise); ``baseline``: the run's baseline's id (a re-measurement of another parent
    names it)."""
    if entry.role == "confirm":
        return {
            "equivalent": " The best configuration's first run holds up when measured again.",
            "inconclusive": " Measured again, it cannot be told from its first run.",
        }.get(
            verdict,
            " Measured again, it differs from its first run: the first run's numbers were "
            "lucky or the host drifted, so read its gain with care.",
        )
    if entry.role == "anchor":
        mine = entry.parent and baseline and entry.parent != baseline
        first = entry.parent if mine else "the baseline"
        return {
            "equivalent": f" The host had not drifted measurably since {first}.",
            "inconclusive": f" Whether the host drifted since {first} cannot be told.",
        }.get(
            verdict,
            f" The same configuration measured differently: the host drifted since {first}; "
            "the experiments beside it are compared with it, not with the first.",
        )
    if entry.role == "bracket":
        return {
            "equivalent": " The host did not drift measurably over the campaign.",
            "inconclusive": " Whether the host drifted over the campaign cannot be told.",
        }.get(
            verdict,
            " The same configuration measured differently at the end: the host or the engine "
            "drifted over the campaign, so read the experiments' differences with care.",
        )
    if entry.role != "leave-one-out" or not entry.leaves_out:
        return ""
    x = entry.leaves_out
    return {
        "rejected": f" Worse without it: {x} still pays in the final configuration.",
        "equivalent": f" No difference without it: {x} no longer pays once the others are in "
        "(the configuration without it is simpler).",
        "adopted": f" Better without it: {x} now hurts the final configuration.",
        "inconclusive": f" Whether {x} still pays cannot be told from these runs.",
    }.get(verdict, "")
