"""Running a campaign (``reportgen run``, ``--resume``, the summary table it ends with) and
reading a run back (``reportgen render``, ``reportgen verify``)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from reportgen.cli.codes import EXIT_FAILED, EXIT_OK
from reportgen.errors import HostLost, ResultsError
from reportgen.run import interrupt

if TYPE_CHECKING:
    from reportgen.results.model import Run


@dataclass(frozen=True)
class RunRequest:
    """What ``reportgen run`` is asked to do; ``reportgen bench`` asks it too, for the
    campaign file it wrote."""

    campaign: Path
    output: Path
    resume: str | None = None  # --resume: "latest", else a run directory
    ssh: str | None = None
    slurm: str | None = None
    parallel: int | None = None
    no_pdf: bool = False
    quiet: bool = False
    strict: bool = False
    json: bool = False

    @classmethod
    def of(cls, args: argparse.Namespace) -> RunRequest:
        given: dict[str, Any] = {f.name: getattr(args, f.name, f.default) for f in fields(cls)}
        return cls(**given)


def cmd_run(args: argparse.Namespace, out: Console, err: Console) -> int:
    return run_campaign(RunRequest.of(args), out, err)


def run_campaign(args: RunRequest, out: Console, err: Console) -> int:
    """Run a campaign, render its report, say the outcome; the exit code."""
    c = load_for(args)  # a mistake in the file is said before the runner's imports (1 s)
    from reportgen import results
    from reportgen.run import plan, progress, resume, runner

    said = err if args.json else out  # --json: stdout holds the JSON alone
    saved: Run | None = None
    if args.resume is not None:
        run_dir = _run_to_resume(args.output / c.name, args.resume)
        saved = resume.resumable(c, run_dir)
        done = [e.id for e in saved.experiments[: saved.finished_prefix()]]
        said.print(
            f"resuming {run_dir}: kept {len(done)} finished experiment(s)"
            + (f" ({', '.join(done)})" if done else ""),
            markup=False,
        )
        for line in _stop_leftovers(run_dir):
            said.print(line, markup=False)
        if saved.campaign_file.sha256 != c.sha256:
            said.print(
                "the campaign file changed since, only in what is still to run: "
                + (", ".join(e.id for e in c.experiments[len(done) :]) or "nothing"),
                markup=False,
            )
    else:
        run_dir = args.output / c.name / plan.new_run_id(c)
    live = said.is_terminal and not args.quiet
    interrupt.install()  # Ctrl-C and SIGTERM: KeyboardInterrupt, never lost (see there)
    r = runner.Runner(c, run_dir, progress.make(said, live), resume=saved)
    data: Run | None = None
    interrupted = lost = False
    try:
        data = r.run()
    except KeyboardInterrupt:
        interrupt.stopping()
        interrupted = True
        err.print(
            "interrupted: servers stopped, finished experiments saved; rendering a partial report",
            markup=False,
        )
    except HostLost as exc:
        lost = True
        err.print(f"error: {exc}; rendering a partial report", markup=False)
    if data is None:  # interrupted: what was saved, if the run got as far
        if not results.RunDir(run_dir).results.exists():
            return interrupt.exit_code()
        data = results.load(run_dir)
    if not args.json:
        _summary_table(out, data)
    try:
        if interrupted:
            interrupt.rendering()
        paths = _render_paths(run_dir, pdf=not args.no_pdf)
    except KeyboardInterrupt:
        err.print(
            "interrupted again while rendering: the results are saved; render the report "
            f"with: reportgen render {run_dir}",
            markup=False,
        )
        return interrupt.exit_code()
    for p in paths:
        said.print(f"report: {p}", markup=False)
    code = EXIT_FAILED if lost else _exit_code(data, err, interrupted, strict=args.strict)
    if args.json:
        out.print_json(json.dumps(_summary_json(run_dir, data, paths, code), default=str))
    return code


def _ssh_host(path: Path, destination: str) -> str:
    """``--ssh``'s value, refused in one line unless ssh could take it as a host."""
    from reportgen.campaign.host import SshHost
    from reportgen.errors import CampaignError, Problem

    try:
        SshHost.model_validate({"host": destination})
    except ValueError:
        raise CampaignError(
            [Problem(str(path), "--ssh", destination, "not a host: give HOST or USER@HOST")]
        ) from None
    return destination


