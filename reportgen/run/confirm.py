"""The end of a campaign with ``campaign.confirm``: is the best configuration's gain real, and
does every change adopted on its way still pay once the others are in? (What each verdict
then means: ``analysis.verdict.meaning``.)

Experiments interact: a change adopted early may stop helping once a later one is in. So after
the campaign's own experiments come:

- ``confirm-best``: the best configuration run again (role "confirm"), compared with its first
  run (an A/A comparison: a difference means the first run was lucky or the host drifted) and
  with the baseline;
- ``without-<id>`` for each change adopted on the best configuration's way from the baseline
  (role "leave-one-out"): the best configuration with that change's flags and environment set
  back to what they were before it, compared with ``confirm-best``, run next to it in time.
  Worse without it: the change still pays. Equivalent: it no longer does (the simpler
  configuration would do). Better without it: it now hurts.

A change whose flags a later adopted change set again (so removing it would undo the later
one) has no leave-one-out run, and the report says so.
"""

from __future__ import annotations

import dataclasses

from reportgen.campaign import Resolved
from reportgen.campaign.resolve import FlagChange
from reportgen.results.model import Experiment, Run

CONFIRM_ID = "confirm-best"
BRACKET_ID = "baseline-end"


def bracket(run: Run, resolved: dict[str, Resolved]) -> tuple[Experiment, Resolved] | None:
    """The baseline's configuration measured again after every experiment (role
    "bracket"), compared with the baseline's first measurement: an A/A comparison over the
    campaign's length, whose ratio is the host's drift, and one more start of the baseline's
    configuration for the noise model. None where the baseline did not run."""
    base = run.baseline
    if base is None or not base.ok or base.id not in resolved:
        return None
    base_r = resolved[base.id]
    if base_r.base_url is not None:
        return None  # a server reportgen did not start: nothing to start again
    r = again(
        base_r,
        BRACKET_ID,
        f"The baseline ({base.id}) measured again after every experiment: how far the host "
        "drifted over the campaign, and one more start of its configuration.",
        f"Equivalent to {base.id}: a difference is drift of the host or the engine.",
    )
    return _entry(r, "bracket", None), r


def anchor_id(of: str, k: int) -> str:
    """The ``k``-th re-measurement during the campaign, of the configuration ``of``."""
    return f"{of}-again-{k}"


def anchor_turn(i: int, every: int, last: int) -> str | None:
    """Whether the ``i``-th experiment (0 the baseline, ``last`` the campaign's last) is
    followed by a re-measurement of its parent (``campaign.anchors`` = ``every``): "due"
    after every N-th but the last; "end" after the last, where its parent is not the
    baseline (the bracket measures that; the caller checks the parent); None otherwise."""
    if not every or not i:
        return None
    if not i % every and i < last:
        return "due"
    return "end" if i == last else None


def anchor(
    run: Run, resolved: dict[str, Resolved], k: int, of: Experiment | None = None
) -> tuple[Experiment, Resolved] | None:
    """``of``'s configuration (default: the baseline's; else the parent, such as the best,
    that experiments were built on) measured again during the campaign (role "anchor", one
    server start; ``campaign.anchors``): the experiments compared with it beside it in time
    are compared with this measurement rather than one further away (``analysis.sides``),
    and it is one more start of its configuration for the noise model. None where it did not
    run or reportgen did not start its server."""
    target = run.baseline if of is None else of
    if target is None or not target.ok or target.id not in resolved:
        return None
    target_r = resolved[target.id]
    if target_r.base_url is not None:
        return None
    what = "The baseline" if target is run.baseline else "The configuration"
    r = again(
        target_r,
        anchor_id(target.id, k),
        f"{what} ({target.id}) measured again during the campaign: the experiments "
        "compared with it beside it in time are compared with this measurement, so drift "
        "of the host bends no ratio.",
        f"Equivalent to {target.id}: a difference is drift of the host or the engine.",
    )
    return _entry(r, "anchor", None), r


