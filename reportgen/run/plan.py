"""What a campaign will run, before anything runs: each experiment's configuration, its exact
server command, what the results record of it, and its server launches.

``reportgen plan`` prints this; the runner follows it.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import Collection
from typing import Literal

from reportgen import engines
from reportgen.campaign import Campaign, Resolved, parent_id, repetitions_range, resolve
from reportgen.redact import known_secrets, redact_argv, redact_env, redact_flag
from reportgen.results.model import Experiment, FlagChange
from reportgen.results.rundir import RunDir
from reportgen.run.external import API_KEY_ENV

# whose configuration a server session runs, and what for ("prime": the baseline's, warmed
# up before it and measured not at all)
Role = Literal["experiment", "control", "prime"]
Launch = tuple[Resolved, list[int], Role]  # (configuration, repetitions, role)


def new_run_id(campaign: Campaign, now: dt.datetime | None = None) -> str:
    """Sortable: UTC time, then a short hash of the campaign file."""
    now = now or dt.datetime.now(dt.UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{campaign.sha256[:6]}"


def python_there(campaign: Campaign) -> str:
    """The Python that runs the servers' default commands: this one for a local run, the far
    side's (``host.ssh.python``, ``host.slurm.python`` or, on Slurm, this path) elsewhere."""
    host = campaign.model.host
    far = host.ssh if host.executor == "ssh" else host.slurm if host.executor == "slurm" else None
    return (far.python if far is not None else "") or sys.executable


def command_line(campaign: Campaign, r: Resolved, python: str | None = None) -> list[str]:
    """What starts ``r``'s server: the engine's command and flags, across ``r.nodes`` nodes
    through ``run.nodes`` (which adds each rank's flags). A default command runs under
    ``python`` (default: ``python_there``; the process that starts the server passes its own,
    ``sys.executable``, there); a command the campaign gives runs as given."""
    engine = engines.get(campaign.model.server.engine)
    python = python or python_there(campaign)
    argv = engine.command(campaign.model.server.command)
    if not campaign.model.server.command:
        argv = [python if a == sys.executable else a for a in argv]
    argv += engine.format_args(r.args)
    if r.nodes > 1:
        launcher = [python, "-m", "reportgen.run.nodes", "--engine", engine.name]
        return [*launcher, "--nodes", str(r.nodes), "--", *argv]
    return argv


def plan(campaign: Campaign) -> list[Resolved]:
    """Resolve every experiment without running anything.

    ``based_on = "best"`` is only known while running; the plan assumes every earlier
    experiment is adopted, i.e. "best" is the experiment just before.
    """
    out: list[Resolved] = []
    by_id: dict[str, Resolved] = {}
    exps = campaign.experiments
    for i, exp in enumerate(exps):
        pid = parent_id(exp, i, exps[0].id, exps[i - 1].id if i else "")
        r = resolve(campaign.model, exp, by_id[pid] if pid else None)
        by_id[exp.id] = r
        out.append(r)
    return out


def describe(campaign: Campaign, r: Resolved, entry: Experiment) -> None:
    """Record in ``entry`` what its configuration is, secrets redacted."""
    entry.parent = r.parent
    entry.args = {k: redact_flag(k, v) for k, v in r.args.items()}
    entry.env = redact_env(r.env)
    entry.command = [] if r.base_url else redact_argv(command_line(campaign, r))
    entry.base_url = r.base_url
    entry.flag_diff = [
        FlagChange(
            key=c.key,
            kind=c.kind,
            before=redact_flag(c.key, c.before),
            after=redact_flag(c.key, c.after),
        )
        for c in r.flag_diff
    ]
    entry.workload = r.workload.model_dump(mode="json")
    entry.log_file = RunDir.log_name(r.id)


