"""An experiment's verdict on its objective and the sentences that say it: adopted when
better at some objective level and worse at none (``decide``), each comparison in a clause
(``said``), what changed from its parent, and why nothing could be compared. One home for
these words: the report, ``verify`` and the simulations read them from here."""

from __future__ import annotations

from collections.abc import Sequence

from reportgen.analysis.decide import NONE_MET, ONE_START, ObjectiveVerdict
from reportgen.analysis.sequential import level_label
from reportgen.analysis.tails import ORDERED, TAIL_MIN, TOO_FEW
from reportgen.results.model import FlagChange
from reportgen.results.verdicts import Comparison
from reportgen.results.verdicts import ci_label as ci_label


def said(c: Comparison) -> str:
    """One comparison in a clause: its level, ratio, interval and verdict, and why not
    decided where that is known."""
    if c.ratio is None and c.limit == NONE_MET:
        return f"{c.point.label}: no request met the SLO on either side"
    if c.ratio is None:
        return f"{c.point.label}: no data"
    ci = "" if c.ci_low is None else f" ({ci_label(c)} {c.ci_low:.2f}-{c.ci_high:.2f})"
    more = ""
    if c.verdict == "inconclusive" and c.reps_needed:
        more = f" (about {c.reps_needed} repetitions a side would decide)"
    elif c.verdict == "inconclusive" and c.limit == "starts":
        more = (
            " (two server starts differ by more than this: more repetitions on one server "
            "cannot decide)"
        )
    elif c.limit == TOO_FEW:
        more = f" (fewer than {TAIL_MIN} requests above it a side: no interval"
        if c.requests_needed:
            more += f"; about {c.requests_needed:,} requests a side would give one"
            if c.runs_needed:
                more += f", or {c.runs_needed} runs of it all beyond the parent's"
        more += ")"
    elif c.limit == ORDERED:
        more = (
            f" (too few requests for an interval; every run's {c.metric.rsplit('_', 1)[-1]} "
            f"lies {'above' if c.ratio and c.ratio > 1 else 'below'} every run's of the parent, "
            f"an order chance gives {c.order_p:.1%} of the time)"
        )
    elif c.verdict == "inconclusive" and c.limit == ONE_START:
        more = " (a side ran on one server start: more starts would decide, not repetitions)"
    if c.bound is not None and c.verdict in ("equivalent", "inconclusive"):
        rests = ""
        if c.eq_low is not None and c.eq_high is not None and c.eq_confidence:
            rests = (
                f", by the two one-sided tests' {level_label(c.eq_confidence)} interval "
                f"{c.eq_low:.3f}-{c.eq_high:.3f}"
            )
        more = f" (no change beyond {c.bound:.1%}{rests}{'; ' + more[2:-1] if more else ''})"
    return f"{c.point.label}: x{c.ratio:.2f}{ci}, {c.verdict}{more}"


def what_changed(parent: str, flag_diff: Sequence[FlagChange], same: bool = False) -> str:
    """The flag changes from the parent in a sentence (values already redacted); ``same``:
    nothing differs at all (the same configuration started again)."""
    if same and not flag_diff:
        return f"The same configuration as {parent}, started again: nothing changed. "
    parts = []
    for f in flag_diff:
        if f.key == "nodes":  # reportgen's own setting (server.nodes), not the engine's flag
            parts.append(f"nodes {f.before} -> {f.after}")
        elif f.kind == "added":
            parts.append(f"--{f.key} {f.after} added")
        elif f.kind == "removed":
            parts.append(f"--{f.key} removed")
        else:
            parts.append(f"--{f.key} {f.before} -> {f.after}")
    what = ", ".join(parts) or "no server flag, only its environment or workload"
    return f"Changed from {parent}: {what}. "


# An experiment that ran at none of the objective's levels its parent ran at: not judged.
NO_COMMON_LEVEL = (
    "{exp} and {parent} ran at no common level of the objective, so it cannot be judged "
    "either way: inconclusive. Run it at one of {parent}'s objective levels to decide."
)


def what_changed_unknown(
    exp_id: str, url: str | None, parent_id: str, parent_url: str | None
) -> str:
    """What changed from the parent where either is a server reportgen did not start (its
    flags unknown to it): said as not known, never as a flag difference."""
    if url and parent_url:
        return (
            f"{exp_id} ({url}) and {parent_id} ({parent_url}) are servers reportgen did not "
            "start: what differs between them is not known to it. "
        )
    if url:
        return (
            f"{exp_id} is a server already running at {url}, not started by reportgen: how "
            f"its configuration differs from {parent_id}'s is not known to it. "
        )
    return (
        f"{parent_id} is a server that was already running at {parent_url}, not started by "
        f"reportgen: how {exp_id}'s configuration differs from it is not known to it. "
    )