def again(of: Resolved, new_id: str, why: str, expect: str) -> Resolved:
    """``of``'s configuration as a new experiment compared with it (no flag changed)."""
    return dataclasses.replace(
        of,
        id=new_id,
        why=why,
        expect=expect,
        based_on=of.id,
        parent=of.id,
        flag_diff=[],
        expects=None,
    )


def adopted_path(run: Run) -> list[Experiment]:
    """The adopted experiments on the best configuration's way from the baseline, in order."""
    chain: list[Experiment] = []
    current = run.experiment(run.best)
    while current is not None and current.parent is not None:
        if current.decision is not None and current.decision.verdict == "adopted":
            chain.append(current)
        current = run.experiment(current.parent)
    return chain[::-1]


def plan(
    run: Run, resolved: dict[str, Resolved], leave_one_out: bool = True
) -> list[tuple[Experiment, Resolved]]:
    """The confirmation runs to make (entry, configuration), after the campaign's own; none
    when the best configuration is the baseline; without ``leave_one_out``, confirm-best
    alone (``campaign.confirm = "best"``)."""
    best = run.experiment(run.best)
    if best is None or run.baseline is None or best.id == run.baseline.id:
        return []
    best_r = resolved[best.id]
    out: list[tuple[Experiment, Resolved]] = []
    confirm_r = again(
        best_r,
        CONFIRM_ID,
        f"The best configuration ({best.id}) run again at the end: does its gain hold when "
        "measured again, next to the leave-one-out runs?",
        f"Equivalent to {best.id}'s first run.",
    )
    out.append((_entry(confirm_r, "confirm", None), confirm_r))
    for step in adopted_path(run) if leave_one_out else []:
        before = resolved.get(step.parent or "")
        mine = resolved.get(step.id)
        if before is None or mine is None:
            continue
        args, env = dict(best_r.args), dict(best_r.env)
        changed = False
        for key in set(mine.args) | set(before.args):
            if mine.args.get(key) == before.args.get(key):
                continue
            if best_r.args.get(key) != mine.args.get(key):
                continue  # a later adopted change set it again
            changed = True
            if key in before.args:
                args[key] = before.args[key]
            else:
                args.pop(key, None)
        for key in set(mine.env) | set(before.env):
            if mine.env.get(key) != before.env.get(key) and best_r.env.get(key) == mine.env.get(
                key
            ):
                changed = True
                if key in before.env:
                    env[key] = before.env[key]
                else:
                    env.pop(key, None)
        nodes = best_r.nodes
        if mine.nodes != before.nodes and best_r.nodes == mine.nodes:
            changed, nodes = True, before.nodes  # server.nodes: its node count undone too
        if not changed:
            continue
        diff = [
            FlagChange(k, best_r.args.get(k), args.get(k))
            for k in sorted(set(best_r.args) | set(args))
            if best_r.args.get(k) != args.get(k)
        ]
        if nodes != best_r.nodes:
            diff.append(FlagChange("nodes", best_r.nodes, nodes))
        out_r = dataclasses.replace(
            best_r,
            id=f"without-{step.id}",
            why=f"The best configuration without {step.id}'s change: does {step.id} still pay "
            "once everything else is in?",
            expect=f"Worse than {CONFIRM_ID}, if {step.id} still pays.",
            based_on=CONFIRM_ID,
            parent=CONFIRM_ID,
            args=args,
            env=env,
            nodes=nodes,
            flag_diff=diff,
        )
        out.append((_entry(out_r, "leave-one-out", step.id), out_r))
    return out


def _entry(r: Resolved, role: str, leaves_out: str | None) -> Experiment:
    return Experiment(
        id=r.id,
        why=r.why,
        expect=r.expect,
        based_on=r.based_on,
        role=role,  # type: ignore[arg-type]
        leaves_out=leaves_out,
    )