def server_sessions(
    r: Resolved,
    parent: Resolved | None,
    *,
    interleave: bool,
    starts: int = 1,
    prime: bool = False,
) -> list[Launch]:
    """``sessions``, led for the baseline (no parent) by a priming start of its own
    configuration where ``prime`` (``CampaignModel.primes``): every level warmed up until
    steady, nothing measured, so the engine's compile caches are full before the baseline is
    measured."""
    out = sessions(r, parent, interleave=interleave, starts=starts)
    if prime and parent is None and r.base_url is None:
        return [(r, [], "prime"), *out]
    return out


def sessions(
    r: Resolved, parent: Resolved | None, *, interleave: bool, starts: int = 1
) -> list[Launch]:
    """Server launches for one experiment: (configuration, repetitions, role). One for all
    repetitions (the first ``min`` of adaptive ones); one per repetition with
    ``workload.fresh_server``; with ``interleave``, the parent's configuration ("control")
    and the experiment's alternate, parent first then child first (P C C P P C ...), so a
    linear drift of the host weighs on both alike. Otherwise the repetitions are split over
    ``starts`` launches (the baseline's, with no parent, over at least two), in order, at most
    one per repetition."""
    reps = list(range(repetitions_range(r.workload.repetitions)[0]))
    if r.one_session:  # however many starts (or interleaved runs) were asked for
        return [(r, reps, "experiment")]
    if interleave and parent is not None:
        out: list[Launch] = []
        for k in reps:
            out += interleaved(r, parent, k)
        return out
    if r.workload.fresh_server:
        return [(r, [k], "experiment") for k in reps]
    starts = min(max(starts, 2) if parent is None else starts, len(reps))
    if starts > 1:
        size, extra = divmod(len(reps), starts)
        out, first = [], 0
        for i in range(starts):
            last = first + size + (1 if i < extra else 0)
            out.append((r, reps[first:last], "experiment"))
            first = last
        return out
    return [(r, reps, "experiment")]


def interleaved(r: Resolved, parent: Resolved, k: int) -> list[Launch]:
    """Repetition ``k`` interleaved: the parent's run and the experiment's, parent first on
    even repetitions and second on odd ones."""
    pair: list[Launch] = [(parent, [k], "control"), (r, [k], "experiment")]
    return pair if k % 2 == 0 else pair[::-1]


def planned_requests(campaign: Campaign, r: Resolved) -> int:
    """Measured requests an experiment will send (0 when levels run for a duration);
    twice that when its parent's configuration is interleaved with it. Adaptive repetitions
    count their ``min``: what more they run depends on the verdicts."""
    wl = r.workload
    sides = 2 if campaign.model.campaign.interleave and r.parent else 1
    reps = repetitions_range(wl.repetitions)[0]
    return (wl.requests_per_level or 0) * len(wl.points) * reps * sides


def total_requests(campaign: Campaign, kept: Collection[str] = ()) -> int:
    """The measured requests the campaign's experiments will send, but those in ``kept``
    (finished before a resumption); 0, no total to show, where levels run for a duration or
    a search decides its levels while running (its probes are not known before)."""
    steps = [r for r in plan(campaign) if r.id not in kept]
    if any(r.workload.requests_per_level is None or r.workload.find_max for r in steps):
        return 0
    return sum(planned_requests(campaign, r) for r in steps)


def campaign_secrets(campaign: Campaign) -> list[str]:
    """Values of the campaign's secret-named flags and variables (hidden in all it writes)."""
    m = campaign.model
    found = known_secrets(
        m.server.args, m.server.env, *(t for e in campaign.experiments for t in (e.args, e.env))
    )
    key = os.environ.get(API_KEY_ENV, "")
    if len(key) >= 8 and (m.server.base_url or any(e.base_url for e in campaign.experiments)):
        found = sorted({*found, key}, key=len, reverse=True)  # sent to servers not started here
    return found


def pending(campaign: Campaign) -> list[Experiment]:
    """Every experiment's entry in the results before it runs."""
    return [
        Experiment(id=e.id, why=e.why, expect=e.expect_text, expects=e.expects, based_on=e.based_on)
        for e in campaign.experiments
    ]
