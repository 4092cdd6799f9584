"""The report's header: the run's title, status, host, GPUs and software in a line each, how
it was reached, and each resumption."""

from __future__ import annotations

import re
from collections.abc import Sequence

from reportgen.observe.environment import Environment
from reportgen.render.content import (
    Header,
)
from reportgen.render.fmt import (
    NONE,
    fmt_duration,
    fmt_time,
)
from reportgen.results.model import Resumption, Run

SIMULATED_NOTICE = (
    "Simulated engine: these numbers come from reportgen's built-in simulator "
    "(reportgen sim), not from a real inference engine or GPU."
)


def external_notice(run: Run) -> str:
    """Which experiments' servers were already running (reportgen started none of them)."""
    external = [e for e in run.experiments if e.base_url]
    if not external:
        return ""
    where = sorted({e.base_url or "" for e in external})
    which = (
        "every experiment's server was"
        if len(external) == len(run.experiments)
        else "the servers of " + ", ".join(e.id for e in external) + " were"
    )
    return (
        f"Not started by reportgen: {which} already running ({', '.join(where)}). reportgen "
        "sent the load and read what the server's endpoints say of it (models, version, "
        "metrics), but cannot vouch for its configuration: its flags, its environment, what "
        "else it served meanwhile, or whether it restarted between experiments."
    )


# GPU models a campaign's title or host.expect may name, as NVML spells them inside its names
GPU_MODELS = ("H100", "H200", "H20", "B200", "B300", "GB200", "A100", "A10G", "L40S", "L4",
              "MI300X", "MI325X", "MI355X", "RTX 4090", "RTX 5090")  # fmt: skip


def gpu_notice(run: Run) -> str:
    """Where the campaign was written for one GPU (its title or ``host.expect.gpu_name``
    names a model) and measured on another: said on page one, the title left as written."""
    measured = sorted({d.name for d in run.fingerprint.gpus.devices if d.name})
    if not measured:
        return ""
    info = run.info
    expect = ((run.campaign.get("host") or {}).get("expect") or {}).get("gpu_name")
    named = [str(expect)] if expect else []
    title = str(info.get("title") or "")
    named += [m for m in GPU_MODELS if re.search(rf"(?<![\w-]){re.escape(m)}(?![\w-])", title)]
    if not named:
        return ""
    wrong = [
        m for m in dict.fromkeys(named)
        if not any(re.search(rf"(?<![\w-]){re.escape(m)}(?![\w-])", x) for x in measured)
    ]  # fmt: skip
    if not wrong:
        return ""
    return (
        f"Written for {' and '.join(wrong)} (the campaign's title or host.expect), measured on "
        f"{', '.join(measured)}: every number here is that GPU's."
    )


def run_dir_hint(run: Run) -> str:
    return f"output/{run.settings.name}/{run.run_id}"


def header(run: Run) -> Header:
    info = run.info
    env = run.fingerprint
    reason = run.status_reason
    if not reason:
        reason = {
            "running": "the run had not finished when these results were last saved "
            "(it is still running, or reportgen was killed before it could say why): "
            "`reportgen run CAMPAIGN --resume` goes on where it stopped",
            "incomplete": "the run stopped before every experiment had finished",
        }.get(run.status, f"the run's status is {run.status!r}")
    started, finished = run.started_at, run.finished_at
    return Header(
        title=str(info.get("title") or info.get("name") or "reportgen report"),
        name=str(info.get("name") or NONE),
        description=str(info.get("description") or ""),
        run_id=run.run_id or NONE,
        started=fmt_time(started),
        finished=fmt_time(finished) if finished else "not finished",
        duration=fmt_duration(started, finished)
        + (" from start to end, pauses included" if run.resumed else ""),
        created=finished or started or "",
        version=run.reportgen_version or NONE,
        status=run.status,
        complete=run.status == "complete",
        incomplete_reason=reason,
        simulated=run.engine.simulated,
        simulated_notice=SIMULATED_NOTICE,
        engine=run.engine.name or NONE,
        model=", ".join(
            dict.fromkeys(e.server.model for e in run.experiments if e.server and e.server.model)
        ),
        host=host_line(env),
        external_notice=external_notice(run),
        gpu_notice=gpu_notice(run),
        resumed="; ".join(resumed(x, env.gpus.uuids) for x in run.resumed),
    )


def resumed(x: Resumption, first_gpus: Sequence[str] = ()) -> str:
    """One --resume: when, what it kept, what the campaign file had changed since, and
    whether it ran on other GPUs than the run began on (comparisons across it then mix two
    machines, a difference no repetition measured)."""
    kept = ", ".join(x.kept) or "nothing"
    line = f"{fmt_time(x.at)} (run {x.after or 'unfinished'}; kept {kept}"
    now = [u for u in x.gpu_uuids if u]
    if first_gpus and now and sorted(now) != sorted(first_gpus):
        line += (
            "; on other GPUs than the run began on (" + ", ".join(now) + "): experiments "
            "after it are compared with ones measured on another machine, a difference the "
            "noise model does not know"
        )
    changed = x.campaign_changed
    if changed:
        line += "; campaign file changed after them"
        if changed.get("added"):
            line += ": added " + ", ".join(changed["added"])
        if changed.get("removed"):
            line += ("; " if changed.get("added") else ": ") + "removed "
            line += ", ".join(changed["removed"])
    return line + ")"


def host_line(env: Environment) -> str:
    """The machine in a phrase: its name and its GPUs, counted by model."""
    names: dict[str, int] = {}
    for d in env.gpus.devices:
        name = str(d.name or "GPU")
        names[name] = names.get(name, 0) + 1
    if names:
        what = ", ".join(f"{n} x {name}" for name, n in names.items())
    else:
        what = "no GPU seen" + (f" ({env.gpus.error})" if env.gpus.error else "")
    cpu = env.host.cpu_model
    parts = [str(env.host.hostname or "host"), what] + ([str(cpu)] if cpu else [])
    return f"{parts[0]}: " + "; ".join(parts[1:])