def per_level(metric: str, parent_id: str, comparisons: Sequence[Comparison]) -> str:
    """The decision's sentence of its objective comparisons, level by level (what the
    report's tables also show): "output_tok_s vs baseline: C=1: x1.02 (...); C=4: ..."."""
    return f"{metric} vs {parent_id}: {'; '.join(said(c) for c in comparisons)}."


def decide(
    exp_id: str,
    parent_id: str,
    comparisons: Sequence[Comparison],
    metric: str,
    margin: float,
    between_sd: float | None = None,
    legacy: bool = False,
) -> tuple[ObjectiveVerdict, str, str]:
    """Adopt when better at some objective level and worse at none. Returns the verdict and
    its words in two parts: the per-level sentence ("" where nothing was compared) and what
    it concludes; ``between_sd`` is the spread between server starts, named when it stands
    in the way."""
    if not comparisons:
        return "inconclusive", "", NO_COMMON_LEVEL.format(exp=exp_id, parent=parent_id)
    verdict, rest = _conclude(exp_id, parent_id, comparisons, margin, between_sd, legacy)
    return verdict, per_level(metric, parent_id, comparisons), rest


def _conclude(
    exp_id: str,
    parent_id: str,
    comparisons: Sequence[Comparison],
    margin: float,
    between_sd: float | None,
    legacy: bool,
) -> tuple[ObjectiveVerdict, str]:
    verdicts = [c.verdict for c in comparisons]
    if "worse" in verdicts:
        levels = ", ".join(c.point.label for c in comparisons if c.verdict == "worse")
        return (
            "rejected",
            f" Worse at {levels}, so {parent_id} stays the configuration to build on.",
        )
    if "better" in verdicts:
        return (
            "adopted",
            f" Better beyond the {margin:.0%} margin and worse nowhere: "
            f'later experiments based on "best" build on {exp_id}.',
        )
    if all(v == "equivalent" for v in verdicts):
        return (
            "equivalent",
            f" Within the {margin:.0%} margin everywhere: no gain, so "
            f"{parent_id} (the simpler configuration) is kept.",
        )
    if all(c.limit == NONE_MET for c in comparisons):
        return (
            "inconclusive",
            " No request met the SLO on either side, so goodput cannot tell them "
            "apart: loosen workload.slo or lower the load to compare them by it.",
        )
    missing = [c for c in comparisons if c.ci_low is None and c.limit != NONE_MET]
    if legacy:  # the words of decisions taken before the noise model, to verify them
        more = (
            " Only one repetition per level: raise workload.repetitions to at least 2 for an "
            "interval."
            if missing
            else " More repetitions would narrow the interval."
        )
        return "inconclusive", f" The noise is too large to tell.{more}"
    starts = [c for c in comparisons if c.limit == "starts"]
    one_start = [c for c in comparisons if c.limit == ONE_START]
    needed = [c.reps_needed for c in comparisons if c.reps_needed]
    if missing:
        more = (
            " Only one repetition per level, and no noise measured elsewhere in the run: raise "
            "workload.repetitions to at least 2 for an interval."
        )
    elif starts:
        spread = f" (about {between_sd:.1%})" if between_sd else ""
        more = (
            f" Two server starts of one configuration differ by more than this{spread}, and "
            "repetitions on one server cannot average that away: start a fresh server for "
            "each repetition (workload.fresh_server = true) or set campaign.interleave = true."
        )
    elif one_start:
        more = (
            f" {exp_id} or {parent_id} ran on one server start, and one start's own speed "
            "cannot be told apart from the change it carries (starts of one configuration "
            "differ, and one pair of starts measures by how much only roughly): run every "
            "experiment on two starts (campaign.starts = 2, the default) or start a fresh server "
            "for each repetition (workload.fresh_server = true)."
        )
    elif needed:
        more = f" About {max(needed)} repetitions a side would decide."
    else:
        more = " More repetitions would narrow the interval."
    bounds = [c.bound for c in comparisons if c.bound is not None]
    if bounds and len(bounds) == len(comparisons) and max(bounds) < 1:
        more = (
            f" No change larger than {max(bounds):.1%} is shown (two one-sided tests, 90%), "
            f"but that is more than the {margin:.0%} margin." + more
        )
    return "inconclusive", f" The data cannot tell yet.{more}"
