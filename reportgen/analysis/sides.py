"""What an experiment is compared with: its parent's side (the parent's own runs, or its
interleaved runs of the parent's configuration) and the baseline's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
    return parent_side, base_side