def load_for(args: argparse.Namespace | RunRequest) -> Any:
    """The campaign file with where the command line says to run it (``--ssh``, ``--slurm``,
    ``--parallel``) over its host and campaign tables."""
    from reportgen import campaign

    return campaign.load(args.campaign, overrides(args, args.campaign))


def overrides(args: argparse.Namespace | RunRequest, path: Path) -> dict[str, Any]:
    """What ``--ssh [USER@]HOST``, ``--slurm [PARTITION]`` and ``--parallel N`` change of the
    campaign file at ``path``, merged over it before it is checked (so a file's server.nodes
    is satisfied by --slurm, and parallel with --ssh is refused as in the file)."""
    over: dict[str, Any] = {}
    destination = getattr(args, "ssh", None)
    if destination:
        over["host"] = {"executor": "ssh", "ssh": {"host": _ssh_host(path, destination)}}
    partition = getattr(args, "slurm", None)
    if partition is not None:
        partition = partition.strip()
        slurm = {"partition": partition} if partition else {}
        over["host"] = {"executor": "slurm", "slurm": slurm}
    if getattr(args, "parallel", None) is not None:
        over["campaign"] = {"parallel": args.parallel}
    return over


def _exit_code(data: Run, err: Console, interrupted: bool, strict: bool) -> int:
    """What the run exits with, each failure said on stderr."""
    if interrupted:
        return interrupt.exit_code()
    failed = [e.id for e in data.experiments if not e.ok]
    if failed:
        err.print(
            f"{len(failed)} experiment(s) failed: {', '.join(failed)} (see the report)",
            markup=False,
        )
    untrusted = [
        e.id for e in data.experiments if e.ok and e.decision and e.decision.verdict == "failed"
    ]
    if untrusted:
        err.print(
            f"{len(untrusted)} experiment(s) ran but failed an assumption check that "
            f"invalidates their numbers: {', '.join(untrusted)} (see the report)",
            markup=False,
        )
    failed += untrusted
    baseline = data.baseline
    if baseline is not None and baseline.status == "failed":
        # failures are results, but not the reference's: with no baseline nothing was compared
        err.print(
            f"the baseline ({baseline.id}) failed, so no experiment could be compared with it: "
            "fix what its reason in the report says, then `reportgen run CAMPAIGN --resume`",
            markup=False,
        )
        return EXIT_FAILED
    return EXIT_FAILED if failed and strict else EXIT_OK


def _summary_json(run_dir: Path, data: Run, paths: list[Path], code: int) -> dict[str, Any]:
    """``run --json``: what the summary table and the report paths say, for scripts. Each
    experiment's objective per level is the mean and standard deviation over repetitions;
    its comparisons are the decision's, against its parent and the baseline."""
    from reportgen import metrics

    key = metrics.key(data.metric)

    def compared(comps: list[Any]) -> list[dict[str, Any]]:
        return [
            {
                k: getattr(c, k)
                for k in ("concurrency", "rate", "ratio", "ci_low", "ci_high", "verdict")
            }
            for c in comps
        ]

    experiments = []
    for e in data.experiments:
        levels = {}
        for agg in e.by_level:
            stat = agg.stat(key)
            levels[str(agg.point)] = {
                "mean": stat.mean,
                "sd": stat.sd,
                "repetitions": agg.repetitions,
            }
        d = e.decision
        experiments.append(
            {
                "id": e.id,
                "status": e.status,
                "outcome": data.outcome(e),
                "reason": e.reason,
                "parent": e.parent,
                key: levels,
                "vs_parent": compared(d.vs_parent) if d else [],
                "vs_baseline": compared(d.vs_baseline) if d else [],
                "search": e.search.model_dump(mode="json") if e.search else None,
            }
        )
    kinds = {".html": "html", ".pdf": "pdf", ".md": "markdown"}
    return {
        "run_dir": str(run_dir),
        "status": data.status,
        "status_reason": data.status_reason,
        "exit_code": code,
        "best": data.best,
        "objective": {
            "metric": data.metric,
            "key": key,
            "concurrency": data.objective_levels,
            "higher_is_better": data.higher_is_better,
        },
        "experiments": experiments,
        "reports": {kinds.get(p.suffix, "tables"): str(p) for p in paths},
    }


