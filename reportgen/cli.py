"""The ``reportgen`` command. It parses arguments, calls the core, and maps errors to exit codes:
0 success, 1 a run or render that failed, 2 bad input (campaign file, arguments, results file),
130 interrupted."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from reportgen import __version__
from reportgen.errors import CampaignError, ReportgenError, ResultsError
from reportgen.run import interrupt

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="reportgen",
        description="Reproducible LLM-serving tuning campaigns, from a campaign file to a "
        "shareable engineering report.",
        epilog="example:\n  reportgen run campaigns/demo.toml",
        formatter_class=_Formatter,
    )
    p.add_argument("--version", action="version", version=f"reportgen {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    v = sub.add_parser(
        "validate",
        help="check campaign files (schema and references)",
        description="Check campaign files and report every problem at once, "
        "each with the file, the key and the value. Starts nothing.",
        epilog="example:\n  reportgen validate campaigns/demo.toml",
        formatter_class=_Formatter,
    )
    v.add_argument("campaigns", nargs="+", type=Path, metavar="CAMPAIGN")

    pl = sub.add_parser(
        "plan",
        help="print each experiment's resolved command, env and workload",
        description="Print, for each experiment, the exact server command line, "
        "its environment (secrets redacted) and workload, without "
        "starting anything.",
        epilog="example:\n  reportgen plan campaigns/demo.toml",
        formatter_class=_Formatter,
    )
    pl.add_argument("campaign", type=Path)
    pl.add_argument("--json", action="store_true", help="print the plan as JSON")

    r = sub.add_parser(
        "run",
        help="run a campaign and render its report",
        description="Run every experiment in order (start the server, wait until "
        "ready, warm up, load each concurrency level, stop), save "
        "results after each experiment, then render the report. After Ctrl-C (or a crash), "
        "the same command with --resume goes on where the run stopped.",
        epilog="example:\n  reportgen run campaigns/demo.toml --output output/",
        formatter_class=_Formatter,
    )
    r.add_argument("campaign", type=Path)
    r.add_argument(
        "--output",
        type=Path,
        default=Path("output"),
        help="root folder for run directories (default: output/)",
    )
    r.add_argument("--no-pdf", action="store_true", help="render HTML only")
    r.add_argument("--quiet", action="store_true", help="one line per experiment, no live bars")
    r.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when any experiment failed (default: failures are results)",
    )
    r.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        metavar="RUN_DIR",
        help="continue an interrupted run instead of starting a new one: its finished "
        "experiments are kept, the others run (default: the latest unfinished run of this "
        "campaign under --output)",
    )

    rd = sub.add_parser(
        "render",
        help="render the report (HTML, PDF, Markdown, CSV) from saved results",
        description="Build report.html (self-contained), report.pdf, report.md (a summary "
        "for a pull request or a chat) and tables/*.csv from a run directory's saved results "
        "alone; no GPU or server needed.",
        epilog="example:\n  reportgen render output/demo/20261129T150000Z-1a2b3c",
        formatter_class=_Formatter,
    )
    rd.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    rd.add_argument("--no-pdf", action="store_true", help="skip the PDF")

    vf = sub.add_parser(
        "verify",
        help="check that a report still matches the raw data it summarises",
        description="Recompute every summary of a report from the raw request tables beside "
        "it (raw table hashes, level summaries, aggregates across repetitions, every "
        "comparison in the decisions, the page's own text) and say whether the report still "
        "matches. Exit 0 when everything matches, 1 when something differs.",
        epilog="example:\n  reportgen verify output/demo/20261129T150000Z-1a2b3c/report.html",
        formatter_class=_Formatter,
    )
    vf.add_argument("report", type=Path, metavar="REPORT", help="report.html, or its run directory")
    vf.add_argument(
        "--run-dir", type=Path, default=None, help="where the raw tables are (default: beside it)"
    )

    df = sub.add_parser(
        "diff",
        help="compare two runs: what changed in the environment, which differences are real",
        description="Compare run B (after) with run A (before), e.g. the same campaign before "
        "and after an engine upgrade: differences that make the runs incomparable (GPUs, "
        "model checkpoint, workload) in a banner, every other difference in the environment "
        "and the setup, and per experiment and level each headline metric B / A with its 95%% "
        "confidence interval and a verdict (improved, regressed, equivalent, inconclusive), "
        "verdicts that changed and new failures. Writes diff.html, diff.pdf, diff.md and "
        "diff.json. Exit 1 when --fail-on-regression is given and a regression beyond it is "
        "certain, 0 otherwise.",
        epilog="example:\n  reportgen diff output/demo/RUN_A output/demo/RUN_B "
        "--fail-on-regression 5%%",
        formatter_class=_Formatter,
    )
    df.add_argument("run_a", type=Path, metavar="A", help="run directory (or results.json): before")
    df.add_argument("run_b", type=Path, metavar="B", help="run directory (or results.json): after")
    df.add_argument(
        "--fail-on-regression",
        metavar="PCT",
        default=None,
        help="exit 1 when some metric is certainly worse in B by more than PCT (e.g. 5%%)",
    )
    df.add_argument(
        "--metric",
        action="append",
        choices=["output_tok_s", "req_s", "ttft_ms", "itl_ms", "e2e_ms"],  # decide.HEADLINE
        help="only these metrics count for --fail-on-regression (repeatable; default: all)",
    )
    df.add_argument(
        "--margin",
        metavar="FRAC",
        type=float,
        default=None,
        help="changes within this fraction are equivalent (default: B's campaign margin)",
    )
    df.add_argument(
        "--out", type=Path, default=None, help="folder for the files (default: beside B's run)"
    )
    df.add_argument("--no-pdf", action="store_true", help="skip the PDF")

    # `reportgen sim ...` is handed to the simulator's own parser (see main); listed here for
    # the command overview.
    sub.add_parser("sim", help="run the simulated OpenAI-compatible server (no GPU needed)")

    cal = sub.add_parser(
        "calibrate",
        help="measure this host's client ceiling (chunks per CPU-second)",
        description="Measure how much streaming the load generator can process on this host, "
        "against a zero-delay simulator. Runs record it and flag levels that came within 80%% "
        "of it as client-limited. Cached per host and reportgen version.",
        epilog="example:\n  reportgen calibrate --refresh",
        formatter_class=_Formatter,
    )
    cal.add_argument("--refresh", action="store_true", help="measure again even if cached")
    cal.add_argument("--json", action="store_true", help="print the result as JSON")

    fp = sub.add_parser(
        "fingerprint",
        help="print this host's fingerprint (host, software, GPUs) as a table or JSON",
        description="Print what a run records about its environment: the host, the software "
        "stack and every GPU through NVML, each field best-effort (one that cannot be read "
        "says why).",
        epilog="example:\n  reportgen fingerprint --json > host.json",
        formatter_class=_Formatter,
    )
    fp.add_argument("--json", action="store_true", help="print JSON instead of a table")

    sc = sub.add_parser(
        "schema",
        help="print the campaign file's JSON Schema",
        description="Print the JSON Schema of campaign files (for editors).",
        epilog="example:\n  reportgen schema > campaign.schema.json",
        formatter_class=_Formatter,
    )
    sc.set_defaults()
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        from reportgen import sim

        return sim.main(argv[1:])
    args = _parser().parse_args(argv)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    out = Console(highlight=False, soft_wrap=True)
    try:
        handler = _COMMANDS[args.command]
        return handler(args, out, err)
    except CampaignError as exc:
        for problem in exc.problems:
            err.print(f"error: {problem}", markup=False)
        n = len(exc.problems)
        err.print(f"{n} problem{'s' if n != 1 else ''} found.", markup=False)
        return EXIT_BAD_INPUT
    except ResultsError as exc:
        err.print(f"error: {exc}", markup=False)
        return EXIT_BAD_INPUT
    except ReportgenError as exc:
        err.print(f"error: {exc}", markup=False)
        return EXIT_FAILED
    except KeyboardInterrupt:
        err.print("interrupted", markup=False)
        return EXIT_INTERRUPTED


def _validate(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen import campaign

    problems = []
    for path in args.campaigns:
        try:
            c = campaign.load(path)
        except CampaignError as exc:
            problems.extend(exc.problems)
            continue
        out.print(f"{path}: ok ({len(c.experiments)} experiments)", markup=False)
    if problems:
        raise CampaignError(problems)
    return EXIT_OK


def _plan(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen import campaign, engines
    from reportgen.redact import redact_argv, redact_env
    from reportgen.run import runner

    c = campaign.load(args.campaign)
    steps = runner.plan(c)
    engine = engines.get(c.model.server.engine)
    if args.json:
        data = [
            {
                "id": r.id,
                "parent": r.parent,
                "based_on": r.based_on,
                "command": redact_argv(runner.command_line(c, r)),
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
    for i, r in enumerate(steps):
        out.print()
        parent = "" if r.parent is None else f"  based on {r.parent}"
        if r.based_on == "best":
            parent += ' ("best": decided while running; shown as if every earlier one wins)'
        out.print(f"[bold][{i + 1}/{len(steps)}] {r.id}[/bold]{parent}", highlight=False)
        out.print(f"  why:      {r.why}", markup=False)
        if r.expect:
            out.print(f"  expect:   {r.expect}", markup=False)
        cmd = " ".join(_quote(a) for a in redact_argv(runner.command_line(c, r)))
        out.print(f"  command:  {cmd}", markup=False)
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
        out.print(
            f"  workload: {wl.api}, C={','.join(map(str, wl.concurrency))}, {amount} "
            f"per level x {wl.repetitions} repetition(s), {wl.input_tokens} in / "
            f"{wl.output_tokens} out tokens, warm-up {wl.warmup_requests}, seed {wl.seed}",
            markup=False,
        )
        parent_r = next((x for x in steps if x.id == r.parent), None)
        launches = runner.server_sessions(r, parent_r, interleave=c.model.campaign.interleave)
        if len(launches) > 1:
            order = " ".join("P" if role == "control" else "E" for _, _, role in launches)
            how = (
                f"{order} (P: {r.parent}'s configuration, interleaved; E: this one)"
                if "P" in order
                else "a fresh server per repetition"
            )
            out.print(f"  servers:  {len(launches)} launches, {how}", markup=False)
        if r.checks or c.model.probe:
            out.print(
                f"  checks:   {len(r.checks)} of the campaign's, "
                f"{len(c.model.probe)} golden prompt(s)",
                markup=False,
            )
    return EXIT_OK


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


def _run(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen import campaign, results
    from reportgen.run import progress, runner

    c = campaign.load(args.campaign)
    saved = None
    if args.resume is not None:
        run_dir = _run_to_resume(args.output / c.name, args.resume)
        saved = runner.resumable(c, run_dir)
        done = [e["id"] for e in saved["experiments"][: runner.finished_prefix(saved)]]
        out.print(
            f"resuming {run_dir}: kept {len(done)} finished experiment(s)"
            + (f" ({', '.join(done)})" if done else ""),
            markup=False,
        )
        if saved["campaign_file"].get("sha256") != c.sha256:
            out.print(
                "the campaign file changed since, only in what is still to run: "
                + (", ".join(e.id for e in c.experiments[len(done) :]) or "nothing"),
                markup=False,
            )
    else:
        run_dir = args.output / c.name / runner.new_run_id(c)
    live = out.is_terminal and not args.quiet
    interrupt.install()  # Ctrl-C and SIGTERM: KeyboardInterrupt, never lost (see there)
    out.print(f"run directory: {run_dir}", markup=False)
    r = runner.Runner(c, run_dir, progress.make(out, live), resume=saved)
    interrupted = False
    try:
        r.run()
    except KeyboardInterrupt:
        interrupted = True
        err.print(
            "interrupted: servers stopped, finished experiments saved; rendering a partial report",
            markup=False,
        )
    if not (run_dir / results.RESULTS).exists():
        return EXIT_INTERRUPTED if interrupted else EXIT_FAILED
    data = results.load(run_dir)
    _summary_table(out, data)
    paths = _render_paths(run_dir, pdf=not args.no_pdf)
    for p in paths:
        out.print(f"report: {p}", markup=False)
    if interrupted:
        return EXIT_INTERRUPTED
    failed = [e["id"] for e in data["experiments"] if e["status"] != "ok"]
    if failed:
        err.print(
            f"{len(failed)} experiment(s) failed: {', '.join(failed)} (see the report)",
            markup=False,
        )
    untrusted = [
        e["id"]
        for e in data["experiments"]
        if e["status"] == "ok" and (e.get("decision") or {}).get("verdict") == "failed"
    ]
    if untrusted:
        err.print(
            f"{len(untrusted)} experiment(s) ran but failed an assumption check that "
            f"invalidates their numbers: {', '.join(untrusted)} (see the report)",
            markup=False,
        )
    failed += untrusted
    return EXIT_FAILED if failed and args.strict else EXIT_OK


def _run_to_resume(campaign_dir: Path, given: str) -> Path:
    """The run directory --resume names, or the latest unfinished run of the campaign."""
    from reportgen import results

    if given != "latest":
        return Path(given)
    unfinished = []
    for path in sorted(campaign_dir.glob("*/" + results.RESULTS)):
        try:
            status = results.load(path).get("status")
        except ResultsError:
            continue
        if status != "complete":
            unfinished.append(path.parent)
    if not unfinished:
        raise ResultsError(
            f"no unfinished run under {campaign_dir}/ to resume; run without --resume, or "
            "give the run directory (a complete run's too, to run experiments added to its "
            "file since): --resume output/<campaign>/<run-id>"
        )
    return unfinished[-1]


def _render_paths(run_dir: Path, pdf: bool) -> list[Path]:
    from reportgen.render import render

    out = render(run_dir, pdf=pdf)
    tables = out.tables[0].parent if out.tables else None
    return [p for p in (out.html, out.pdf, out.markdown, tables) if p is not None]


def _summary_table(out: Console, data: dict[str, Any]) -> None:
    """One screen: each experiment's verdict and objective metric per level (mean ± sd)."""
    from reportgen.analysis.summary import all_failed
    from reportgen.render.fmt import fmt_num

    info = data["campaign"]["campaign"]
    metric = info["objective"]["metric"]
    key = metric if metric.endswith("_s") else f"{metric}_p50"
    status = "" if data["status"] == "complete" else f" - {data['status'].upper()}"
    table = Table(
        title=f"{info['title']}{status}",
        caption=f"{key}: mean ± sd over repetitions; best: {data.get('best') or 'none'}",
        title_justify="left",
        caption_justify="left",
    )
    table.add_column("experiment", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    levels = sorted(
        {lv["concurrency"] for e in data["experiments"] for lv in e.get("by_level", [])}
    )
    for c in levels:
        table.add_column(f"C={c}", justify="right", no_wrap=True)
    for e in data["experiments"]:
        by = {lv["concurrency"]: lv for lv in e.get("by_level", [])}
        cells = []
        for c in levels:
            level = by.get(c, {})
            agg = level.get(key) or {}
            mean, sd = agg.get("mean"), agg.get("sd")
            spread = "" if not sd else f" ±{sd:,.0f}" if sd >= 10 else f" ±{sd:#.2g}"
            if all_failed(level):
                cells.append("all failed")
            else:
                cells.append("" if mean is None else fmt_num(mean) + spread)
        verdict = (e.get("decision") or {}).get("verdict") or e["status"]
        if e["id"] == data.get("best"):
            verdict += " (best)"
        table.add_row(e["id"], verdict, *cells)
    out.print(table)


def _render(args: argparse.Namespace, out: Console, err: Console) -> int:
    for p in _render_paths(args.run_dir, pdf=not args.no_pdf):
        out.print(f"report: {p}", markup=False)
    return EXIT_OK


def _verify(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen import verify
    from reportgen.render import HTML_NAME

    report = args.report / HTML_NAME if args.report.is_dir() else args.report
    if not report.is_file():
        raise ResultsError(f"{report}: no such report; give report.html or its run directory")
    found = verify.verify(report, args.run_dir)
    for f in found.findings:
        mark = "ok  " if f.ok else "DIFF"
        out.print(f"{mark} {f.step}: {f.detail}", markup=False, highlight=False)
    if found.ok:
        out.print(f"{report}: matches its raw data", markup=False)
        return EXIT_OK
    err.print(f"{report}: does NOT match its raw data (see DIFF above)", markup=False)
    return EXIT_FAILED


def _calibrate(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen.run import calibrate

    result = calibrate.calibrate(refresh=args.refresh)
    if args.json:
        out.print_json(json.dumps(result))
        return EXIT_OK
    out.print(
        f"client ceiling on {result['host']} ({result['cpu_count']} CPUs), measured "
        f"{result['measured_at']}:\n"
        f"  {result['chunks_per_cpu_s']:,.0f} chunks per CPU-second, "
        f"{result['requests_per_cpu_s']:,.1f} requests per CPU-second "
        f"({result['requests']} requests x 256 chunks at C={result['concurrency']})\n"
        f"  cached in {calibrate.cache_path()}",
        markup=False,
    )
    return EXIT_OK


def _fingerprint(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen.observe import fingerprint

    data = fingerprint.collect()
    if args.json:
        sys.stdout.write(json.dumps(data, indent=1, default=str) + "\n")
        return EXIT_OK
    from rich.table import Table

    for section in ("host", "software", "gpus"):
        table = Table(title=section, show_header=False, title_justify="left")
        table.add_column("field", style="bold")
        table.add_column("value", overflow="fold")
        for key, value in fingerprint.flatten(data[section]):
            table.add_row(key, value)
        out.print(table)
    return EXIT_OK


def _schema(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen.campaign import json_schema

    sys.stdout.write(json.dumps(json_schema(), indent=2) + "\n")
    return EXIT_OK


def _diff(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen import diff, results
    from reportgen.render import diffpage

    threshold = None
    if args.fail_on_regression is not None:
        try:
            threshold = diff.parse_threshold(args.fail_on_regression)
        except ValueError:
            raise ResultsError(
                f"--fail-on-regression {args.fail_on_regression}: not a percentage; give one "
                "such as 5% (or 0.05)"
            ) from None
    if args.margin is not None and not 0 < args.margin < 1:
        raise ResultsError(f"--margin {args.margin}: give a fraction such as 0.03 (3%)")
    a, b = results.load(args.run_a), results.load(args.run_b)
    paths = (str(results.results_path(args.run_a)), str(results.results_path(args.run_b)))
    d = diff.compare(a, b, margin=args.margin, paths=paths)
    folder = args.run_b if args.run_b.is_dir() else args.run_b.parent
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", f"diff-{d.a.run_id}-vs-{d.b.run_id}")
    out_dir = args.out or folder.parent / name

    out.print(f"A: {d.a.run_id} ({d.a.campaign}); B: {d.b.run_id} ({d.b.campaign})", markup=False)
    if d.incomparable:
        out.print("[bold red]NOT COMPARABLE[/]: the runs differ in", end=" ")
        out.print(
            "; ".join(f"{c.area} {c.key}: {c.a} -> {c.b}" for c in d.incomparable), markup=False
        )
    table = Table(
        caption="comparisons of a headline metric at a level, B / A: + improved, - regressed, "
        "= equivalent, ? inconclusive"
    )
    table.add_column("experiment", no_wrap=True)
    table.add_column("verdict (A -> B)")
    for name in "+-=?":
        table.add_column(name, justify="right")
    table.add_column("notes")
    for e in d.experiments:
        n = {v: sum(m.verdict == v for m in e.metrics) for v in diff.VERDICT.values()}
        notes = []
        if e.new_failure:
            notes.append(f"failed in B: {e.reason[1] or e.status[1]}")
        if e.recovered:
            notes.append("failed in A only")
        if e.newly_failed:
            notes.append(f"checks failing only in B: {', '.join(e.newly_failed)}")
        verdict = f"{e.verdict[0]} -> {e.verdict[1]}" if e.flipped else e.verdict[1]
        table.add_row(e.id, verdict, *(str(n[v]) for v in diff.VERDICT.values()), "; ".join(notes))
    out.print(table)
    if d.only_a or d.only_b:
        out.print(
            f"only in A: {', '.join(d.only_a) or '-'}; only in B: {', '.join(d.only_b) or '-'}",
            markup=False,
        )
    out.print(f"what else changed: {len(d.changed)} difference(s)", markup=False)
    for c in d.changed[:8]:
        out.print(f"  {c.area}: {c.key}: {c.a} -> {c.b} ({diffpage.where(c)})", markup=False)
    if len(d.changed) > 8:
        out.print(f"  ... {len(d.changed) - 8} more in diff.html", markup=False)
    for path in diffpage.write(d, out_dir, threshold, pdf=not args.no_pdf).values():
        out.print(f"diff: {path}", markup=False)
    if threshold is None:
        return EXIT_OK
    worse = d.regressions(threshold, args.metric)
    for m in worse:
        err.print(
            f"regression: {m.experiment} {m.metric} at C={m.concurrency}: B/A "
            f"{m.ratio:.3f} (95% CI {m.ci_low:.3f}-{m.ci_high:.3f}), beyond {threshold:.0%}",
            markup=False,
        )
    if worse:
        return EXIT_FAILED
    out.print(f"no regression beyond {threshold:.0%} is certain", markup=False)
    return EXIT_OK


_COMMANDS = {
    "diff": _diff,
    "validate": _validate,
    "plan": _plan,
    "run": _run,
    "render": _render,
    "verify": _verify,
    "calibrate": _calibrate,
    "fingerprint": _fingerprint,
    "schema": _schema,
}
