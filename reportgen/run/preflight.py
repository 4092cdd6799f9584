"""Before anything starts: is this the host the campaign expects, do its flags parse, are its
ports free? Each refusal says what to do, and nothing is started (no GPU time spent)."""

from __future__ import annotations

from typing import Any

from reportgen import engines
from reportgen.campaign import Campaign
from reportgen.errors import CampaignError, GpuError, Problem, ServerError
from reportgen.observe.environment import Environment
from reportgen.run import external, static
from reportgen.run.plan import plan
from reportgen.run.progress import ProgressSink
from reportgen.run.server import port_is_free


def preflight(
    campaign: Campaign, environment: dict[str, Any], progress: ProgressSink
) -> engines.Flags | None:
    """Refuse to start when the host is not the one the campaign expects, a flag is not the
    engine's, or a port its servers need is taken (another server, perhaps another run): every
    experiment would fail. Returns the engine's flags as read from its help (None when the
    engine has no help to read)."""
    m = campaign.model
    engine = engines.get(m.server.engine)
    problems = Environment.of(environment).gpus.mismatches(m.host.expect.model_dump())
    if problems:
        raise GpuError(
            f"{campaign.path}: host.expect does not match this host: "
            + "; ".join(problems)
            + ". Nothing was started; run on the host the campaign was written for, "
            "or change host.expect"
        )
    gpus = Environment.of(environment).gpus
    metric = m.campaign.objective.metric
    planned = plan(campaign)
    if metric == "output_tok_per_j" and not gpus.available:
        raise CampaignError(
            [
                Problem(
                    campaign.path,
                    "campaign.objective.metric",
                    metric,
                    "tokens per joule need the GPUs' energy, from NVML, which is not available "
                    f"here ({gpus.reason or 'no GPU seen'}); nothing was started: run where "
                    "NVML sees the server's GPUs, or choose another metric",
                )
            ]
        )
    if metric == "output_tok_per_j":
        for r in planned:
            if r.base_url and not external.is_local(r.base_url):
                raise CampaignError(
                    [
                        Problem(
                            campaign.path,
                            f"experiment {r.id!r}: base_url",
                            r.base_url,
                            "tokens per joule need the server's GPUs' energy, and this server "
                            "runs on another host, whose GPUs NVML here cannot see; nothing was "
                            "started: run reportgen on that host, or choose another metric",
                        )
                    ]
                )
        if gpus.replayed:
            progress.warn(
                f"the GPUs are {gpus.replayed} (REPORTGEN_GPU_CAPTURE): tokens per joule, the "
                "objective, follow the capture's power, not this load's"
            )
    found = static.check(campaign)
    if found.errors or found.not_here:
        raise CampaignError(
            found.errors
            + [
                Problem(p.file, p.key, p.value, f"{p.message}; nothing was started")
                for p in found.not_here
            ]
        )
    for p in found.advice:
        progress.warn(str(p))
    started = [r for r in planned if r.base_url is None]  # already running: not ours
    flags = check_flags(campaign, progress) if started else None
    host = m.server.host
    for port in sorted({engine.port(r.args) for r in started}):
        if not port_is_free(host, port):
            raise ServerError(
                f"{campaign.path}: port {port} on {host} is already in use by another "
                "process (another server or reportgen run?); nothing was started. Stop it "
                "or set another port in server.args"
            )
    return flags


def check_flags(campaign: Campaign, progress: ProgressSink) -> engines.Flags | None:
    """Every experiment's flags against the engine's own help, where the engine is
    installed: a misspelt flag or a value outside its choices stops the campaign before
    anything starts, naming the experiment, not hours later when its turn comes."""
    m = campaign.model
    engine = engines.get(m.server.engine)
    if engine.help_flag is None:
        return None
    argv = engine.command(m.server.command) + [engine.help_flag]
    progress.phase(f"checking flags against `{' '.join(argv)}`")
    flags = engines.read_flags(argv)
    where = " ".join(argv)
    problems = [
        Problem(
            campaign.path,
            f"experiment {r.id!r}: args.{key}",
            value,
            f"{why} (checked against `{where}`); nothing was started: fix the flag",
        )
        for r in plan(campaign)
        for key, value, why in flags.problems(r.args, skip=engine.positional)
    ]
    if problems:
        raise CampaignError(problems)
    return flags
