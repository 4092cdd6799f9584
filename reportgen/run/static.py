"""What can be checked about a campaign on this machine without starting a server.

``reportgen validate`` reports it, and ``reportgen run`` refuses to start on its errors
(``preflight``), so a campaign that cannot work fails in a second, not once per experiment.

- **Errors** (the campaign cannot work anywhere as written): a prompt file that does not exist
  or does not parse, a tokenizer folder that does not exist, a generic server whose command
  sets a port reportgen does not poll.
- **Not installed here** (it may be on the GPU host): the engine's command or its Python
  package, a local model folder. ``validate`` warns; ``run`` refuses, since every experiment
  would fail to start.
- **Advice** (it runs, but a reader would not get what the campaign is for): an experiment
  that shares no level of the objective with the configuration it is compared with, so its
  verdict can only be "inconclusive"; one that runs another load than that configuration,
  so it will not be judged; simulator flags its own parser refuses (that experiment will
  fail to start). Said by ``validate``, ``plan`` and ``run``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from reportgen import engines
from reportgen.analysis.unjudged import changes_said, load_diff
from reportgen.campaign import Campaign, Resolved, repetitions_range
from reportgen.errors import MISSING, LoadError, Problem
from reportgen.load import prompts, trace
from reportgen.run import external
from reportgen.run.external import url_host
from reportgen.run.plan import command_line, plan


@dataclass
class Findings:
    errors: list[Problem] = field(default_factory=list)
    not_here: list[Problem] = field(default_factory=list)  # missing on this machine
    advice: list[Problem] = field(default_factory=list)  # runs, but cannot decide


def check(campaign: Campaign) -> Findings:
    found = Findings()
    base = Path(campaign.path).parent
    steps = plan(campaign)
    seen: set[tuple[str, str]] = set()
    for r in steps:
        wl = r.workload
        src = wl.prompts
        if src.path and ("prompts", src.path) not in seen:
            seen.add(("prompts", src.path))
            path = _local(base, src.path)
            try:
                if src.source == "trace":
                    trace.load(path, src.time_scale)
                else:
                    skipped: list[int] = []
                    used = prompts.load_pairs(src.source, path, src.field, skipped)
                    if skipped and skipped[0]:
                        found.advice.append(
                            Problem(
                                campaign.path,
                                f"experiment {r.id!r}: workload.prompts.path",
                                src.path,
                                f"{skipped[0]} of {skipped[0] + len(used)} items have no user "
                                "turn with text and are skipped",
                            )
                        )
            except LoadError as exc:
                message = str(exc).split(": ", 1)[-1]
                found.errors.append(
                    Problem(
                        campaign.path,
                        f"experiment {r.id!r}: workload.prompts.path",
                        src.path,
                        message,
                    )  # fmt: skip
                )
        if wl.tokenizer and ("tokenizer", wl.tokenizer) not in seen:
            seen.add(("tokenizer", wl.tokenizer))
            path = _local(base, wl.tokenizer)
            if not path.is_dir():
                found.errors.append(
                    Problem(
                        campaign.path,
                        f"experiment {r.id!r}: workload.tokenizer",
                        wl.tokenizer,
                        "no such folder (paths are relative to the campaign file); give a "
                        "local tokenizer folder, or remove workload.tokenizer",
                    )
                )
            elif (why := _not_a_tokenizer(path)) is not None:
                found.errors.append(
                    Problem(
                        campaign.path, f"experiment {r.id!r}: workload.tokenizer", wl.tokenizer, why
                    )
                )
    started = [r for r in steps if r.base_url is None]  # the servers reportgen starts
    host = campaign.model.server.host
    if started and not external.is_local(f"http://{url_host(host)}"):
        found.not_here.append(  # (it may be one of the GPU host's own addresses)
            Problem(
                campaign.path,
                "server.host",
                host,
                "not an address of this machine: reportgen starts the servers where it runs "
                "and connects to them there; use 127.0.0.1 (or the GPU host's own address), "
                "or give a server already running elsewhere as server.base_url",
            )
        )
    engine = engines.get(campaign.model.server.engine)
    if started and not campaign.model.server.command and not engine.default_command:
        found.errors.append(
            Problem(
                campaign.path,
                "server.command",
                MISSING,
                f"engine {engine.name!r} has no command of its own: give server.command, the "
                "command line that starts the server (or base_url for one already running)",
            )
        )
        return found
    ports = _port_range(campaign, started)
    found.errors += ports or _port_problems(campaign, started)
    if started:
        found.not_here += _installed(campaign)
    if campaign.model.server.engine == "sim" and not campaign.model.server.command:
        # a warning: the demo campaign shows a server that refuses its flags on purpose
        found.advice += _sim_flags(campaign, started)
    found.advice += _undecidable(campaign, steps)
    found.advice += _other_load(campaign, steps)
    found.advice += _one_session(campaign, steps)
    found.advice += _one_start(campaign, steps)
    for r in steps:
        key = next((k for k in ("model", "model-path") if k in r.args), "model")
        model = r.args.get(key)
        if isinstance(model, str) and _looks_local(model) and ("model", model) not in seen:
            seen.add(("model", model))
            path = _local(Path.cwd(), model)
            if not path.exists():
                found.not_here.append(
                    Problem(
                        campaign.path,
                        f"experiment {r.id!r}: args.{key}",
                        model,
                        f"no such folder here ({path}); the server reads it from where it runs",
                    )
                )
            elif path.is_dir() and not (path / "config.json").is_file():
                found.errors.append(
                    Problem(
                        campaign.path,
                        f"experiment {r.id!r}: args.{key}",
                        model,
                        "the folder has no config.json: not a model folder",
                    )
                )
    return found


def _undecidable(campaign: Campaign, steps: Sequence[Resolved]) -> list[Problem]:
    """Experiments that share no level of the objective with every configuration they may be
    compared with (the parent named; for "best", any earlier one): "inconclusive" for sure."""
    objective = campaign.model.campaign.objective
    out = []
    for i, r in enumerate(steps):
        if i == 0:
            continue
        candidates = steps[:i] if r.based_on == "best" else [s for s in steps if s.id == r.parent]
        mine = {p for p in r.workload.points if objective.decides(p)}
        if any(mine & set(c.workload.points) for c in candidates):
            continue
        parent = "any earlier experiment" if r.based_on == "best" else repr(r.parent)
        key = "request_rate" if r.workload.rates is not None else "concurrency"
        wanted = getattr(objective, key)
        levels = (
            f"the objective's levels (campaign.objective.{key} = {wanted})"
            if wanted
            else "its levels"
        )
        out.append(
            Problem(
                campaign.path,
                f"experiment {r.id!r}: workload.{key}",
                getattr(r.workload, key),
                f"shares none of {levels} with {parent}, so its verdict can only be "
                "'inconclusive'; run it at one of them too",
            )
        )
    return out


def _other_load(campaign: Campaign, steps: Sequence[Resolved]) -> list[Problem]:
    """Experiments that run another load than every configuration they may be compared with
    (the parent named; for "best", any earlier one): not judged (``analysis.unjudged``)."""
    out = []
    for i, r in enumerate(steps):
        candidates = steps[:i] if r.based_on == "best" else [s for s in steps if s.id == r.parent]
        changes = [load_diff(c.workload, r.workload) for c in candidates]
        if not changes or not all(changes):
            continue
        parent = "any earlier experiment" if r.based_on == "best" else repr(r.parent)
        key, before, after = changes[0][0]
        named = "; ".join(changes_said(changes[0][:3]))
        out.append(
            Problem(
                campaign.path,
                f"experiment {r.id!r}: workload.{key}",
                f"{before} -> {after}",
                f"runs another load than {parent} ({named}), so it will "
                "not be judged: its difference would be the load's, not the server's; name an "
                "experiment that runs the same load in based_on",
            )
        )
    return out


# Files one of which a tokenizer folder holds (fast tokenizers, SentencePiece, BPE vocabularies)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "spiece.model", "vocab.json", "vocab.txt")


def _not_a_tokenizer(folder: Path) -> str | None:
    """Why ``folder`` cannot be a tokenizer (no tokenizer file, or a tokenizer.json that is
    not JSON), or None: a quick look, not a load (that imports transformers)."""
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        return f"no tokenizer file in this folder (one of {', '.join(TOKENIZER_FILES)})"
    main = folder / "tokenizer.json"
    if main.is_file():
        try:
            json.loads(main.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            return f"tokenizer.json does not parse ({str(exc)[:80]}): save the tokenizer again"
    return None


def _one_session(campaign: Campaign, steps: Sequence[Resolved]) -> list[Problem]:
    """Experiments run in one server session whatever the campaign asks (a server already
    running cannot be started again; a search's next probe depends on the last): the
    settings for several sessions that do not apply to them."""
    info = campaign.model.campaign
    out = []
    for r in steps:
        why = r.one_session
        asked = [  # as written (campaign.starts = 2 by default: no warning for that)
            name
            for name, on in (
                ("campaign.interleave", info.interleave),
                (f"campaign.starts = {info.starts}", "starts" in info.model_fields_set),
                ("workload.fresh_server", r.workload.fresh_server),
            )
            if on
        ]
        if why and asked:
            verb = "does" if len(asked) == 1 else "do"
            out.append(
                Problem(
                    campaign.path,
                    f"experiment {r.id!r}",
                    MISSING,
                    f"runs in one server session ({why}): {' and '.join(asked)} {verb} not "
                    "apply to it, so its verdicts cannot count the spread between server starts",
                )
            )
    return out


def _one_start(campaign: Campaign, steps: Sequence[Resolved]) -> list[Problem]:
    """``campaign.starts = 1`` where experiments are compared: each of them runs on one
    server start, whose own speed its verdicts cannot tell from the change."""
    info = campaign.model.campaign
    if info.starts != 1 or info.interleave:
        return []
    if campaign.model.anchor_every and "start_spread" in info.model_fields_set:
        return []  # the spread between starts stated as this host measured it
    alone = [
        r.id
        for r in steps[1:]
        if not r.workload.fresh_server
        and not r.one_session  # said by _one_session where asked
        and repetitions_range(r.workload.repetitions)[0] >= 2
    ]
    if not alone:
        return []
    names = ", ".join(alone[:3]) + (", ..." if len(alone) > 3 else "")
    said = f"{len(alone)} experiment(s) ({names}) run on one server start each, so their "
    if campaign.model.anchor_every:
        said += (
            "verdicts rest on the stated spread between starts (campaign.start_spread = "
            f"{info.start_spread:g}) more than on the run's own, and decide less (in "
            "simulated campaigns a true 10% gain was adopted in 11-29% of them against "
            "50-89% on two starts, at starts 0.3-5% apart: benchmarks/campaigns.py). Leave "
            "campaign.starts at 2 (the default), or state start_spread as this host has "
            "measured it"
        )
    else:
        said += (
            "verdicts cannot tell a change from that start's own speed: they rest on the few "
            "degrees of freedom the spread between starts has, and most stay inconclusive "
            "(taken as reportgen took them before 2026-12, an identical configuration was "
            "adopted or rejected in 6-13% of simulated campaigns with starts 3% apart: "
            "benchmarks/verdicts.py --start-levels). Leave campaign.starts at 2 (the "
            "default), or set workload.fresh_server = true"
        )
    return [Problem(campaign.path, "campaign.starts", info.starts, said)]


def _sim_flags(campaign: Campaign, steps: Sequence[Resolved]) -> list[Problem]:
    """The simulator's flags, parsed here by its own parser: what it would refuse at start
    (the cause left in its log) is said before anything starts, for each experiment whose
    flags it refuses."""
    import argparse
    import contextlib
    import io

    from reportgen.sim.cli import add_arguments

    engine = engines.get("sim")
    parser = argparse.ArgumentParser(prog="reportgen sim", exit_on_error=False)
    add_arguments(parser)
    out = []
    for r in steps:
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                parser.parse_args(engine.format_args(r.args))
        except (argparse.ArgumentError, SystemExit) as exc:
            why = str(exc) if isinstance(exc, argparse.ArgumentError) else said.getvalue()
            why = why.strip().splitlines()[-1] if why.strip() else "refused by reportgen sim"
            out.append(
                Problem(
                    campaign.path,
                    f"experiment {r.id!r}: args",
                    r.args,
                    why.removeprefix("reportgen sim: error: ")
                    + " (see `reportgen sim --help`; flags are written without dashes, "
                    "with dashes between words: ttft-ms)",
                )
            )
    return out


def _local(base: Path, given: str) -> Path:
    path = Path(given).expanduser()
    return path if path.is_absolute() else base / path


def _looks_local(model: str) -> bool:
    """A path rather than a hub id ("org/name"): absolute, relative with ./ or ../, or with
    more than one slash."""
    return model.startswith(("/", "./", "../", "~")) or model.count("/") > 1


def _port_range(campaign: Campaign, steps: Sequence[Resolved]) -> list[Problem]:
    """Each experiment's port: a whole number from 1 to 65535."""
    out = []
    for r in steps:
        port = r.args.get("port")
        if port is None:
            continue
        ok = isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535
        if not ok and not (isinstance(port, str) and port.isdigit() and 1 <= int(port) <= 65535):
            out.append(
                Problem(
                    campaign.path,
                    f"experiment {r.id!r}: args.port",
                    port,
                    "a TCP port is a whole number from 1 to 65535",
                )
            )
            break  # said once: experiments inherit it
    return out


def _port_problems(campaign: Campaign, steps: Sequence[Resolved]) -> list[Problem]:
    """A server command that names its own port where the campaign's args do not: reportgen
    would poll the engine's default port and wait out its deadline."""
    m = campaign.model
    engine = engines.get(m.server.engine)
    out = []
    for r in steps:
        argv = command_line(campaign, r)
        polled = engine.port(r.args)
        for i, token in enumerate(argv):
            given = None
            if token == "--port" and i + 1 < len(argv):
                given = argv[i + 1]
            elif token.startswith("--port="):
                given = token.split("=", 1)[1]
            if given is not None and given != str(polled):
                out.append(
                    Problem(
                        campaign.path,
                        f"experiment {r.id!r}: server.command",
                        f"--port {given}",
                        f"reportgen polls http://{m.server.host}:{polled} (server.args.port, "
                        f"or the engine's default); set server.args.port = {given} instead "
                        "of the port in the command",
                    )
                )
                return out  # once: every experiment shares the command
    return out


def _installed(campaign: Campaign) -> list[Problem]:
    """The engine's command, and for ``python -m MODULE`` its package, on this machine."""
    m = campaign.model
    engine = engines.get(m.server.engine)
    try:
        argv = engine.command(m.server.command)
    except ValueError as exc:
        return [Problem(campaign.path, "server.command", None, str(exc))]
    given = bool(m.server.command)
    key = "server.command" if given else "server.engine"

    def shown(part: str) -> str:  # the value as the user wrote it: the command, or the engine
        return part if given else m.server.engine

    said = "" if given else f"its default command `{' '.join(argv[:3])}`: "
    program = argv[0]
    found = program if os.path.isabs(program) and os.access(program, os.X_OK) else None
    found = found or shutil.which(program)
    if found is None:
        return [
            Problem(
                campaign.path,
                key,
                shown(program),
                f"{said}command not found here; install the engine, or set server.command "
                "to the program that starts it (its full path)",
            )
        ]
    if len(argv) >= 3 and argv[1] == "-m":
        module = argv[2].split(".")[0]
        if not _has_module(found, module):
            return [
                Problem(
                    campaign.path,
                    key,
                    shown(" ".join(argv[:3])),
                    f"{said}no module named {module!r} for {found}: install {module} there, or "
                    "set server.command to the Python that has it "
                    f'(server.command = ["/path/to/venv/bin/python", "-m", "{argv[2]}"'
                    + ("" if len(argv) < 4 else f', "{argv[3]}"')
                    + "])",
                )
            ]
    return []


def _has_module(python: str, module: str) -> bool:
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return importlib.util.find_spec(module) is not None
    try:
        probe = f"import importlib.util as u; raise SystemExit(not u.find_spec({module!r}))"
        done = subprocess.run(
            [python, "-c", probe],
            capture_output=True,
            timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
