"""One experiment: its server sessions, the GPU telemetry around them, what the server's log
and files say, the level aggregates, its request tables, and the assumption checks.

A failed experiment is a result: its entry records the reason and the end of its log, and
the campaign goes on. A Ctrl-C marks it interrupted and is raised again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from reportgen import results as store
from reportgen.analysis import checks as checks_mod
from reportgen.analysis import engine_config
from reportgen.analysis.recheck import prefix_expect
from reportgen.analysis.summary import by_level
from reportgen.campaign import Resolved, repetitions_range
from reportgen.engines import Engine
from reportgen.errors import ReportgenError
from reportgen.load.records import RequestRecord
from reportgen.observe import evidence, host, telemetry
from reportgen.observe.telemetry import Telemetry
from reportgen.results.engine_log import LogEvidence, LogValues
from reportgen.results.levels import HostWindow
from reportgen.results.model import (
    Control,
    Experiment,
    Failure,
    Look,
    Point,
    Run,
    TelemetryInfo,
)
from reportgen.run import external
from reportgen.run.plan import Role, interleaved, server_sessions
from reportgen.run.resume import utc_now
from reportgen.run.session import Context, Launch, ServerSession, level_gpu


class Judge(Protocol):
    """What a running experiment asks of the run's decisions so far (``verdict.Judge``)."""

    def open_levels(self, mine: Mapping[str, Sequence[RequestRecord]]) -> list[Point]:
        """After a round of adaptive repetitions: the objective levels still undecided, given
        the experiment's request records so far by table."""
        ...

    def starts_apart(self) -> list[str]:
        """The levels where its starts so far spread more than the other configurations'."""
        ...

    def equivalence_open(self, mine: Mapping[str, Sequence[RequestRecord]]) -> list[str]:
        """The objective levels where it is inconclusive with its ratio inside the margin,
        better and worse nowhere: where one more start could show it equivalent."""
        ...


def run_experiment(
    ctx: Context,
    r: Resolved,
    parent: Resolved | None,
    entry: Experiment,
    save: Any,
    judge: Judge | None = None,
) -> dict[str, list[RequestRecord]]:
    """Run ``r`` into ``entry`` (``save()`` is called once its tables are written); returns
    its request records by table. With adaptive repetitions, ``judge.open_levels(tables)``
    says after each round which objective levels are still undecided, from the records
    measured so far; with ``campaign.more_starts``, where its starts disagree with the other
    configurations' (``judge.starts_apart``) and where it could still be shown equivalent
    (``judge.equivalence_open``), it is started once more before that."""
    entry.status = "running"
    entry.started_at = utc_now()
    interleave = ctx.m.campaign.interleave
    launches = [
        Launch(r, cfg, reps, role, i)
        for i, (cfg, reps, role) in enumerate(
            server_sessions(
                r,
                parent,
                interleave=interleave,
                # a re-measurement of the baseline (``campaign.anchors``) is one more start
                starts=1 if entry.role == "anchor" else ctx.m.campaign.starts,
                prime=ctx.m.primes and entry.role == "experiment",
            )
        )
    ]
    entry.sessions = []
    entry.looks = []
    if any(x.role == "control" for x in launches):
        entry.control = Control(of=str(r.parent))
    # (a priming start's warm-up requests are not kept: nothing it measured is used)
    rows: dict[str, list[RequestRecord]] = {"experiment": [], "control": [], "prime": []}
    logs: list[tuple[str, str]] = []  # per server: (while serving, once asked to stop)
    tele = _telemetry_start(ctx, entry)
    # the host's CPU where the server runs: here, not a server elsewhere's (bench URL)
    cpu = host.HostSampler().start() if _server_here(entry) else None

    def launch(one: Launch) -> None:
        control = entry.control
        if one.role == "control" and control is not None and control.error:
            return  # the parent's configuration failed once: no more control runs
        try:
            ServerSession(ctx, one, entry, rows[one.role], logs, tele).run()
        except ReportgenError as exc:
            if one.role != "control" or control is None:
                raise
            how = "the parent grown" if control.grown else "interleaved run"
            control.error = f"{one.config.id} ({how}): {exc}"

    def tables() -> dict[str, list[RequestRecord]]:
        return {entry.table: rows["experiment"], entry.control_table: rows["control"]}

    try:
        for one in launches:
            launch(one)
        if judge is not None:
            for one in _more(ctx, r, parent, entry, launches, judge, tables):
                launch(one)
        entry.status = "ok"
    except ReportgenError as exc:
        _failed(entry, exc)
    except KeyboardInterrupt:
        entry.status = "interrupted"
        entry.reason = "interrupted by the user"
        raise
    except Exception as exc:  # reportgen's own fault: said in the results, then raised
        entry.status = "interrupted"
        entry.reason = f"reportgen stopped on an internal error: {type(exc).__name__}: {exc}"
        raise
    finally:
        try:
            _telemetry_end(ctx, r.id, entry, tele)
        finally:
            _host_end(ctx, r.id, entry, cpu)  # its process stopped whatever happened
        _evidence(ctx, r, entry, logs)
        _finish(ctx, entry, tables())
        save()
    return tables()


