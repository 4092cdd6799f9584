"""The commands before a run: validate, plan, calibrate, fingerprint, schema."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from typing import Any

from rich.console import Console

from reportgen.cli.codes import EXIT_BAD_INPUT, EXIT_OK
from reportgen.errors import MISSING, CampaignError, Problem


def cmd_validate(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen import campaign
    from reportgen.cli.runs import overrides
    from reportgen.run import static

    problems = []
    report: list[dict[str, Any]] = []
    for path in args.campaigns:
        errors, warnings, experiments = [], [], None
        try:
            c = campaign.load(path, overrides(args, path))
        except CampaignError as exc:
            errors = list(exc.problems)
        else:
            found = static.check(c)
            errors, experiments = found.errors, len(c.experiments)
            # it may be installed where the campaign runs: a warning here
            warnings = [(p, " (reportgen run refuses on this machine)") for p in found.not_here]
            warnings += [(p, "") for p in found.advice]
        problems.extend(errors)
        report.append(
            {
                "path": str(path),
                "ok": not errors,
                "experiments": experiments,
                "errors": [_problem(p) for p in errors],
                "warnings": [_problem(p, more) for p, more in warnings],
            }
        )
        if args.json:
            continue
        for p, more in warnings:
            err.print(f"warning: {p}{more}", markup=False)
        if not errors:
            out.print(f"{path}: ok ({experiments} experiments)", markup=False)
    if args.json:
        out.print_json(json.dumps({"ok": not problems, "files": report}, default=str))
        return EXIT_BAD_INPUT if problems else EXIT_OK
    if problems:
        raise CampaignError(problems)
    return EXIT_OK


def _problem(p: Problem, more: str = "") -> dict[str, Any]:
    """One problem for JSON: where, the value as written (absent: none), the message, and
    the one line validate prints for it."""
    out: dict[str, Any] = {"file": p.file, "key": p.key}
    if p.value is not MISSING:  # as TOML gave it; what JSON cannot hold (inf, nan), as text
        value = p.value
        finite = not isinstance(value, float) or math.isfinite(value)
        out["value"] = value if finite else repr(value)
    return {**out, "message": p.message + more, "line": f"{p}{more}"}


def cmd_plan(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen import engines
    from reportgen.cli.runs import load_for
    from reportgen.load.records import api_path
    from reportgen.redact import redact_argv, redact_env
    from reportgen.render.workload import lengths_said, prompt_source
    from reportgen.results.model import rate_text
    from reportgen.run import plan, static
    from reportgen.run.external import url_host

    c = load_for(args)
    found = static.check(c)
    if found.errors:  # what cannot work is said before any plan is shown
        raise CampaignError(found.errors)
    for p in found.advice:
        err.print(f"warning: {p}", markup=False)
    steps = plan.plan(c)
    engine = engines.get(c.model.server.engine)
    if args.json:
        data = [
            {
                "id": r.id,
                "parent": r.parent,
                "based_on": r.based_on,
                "command": [] if r.base_url else redact_argv(plan.command_line(c, r)),
                "base_url": r.base_url,
                "env": redact_env(r.env),
                "workload": r.workload.model_dump(mode="json"),
                "flag_diff": [{"key": f.key, "kind": f.kind} for f in r.flag_diff],
            }
            for r in steps
        ]
        out.print_json(json.dumps(data))
        return EXIT_OK
    out.print(f"[bold]{c.model.campaign.title}[/bold]  ({c.path}, sha256 {c.sha256[:12]})")
    if engine.simulated:
        out.print("engine: simulated (reportgen sim) - numbers will not describe real hardware")
    where = _where(c.model.host, c.model.campaign.parallel)
    if where:
        out.print(f"runs:   {where}", markup=False)
    for i, r in enumerate(steps):
        out.print()
        parent = "" if r.parent is None else f"  based on {r.parent}"
        if r.based_on == "best":
            parent += ' ("best": decided while running; shown as if every earlier one wins)'
        out.print(f"[bold][{i + 1}/{len(steps)}] {r.id}[/bold]{parent}", highlight=False)
        out.print(f"  why:      {r.why}", markup=False)
        if r.expect:
            out.print(f"  expect:   {r.expect}", markup=False)
        if r.base_url:
            out.print(
                f"  server:   already running at {r.base_url}: reportgen starts and stops "
                "nothing, and cannot vouch for its configuration",
                markup=False,
            )
        else:
            cmd = " ".join(_quote(a) for a in redact_argv(plan.command_line(c, r)))
            out.print(f"  command:  {cmd}", markup=False)
            if r.nodes > 1:
                engine = engines.get(c.model.server.engine)
                ranks = " ".join(engine.node_args(r.nodes, 0, "ADDR", "PORT"))
                ranks = ranks.replace("--node-rank 0", "--node-rank R")
                more = " ".join(engine.worker_flags)
                out.print(
                    f"  nodes:    {r.nodes}, one Slurm job: rank 0 serves on its first node; "
                    f"every rank R adds {ranks} (ADDR: rank 0's node)"
                    + (f", the ranks after 0 {more} too" if more else "")
                    + "; those after 0 are started with srun on the other nodes",
                    markup=False,
                )
            env = redact_env(r.env)
            out.print(
                "  env:      " + (" ".join(f"{k}={_quote(v)}" for k, v in env.items()) or "(none)"),
                markup=False,
            )
        if r.flag_diff:
            diff = ", ".join(_flag_change(f.kind, f.key, f.before, f.after) for f in r.flag_diff)
            out.print(f"  changes:  {diff}", markup=False)
        wl = r.workload
        amount = (
            f"{wl.requests_per_level} requests"
            if wl.requests_per_level is not None
            else f"{wl.duration_s:g} s"
        )
        cap = wl.concurrency[0]
        levels = (
            f"rates {', '.join(rate_text(x) for x in wl.rates)} requests/s"
            if wl.rates is not None
            else f"C={','.join(map(str, wl.concurrency))}"
        )
        out.print(
            f"  workload: {wl.api}, {levels}, {amount} "
            f"per level x {_reps(wl.repetitions)} repetition(s), {wl.input_tokens} in / "
            f"{wl.output_tokens} out tokens, warm-up {wl.warmup_requests}, seed {wl.seed}"
            + prompt_source(wl.prompts)
            + lengths_said(wl),
            markup=False,
        )
        load = (
            f"open loop, {wl.arrival} arrivals at each level's rate (inf: every request at "
            "once), " + (f"at most {cap} in flight" if cap else "no cap on requests in flight")
            if wl.rates is not None
            else f"open loop, {wl.arrival} arrivals at {rate_text(wl.request_rate)} "
            "requests/s, at most C in flight"
            if isinstance(wl.request_rate, float)
            else "open loop at the trace's own times, at most C in flight"
            if wl.prompts.source == "trace"
            else "closed loop, C clients"
            + (
                f", each holding conversations of {wl.turns} turns (history re-sent"
                + (f", {wl.think_s:g} s between turns)" if wl.think_s else ")")
                if wl.turns > 1
                else ""
            )
        )
        slo = ", ".join(f"{k} <= {v:g}" for k, v in wl.slo.model_dump().items() if v is not None)
        if wl.find_max is not None and wl.find_max.over == "request_rate":
            f = wl.find_max
            load = (
                f"open loop, {wl.arrival} arrivals, "
                + (f"at most {cap} in flight" if cap else "no cap on requests in flight")
                + f"; levels: the request rate searched from {f.start:g} up to {f.max:g} "
                f"requests/s for the highest meeting {f.slo}, at most {f.probes} levels "
                "(doubling, then bisecting)"
            )
        elif wl.find_max is not None:
            f = wl.find_max
            load += (
                f"; levels: C searched from {f.start} up to {f.max} for the highest meeting "
                f"{f.slo}, at most {f.probes} levels (doubling, then bisecting)"
            )
        out.print(
            f"  load:     {load}; {'streamed' if wl.stream else 'not streamed (no TTFT or ITL)'}"
            f"; request timeout {wl.request_timeout_s:g} s" + (f"; SLO {slo}" if slo else ""),
            markup=False,
        )
        url = r.base_url or f"http://{url_host(c.model.server.host)}:{engine.port(r.args)}"
        ready = f"{url}{engine.health_path}" if engine.health_path else url
        out.print(
            f"  polls:    {ready} until ready, then sends to {url}{api_path(wl.api)}",
            markup=False,
        )
        parent_r = next((x for x in steps if x.id == r.parent), None)
        launches = plan.server_sessions(
            r,
            parent_r,
            interleave=c.model.campaign.interleave,
            starts=c.model.campaign.starts,
            prime=c.model.primes,
        )
        if launches and launches[0][2] == "prime":
            out.print(
                "  priming:  its configuration started once first, every level warmed up "
                "until steady and nothing measured (fills the engine's compile caches)",
                markup=False,
            )
            launches = launches[1:]
        if len(launches) > 1:
            order = " ".join("P" if role == "control" else "E" for _, _, role in launches)
            if "P" in order:
                how = f"{order} (P: {r.parent}'s configuration, interleaved; E: this one)"
            elif r.workload.fresh_server:
                how = "a fresh server per repetition"
            else:
                how = (
                    "its repetitions split over them, to measure how much two starts of one "
                    "configuration differ"
                )
            out.print(f"  servers:  {len(launches)} launches, {how}", markup=False)
        if r.checks or c.model.probe:
            out.print(
                f"  checks:   {len(r.checks)} of the campaign's, "
                f"{len(c.model.probe)} golden prompt(s)",
                markup=False,
            )
        _anchor_after(out, c, steps, r)
    if c.model.brackets and steps and steps[0].base_url is None:
        out.print(
            f"\nthen (campaign.bracket): baseline-end, {steps[0].id}'s configuration measured "
            "again after every experiment and compared with it (the campaign's drift)",
            markup=False,
        )
    elif (
        steps
        and steps[0].base_url is None
        and not c.model.campaign.interleave
        and sum(1 for r in steps[1:] if r.base_url is None) >= 2
    ):
        out.print(
            "\nno bracket (campaign.bracket is off"
            + (" for the simulator" if c.model.campaign.bracket is None else "")
            + "): the baseline is not measured again at the end, so the campaign's drift is "
            "not checked; campaign.bracket = true checks it",
            markup=False,
        )
    if c.model.confirms:
        out.print(
            "\nthen (campaign.confirm): confirm-best, the best configuration run again, "
            "compared with the baseline measured beside it"
            + (
                ", and without-<id>, the best without each change adopted on its way"
                if c.model.confirms is True
                else ""
            )
            + " (known only while running; none where the baseline stays the best)",
            markup=False,
        )
    said = _allocation(c.model.campaign.starts, c.model.campaign.interleave, steps)
    if said:
        out.print("\n" + said, markup=False)
    return EXIT_OK


def _allocation(starts: int, interleave: bool, steps: Sequence[Any]) -> str:
    """Where experiments put several repetitions on each server start: what one repetition
    per start did in simulated campaigns (benchmarks/README.md, "the allocation"); nothing
    where reportgen starts no server, each repetition has its own or runs interleave."""
    from reportgen.campaign import repetitions_range

    started = [r for r in steps if r.base_url is None and not r.workload.fresh_server]
    if interleave or len(started) < 2:
        return ""
    reps = min(8, max(repetitions_range(r.workload.repetitions)[0] for r in started))
    if starts >= reps:
        return ""
    return (
        f"allocation: up to {reps} repetitions an experiment on {starts} server starts "
        f"(campaign.starts = {starts}). Where server starts differ more than repetitions on "
        f"one server do, one repetition per start (campaign.starts = {reps}) decides more, "
        "for one more start an experiment: in simulated campaigns of three repetitions, 2% "
        "noise and starts 3% apart, a 10% change was called in 51-58% of them against "
        "38-39%, identical configurations adopted or rejected in 2.5% against 5.5% "
        "(benchmarks/README.md, the allocation); a run's report works it out from its own "
        "start and repetition times and spreads (its methods)."
    )


def _flag_change(kind: str, key: str, before: Any, after: Any) -> str:
    from reportgen.redact import redact_flag

    before, after = redact_flag(key, before), redact_flag(key, after)
    if kind == "added":
        return f"+{key}={after}"
    if kind == "removed":
        return f"-{key}"
    return f"{key}: {before} -> {after}"


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(str(text))


def cmd_calibrate(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen.run import calibrate

    result = calibrate.calibrate(refresh=args.refresh)
    if args.json:
        out.print_json(json.dumps(result))
        return EXIT_OK
    by = result.get("measured_by")
    if not result.get("cached"):
        origin = "measured now"
    elif by == calibrate.installation():
        origin = f"cached, measured {result['measured_at']} by this installation"
    else:  # the cache is per host and version: another checkout or environment may have
        origin = (
            f"cached, measured {result['measured_at']} by "
            + (f"another installation, {by}" if by else "an installation it does not name")
            + "; `reportgen calibrate --refresh` measures this one"
        )
    out.print(
        f"client ceiling on {result['host']} ({result['cpu_count']} CPUs), {origin}:\n"
        f"  {result['chunks_per_cpu_s']:,.0f} chunks per CPU-second, "
        f"{result['requests_per_cpu_s']:,.1f} requests per CPU-second "
        f"({result['requests']} requests x 256 chunks at C={result['concurrency']})\n"
        f"  cached in {calibrate.cache_path()}",
        markup=False,
    )
    return EXIT_OK


def cmd_fingerprint(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen.observe import fingerprint

    data = fingerprint.collect()
    if args.json:
        out.file.write(json.dumps(data, indent=1, default=str) + "\n")
        return EXIT_OK
    from rich.table import Table

    from reportgen.render.fmt import field_rows

    for section in ("host", "software", "gpus"):
        table = Table(title=section, show_header=False, title_justify="left")
        table.add_column("field", style="bold")
        table.add_column("value", overflow="fold")
        for key, value in field_rows(data[section]):
            table.add_row(key, value)
        out.print(table)
    return EXIT_OK


def cmd_schema(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen.campaign import json_schema

    out.file.write(json.dumps(json_schema(), indent=1) + "\n")
    return EXIT_OK


def _reps(value: object) -> str:
    """3, or "2 to 8 (adaptive)"."""
    from reportgen.campaign import repetitions_range

    low, high = repetitions_range(value)  # type: ignore[arg-type]
    return str(low) if low == high else f"{low} to {high} (adaptive)"


def cmd_completion(args: argparse.Namespace, out: Console, err: Console) -> int:
    import shtab

    from reportgen.cli.parser import build_parser
    from reportgen.sim.cli import add_arguments as sim_arguments

    parser = build_parser()
    # `reportgen sim`'s flags are its own parser's: added here for their completion
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sim_arguments(sub.choices["sim"])
    out.file.write(shtab.complete(parser, shell=args.shell))
    return EXIT_OK


def _where(host: Any, parallel: int) -> str:
    """Where the servers and the load run, for the plan ("" for here)."""
    if host.executor == "ssh" and host.ssh is not None:
        s = host.ssh
        at = (f"{s.user}@" if s.user else "") + s.host + (f":{s.port}" if s.port else "")
        return (
            f"on {at} over SSH (python {s.python} there; each experiment through python -m "
            "reportgen.run.remote; the results come back here)"
        )
    if host.executor == "slurm":
        s = host.slurm
        asked = [
            f"partition {s.partition}" if s and s.partition else "the default partition",
            f"{s.gpus} GPUs" if s and s.gpus is not None else "",
            f"time limit {s.time}" if s and s.time else "",
        ]
        return (
            "as Slurm job steps (srun: " + ", ".join(a for a in asked if a) + ")"
            + (f", up to {parallel} at once" if parallel > 1 else ", one at a time")
        )  # fmt: skip
    return ""


def _anchor_after(out: Any, c: Any, steps: Sequence[Any], r: Any) -> None:
    """``campaign.anchors``: the parent of ``r`` (the baseline, or what it is built on)
    measured again after ``r``, where its turn (as ``runner._anchor`` decides; after the
    last, where its parent is not the baseline and another experiment ran since it was last
    measured)."""
    from reportgen.run import confirm

    n, i = c.model.anchor_every, next(k for k, x in enumerate(steps) if x.id == r.id)
    turn = confirm.anchor_turn(i, n, len(steps) - 1)
    parent = r.based_on or steps[0].id
    if turn is None or (turn == "end" and (parent == steps[0].id or c.model.campaign.interleave)):
        return
    may = " where another experiment ran since it was last measured" if turn == "end" else ""
    k = -(-i // n)
    if parent == "best":
        what = f"<best>-again-{k}, the best so far (what {r.id} is built on)"
    else:
        what = f"{confirm.anchor_id(parent, k)}, {parent}'s configuration"
    out.print(
        f"then (campaign.anchors): {what} measured again on one start{may}: the experiments "
        "beside it are compared with it, not with a measurement further away in time",
        markup=False,
    )
