"""One server session: start the server, wait until it serves, (the first time) ask its info
and the golden prompts, warm up, run each level for its repetitions, and always stop it.

Everything it learns is written into the typed results as it goes (the experiment's entry and
the session's record), so an error or a Ctrl-C halfway keeps what was measured until then.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reportgen import engines
from reportgen.analysis import search, steady
from reportgen.analysis.summary import energy_rates
from reportgen.campaign import Campaign, CampaignModel, Resolved, repetitions_range
from reportgen.campaign.levels import point_of
from reportgen.campaign.workload import FindMax
from reportgen.errors import ReportgenError, ServerError
from reportgen.load import tokens
from reportgen.load.loadgen import RequestSpec
from reportgen.load.records import RequestRecord
from reportgen.load.tokens import Tokenizer
from reportgen.observe import evidence, telemetry
from reportgen.observe.gpu import GpuSource
from reportgen.observe.telemetry import Telemetry
from reportgen.results.levels import GpuWindow, Level, SearchRecord
from reportgen.results.model import Experiment, Point, ProbeAnswer, Ready, Session, Stop
from reportgen.results.rundir import RunDir
from reportgen.results.verdicts import FAILED_DURING
from reportgen.run import events, external, interrupt, probes
from reportgen.run.driver import Driver, keep_text_chars
from reportgen.run.external import ExternalServer
from reportgen.run.plan import Role, command_line
from reportgen.run.progress import ProgressSink
from reportgen.run.server import ServerProcess
from reportgen.tracebacks import gist

EXIT_GRACE_S = 2.0  # after a level whose connections failed: how long its server gets to exit


@dataclass
class Context:
    """What every session of a run shares: the campaign, where it writes, the engine's
    adapter, the progress display, the GPU source, and what is measured once per run."""

    campaign: Campaign
    run_dir: Path
    progress: ProgressSink
    secrets: list[str]
    gpu_source: GpuSource | None = None
    gpu_why: str | None = None
    client_ceiling: dict[str, Any] | None = None
    _tokenizers: dict[str, Tokenizer] = field(default_factory=dict)

    @property
    def m(self) -> CampaignModel:
        return self.campaign.model

    @property
    def engine(self) -> engines.Engine:
        return engines.get(self.m.server.engine)

    @property
    def campaign_dir(self) -> Path:
        return Path(self.campaign.path).resolve().parent

    def tokenizer(self, path: str | None) -> Tokenizer | None:
        if path is None:
            return None
        if path not in self._tokenizers:
            self._tokenizers[path] = tokens.load(path)
        return self._tokenizers[path]


@dataclass
class Launch:
    """One server session of an experiment (``plan.server_sessions``)."""

    experiment: Resolved  # whose workload is run
    config: Resolved  # whose server is started: the experiment's, or its parent's (control)
    repetitions: list[int]
    role: Role
    index: int
    levels: list[Point] | None = None  # a round of adaptive repetitions: the levels still open


class ServerSession:
    """Runs one ``Launch`` into ``entry``; request records go to ``rows``, the server's log
    text (experiment sessions only) to ``logs``: what it wrote while serving, and what it
    wrote once asked to stop (shutdown tracebacks are not errors of the measurement)."""

    def __init__(
        self,
        ctx: Context,
        launch: Launch,
        entry: Experiment,
        rows: list[RequestRecord],
        logs: list[tuple[str, str]],
        gpu: Telemetry | None = None,
    ) -> None:
        self.ctx = ctx
        self.gpu = gpu  # the experiment's GPU sampler: each level's energy at its end
        self.launch = launch
        self.entry = entry
        self.rows = rows
        self.logs = logs
        self._metrics_off = False  # one failed scrape turns them off for the session
        first = not any(s.role == launch.role for s in entry.sessions)
        self.first = first
        name = (
            RunDir.log_name(launch.experiment.id)
            if first and launch.role == "experiment"
            else RunDir.log_name(launch.experiment.id, launch.index, launch.role)
        )
        self.record = Session(
            index=launch.index,
            role=launch.role,
            config=launch.config.id,
            repetitions=list(launch.repetitions),
            log_file=name,
        )
        entry.sessions.append(self.record)
        engine = ctx.engine
        self.engine = engine
        cfg = launch.config
        self.external = cfg.base_url is not None
        self.srv: ServerProcess
        if cfg.base_url is not None:
            self.srv = ExternalServer(
                cfg.base_url,
                log_path=ctx.run_dir / name,
                engine=engine,
                headers={**cfg.workload.headers, **external.auth_headers()},
                secrets=ctx.secrets,
            )
            return
        self.srv = ServerProcess(
            command_line(ctx.campaign, cfg, sys.executable),  # this process's Python
            env=cfg.env,
            log_path=ctx.run_dir / name,
            host=ctx.m.server.host,
            port=engine.port(cfg.args),
            engine=engine,
            stop_timeout_s=ctx.m.server.stop_timeout_s,
            headers={**cfg.workload.headers, **engine.auth_headers(cfg.args)},
            secrets=ctx.secrets,
        )

    @property
    def levels(self) -> list[Level]:
        if self.launch.role == "prime":
            return []  # it measures nothing
        if self.launch.role == "experiment":
            return self.entry.levels
        assert self.entry.control is not None
        return self.entry.control.levels

    def run(self) -> None:
        """Start, measure, stop; a ReportgenError says why the session could not finish
        (recorded in the session with the log's end before it is raised)."""
        try:
            self._measure()
        except ReportgenError as exc:
            self.record.error = str(exc)
            self.record.log_tail = getattr(exc, "log_tail", "") or self.srv.log_tail()
            if isinstance(exc, ServerError) and exc.log_heading:
                self.record.log_heading = exc.log_heading
            raise
        finally:
            self._stop()

    def _measure(self) -> None:
        ctx, launch, entry, srv = self.ctx, self.launch, self.entry, self.srv
        wl = launch.experiment.workload  # the experiment's, also for its parent's control runs
        experiment = launch.role == "experiment"
        what = (
            ""
            if experiment
            else " (priming: nothing measured)"
            if launch.role == "prime"
            else f" ({launch.config.id}, interleaved)"
        )
        ctx.progress.phase(
            f"waiting for {srv.base_url}{what}" if self.external else f"starting server{what}"
        )
        srv.start()
        ready = srv.wait_ready(ctx.m.server.ready_timeout_s, wl.api, ctx.m.server.model)
        self.record.ready_s = ready.ready_s
        if experiment and self.first:
            entry.server = Ready(
                ready_s=ready.ready_s,
                model=ready.model,
                health_checks=ready.health_checks,
                generation_checks=ready.generation_checks,
            )
            entry.engine_info = evidence.fetch_info(srv.base_url, self._info_paths(), srv.headers)
        model = ctx.m.server.model or ready.model or _model_from_args(launch.config.args)
        if experiment and self.first and ctx.m.probe:
            ctx.progress.phase(f"golden prompts ({len(ctx.m.probe)})")
            answers = probes.ask(
                srv.base_url,
                wl.api,
                model,
                ctx.m.probe,
                timeout_s=wl.request_timeout_s,
                headers=srv.headers,
            )
            entry.probes = [ProbeAnswer.model_validate(a) for a in answers]
        drv = self._driver(model)
        if wl.warmup_requests:
            ctx.progress.phase(f"warm-up ({wl.warmup_requests} requests)")
            self.record.warmup = drv.warmup()
            if entry.warmup is None:
                entry.warmup = self.record.warmup
            self._check_alive("during the warm-up")
        if wl.find_max is not None and launch.role == "experiment" and not launch.levels:
            self._search(drv, wl.find_max)
            return
        for point in launch.levels or wl.points:
            if launch.repetitions or launch.role == "prime":
                self._settle(drv, point)
            for rep in launch.repetitions:
                self._level(drv, point, rep)

    def _settle(self, drv: Driver, point: Point) -> None:
        """The level's own warm-up until steady (``workload.warmup``), recorded."""
        wl = self.launch.experiment.workload
        if not wl.warmup.steady:
            return
        what = " (priming)" if self.launch.role == "prime" else ""
        self.ctx.progress.phase(f"warming {point.label} up until steady{what}")
        settled = drv.settle(point, stop_when=self._dead)
        self.record.settled.append(settled)
        self._check_alive(f"during {point.label}'s warm-up")
        interrupt.check()

    def _level(self, drv: Driver, point: Point, rep: int) -> Level:
        """One level run: its records kept, the engine's counters around it; raises the
        server's failure when it died (the level marked cut short)."""
        wl = self.launch.experiment.workload
        most = repetitions_range(wl.repetitions)[1]
        level, recs = self._measured(drv, point, rep, most)
        if level.events and not level.aborted:  # measured once more, past what the engine did
            self.ctx.progress.phase(
                f"{point.label} repetition {rep + 1}: {level.events[0].kind} inside the window, "
                "measuring it again"
            )
            first = level.events
            level, recs = self._measured(drv, point, rep, most)
            level.remeasured = first
        if self.gpu is not None and level.window is not None:
            w = level.window  # its energy now: an objective in tok/J decides adaptive rounds
            level_gpu(level, self.gpu.rows_until(w.end, since=w.t0_monotonic - 1.0))
        self.levels.append(level)
        self.rows.extend(recs)
        failed = self._failure_after(recs, f"during {point.label} repetition {rep + 1}")
        if failed is not None:  # its numbers are not the configuration's
            level.aborted = level.aborted or f"{FAILED_DURING}: {gist(str(failed))}"
            failed.level, failed.repetition = point, rep
            raise failed
        interrupt.check()
        return level

    def _measured(
        self, drv: Driver, point: Point, rep: int, most: int
    ) -> tuple[Level, list[RequestRecord]]:
        """One attempt at a level run: its records, the engine's counters around it, and the
        engine events its window holds (its part of the server's log, its preemptions)."""
        wl = self.launch.experiment.workload
        self.ctx.progress.level_start(point.label, rep, most, wl.requests_per_level)
        before = self._scrape()
        log_start = self.srv.log_bytes()
        level, recs = drv.level(point, rep, stop_when=self._dead)
        log_end = self.srv.log_bytes()
        level.session = self.launch.index
        if before is not None:
            level.engine_metrics = evidence.deltas(before, self._scrape() or {})
        level.log_span = [log_start, log_end]
        window_log = self.srv.log_slice(log_start, log_end)
        level.events = events.in_log(
            self.engine, window_log, level.started_at_unix
        ) + events.in_metrics(self.engine, level.engine_metrics)
        level.graph_steps = events.graph_steps(self.engine, window_log)
        if point.rate is None:  # a closed loop's load is held: a slump is the server's
            found = steady.slump(recs, level.summary.window_s, point.concurrency)
            level.events += [found] if found is not None else []
        return level, recs

    def _search(self, drv: Driver, find: FindMax) -> None:
        """``workload.find_max``: probe levels, doubling then bisecting, until the highest
        concurrency meeting the bounds is pinned down or the probes are spent; every probe
        is a level like any other (its repetitions, its records), the search recorded."""
        bounds = search.parse(find.slo)
        record = SearchRecord(
            slo=find.slo,
            bounds=[str(b) for b in bounds],
            start=find.start,
            max=find.max,
            probes_allowed=find.probes,
            over=find.over,
            pooled=True,
        )
        self.entry.search = record
        look = search.Search(
            bounds,
            find.start,
            find.max,
            find.probes,
            find.tolerance,
            done=record.probes,
            over=find.over,
            cap=self.launch.experiment.workload.concurrency[0],
        )

        def measure(x: float) -> list[search.Ran]:
            point = look.point(x)
            for rep in self._after(point):
                self._level(drv, point, rep)
            return search.search_runs(
                [lv for lv in self.levels if lv.point == point],
                [r for r in self.rows if point_of(r) == point],
            )

        search.drive(
            look,
            measure,
            repeat_near=find.repeat_near,
            confirm=find.confirm,
            progress=lambda said: self.ctx.progress.phase(f"find-max: {said}"),
            answered=lambda: self._answer(record, look),
        )

    def _after(self, point: Point) -> list[int]:
        """The repetitions to run at ``point``: the launch's, or where it ran before (a
        search's probe again), as many numbered on after those."""
        ran = [lv.repetition for lv in self.levels if lv.point == point]
        if not ran:
            return list(self.launch.repetitions)
        return [max(ran) + 1 + i for i in range(len(self.launch.repetitions))]

    @staticmethod
    def _answer(record: SearchRecord, look: search.Search) -> None:
        record.best, record.lowest_failure = look.best, look.lowest_failure
        record.converged, record.interval = look.converged, look.interval

    def _stop(self) -> None:
        interrupt.stopping()  # after a stop signal: another must not cut this short
        if self.external:  # not ours to stop: it runs on
            if self.launch.role == "experiment":
                self.logs.append(self.srv.log_split(self.srv.log_bytes()))
            return
        self.ctx.progress.phase("stopping server")
        serving = self.srv.log_bytes()
        report = self.srv.stop()
        stop = Stop(
            signals=report.signals,
            exit_code=report.exit_code,
            stop_s=report.stop_s,
            group_gone=report.group_gone,
            port_free=report.port_free,
        )
        self.record.stop = stop
        if self.launch.role == "experiment":
            self.entry.stop = stop
            self.logs.append(self.srv.log_split(serving))
        if not stop.group_gone or not stop.port_free:
            self.entry.warnings.append(
                "server did not stop cleanly: "
                + ("process group still alive; " if not stop.group_gone else "")
                + ("port still in use" if not stop.port_free else "")
            )

    def _driver(self, model: str | None) -> Driver:
        ctx, wl = self.ctx, self.launch.experiment.workload
        tokenizer = ctx.tokenizer(wl.tokenizer)
        spec = RequestSpec(
            api=wl.api,
            model=model,
            output_tokens=wl.output_tokens,
            extras={**self.engine.request_extras(wl.output_tokens), **wl.extra_body},
            stream=wl.stream,
            keep_text_chars=keep_text_chars(tokenizer),
            headers=self.srv.headers,
            preopen_paths=self.engine.preopen_paths,
        )
        done: Callable[[RequestRecord], None] = lambda rec: ctx.progress.request_done(  # noqa: E731
            rec.output_tokens, rec.status == "ok"
        )
        return Driver(
            wl,
            self.srv.base_url,
            spec,
            campaign_dir=ctx.campaign_dir,
            tokenizer=tokenizer,
            ceiling=ctx.client_ceiling,
            on_request=done,
            margin=ctx.m.campaign.margin,
        )

    def _info_paths(self) -> tuple[str, ...]:
        """The GETs recorded once the server is ready: the engine's; for a server reportgen
        did not start, its version and models too (all it can learn of its configuration)."""
        paths = self.engine.info_paths
        return tuple(dict.fromkeys((*paths, *external.INFO_PATHS))) if self.external else paths

    def _scrape(self) -> dict[str, Any] | None:
        """The engine's Prometheus metrics now, or None when it has none (or stopped
        answering: one failed scrape turns them off for the rest of the session)."""
        path = self.engine.metrics_path
        if path is None or self._metrics_off:
            return None
        got = evidence.scrape(self.srv.base_url, path, self.srv.headers)
        if "error" in got:
            self._metrics_off = True
        return got

    def _dead(self) -> str | None:
        """Why the server can no longer serve (it exited, or logged a fatal line), or why
        the run is stopping (a stop signal came), or None."""
        if interrupt.pending():
            return f"stopped by {interrupt.received()}"
        failed = self.srv.failure()
        return None if failed is None else str(failed)

    def _failure_after(self, recs: list[RequestRecord], when: str) -> ServerError | None:
        """The server's failure after a level (``failure``), waiting up to EXIT_GRACE_S for
        one where requests failed without an HTTP answer: a server that exits mid-level cuts
        its connections before its exit can be seen, and on a busy host the next level would
        otherwise start and be blamed for it."""
        failed = self.srv.failure(when)
        if failed is not None or all(r.status == "ok" or r.http_status for r in recs):
            return failed
        deadline = time.monotonic() + EXIT_GRACE_S
        while failed is None and time.monotonic() < deadline:
            time.sleep(0.05)
            failed = self.srv.failure(when)
        return failed

    def _check_alive(self, when: str) -> None:
        """Raise ServerError if the server exited, or logged a line its engine calls fatal."""
        failed = self.srv.failure(when)
        if failed is not None:
            raise failed


def level_gpu(level: Level, rows: list[dict[str, Any]]) -> None:
    """A level's GPU windows from the telemetry rows around it, and its mean power and output
    tokens per joule from them."""
    w = level.window
    if w is None or not w.t0_monotonic:
        return
    windows = telemetry.window(rows, w.t0_monotonic, w.end)
    level.telemetry = [GpuWindow.model_validate(g) for g in windows]
    level.summary.power_w, level.summary.output_tok_per_j = energy_rates(level)


def _model_from_args(args: dict[str, Any]) -> str | None:
    for key in ("served-model-name", "model", "model-path"):
        if isinstance(args.get(key), str):
            return str(args[key])
    return None