def _stop_leftovers(run_dir: Path) -> list[str]:
    """Servers the earlier run of ``run_dir`` started and never stopped (it was killed, and
    their watchdog could not stop them either): each stopped by its process group, said."""
    from reportgen.results import RunDir
    from reportgen.run import reaper

    said = []
    for path, record in reaper.leftovers(RunDir(run_dir).server_records()):
        if record.running():
            gone = reaper.stop_group(record.pgid, 5.0)
            said.append(
                f"stopped the server the earlier run left running: process group "
                f"{record.pgid} on port {record.port} ({record.log})"
                + ("" if gone else "; it did not stop, stop it by hand before resuming")
            )
            if not gone:
                continue
        path.unlink(missing_ok=True)
    return said


def _run_to_resume(campaign_dir: Path, given: str) -> Path:
    """The run directory --resume names, or the latest unfinished run of the campaign."""
    from reportgen import results

    if given != "latest":
        return Path(given)
    unfinished = []
    for path in sorted(campaign_dir.glob("*/" + results.RESULTS)):
        try:
            status = results.load(path).status
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


# A lone configuration's table (``reportgen bench``): per level, what `vllm bench serve`
# prints, each the mean over repetitions: (Aggregate key, column)
LONE = (
    ("req_s", "req/s"),
    ("output_tok_s", "output\ntok/s"),
    ("ttft_ms_p50", "TTFT\np50 ms"),
    ("ttft_ms_p99", "TTFT\np99 ms"),
    ("itl_ms_p50", "ITL\np50 ms"),
    ("itl_ms_p99", "ITL\np99 ms"),
    ("e2e_ms_p50", "E2E\np50 ms"),
)


def _lone_table(out: Console, data: Run) -> None:
    """One configuration, nothing to compare: its headline numbers per level."""
    from reportgen.render.fmt import fmt_num, level_head

    (e,) = data.experiments
    status = "" if data.status == "complete" else f" - {data.status.upper()}"
    table = Table(
        title=f"{data.info.get('title', '')}{status}",
        caption=f"{e.id}: {e.status}; means over {_reps_said(e)}; errors: failed "
        "requests of all sent",
        title_justify="left",
        caption_justify="left",
    )
    table.add_column(level_head(lv.point for lv in e.levels), justify="right", no_wrap=True)
    for _, label in LONE:
        table.add_column(label, justify="right", no_wrap=True)
    table.add_column("in flight", justify="right", no_wrap=True)
    table.add_column("errors", justify="right", no_wrap=True)
    met = {p.point: p.passed for p in e.search.probes} if e.search else {}
    if e.search:
        table.add_column("SLO", no_wrap=True)
    for agg in e.by_level:
        cells = [fmt_num(agg.stat(key).mean) if agg.stat(key).mean is not None else "–"
                 for key, _ in LONE]  # fmt: skip
        sent = sum(lv.summary.requests for lv in e.levels if lv.point == agg.point)
        ok = sum(lv.summary.ok for lv in e.levels if lv.point == agg.point)
        slo = ["met" if met.get(agg.point) else "missed"] if e.search else []
        table.add_row(str(agg.point), *cells, _in_flight(e, agg.point), f"{sent - ok}/{sent}", *slo)
    _print_table(out, table)
    if e.search:
        from reportgen.render.text import search_said

        out.print(search_said(e.search), markup=False, highlight=False)


def _print_table(out: Console, table: Table) -> None:
    """A table in full where the output is a file or a pipe (a log keeps every digit); fitted
    to the width of a terminal, as rich does, where it is one."""
    if out.is_terminal:
        out.print(table)
        return
    from rich.measure import Measurement
    from rich.segment import Segments

    wide = Measurement.get(out, out.options.update_width(1_000), table).maximum
    out.print(Segments(out.render(table, out.options.update_width(max(out.width, wide)))))


def _in_flight(e: Any, point: Any) -> str:
    """A level's mean requests in flight, marked "(low)" under 0.9 x a closed loop's C; an
    open loop's shortfall against its offered rate where it fell short."""
    from reportgen.analysis.checks_levels import under_load
    from reportgen.render.levels import achieved

    runs = [lv for lv in e.levels if lv.point == point]
    wl = e.workload or {}
    closed = point.rate is None and not wl.get("request_rate")
    short = next((u for lv in runs if (u := under_load(lv, wl))), "")
    if closed:
        return achieved([lv.summary for lv in runs], point.concurrency)
    return achieved([lv.summary for lv in runs]) + (f" (low: {short})" if short else "")