def _failed(entry: Experiment, exc: ReportgenError) -> None:
    """``entry`` failed with ``exc``: why, and the end of its last server's log."""
    entry.status = "failed"
    entry.reason = str(exc)
    entry.failure = Failure.of(exc)
    last = entry.sessions[-1] if entry.sessions else None
    entry.log_tail = (last.log_tail if last else None) or ""
    if last is not None and last.log_heading:
        entry.log_heading = last.log_heading


def _finish(ctx: Context, entry: Experiment, tables: Mapping[str, list[RequestRecord]]) -> None:
    """Its end: the time, its levels' aggregates, its request tables written."""
    entry.finished_at = utc_now()
    entry.by_level = by_level(entry.levels)
    if entry.control is not None:
        entry.control.by_level = by_level(entry.control.levels)
    for name, rows in tables.items():
        if rows:
            store.save_requests(ctx.run_dir, name, rows)


def _more(
    ctx: Context,
    r: Resolved,
    parent: Resolved | None,
    entry: Experiment,
    launches: Sequence[Launch],
    judge: Judge,
    tables: Callable[[], Mapping[str, Sequence[RequestRecord]]],
) -> Iterator[Launch]:
    """The launches after the planned ones: one more start where its starts disagree with
    the others', one more where it could still be shown equivalent (``_more_starts``), then
    rounds of adaptive repetitions (``_rounds``), each asked of ``judge`` once the launch
    before it has run."""
    index = len(launches)
    for extra in _more_starts(ctx, r, entry, launches, judge, tables):
        yield extra
        index += 1
    yield from _rounds(r, parent, entry, index, lambda: judge.open_levels(tables()))


def _more_starts(
    ctx: Context,
    r: Resolved,
    entry: Experiment,
    launches: Sequence[Launch],
    judge: Judge,
    tables: Callable[[], Mapping[str, Sequence[RequestRecord]]],
) -> Iterator[Launch]:
    """``campaign.more_starts``, for an experiment that ran on two or more starts (fixed
    repetitions, not interleaved): one more start, with one more repetition, where its starts
    spread more than the other configurations' at some level (``entry.more_start`` says
    where: its verdicts take the spread between starts from them all, which its own starts say
    is too small for it); then, asked once that has run, one more where it is still
    inconclusive with its ratio inside the margin, better and worse nowhere
    (``entry.more_open``: one more start is what narrows an interval the spread between
    starts holds wide), unless it measures again what was decided (a bracket, a
    confirmation)."""
    campaign = ctx.m.campaign
    low, high = repetitions_range(r.workload.repetitions)
    starts = sum(x.role == "experiment" for x in launches)
    if not campaign.more_starts or campaign.interleave or r.one_session or high > low:
        return
    if starts < 2:
        return
    rep = low
    apart = judge.starts_apart()
    if apart:
        entry.more_start = "; ".join(apart)
        yield Launch(r, r, [rep], "experiment", len(launches))
        rep += 1
    if entry.role != "experiment":
        return  # a re-measurement of a configuration already decided: no verdict of its own
    inside = judge.equivalence_open(tables())
    if inside:
        entry.more_open = "; ".join(inside)
        yield Launch(r, r, [rep], "experiment", len(launches) + rep - low)


