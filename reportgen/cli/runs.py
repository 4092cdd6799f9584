"""Running a campaign (``reportgen run``, ``--resume``, the summary table it ends with) and
reading a run back (``reportgen render``, ``reportgen verify``)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from reportgen.cli import summary
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
    percentiles: tuple[float, ...] = ()  # bench --percentiles: more latency percentiles shown
    save_result: Path | None = None  # bench --save-result: the --json object, also in a file
    history: Path | None = None  # run --history: earlier runs' spread between starts

    @classmethod
    def of(cls, args: argparse.Namespace) -> RunRequest:
        given: dict[str, Any] = {f.name: getattr(args, f.name, f.default) for f in fields(cls)}
        return cls(**given)


def cmd_run(args: argparse.Namespace, out: Console, err: Console) -> int:
    return run_campaign(RunRequest.of(args), out, err)


def run_campaign(args: RunRequest, out: Console, err: Console) -> int:
    """Run a campaign, render its report, say the outcome; the exit code."""
    c = load_for(args)  # a mistake in the file is said before the runner's imports (1 s)
    if args.history is not None and not args.history.is_file():
        raise ResultsError(
            f"--history {args.history}: no history file there; record runs first (reportgen "
            f"history add RUN_DIR --store {args.history}), or leave --history out"
        )
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
                + (", ".join(e.id for e in c.experiments if e.id not in done) or "nothing"),
                markup=False,
            )
    else:
        run_dir = args.output / c.name / plan.new_run_id(c)
    live = said.is_terminal and not args.quiet
    interrupt.install()  # Ctrl-C and SIGTERM: KeyboardInterrupt, never lost (see there)
    r = runner.Runner(
        c,
        run_dir,
        progress.make(said, live),
        resume=saved,
        history=args.history or args.output / "history.sqlite",
    )
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
    # bench --percentiles: read from the request tables once, for the table and the JSON
    asked = summary.latency_percentiles(run_dir, data, args.percentiles)
    if not args.json:
        summary.summary_table(out, data, asked)
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
    if args.json or args.save_result is not None:
        outcome = summary.summary_json(run_dir, data, paths, code, asked)
        text = json.dumps(outcome, default=str, indent=2)
        if args.save_result is not None:
            args.save_result.parent.mkdir(parents=True, exist_ok=True)
            results.atomic_write_bytes(args.save_result, (text + "\n").encode())
            said.print(f"result: {args.save_result}", markup=False)
        if args.json:
            out.print_json(text)
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
    if baseline is not None and baseline.id in untrusted:
        err.print(
            f"the baseline ({baseline.id}) failed a check that invalidates its numbers, so "
            "nothing measured can be relied on or compared with it",
            markup=False,
        )
        return EXIT_FAILED
    if baseline is not None and baseline.status == "failed":
        # failures are results, but not the reference's: with no baseline nothing was compared
        err.print(
            f"the baseline ({baseline.id}) failed, so no experiment could be compared with it: "
            "fix what its reason in the report says, then `reportgen run CAMPAIGN --resume`",
            markup=False,
        )
        return EXIT_FAILED
    return EXIT_FAILED if failed and strict else EXIT_OK


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
    from reportgen.analysis.findings import attach
    from reportgen.render import render

    out = render(run_dir, pdf=pdf, attach=attach)
    tables = out.tables[0].parent if out.tables else None
    return [p for p in (out.html, out.pdf, out.markdown, tables) if p is not None]


def cmd_render(args: argparse.Namespace, out: Console, err: Console) -> int:
    priced = args.price is not None or args.price_source is not None
    if args.model_config is not None or args.energy or priced:
        # what a run kept before reportgen recorded it, given back: read once, each part
        # applied, saved once (one refused leaves the run as it was)
        from reportgen import results as store

        run = store.load(args.run_dir)
        if args.model_config is not None:
            _model_shape(run, args.model_config, out)
        if args.energy:
            _energy(run, args.run_dir, out)
        if priced:
            _price(run, args.run_dir, args.price, args.price_source, out)
        store.save(args.run_dir, run, [])
    if args.redecide or args.recheck:
        _redecide(args.run_dir, out, recheck=args.recheck)
    for p in _render_paths(args.run_dir, pdf=not args.no_pdf):
        out.print(f"report: {p}", markup=False)
    return EXIT_OK


def _model_shape(run: Run, config: Path, out: Console) -> None:
    """``render --model-config``: the model's shape read from ``config`` into each experiment
    that recorded a config.json of the same sha256 (so it is the file the run's server read);
    one line naming what matched, or why nothing did."""
    import hashlib
    import json

    from reportgen.observe.evidence import model_shape

    try:
        raw = config.read_bytes()
        data = json.loads(raw)
    except (OSError, ValueError) as exc:
        raise ResultsError(
            f"{config}: not a readable config.json ({exc}); nothing changed"
        ) from None
    if not isinstance(data, dict):
        raise ResultsError(f"{config}: not a model's config.json (no object); nothing changed")
    digest = hashlib.sha256(raw).hexdigest()
    matched = []
    recorded = set()
    for e in run.experiments:
        files = (e.model_files or {}).get("files") or {}
        if files.get("config.json"):
            recorded.add(str(files["config.json"])[:12])
        if files.get("config.json") == digest and e.model_files is not None:
            e.model_files["shape"] = model_shape(data)
            matched.append(e.id)
    if not matched:
        raise ResultsError(
            f"{config}: sha256 {digest[:12]}... matches no experiment's recorded config.json "
            f"({', '.join(sorted(recorded)) or 'none recorded'}): not the file the run's server "
            "read; nothing changed"
        )
    out.print(f"model shape from {config} (sha256 {digest[:12]}...): {', '.join(matched)}",
              markup=False)  # fmt: skip


def _price(
    run: Run, run_dir: Path, per_hour: float | None, source: str | None, out: Console
) -> None:
    """``render --price PER_HOUR --price-source TEXT``: what the host cost an hour, into the
    run's campaign (``host.price``, as the campaign file would have given it)."""
    from reportgen.campaign.host import Price

    if per_hour is None or not (source or "").strip():
        raise ResultsError(
            f"{run_dir}: render --price needs both a price an hour and --price-source (where "
            "it came from, quoted in the report); nothing changed"
        )
    price = Price.model_validate({"per_hour": per_hour, "source": str(source).strip()})
    host = dict(run.campaign.get("host") or {})
    host["price"] = price.model_dump(exclude_none=True)
    run.campaign["host"] = host
    out.print(f"price: {per_hour:g} {price.currency} an hour ({price.source})", markup=False)


def _energy(run: Run, run_dir: Path, out: Console) -> None:
    """``render --energy``: every level's GPU windows computed again from the telemetry table
    beside it (as ``verify`` does), with their energy, and each level run's mean power and
    output tokens per joule from them; the aggregates again."""
    from reportgen import results as store
    from reportgen.analysis.summary import by_level
    from reportgen.results.rundir import RunDir
    from reportgen.run.session import level_gpu

    d = RunDir(run_dir)
    done = []
    for e in run.experiments:
        if not d.telemetry(e.table).exists():
            continue
        rows = store.telemetry_records(run_dir, e.table)
        for lv in e.all_levels():
            level_gpu(lv, rows)
        e.by_level = by_level(e.levels)
        if e.control is not None:
            e.control.by_level = by_level(e.control.levels)
        done.append(e.id)
    if not done:
        raise ResultsError(f"{run_dir}: no telemetry table: no GPU was sampled; nothing changed")
    out.print(f"energy from the telemetry tables: {', '.join(done)}", markup=False)


def _redecide(run_dir: Path, out: Console, recheck: bool = False) -> None:
    """``render --redecide``: the decisions taken again by this reportgen's method, saved,
    with what they were (``Run.redecided``); ``--recheck``: the assumption checks first."""
    from reportgen import __version__
    from reportgen import results as store
    from reportgen.analysis import verdict
    from reportgen.results.verdicts import Redecision
    from reportgen.run.resume import utc_now

    run = store.load(run_dir)
    best = run.best

    read: dict[str, list[Any]] = {}

    def rows(table: str) -> list[Any]:  # each table read once (stalls, checks, decisions)
        if table not in read:
            read[table] = store.read_requests(run_dir, table)
        return read[table]

    checks_before: dict[str, dict[str, str]] | None = None
    if recheck:
        from reportgen.analysis.recheck import recheck as take_checks

        checks_before = take_checks(run, run_dir, rows)
        for eid, was in checks_before.items():
            entry = next(e for e in run.experiments if e.id == eid)
            now = {c.id: c.status for c in entry.checks}
            said = ", ".join(f"{k} {v} -> {now.get(k, 'absent')}" for k, v in sorted(was.items()))
            out.print(f"{eid}: {said}", markup=False)
    _stalls_of(run, rows)  # (what decisions leave out, for a run recorded before it was kept)
    # the method of the decisions that compared something (a baseline's has none)
    methods = {
        e.decision.method or "welch"
        for e in run.experiments
        if e.decision and (e.decision.vs_parent or e.decision.vs_baseline)
    }
    before = verdict.redecide(run, rows)
    record = Redecision(
        at=utc_now(),
        reportgen_version=__version__,
        method=verdict.CURRENT,
        method_before=verdict.oldest(methods),
        verdicts_before=before,
        best_before=best,
    )
    if checks_before is not None:
        record.checks_before = checks_before
    run.redecided.append(record)
    store.save(run_dir, run, [])
    for e in run.experiments:
        if e.id in before and e.decision is not None and e.decision.verdict != before[e.id]:
            out.print(f"{e.id}: {before[e.id]} -> {e.decision.verdict}", markup=False)
    out.print(f"best: {best} -> {run.best}", markup=False)


def _stalls_of(run: Any, rows: Any) -> None:
    """Each level run's longest hold-up of a stalled request (``Summary.stall_s``), from its
    requests, where the run was recorded before reportgen kept it."""
    from reportgen.analysis.checks_stalls import longest_stall
    from reportgen.results.model import point_of

    for e in run.experiments:
        control = e.control.levels if e.control else []
        for table, levels in ((e.table, e.levels), (e.control_table, control)):
            if not levels or all(lv.summary.stall_s is not None for lv in levels):
                continue
            recs = rows(table)
            for lv in levels:
                if lv.summary.stall_s is None:
                    mine = [r for r in recs if (point_of(r), r.repetition) == lv.key]
                    lv.summary.stall_s = longest_stall(mine)


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