def _reps_said(e: Any) -> str:
    reps = sorted({lv.repetition for lv in e.levels})
    return f"{len(reps)} repetition{'s' if len(reps) != 1 else ''}"


def _summary_table(out: Console, data: Run) -> None:
    """One screen: each experiment's verdict and objective metric per level (mean ± sd)."""
    if len(data.experiments) == 1 and data.experiments[0].by_level:
        _lone_table(out, data)
        return
    from reportgen import metrics
    from reportgen.render.fmt import fmt_num
    from reportgen.render.levels import achieved, summaries_by_level
    from reportgen.results.model import sorted_points

    metric = data.metric
    key = metrics.key(metric)
    status = "" if data.status == "complete" else f" - {data.status.upper()}"
    table = Table(
        title=f"{data.info.get('title', '')}{status}",
        caption=f"{key}: mean ± sd over repetitions (in brackets: achieved concurrency); "
        f"best: {data.best or 'none'}",
        title_justify="left",
        caption_justify="left",
    )
    table.add_column("experiment", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    levels = sorted_points(agg.point for e in data.experiments for agg in e.by_level)
    for c in levels:
        table.add_column(c.label, justify="right", no_wrap=True)
    for e in data.experiments:
        cells = []
        runs = summaries_by_level(e)
        for c in levels:
            level = e.aggregate(c)
            stat = level.stat(key) if level else None
            mean, sd = (stat.mean, stat.sd) if stat else (None, None)
            spread = "" if not sd else f" ±{sd:,.0f}" if sd >= 10 else f" ±{sd:#.2g}"
            if level is not None and level.all_failed:
                cells.append("all failed")
            else:
                busy = f" ({achieved(runs[c])})" if c in runs else ""
                cells.append("" if mean is None else fmt_num(mean) + spread + busy)
        verdict = data.outcome(e)
        if e.id == data.best:
            verdict += " (best)"
        table.add_row(e.id, verdict, *cells)
    _print_table(out, table)


def cmd_render(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.redecide or args.recheck:
        _redecide(args.run_dir, out, recheck=args.recheck)
    for p in _render_paths(args.run_dir, pdf=not args.no_pdf):
        out.print(f"report: {p}", markup=False)
    return EXIT_OK


def _redecide(run_dir: Path, out: Console, recheck: bool = False) -> None:
    """``render --redecide``: the decisions taken again by this reportgen's method, saved,
    with what they were (``Run.redecided``); ``--recheck``: the assumption checks first."""
    from reportgen import __version__
    from reportgen import results as store
    from reportgen.analysis import verdict
    from reportgen.run.resume import utc_now

    run = store.load(run_dir)
    best = run.best

    def rows(table: str) -> list[Any]:
        return store.read_requests(run_dir, table)

    checks_before: dict[str, dict[str, str]] | None = None
    if recheck:
        from reportgen.analysis.recheck import recheck as take_checks

        checks_before = take_checks(run, run_dir, rows)
        for eid, was in checks_before.items():
            entry = next(e for e in run.experiments if e.id == eid)
            now = {c.id: c.status for c in entry.checks}
            said = ", ".join(f"{k} {v} -> {now.get(k, 'absent')}" for k, v in sorted(was.items()))
            out.print(f"{eid}: {said}", markup=False)
    # the method of the decisions that compared something (a baseline's has none)
    methods = {
        e.decision.method or "welch"
        for e in run.experiments
        if e.decision and (e.decision.vs_parent or e.decision.vs_baseline)
    }
    before = verdict.redecide(run, rows)
    record: dict[str, Any] = {
        "at": utc_now(),
        "reportgen_version": __version__,
        "method": verdict.CURRENT,
        "method_before": verdict.oldest(methods),
        "verdicts_before": before,
        "best_before": best,
    }
    if checks_before is not None:
        record["checks_before"] = checks_before
    run.redecided.append(record)
    store.save(run_dir, run, [])
    for e in run.experiments:
        if e.id in before and e.decision is not None and e.decision.verdict != before[e.id]:
            out.print(f"{e.id}: {before[e.id]} -> {e.decision.verdict}", markup=False)
    out.print(f"best: {best} -> {run.best}", markup=False)


def cmd_verify(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen import results, verify

    given = args.report
    if given.name == results.RESULTS and given.is_file():  # the run's results: its report
        given = given.parent
    report = results.RunDir(given).html if given.is_dir() else given
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