def _rounds(
    r: Resolved,
    parent: Resolved | None,
    entry: Experiment,
    index: int,
    open_levels: Callable[[], list[Point]],
) -> Iterator[Launch]:
    """Adaptive repetitions: after ``min``, while some objective level is undecided and
    below ``max``, one more repetition of just those levels on a fresh server, with its
    parent's beside it on a fresh server too (interleaved: pair by pair; otherwise the
    parent grows, ``Control.grown``: its runs join the parent's own, so that both sides'
    counts grow and the repetitions that would decide are known). A level once decided stays
    so; each look is recorded in ``entry.looks``."""
    low, high = repetitions_range(r.workload.repetitions)
    if high <= low or parent is None:
        return  # a fixed count, or the baseline: nothing to tell it from
    still: list[Point] | None = None
    for done in range(low, high + 1):
        found = open_levels()
        still = found if still is None else [c for c in found if c in still]
        entry.looks.append(Look(repetitions=done, open=still))
        if not still or done == high:
            return
        pairs: list[tuple[Resolved, list[int], Role]] = [(r, [done], "experiment")]
        if not r.one_session:  # (as server_sessions): one server, nothing to grow beside it
            pairs = interleaved(r, parent, done)
            if entry.control is None:
                entry.control = Control(of=parent.id, grown=True)
        for cfg, reps, role in pairs:
            yield Launch(r, cfg, reps, role, index, levels=list(still))
            index += 1


def _evidence(ctx: Context, r: Resolved, entry: Experiment, logs: list[tuple[str, str]]) -> None:
    """What the server's log and the model's files say, and the campaign's own checks. Its
    error lines are counted while it served; those it printed once asked to stop (vLLM's
    EngineDeadError tracebacks at shutdown, SGLang's KeyboardInterrupt) are counted apart."""
    log_text = "\n".join(serving for serving, _ in logs)
    entry.campaign_checks = [chk.model_dump() for chk in r.checks]
    patterns = ctx.engine.patterns()
    for i, chk in enumerate(r.checks):
        if chk.log_contains or chk.log_absent:
            patterns[f"campaign:{i}"] = str(chk.log_contains or chk.log_absent)
    at_stop = evidence.log_evidence("\n".join(stopping for _, stopping in logs), {})
    said = LogEvidence.model_validate(
        evidence.log_evidence(log_text, patterns) | {"errors_at_stop": at_stop["errors"]}
    )
    accept = evidence.log_values(log_text, ctx.engine.spec_accept_log)
    if accept is not None:
        said.spec_accept_length = LogValues.model_validate(accept)
    entry.log_evidence = said
    entry.server_args_resolved = evidence.server_args(said.found)
    entry.engine_config = engine_config_of(ctx.run_dir, ctx.engine, entry, log_text)
    entry.model_files = evidence.model_files(r.args, ctx.campaign_dir)


def engine_config_of(
    run_dir: Path, engine: Engine, entry: Experiment, fallback: str | None
) -> dict[str, Any] | None:
    """Its resolved configuration, from the log of its first start of its own configuration
    (not a priming or its parent's interleaved start), else from ``fallback``."""
    first = next((s for s in entry.sessions if s.role == "experiment"), None)
    text = store.read_log(run_dir, first.log_file) if first is not None else None
    text = text if text is not None else fallback
    if not text:
        return None
    return evidence.engine_config(text, engine.config_lines, engine.config_values)


