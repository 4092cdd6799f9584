"""What an experiment is compared with: its parent's side (the parent's own runs, or its
interleaved runs of the parent's configuration) and the baseline's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from reportgen.analysis import unjudged
from reportgen.results.levels import Level
from reportgen.results.model import Experiment, Run


@dataclass(frozen=True)
class Side:
    """What an experiment is compared with: its levels, the request table they came from,
    and whether the two ran pair by pair (interleaved)."""

    id: str
    ok: bool
    levels: Sequence[Level]
    table: str
    paired: bool = False
    # the parent grown beside the experiment's adaptive rounds (``Control.grown``): runs of
    # the experiment's control table, added to ``levels``
    grown: Sequence[Level] = ()
    # the parent's id where another experiment stands in for it (``unjudged.stand_in``: its
    # configuration measured again on the experiment's machine); this side is that one's
    stands_for: str | None = None
    # the measurements of the baseline's configuration nearest in time that make this side
    # (``nearest``: the baseline or its re-measurements, ``campaign.anchors``), each with its
    # levels; () where the side is one experiment's own runs
    parts: tuple[tuple[str, Sequence[Level]], ...] = ()

    @property
    def against(self) -> tuple[str, ...]:
        """The experiments whose runs this side is: ``parts``' ids, else its own."""
        return tuple(i for i, _ in self.parts) or (self.id,)


def sides(
    run: Run, entry: Experiment, *, stand_ins: bool = True
) -> tuple[Side | None, Side | None]:
    """The parent's side (its interleaved runs where they succeeded; else, where the parent
    ran on other GPUs, the experiment that measured its configuration again on ``entry``'s
    (``unjudged.stand_in``; not with ``stand_ins`` False, as reportgen decided before); else
    its own, with the runs it grew beside the experiment) and the baseline's; None where there
    is none."""
    base, parent = run.baseline, run.experiment(entry.parent)
    control = entry.control
    parent_side: Side | None = None
    if control is not None and control.paired:
        parent_side = Side(control.of, True, control.levels, entry.control_table, paired=True)
    elif parent is not None and stand_ins and (other := unjudged.stand_in(run, entry)) is not None:
        parent_side = Side(other.id, other.ok, other.levels, other.table, stands_for=parent.id)
    elif parent is not None:
        grown = control.levels if control is not None and control.usable else ()
        parent_side = Side(parent.id, parent.ok, parent.levels, parent.table, grown=grown)
    base_side = None if base is None else Side(base.id, base.ok, base.levels, base.table)
    if base_side and parent_side and parent_side.grown and parent_side.id == base_side.id:
        base_side = parent_side  # the parent is the baseline, grown: the same runs
    if base is not None and run.settings.anchors and entry.role in ("experiment", "confirm"):
        near = nearest(run, entry)
        if base_side is not None and near:
            base_side = _of(base.id, base.ok, near)
        paired = control is not None and control.paired
        if parent_side is not None and near and parent_side.id == base.id and not paired:
            # the parent grown beside adaptive rounds is the baseline measured nearer still
            parent_side = replace(base_side, grown=parent_side.grown) if base_side else None
            base_side = parent_side  # the same runs, as without re-measurements
        elif (
            entry.role == "experiment"
            and parent is not None
            and parent_side is not None
            and parent_side.id == parent.id
        ):
            # a parent other than the baseline (``based_on = "best"``) measured again
            # during the campaign: as measured nearest in time too (not for confirm-best,
            # which checks the best's first run itself)
            mine = nearest(run, entry, parent)
            if not paired and any(e is not parent for e in mine):
                parent_side = replace(_of(parent.id, parent.ok, mine), grown=parent_side.grown)
    return parent_side, base_side


def remeasured(run: Run, of: Experiment | None = None) -> list[Experiment]:
    """``of`` (default: the baseline) and the run's measurements of its configuration again,
    in the run's order: its re-measurements during the campaign (``campaign.anchors``) and,
    for the baseline, the bracket at its end."""
    target = run.baseline if of is None else of
    if target is None:
        return []
    again = ("anchor", "bracket") if target is run.baseline else ("anchor",)
    return [
        e for e in run.experiments if e is target or (e.role in again and e.parent == target.id)
    ]


def nearest(run: Run, entry: Experiment, of: Experiment | None = None) -> list[Experiment]:
    """``of``'s configuration (default: the baseline's) as measured nearest to ``entry`` in
    the run's order (its time on the host): of ``of`` and its re-measurements that ran to
    their end, the nearest one, or the two either side where they are as near (their mean
    is the configuration at ``entry``'s time wherever drift is straight between them)."""
    order = {e.id: i for i, e in enumerate(run.experiments)}
    here = order[entry.id]
    ran = [e for e in remeasured(run, of) if e.ok and e.decision is not None and e.id != entry.id]
    if not ran:
        return []
    gap = min(abs(order[e.id] - here) for e in ran)
    return [e for e in ran if abs(order[e.id] - here) == gap]


def against(run: Run, entry: Experiment) -> tuple[str, ...]:
    """The measurements of the baseline ``entry``'s parent side would be now (``sides``;
    () where it is not the baseline's as measured nearest in time)."""
    parent, _ = sides(run, entry)
    return parent.against if parent is not None and parent.parts else ()


def baseline_against(run: Run, entry: Experiment) -> tuple[str, ...]:
    """The measurements of the baseline ``entry``'s baseline side would be now, where that is
    not its parent side (() where it is, or is the baseline's own runs)."""
    parent, base = sides(run, entry)
    return base.against if base is not None and base.parts and base is not parent else ()


def _of(base_id: str, ok: bool, near: Sequence[Experiment]) -> Side:
    """One side of the baseline's measurements ``near`` (named the baseline's; the first's
    request table)."""
    levels = [lv for e in near for lv in e.levels]
    parts = tuple((e.id, e.levels) for e in near)
    return Side(base_id, ok and all(e.ok for e in near), levels, near[0].table, parts=parts)
