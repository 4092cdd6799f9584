"""Run a campaign: each experiment in order, saving after each, so nothing paid for is lost.

The table of contents (``Runner.run``): fingerprint the host, refuse early what would fail
(``preflight``), start the results (or continue them, ``resume``), measure the client's
ceiling, then for every experiment: resolve its configuration (``plan``), run its server
sessions (``experiment``, ``session``), check its assumptions, decide its verdict
(``analysis.verdict``), save. A failed experiment is recorded with its reason and the end
of its log, and the campaign goes on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from functools import partial
from pathlib import Path

from reportgen import __version__, engines
from reportgen import results as store
from reportgen.analysis import drift, findings, sides, unjudged, verdict
from reportgen.analysis.checks import invalidated
from reportgen.campaign import Campaign, Resolved, parent_id, resolve
from reportgen.errors import HostLost, ResultsError
from reportgen.load.records import RequestRecord
from reportgen.observe import sources
from reportgen.redact import redact_text
from reportgen.results.model import EngineRecord, Experiment, Run, RunStatus
from reportgen.results.rundir import RunDir
from reportgen.run import confirm, executor, interrupt
from reportgen.run.experiment import check
from reportgen.run.plan import (
    campaign_secrets,
    describe,
    pending,
    planned_requests,
    total_requests,
)
from reportgen.run.progress import ProgressSink, Quiet
from reportgen.run.resume import campaign_file, continue_run, utc_now
from reportgen.run.session import Context


class Runner:
    def __init__(
        self,
        campaign: Campaign,
        run_dir: Path,
        progress: ProgressSink | None = None,
        resume: Run | None = None,
        history: Path | None = None,
    ):
        self.campaign = campaign
        # earlier runs of the campaign: where its decisions start from (``history.prior``,
        # sought once, before the first) and what its verdicts replicate (at the end)
        self.history = history
        self._prior_sought = False
        self.run_dir = run_dir
        self.resume = resume  # saved results of this run, to continue (``resume.resumable``)
        self.ctx = Context(campaign, run_dir, progress or Quiet(), campaign_secrets(campaign))
        self.m = campaign.model
        self.engine = engines.get(self.m.server.engine)
        self.resolved: dict[str, Resolved] = {}
        self.results: Run | None = None
        self.flags: engines.Flags | None = None
        self.executor = executor.choose(campaign)

    @property
    def progress(self) -> ProgressSink:
        return self.ctx.progress

    # -- the table of contents ---------------------------------------------------------------

    def run(self) -> Run:
        if self.executor.name == "local":  # elsewhere, the GPU host samples its own
            self.ctx.gpu_source, self.ctx.gpu_why = sources.open_source()
        try:
            return self._run_all()
        finally:
            if self.ctx.gpu_source is not None:
                self.ctx.gpu_source.close()

    def _run_all(self) -> Run:
        environment, self.flags = self.executor.prepare(self.ctx)
        run = self._continue(environment) if self.resume is not None else self._start(environment)
        self.results = run
        self.progress.phase("measuring the client's ceiling (cached per host)")
        run.client_ceiling = self.executor.client_ceiling()
        self.ctx.client_ceiling = run.client_ceiling
        exps = self.campaign.experiments
        kept = {e.id for e in run.experiments if e.finished} if self.resume is not None else ()
        total = total_requests(self.campaign, kept)
        self.progress.campaign_start(total, len(exps), self.ctx.run_dir)
        try:
            if self.m.campaign.parallel > 1:
                self._parallel(run)
            count = len(exps) + bool(self.m.brackets) + self._anchors_planned()
            for i, exp in enumerate(exps):
                entry = run.experiment(exp.id)
                assert entry is not None  # every experiment of the campaign has its entry
                if entry.finished and (self.resume is not None or self.m.campaign.parallel > 1):
                    # kept from before the interruption: its parent as it was then
                    pid = entry.parent
                    self.resolved[exp.id] = resolve(
                        self.m, exp, self.resolved[pid] if pid else None
                    )
                else:
                    pid = parent_id(exp, i, exps[0].id, run.best or exps[0].id)
                    r = resolve(self.m, exp, self.resolved[pid] if pid else None)
                    # counted with the anchors and the bracket's baseline-end ([1/4] ... [4/4])
                    self._one(run, run.experiments.index(entry), count, entry, r)
                self._anchor(run, i, entry, count)
            if self.m.brackets:
                self._bracket(run)
            if self.m.confirms:
                self._confirm(run)
            interrupt.check()
        except KeyboardInterrupt:
            interrupt.stopping()
            self._finish("incomplete", f"interrupted by the user ({interrupt.received()})")
            raise
        except HostLost as exc:  # the GPU host went away: stopped as an interrupted run is
            self._finish("incomplete", str(exc))
            raise
        except Exception as exc:  # a bug of reportgen's: the results say so, never "running"
            self._finish(
                "incomplete",
                f"reportgen stopped on an internal error ({type(exc).__name__}: {exc}); "
                "what finished is kept: reportgen run CAMPAIGN --resume goes on",
            )
            raise
        finally:
            self.progress.close()
        self._finish("complete", None)
        return run

    # -- steps -----------------------------------------------------------------------------

    def _one(self, run: Run, i: int, count: int, entry: Experiment, r: Resolved) -> None:
        """Run one experiment into ``entry``: its sessions, checks and verdict, saved."""
        rows = self._start_one(run, i, count, entry, r)
        self._end_one(run, entry, r, rows)

    def _start_one(
        self, run: Run, i: int, count: int, entry: Experiment, r: Resolved
    ) -> dict[str, list[RequestRecord]]:
        """Its server sessions (``executor.run_experiment``), into ``entry``."""
        self.resolved[r.id] = r
        self.progress.experiment_start(i, count, r.id)
        describe(self.campaign, r, entry)
        entry.status = "running"
        self._save()  # a crash from here on still shows which experiment was running
        parent = self.resolved.get(r.parent) if r.parent else None
        return self.executor.run_experiment(
            self.ctx,
            run,
            r,
            parent,
            entry,
            self._save,
            verdict.Judge(run, entry, partial(self._tables, run, entry)),
        )

    def _parallel(self, run: Run) -> None:
        """``campaign.parallel``: up to N experiments at once (each a job step of its own),
        one starting as soon as what it builds on is decided: its parent, or for based_on =
        "best" every experiment before it. Verdicts are taken in the campaign's order, as
        they finish, so "best" and the noise model are what a run one at a time has."""
        exps = self.campaign.experiments
        n, most = len(exps), self.m.campaign.parallel
        running: dict[Future[dict[str, list[RequestRecord]]], int] = {}
        started: dict[int, Resolved] = {}
        decided = 0  # experiments 0 .. decided-1 have their verdicts
        with ThreadPoolExecutor(max_workers=most, thread_name_prefix="experiment") as pool:
            try:
                while decided < n:
                    for i in range(decided, n):
                        if len(running) >= most:
                            break
                        if i in started or not self._ready(run, i, decided):
                            continue
                        entry = run.experiments[i]
                        pid = parent_id(exps[i], i, exps[0].id, run.best or exps[0].id)
                        r = resolve(self.m, exps[i], self.resolved[pid] if pid else None)
                        started[i] = r
                        if self.resume is not None and entry.finished:
                            self.resolved[r.id] = r
                            continue
                        job = pool.submit(self._start_one, run, i, n, entry, r)
                        running[job] = i
                    while decided < n and decided in started and not self._busy(running, decided):
                        i = decided
                        entry = run.experiments[i]
                        done = next((f for f, k in running.items() if k == i), None)
                        if done is not None:
                            del running[done]
                            self._end_one(run, entry, started[i], done.result())
                        decided += 1
                    # only the jobs still going: one that finished ahead of its turn would
                    # end the wait at once, and the loop would spin a core until its turn
                    going = [f for f in running if not f.done()]
                    if decided < n and going:
                        wait(going, return_when=FIRST_COMPLETED)
            except BaseException:
                for job in running:
                    job.cancel()
                raise

    def _ready(self, run: Run, i: int, decided: int) -> bool:
        """Whether experiment ``i`` may start: what it builds on is decided."""
        exp = self.campaign.experiments[i]
        if i == 0:
            return True
        if exp.based_on == "best":
            return decided >= i
        parent = exp.based_on or self.campaign.experiments[0].id
        k = next(j for j, e in enumerate(self.campaign.experiments) if e.id == parent)
        return decided > k

    @staticmethod
    def _busy(running: dict[Future[dict[str, list[RequestRecord]]], int], i: int) -> bool:
        return any(k == i and not f.done() for f, k in running.items())

    def _end_one(
        self, run: Run, entry: Experiment, r: Resolved, rows: dict[str, list[RequestRecord]]
    ) -> None:
        """Its checks and verdict, saved, and said."""
        check(self.ctx, run, entry, r, rows[entry.table])
        self._decide(run, entry, rows)
        self._save()
        interrupt.check()  # a signal whose exception a finaliser dropped
        shown: str
        note: str
        shown, note = (
            entry.status,
            entry.reason or (entry.decision.verdict if entry.decision else ""),
        )
        broken = invalidated(entry.checks)
        if entry.ok and broken:  # it ran, but its numbers cannot be trusted
            checks = ", ".join(f"'{b}'" for b in broken)
            shown, note = "ran", f"verdict failed: its check {checks} failed"
        sent = sum(lv.summary.requests for lv in entry.all_levels())
        skipped = max(0, planned_requests(self.campaign, r) - sent)
        self.progress.experiment_end(r.id, shown, note, skipped)

    def _anchors_planned(self) -> int:
        """The re-measurements the campaign makes (``campaign.anchors``): after every N-th
        experiment but the last (the bracket, where on, follows that one), and after the
        last where it may be compared with a parent other than the baseline (based_on)."""
        n, exps = self.m.anchor_every, self.campaign.experiments
        turns = [confirm.anchor_turn(i, n, len(exps) - 1) for i in range(len(exps))]
        end = exps[-1].based_on not in (None, exps[0].id) and not self.m.campaign.interleave
        return turns.count("due") + (end and "end" in turns)

    def _anchor(self, run: Run, i: int, entry: Experiment, count: int) -> None:
        """``campaign.anchors``: after the ``i``-th experiment (0 the baseline), where its
        turn, its parent (the baseline, or the best it was built on) measured again
        (``confirm.anchor``) right after ``entry``; after the last, its parent where that is
        not the baseline (the bracket measures the baseline) and another experiment ran
        since it was last measured. Then the experiments now nearer to it than to what they were
        compared with decided again, and the best chosen again."""
        n, last = self.m.anchor_every, len(self.campaign.experiments) - 1
        turn = confirm.anchor_turn(i, n, last)
        parent = run.experiment(entry.parent) if entry.parent else None
        if turn is None or parent is None:
            return
        if turn == "end":
            # the last experiments' parent, where it is not the baseline (the bracket
            # measures that), not beside them already (interleave), and some experiment
            # ran since it was last measured
            if parent is run.baseline or self.m.campaign.interleave:
                return
            near = sides.nearest(run, entry, parent) or [parent]
            if run.experiments.index(entry) - run.experiments.index(near[-1]) < 2:
                return
        step = confirm.anchor(run, self.resolved, -(-i // n), parent)
        if step is None:
            return
        fresh, r = step
        done = run.experiment(r.id)
        if done is not None and done.finished:  # measured before an interruption
            self.resolved[r.id] = r
            return
        later = run.experiments[run.experiments.index(entry) + 1 :]
        if any(e.finished for e in later if e is not done):
            # a resumed run that went on past here without it (another reportgen, or other
            # campaign.anchors): measured now it would sit out of its time
            return
        if done is not None:
            run.experiments.remove(done)
        at = run.experiments.index(entry) + 1
        run.experiments.insert(at, fresh)
        self._one(run, at, count, fresh, r)
        self._nearer(run)

    def _nearer(self, run: Run) -> None:
        """The experiments now nearer another measurement of the baseline decided again
        (``verdict.decide_nearer``), saved."""
        if verdict.decide_nearer(run, lambda e: self._tables(run, e, {})):
            self._save()

    def _bracket(self, run: Run) -> None:
        """``campaign.bracket``: the baseline's configuration measured again at the end
        (``confirm.bracket``)."""
        step = confirm.bracket(run, self.resolved)
        self._at_end(run, [step] if step is not None else [])
        self._nearer(run)  # the last experiments may be nearer the bracket
        self._stood_in(run)
        for eid in drift.drift_check(run):
            self.progress.warn(
                f"{eid}: adoption withdrawn: the drift the baseline's last measurement saw "
                "could explain its gain"
            )
        self._save()

    def _stood_in(self, run: Run) -> None:
        """Experiments measured on other GPUs than their parent, whose parent's configuration
        a later experiment (the bracket, after a resumption on another host) measured on
        theirs: decided again against it (``unjudged.stand_in``), then the best chosen again
        in the campaign's order."""
        again = [
            e
            for e in run.experiments
            if e.decision is not None
            and e.decision.unjudged is not None  # decided by the current rules
            and e.decision.verdict != "failed"
            and (stood := unjudged.stand_in(run, e)) is not None
            and stood.id != e.decision.stand_in
        ]
        if not again:
            return
        for e in again:
            e.decision = verdict.decide_experiment(run, e, self._tables(run, e, {}))
        drift.choose_best(run)

    def _confirm(self, run: Run) -> None:
        """``campaign.confirm``: the best configuration again, then without each change
        adopted on its way (``confirm``)."""
        self._at_end(run, confirm.plan(run, self.resolved, self.m.confirms is True))

    def _at_end(self, run: Run, steps: list[tuple[Experiment, Resolved]]) -> None:
        """Experiments a run adds after the campaign's own, in order; kept where a resumed
        run finished them, run again where it did not."""
        ids = {r.id for _, r in steps}
        total = sum(e.id not in ids for e in run.experiments) + len(steps)
        for fresh, r in steps:
            done = run.experiment(r.id)
            if done is not None and done.finished:
                self.resolved[r.id] = r
                continue
            if done is not None:
                run.experiments.remove(done)
            run.experiments.append(fresh)
            self._one(run, len(run.experiments) - 1, total, fresh, r)

    def _start(self, environment: dict[str, object]) -> Run:
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._write_campaign_copy()
        except OSError as exc:
            raise ResultsError(
                f"cannot write the run directory {self.run_dir}: {exc.strerror}; nothing was "
                "started. Choose a writable folder with --output"
            ) from None
        run = Run(
            reportgen_version=__version__,
            run_id=self.run_dir.name,
            started_at=utc_now(),
            campaign=self.m.recorded(),
            campaign_file=campaign_file(self.campaign),
            engine=EngineRecord(
                name=self.engine.name,
                simulated=self.engine.simulated,
                flag_check=self.flags.record() if self.flags else None,
            ),
            environment=dict(environment),
            experiments=pending(self.campaign),
        )
        store.save(self.run_dir, run, self.ctx.secrets)
        return run

    def _continue(self, environment: dict[str, object]) -> Run:
        """The saved results, ready to go on (``resume.continue_run``)."""
        assert self.resume is not None
        run = self.resume
        changed = continue_run(
            run,
            self.campaign,
            self.run_dir,
            environment=dict(environment),
            flag_check=self.flags.record() if self.flags else None,
            pending=pending(self.campaign),
        )
        if changed:
            self._write_campaign_copy()
        store.save(self.run_dir, run, self.ctx.secrets)
        return run

    def _write_campaign_copy(self) -> None:
        store.atomic_write_bytes(
            RunDir(self.run_dir).campaign,
            redact_text(self.campaign.text, self.ctx.secrets).encode("utf-8"),
        )

    def _decide(self, run: Run, entry: Experiment, rows: dict[str, list[RequestRecord]]) -> None:
        """The verdict (``analysis.verdict``), from this experiment's rows and the saved
        rows of the tables it is compared with; then which configuration is best."""
        if not any(e.decision for e in run.experiments[1:]):
            self._start_prior(run)
        entry.decision = verdict.decide_experiment(run, entry, self._tables(run, entry, rows))
        run.best = drift.best_after(run, entry)

    def _start_prior(self, run: Run) -> None:
        """Before the first verdict: the spread between starts earlier runs of this campaign
        measured on this host (``history.prior``), where the campaign does not state it."""
        stated = "start_spread" in self.m.campaign.model_fields_set
        if stated or self.history is None or self._prior_sought:
            return
        self._prior_sought = True
        from reportgen.history import prior

        try:
            run.start_prior = prior.start_prior(run, self.history)
        except ResultsError as exc:
            self.progress.warn(f"history not read ({exc}): campaign.start_spread is used")

    def _tables(
        self, run: Run, entry: Experiment, rows: Mapping[str, Sequence[RequestRecord]]
    ) -> dict[str, Sequence[RequestRecord]]:
        """``rows`` (``entry``'s request records by table) with the saved tables it lacks of
        ``entry`` and the sides it is compared with (``verdict.with_sides``)."""
        return verdict.with_sides(run, entry, rows, partial(store.read_requests, self.run_dir))

    def _finish(self, status: RunStatus, reason: str | None) -> None:
        run = self.results
        if run is None:
            return
        run.status = status
        run.status_reason = reason
        run.finished_at = utc_now()
        self._replications(run)
        self._save()

    def _replications(self, run: Run) -> None:
        """At the end: the decided experiments earlier runs of this campaign in the history
        store also ran, then against now (``history.replication``)."""
        if self.history is None or not self.history.is_file():
            return
        from reportgen.history import replication

        try:
            run.replications = replication.replications(run, self.history)
        except ResultsError as exc:
            self.progress.warn(f"history not read ({exc}): replications not said")

    def _save(self) -> None:
        if self.results is not None:
            with self.executor.lock:  # experiments at once (campaign.parallel) save too
                findings.attach(self.results)  # what the decisions so far find beyond them
                store.save(self.run_dir, self.results, self.ctx.secrets)