def check(
    ctx: Context, run: Run, entry: Experiment, r: Resolved, rows: list[RequestRecord]
) -> None:
    """Every assumption check of ``entry`` (``analysis.checks``), from what it recorded."""
    baseline = run.baseline
    m = ctx.m
    parent = run.experiment(entry.parent) if entry.parent else None
    entry.also_changed = engine_config.also_changed(
        parent.engine_config if parent is not None else None,
        entry.engine_config,
        [f.key for f in entry.flag_diff],
        ctx.engine.config_volatile,
    )
    entry.checks = checks_mod.run_checks(
        entry,
        run.fingerprint,
        log_patterns=list(ctx.engine.patterns()),
        cv_bound=m.campaign.cv_bound,
        host_expect=m.host.expect.model_dump(),
        rows=rows,
        counters=dict(ctx.engine.counters),
        prefix_expect=prefix_expect(r.workload),
        baseline=None if baseline is None or baseline.id == entry.id else baseline,
        random_weights=m.campaign.random_weights,
        graphs_off=ctx.engine.graphs_disabled(r.args),
        known=run.known_at(entry.id),
        metric=run.metric,
    )


def _server_here(entry: Experiment) -> bool:
    """Whether the experiment's server runs on this host (one reportgen starts, or a
    ``base_url`` here), so its GPUs and CPUs are the ones sampled here."""
    return not entry.base_url or external.is_local(entry.base_url)


def _telemetry_start(ctx: Context, entry: Experiment) -> Telemetry | None:
    """Error counters now, and GPU sampling from before the server starts (its loading
    shows in the charts) until after it stops."""
    if ctx.gpu_source is None:
        entry.telemetry = TelemetryInfo(error=f"no GPU telemetry: {ctx.gpu_why}")
        return None
    if not _server_here(entry):
        entry.telemetry = TelemetryInfo(
            error=f"no GPU telemetry: the server runs on another host ({entry.base_url}), "
            "whose GPUs NVML here cannot see"
        )
        return None
    try:
        entry.gpu_counters = {"before": ctx.gpu_source.counters()}
    except Exception as exc:
        entry.gpu_counters = {"error": f"error counters unreadable: {exc}"}
    return Telemetry(ctx.gpu_source).start()


def _host_end(ctx: Context, exp_id: str, entry: Experiment, cpu: host.HostSampler | None) -> None:
    """The host's CPU samples summarised over each level's window, and kept."""
    if cpu is None:
        return
    rows = cpu.stop()
    if cpu.error:
        entry.warnings.append(cpu.error)
    for level in entry.all_levels():
        w = level.window
        if w is not None and w.t0_monotonic:
            found = host.window(rows, w.t0_monotonic, w.end)
            level.host = None if found is None else HostWindow.model_validate(found)
    if rows:
        store.save_host(ctx.run_dir, exp_id, rows)


def _telemetry_end(ctx: Context, exp_id: str, entry: Experiment, tele: Telemetry | None) -> None:
    if tele is None or ctx.gpu_source is None:
        return
    rows = tele.stop()
    for level in entry.all_levels():  # again, with every sample: the same, or more complete
        level_gpu(level, rows)
    entry.telemetry = TelemetryInfo(
        hz=tele.hz, rows=len(rows), late_samples=tele.late_samples, error=tele.error
    )
    if rows:
        store.save_telemetry(ctx.run_dir, exp_id, rows)
    counters = entry.gpu_counters or {}
    if "before" in counters:
        try:
            counters["after"] = ctx.gpu_source.counters()
            counters["new_errors"] = telemetry.counter_deltas(counters["before"], counters["after"])
        except Exception as exc:
            counters["after"] = {"error": f"error counters unreadable: {exc}"}
