"""Run a campaign: each experiment in order, saving after each, so nothing paid for is lost.

For every experiment: resolve its configuration, start the server in its own process group,
wait until it serves, warm up, run each concurrency level x repetition, stop the server (and
check it is gone), decide against the parent, save. A failed experiment is recorded with its
reason and the end of its log, and the campaign goes on.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from reportgen import __version__, engines, results
from reportgen.analysis import checks as checks_mod
from reportgen.analysis import decide as decide_mod
from reportgen.analysis.summary import by_level
from reportgen.campaign import Campaign, Experiment, Resolved, Workload, parent_id, resolve
from reportgen.errors import (
    CampaignError,
    GpuError,
    Problem,
    ReportgenError,
    ResultsError,
    ServerError,
)
from reportgen.load import tokens
from reportgen.load.loadgen import RequestSpec
from reportgen.load.tokens import Tokenizer
from reportgen.observe import evidence, fingerprint, gpu, telemetry
from reportgen.observe.gpu import GpuSource
from reportgen.observe.telemetry import Telemetry
from reportgen.redact import (
    REDACTED,
    known_secrets,
    redact_argv,
    redact_env,
    redact_flag,
    redact_text,
)
from reportgen.run import calibrate, interrupt, probes
from reportgen.run.driver import Driver, keep_text_chars
from reportgen.run.progress import ProgressSink, Quiet
from reportgen.run.server import ServerProcess, port_is_free


def new_run_id(campaign: Campaign, now: dt.datetime | None = None) -> str:
    """Sortable: UTC time, then a short hash of the campaign file."""
    now = now or dt.datetime.now(dt.UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{campaign.sha256[:6]}"


def control_table(exp_id: str) -> str:
    """Name of the request table of an experiment's interleaved runs of its parent ("~" is
    not allowed in experiment ids, so it cannot clash with one)."""
    return f"{exp_id}~control"


def _redact_args(args: dict[str, Any]) -> dict[str, Any]:
    return {k: redact_flag(k, v) for k, v in args.items()}


def command_line(campaign: Campaign, r: Resolved) -> list[str]:
    engine = engines.get(campaign.model.server.engine)
    return engine.command(campaign.model.server.command) + engine.format_args(r.args)


def plan(campaign: Campaign) -> list[Resolved]:
    """Resolve every experiment without running anything.

    ``based_on = "best"`` is only known while running; the plan assumes every earlier
    experiment is adopted, i.e. "best" is the experiment just before.
    """
    out: list[Resolved] = []
    by_id: dict[str, Resolved] = {}
    exps = campaign.experiments
    for i, exp in enumerate(exps):
        pid = parent_id(exp, i, exps[0].id, exps[i - 1].id if i else "")
        r = resolve(campaign.model, exp, by_id[pid] if pid else None)
        by_id[exp.id] = r
        out.append(r)
    return out


def describe(campaign: Campaign, r: Resolved) -> dict[str, Any]:
    """What a run records about an experiment's configuration, secrets redacted."""
    return {
        "parent": r.parent,
        "args": _redact_args(r.args),
        "env": redact_env(r.env),
        "command": redact_argv(command_line(campaign, r)),
        "flag_diff": [
            {
                "key": c.key,
                "kind": c.kind,
                "before": redact_flag(c.key, c.before),
                "after": redact_flag(c.key, c.after),
            }
            for c in r.flag_diff
        ],
        "workload": r.workload.model_dump(mode="json"),
        "log_file": f"logs/{r.id}.server.log",
    }


def server_sessions(
    r: Resolved, parent: Resolved | None, *, interleave: bool
) -> list[tuple[Resolved, list[int], str]]:
    """Server launches for one experiment: (configuration, repetitions, role). One for all
    repetitions; one per repetition with ``workload.fresh_server``; with ``interleave``, the
    parent's configuration ("control") and the experiment's alternate, parent first then
    child first (P C C P P C ...), so a linear drift of the host weighs on both alike."""
    reps = list(range(r.workload.repetitions))
    if interleave and parent is not None:
        out: list[tuple[Resolved, list[int], str]] = []
        for k in reps:
            pair = [(parent, [k], "control"), (r, [k], "experiment")]
            out += pair if k % 2 == 0 else pair[::-1]
        return out
    if r.workload.fresh_server:
        return [(r, [k], "experiment") for k in reps]
    return [(r, reps, "experiment")]


FINISHED = ("ok", "failed")  # an experiment in either state is kept by --resume


def resumable(campaign: Campaign, run_dir: Path) -> dict[str, Any]:
    """The saved results of an unfinished run of ``campaign``, to continue with ``--resume``;
    a ResultsError saying what to do when the run cannot be continued (complete, with nothing
    new to run, or the campaign file changed in what its finished experiments were run with).

    The file may have changed since in what is still to run: experiments after the finished
    ones edited, added or removed, comments. A complete run goes on when experiments were
    added to its file (a campaign grows one change at a time)."""
    saved = results.load(run_dir)
    was = (saved.get("campaign_file") or {}).get("sha256")
    if was != campaign.sha256:
        changed = campaign_changes(saved, campaign)
        if changed:
            more = f"; and {len(changed) - 3} more" if len(changed) > 3 else ""
            shown = "; ".join(changed[:3]) + more
            raise ResultsError(
                f"{campaign.path}: the campaign file changed since run {run_dir.name} started, "
                f"in what its finished experiments were run with ({shown}). Run it without "
                "--resume for a new run, or resume from the file as it was: "
                f"{run_dir / 'campaign.toml'} (only experiments after the finished ones may "
                "change)"
            )
    if saved.get("status") == "complete" and finished_prefix(saved) >= len(campaign.experiments):
        raise ResultsError(
            f"{run_dir}: this run is complete, there is nothing to resume; run the campaign "
            "without --resume for a new run, or add experiments to its file to continue this one"
        )
    return saved


def finished_prefix(saved: dict[str, Any]) -> int:
    """How many of the saved run's experiments, from the first, are finished (kept)."""
    n = 0
    for entry in saved.get("experiments", []):
        if entry.get("status") not in FINISHED:
            break
        n += 1
    return n


def campaign_secrets(campaign: Campaign) -> list[str]:
    """Values of the campaign's secret-named flags and variables (hidden in all it writes)."""
    m = campaign.model
    return known_secrets(
        m.server.args, m.server.env, *(t for e in campaign.experiments for t in (e.args, e.env))
    )


def campaign_changes(saved: dict[str, Any], campaign: Campaign) -> list[str]:
    """What differs, between the campaign a saved run was started with and ``campaign``, in
    what its finished experiments ran with: every section but the experiments, and the
    finished experiments themselves ("workload.output_tokens: 64 then, 32 now")."""
    text = json.dumps(campaign.model.model_dump(mode="json"))
    for value in campaign_secrets(campaign):  # compared as saved: secrets hidden
        text = text.replace(json.dumps(value)[1:-1], REDACTED)
    now: dict[str, Any] = json.loads(text)
    then: dict[str, Any] = saved.get("campaign") or {}
    changes: list[str] = []
    for key in sorted((set(then) | set(now)) - {"experiment"}):
        _differences(key, then.get(key), now.get(key), changes)
    old, new = then.get("experiment") or [], now.get("experiment") or []
    for i in range(finished_prefix(saved)):
        label = (
            f"experiment {i + 1} ({old[i].get('id')})" if i < len(old) else f"experiment {i + 1}"
        )
        _differences(
            label, old[i] if i < len(old) else None, new[i] if i < len(new) else None, changes
        )
    return changes


def _differences(path: str, then: Any, now: Any, out: list[str]) -> None:
    if isinstance(then, dict) and isinstance(now, dict):
        for key in sorted(set(then) | set(now)):
            _differences(f"{path}.{key}", then.get(key), now.get(key), out)
    elif then != now:
        out.append(f"{path}: {_short(then)} then, {_short(now)} now")


def _short(value: Any) -> str:
    text = "absent" if value is None else json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Runner:
    def __init__(
        self,
        campaign: Campaign,
        run_dir: Path,
        progress: ProgressSink | None = None,
        resume: dict[str, Any] | None = None,
    ):
        self.campaign = campaign
        self.run_dir = run_dir
        self.resume = resume  # saved results of this run, to continue (see ``resumable``)
        self.progress: ProgressSink = progress or Quiet()
        self.m = campaign.model
        self.engine = engines.get(self.m.server.engine)
        self.resolved: dict[str, Resolved] = {}
        self.results: dict[str, Any] = {}
        self._tokenizers: dict[str, Tokenizer] = {}
        self._metrics_off = False
        self.gpu_source: GpuSource | None = None
        self.gpu_why: str | None = None
        self.flags: engines.Flags | None = None
        # Values of secret-named flags and variables: hidden in everything the run writes.
        self.secrets = campaign_secrets(campaign)

    # -- the table of contents ---------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        self.gpu_source, self.gpu_why = gpu.open_source()
        try:
            return self._run_all()
        finally:
            if self.gpu_source is not None:
                self.gpu_source.close()

    def _run_all(self) -> dict[str, Any]:
        here = Path(self.campaign.path).resolve().parent
        environment = fingerprint.collect(
            self.gpu_source,
            self.gpu_why,
            repos=[here / p for p in self.m.host.repos],
            env_keys=sorted(self.m.server.env),
        )
        self._preflight(environment)
        if self.resume is not None:
            self._resume_results(environment)
        else:
            self._start_results(environment)
        self.progress.phase("measuring the client's ceiling (cached per host)")
        try:
            self.results["client_ceiling"] = calibrate.calibrate()
        except ReportgenError as exc:  # best-effort: the campaign is worth more than the flag
            self.results["client_ceiling"] = {"error": str(exc)}
        exps = self.campaign.experiments
        self.progress.campaign_start(self._total_requests(), len(exps))
        try:
            for i, exp in enumerate(exps):
                entry = self.results["experiments"][i]
                if self.resume is not None and entry["status"] in FINISHED:
                    # kept from before the interruption: its parent as it was then
                    pid = entry.get("parent")
                    self.resolved[exp.id] = resolve(
                        self.m, exp, self.resolved[pid] if pid else None
                    )
                    continue
                pid = parent_id(exp, i, exps[0].id, self.results["best"] or exps[0].id)
                r = resolve(self.m, exp, self.resolved[pid] if pid else None)
                self.resolved[exp.id] = r
                self.progress.experiment_start(i, len(exps), exp.id)
                entry.update(describe(self.campaign, r))
                entry["status"] = "running"
                self._save()  # a crash from here on still shows which experiment was running
                self._run_experiment(r, entry)
                self._decide(entry)
                self._save()
                interrupt.check()  # a signal whose exception a finaliser dropped
                note = entry.get("reason") or entry["decision"]["verdict"]
                measured = entry["levels"] + (entry.get("control") or {}).get("levels", [])
                sent = sum(lv["summary"]["requests"] for lv in measured)
                skipped = max(0, self._planned_requests(r) - sent)
                self.progress.experiment_end(exp.id, entry["status"], note, skipped)
            interrupt.check()
        except KeyboardInterrupt:
            self._finish("incomplete", "interrupted by the user (Ctrl-C or SIGTERM)")
            raise
        finally:
            self.progress.close()
        self._finish("complete", None)
        return self.results

    # -- steps -----------------------------------------------------------------------------

    def _preflight(self, environment: dict[str, Any]) -> None:
        """Refuse to start when the host is not the one the campaign expects, or a port its
        servers need is taken (another server, perhaps another run): every experiment would
        fail, so nothing is started and the user is told what to do."""
        expect = self.m.host.expect.model_dump()
        problems = fingerprint.host_mismatches(expect, environment["gpus"])
        if problems:
            raise GpuError(
                f"{self.campaign.path}: host.expect does not match this host: "
                + "; ".join(problems)
                + ". Nothing was started; run on the host the campaign was written for, "
                "or change host.expect"
            )
        self._check_flags()
        host = self.m.server.host
        for port in sorted({self.engine.port(r.args) for r in plan(self.campaign)}):
            if not port_is_free(host, port):
                raise ServerError(
                    f"{self.campaign.path}: port {port} on {host} is already in use by another "
                    "process (another server or reportgen run?); nothing was started. Stop it "
                    "or set another port in server.args"
                )

    def _check_flags(self) -> None:
        """Every experiment's flags against the engine's own help, where the engine is
        installed: a misspelt flag or a value outside its choices stops the campaign before
        anything starts, naming the experiment, not hours later when its turn comes."""
        if self.engine.help_flag is None:
            return
        argv = self.engine.command(self.m.server.command) + [self.engine.help_flag]
        self.progress.phase(f"checking flags against `{' '.join(argv)}`")
        self.flags = engines.read_flags(argv)
        where = " ".join(argv)
        problems = [
            Problem(
                self.campaign.path,
                f"experiment {r.id!r}: args.{key}",
                value,
                f"{why} (checked against `{where}`); nothing was started: fix the flag",
            )
            for r in plan(self.campaign)
            for key, value, why in self.flags.problems(r.args, skip=self.engine.positional)
        ]
        if problems:
            raise CampaignError(problems)

    def _start_results(self, environment: dict[str, Any]) -> None:
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._write_campaign_copy()
        except OSError as exc:
            raise ResultsError(
                f"cannot write the run directory {self.run_dir}: {exc.strerror}; nothing was "
                "started. Choose a writable folder with --output"
            ) from None
        now = _utc_now()
        self.results = {
            "schema_version": results.SCHEMA_VERSION,
            "reportgen_version": __version__,
            "run_id": self.run_dir.name,
            "status": "running",
            "status_reason": None,
            "started_at": now,
            "finished_at": None,
            "campaign": self.m.model_dump(mode="json"),
            "campaign_file": {
                "path": self.campaign.path,
                "sha256": self.campaign.sha256,
                "text": self.campaign.text,
            },
            "engine": {
                "name": self.engine.name,
                "simulated": self.engine.simulated,
                "flag_check": self.flags.record() if self.flags else None,
            },
            "environment": environment,
            "best": None,
            "client_ceiling": None,
            "experiments": [_pending(e) for e in self.campaign.experiments],
        }
        self._save()

    def _write_campaign_copy(self) -> None:
        results.atomic_write_bytes(
            self.run_dir / "campaign.toml",
            redact_text(self.campaign.text, self.secrets).encode("utf-8"),
        )

    def _resume_results(self, environment: dict[str, Any]) -> None:
        """Continue the saved results: finished experiments stay as they are, the others
        start again from nothing; the resumption is recorded with the host it ran on."""
        assert self.resume is not None
        self.results = self.resume
        n = finished_prefix(self.results)
        entries = self.results["experiments"]
        kept = [e["id"] for e in entries[:n]]
        for entry in entries[n:]:  # started again from nothing, or no longer in the file
            for table in (entry["id"], control_table(entry["id"])):  # what a try saved
                for folder in ("requests", "telemetry"):
                    (self.run_dir / folder / f"{table}.parquet").unlink(missing_ok=True)
        self.results["experiments"] = entries[:n] + [
            _pending(exp) for exp in self.campaign.experiments[n:]
        ]
        before = self.results.get("campaign_file") or {}
        changed: dict[str, Any] = {}
        if before.get("sha256") != self.campaign.sha256:  # only what is still to run
            old_ids = [e["id"] for e in entries[n:]]
            new_ids = [e.id for e in self.campaign.experiments[n:]]
            changed = {
                "sha256_before": before.get("sha256"),
                "added": [i for i in new_ids if i not in old_ids],
                "removed": [i for i in old_ids if i not in new_ids],
            }
            self._write_campaign_copy()
            self.results["campaign"] = self.m.model_dump(mode="json")
            self.results["campaign_file"] = {
                "path": self.campaign.path,
                "sha256": self.campaign.sha256,
                "text": self.campaign.text,
            }
        self.results["resumed"] = [
            *self.results.get("resumed", []),
            {
                "at": _utc_now(),
                "after": self.results.get("status"),
                "kept": kept,
                **({"campaign_changed": changed} if changed else {}),
                "reportgen_version": __version__,
                "host": (environment.get("host") or {}).get("hostname"),
                "gpus": [g.get("name") for g in (environment.get("gpus") or {}).get("devices", [])],
            },
        ]
        self.results["status"] = "running"
        self.results["status_reason"] = None
        self.results["finished_at"] = None
        self.results["engine"]["flag_check"] = self.flags.record() if self.flags else None
        self._save()

    def _sessions(self, r: Resolved) -> list[tuple[Resolved, list[int], str]]:
        parent = self.resolved.get(r.parent) if r.parent else None
        return server_sessions(r, parent, interleave=self.m.campaign.interleave)

    def _run_experiment(self, r: Resolved, entry: dict[str, Any]) -> None:
        entry["status"] = "running"
        entry["started_at"] = _utc_now()
        sessions = self._sessions(r)
        entry["sessions"] = []
        if any(role == "control" for _, _, role in sessions):
            entry["control"] = {"of": r.parent, "levels": [], "error": None}
        rows: dict[str, list[dict[str, Any]]] = {"experiment": [], "control": []}
        logs: list[str] = []
        tele = self._telemetry_start(entry)
        try:
            for index, (cfg, reps, role) in enumerate(sessions):
                control = entry.get("control") or {}
                if role == "control" and control.get("error"):
                    continue  # the parent's configuration failed once: no more control runs
                try:
                    self._session(r, cfg, reps, role, index, entry, rows[role], logs)
                except ReportgenError as exc:
                    if role != "control":
                        raise
                    control["error"] = f"{cfg.id} (interleaved run): {exc}"
            entry["status"] = "ok"
        except ReportgenError as exc:
            entry["status"] = "failed"
            entry["reason"] = str(exc)
            last = entry["sessions"][-1] if entry["sessions"] else {}
            entry["log_tail"] = last.get("log_tail", "")
            if last.get("log_heading"):
                entry["log_heading"] = last["log_heading"]
        except KeyboardInterrupt:
            entry["status"] = "interrupted"
            entry["reason"] = "interrupted by the user"
            raise
        finally:
            self._telemetry_end(r.id, entry, tele)
            entry["campaign_checks"] = [chk.model_dump() for chk in r.checks]
            patterns = self.engine.patterns()
            for i, chk in enumerate(r.checks):
                if chk.log_contains or chk.log_absent:
                    patterns[f"campaign:{i}"] = str(chk.log_contains or chk.log_absent)
            log_text = "\n".join(logs)
            entry["log_evidence"] = evidence.log_evidence(log_text, patterns)
            accept = evidence.log_values(log_text, self.engine.spec_accept_log)
            if accept is not None:
                entry["log_evidence"]["spec_accept_length"] = accept
            entry["model_files"] = evidence.model_files(
                r.args, Path(self.campaign.path).resolve().parent
            )
            entry["finished_at"] = _utc_now()
            entry["by_level"] = by_level(entry["levels"])
            if entry.get("control"):
                entry["control"]["by_level"] = by_level(entry["control"]["levels"])
            if rows["experiment"]:
                results.save_requests(self.run_dir, r.id, rows["experiment"])
            if rows["control"]:
                results.save_requests(self.run_dir, control_table(r.id), rows["control"])
            self._save()

    def _session(
        self,
        r: Resolved,
        cfg: Resolved,
        reps: list[int],
        role: str,
        index: int,
        entry: dict[str, Any],
        rows: list[dict[str, Any]],
        logs: list[str],
    ) -> None:
        """One server launch: start, wait until ready, (first time) the engine's info and the
        golden prompts, warm-up, then each level for these repetitions; always stopped."""
        wl = r.workload  # the experiment's workload, also for its parent's control runs
        first = not any(x["role"] == role for x in entry["sessions"])
        name = (
            f"{r.id}.server.log"
            if first and role == "experiment"
            else (f"{r.id}.{index + 1}-{role}.server.log")
        )
        session: dict[str, Any] = {
            "index": index,
            "role": role,
            "config": cfg.id,
            "repetitions": reps,
            "log_file": f"logs/{name}",
        }
        entry["sessions"].append(session)
        self._metrics_off = False
        srv = ServerProcess(
            command_line(self.campaign, cfg),
            env=cfg.env,
            log_path=self.run_dir / "logs" / name,
            host=self.m.server.host,
            port=self.engine.port(cfg.args),
            engine=self.engine,
            stop_timeout_s=self.m.server.stop_timeout_s,
            headers=self.engine.auth_headers(cfg.args),
            secrets=self.secrets,
        )
        levels = entry["levels"] if role == "experiment" else entry["control"]["levels"]
        try:
            what = "" if role == "experiment" else f" ({cfg.id}, interleaved)"
            self.progress.phase(f"starting server{what}")
            srv.start()
            ready = srv.wait_ready(self.m.server.ready_timeout_s, wl.api)
            session["ready_s"] = ready.ready_s
            if role == "experiment" and first:
                entry["server"] = {
                    "ready_s": ready.ready_s,
                    "model": ready.model,
                    "health_checks": ready.health_checks,
                    "generation_checks": ready.generation_checks,
                }
                entry["engine_info"] = evidence.fetch_info(
                    srv.base_url, self.engine.info_paths, srv.headers
                )
            model = ready.model or _model_from_args(cfg.args)
            if role == "experiment" and first and self.m.probe:
                self.progress.phase(f"golden prompts ({len(self.m.probe)})")
                entry["probes"] = probes.ask(
                    srv.base_url,
                    wl.api,
                    model,
                    self.m.probe,
                    timeout_s=wl.request_timeout_s,
                    headers=srv.headers,
                )
            drv = self._driver(wl, srv.base_url, model, srv.headers)
            if wl.warmup_requests:
                self.progress.phase(f"warm-up ({wl.warmup_requests} requests)")
                session["warmup"] = drv.warmup()
                entry.setdefault("warmup", session["warmup"])
                _check_alive(srv, "during the warm-up")
            for c in wl.concurrency:
                for rep in reps:
                    self.progress.level_start(c, rep, wl.repetitions, wl.requests_per_level)
                    before = self._scrape(srv.base_url, srv.headers)
                    level, recs = drv.level(c, rep, stop_when=lambda: _dead(srv))
                    level["session"] = index
                    if before is not None:
                        level["engine_metrics"] = evidence.deltas(
                            before, self._scrape(srv.base_url, srv.headers) or {}
                        )
                    levels.append(level)
                    rows.extend(
                        {"experiment": r.id, "concurrency": c, "repetition": rep, **x} for x in recs
                    )
                    _check_alive(srv, f"during C={c} repetition {rep + 1}")
                    interrupt.check()
        except ReportgenError as exc:
            session["error"] = str(exc)
            session["log_tail"] = getattr(exc, "log_tail", "") or srv.log_tail()
            if isinstance(exc, ServerError) and exc.log_heading:
                session["log_heading"] = exc.log_heading
            raise
        finally:
            self.progress.phase("stopping server")
            stop = srv.stop()
            session["stop"] = asdict(stop)
            if role == "experiment":
                entry["stop"] = session["stop"]
                logs.append(srv.log_text())
            if not stop.group_gone or not stop.port_free:
                entry.setdefault("warnings", []).append(
                    "server did not stop cleanly: "
                    + ("process group still alive; " if not stop.group_gone else "")
                    + ("port still in use" if not stop.port_free else "")
                )

    def _driver(
        self, wl: Workload, base_url: str, model: str | None, headers: dict[str, str]
    ) -> Driver:
        tokenizer = self._tokenizer(wl.tokenizer)
        spec = RequestSpec(
            api=wl.api,
            model=model,
            output_tokens=wl.output_tokens,
            extras=self.engine.request_extras(wl.output_tokens),
            stream=wl.stream,
            keep_text_chars=keep_text_chars(tokenizer),
            headers=headers,
            preopen_paths=self.engine.preopen_paths,
        )
        return Driver(
            wl,
            base_url,
            spec,
            campaign_dir=Path(self.campaign.path).resolve().parent,
            tokenizer=tokenizer,
            ceiling=self.results.get("client_ceiling"),
            on_request=lambda rec: self.progress.request_done(
                rec.output_tokens, rec.status == "ok"
            ),
        )

    def _scrape(self, base_url: str, headers: dict[str, str]) -> dict[str, Any] | None:
        """The engine's Prometheus metrics now, or None when it has none (or stopped
        answering: one failed scrape turns them off for the rest of the run)."""
        path = self.engine.metrics_path
        if path is None or self._metrics_off:
            return None
        got = evidence.scrape(base_url, path, headers)
        if "error" in got:
            self._metrics_off = True
        return got

    def _telemetry_start(self, entry: dict[str, Any]) -> Telemetry | None:
        """Error counters now, and GPU sampling from before the server starts (its loading
        shows in the charts) until after it stops."""
        if self.gpu_source is None:
            entry["telemetry"] = {"error": f"no GPU telemetry: {self.gpu_why}"}
            return None
        try:
            entry["gpu_counters"] = {"before": self.gpu_source.counters()}
        except Exception as exc:
            entry["gpu_counters"] = {"error": f"error counters unreadable: {exc}"}
        return Telemetry(self.gpu_source).start()

    def _telemetry_end(self, exp_id: str, entry: dict[str, Any], tele: Telemetry | None) -> None:
        if tele is None or self.gpu_source is None:
            return
        rows = tele.stop()
        for level in entry["levels"] + (entry.get("control") or {}).get("levels", []):
            w = level.get("window") or {}
            if w.get("t0_monotonic"):
                t0 = float(w["t0_monotonic"])
                level["telemetry"] = telemetry.window(rows, t0, t0 + float(w["duration_s"]))
        entry["telemetry"] = {
            "hz": tele.hz,
            "rows": len(rows),
            "late_samples": tele.late_samples,
            "error": tele.error,
        }
        if rows:
            results.save_telemetry(self.run_dir, exp_id, rows)
        counters = entry.get("gpu_counters") or {}
        if "before" in counters:
            try:
                counters["after"] = self.gpu_source.counters()
                counters["new_errors"] = telemetry.counter_deltas(
                    counters["before"], counters["after"]
                )
            except Exception as exc:
                counters["after"] = {"error": f"error counters unreadable: {exc}"}

    def _tokenizer(self, path: str | None) -> Tokenizer | None:
        if path is None:
            return None
        if path not in self._tokenizers:
            self._tokenizers[path] = tokens.load(path)
        return self._tokenizers[path]

    def _decide(self, entry: dict[str, Any]) -> None:
        obj = self.m.campaign.objective
        margin = self.m.campaign.margin
        higher = obj.better() == "higher"
        by_id = {e["id"]: e for e in self.results["experiments"]}
        baseline = self.results["experiments"][0]
        mine = (
            results.load_requests(self.run_dir, entry["id"]).to_dict("records")
            if entry["levels"]
            else []
        )
        wl = self.resolved[entry["id"]].workload
        entry["checks"] = checks_mod.run_checks(
            entry,
            self.results.get("environment"),
            log_patterns=list(self.engine.patterns()),
            cv_bound=self.m.campaign.cv_bound,
            host_expect=self.m.host.expect.model_dump(),
            rows=mine,
            counters=dict(self.engine.counters),
            prefix_expect=_prefix_expect(wl),
            baseline=None if entry is baseline else baseline,
            random_weights=self.m.campaign.random_weights,
        )
        broken = checks_mod.invalidated(entry["checks"], evidence=True)
        if entry["status"] == "ok" and broken:
            entry["decision"] = decide_mod.Decision(
                "failed",
                f"{entry['id']}'s numbers cannot be trusted, whatever they say: failed "
                + "; ".join(broken)
                + ". See the assumptions checked.",
            ).as_dict()
            return
        if entry["status"] != "ok":
            entry["decision"] = decide_mod.Decision(
                "failed", f"{entry['id']} failed: {entry.get('reason')}"
            ).as_dict()
            return
        if entry is baseline:
            entry["decision"] = decide_mod.Decision(
                "baseline", "The reference every other experiment is compared with."
            ).as_dict()
            self.results["best"] = entry["id"]
            return
        parent = by_id[entry["parent"]]
        control = entry.get("control") or {}
        paired = bool(control.get("levels")) and not control.get("error")
        # With interleaving, the parent's side is its runs next to this experiment's.
        parent_side = (
            {
                "id": parent["id"],
                "status": "ok",
                "levels": control["levels"],
                "table": control_table(entry["id"]),
            }  # fmt: skip
            if paired
            else {**parent, "table": parent["id"]}
        )
        base_side = {**baseline, "table": baseline["id"]}

        def cmp(other: dict[str, Any], pair: bool) -> list[decide_mod.Comparison]:
            if other["status"] != "ok":
                return []
            return decide_mod.compare_experiments(
                other["levels"],
                entry["levels"],
                obj.metric,
                margin=margin,
                higher_is_better=higher,
                concurrency=obj.concurrency,
                paired=pair,
            )

        vs_parent, vs_base = cmp(parent_side, paired), cmp(base_side, False)
        if parent_side["status"] != "ok":
            verdict, why = (
                "inconclusive",
                f"its parent {parent['id']} failed, so there is nothing to compare with.",
            )
        else:
            verdict, why = decide_mod.decide(
                entry["id"], parent["id"], vs_parent, obj.metric, margin
            )
            why = decide_mod.what_changed(entry["parent"], entry.get("flag_diff") or []) + why
            if paired:
                why += (
                    f" Compared pair by pair with {parent['id']}'s configuration run "
                    "alternately with it (interleaved)."
                )
            elif control.get("error"):
                why += (
                    f" The interleaved runs of {parent['id']} failed ({control['error']}), "
                    "so its earlier runs were used."
                )
        entry["decision"] = decide_mod.Decision(verdict, why, vs_parent, vs_base).as_dict()
        entry["decision"]["paired"] = paired
        entry["decision"]["metrics"] = self._all_metrics(
            mine, entry, [("vs_parent", parent_side, paired), ("vs_baseline", base_side, False)]
        )
        if verdict == "adopted":
            self._update_best(entry, baseline, higher)

    def _all_metrics(
        self,
        mine: list[dict[str, Any]],
        entry: dict[str, Any],
        sides: list[tuple[str, dict[str, Any], bool]],
    ) -> dict[str, list[dict[str, Any]]]:
        """Every headline metric against the parent and the baseline, at every common level:
        run-level comparisons for throughputs and medians, the two-level bootstrap for p99."""
        margin = self.m.campaign.margin
        out: dict[str, list[dict[str, Any]]] = {}
        done: dict[tuple[str, bool], list[dict[str, Any]]] = {}  # the parent is often the baseline
        for name, other, paired in sides:
            if other["status"] != "ok":
                continue
            key = (other["table"], paired)
            if key not in done:
                theirs = results.load_requests(self.run_dir, other["table"]).to_dict("records")
                found = decide_mod.headline_comparisons(
                    other["levels"], entry["levels"], margin=margin, paired=paired
                )
                found += decide_mod.tail_comparisons(theirs, mine, margin=margin)
                done[key] = [c.as_dict() for c in found]
            out[name] = done[key]
        return out

    def _update_best(self, entry: dict[str, Any], baseline: dict[str, Any], higher: bool) -> None:
        """Best = the adopted configuration with the highest objective score against baseline."""

        def score(e: dict[str, Any]) -> float:
            if e is baseline:
                return 0.0
            ratios = [c["ratio"] for c in e["decision"]["vs_baseline"] if c["ratio"]]
            if not ratios:
                return -math.inf
            s = sum(math.log(x) for x in ratios) / len(ratios)
            return s if higher else -s

        current = next(e for e in self.results["experiments"] if e["id"] == self.results["best"])
        if score(entry) > score(current):
            self.results["best"] = entry["id"]

    def _finish(self, status: str, reason: str | None) -> None:
        if not self.results:
            return
        self.results["status"] = status
        self.results["status_reason"] = reason
        self.results["finished_at"] = _utc_now()
        self._save()

    def _save(self) -> None:
        results.save(self.run_dir, self.results, self.secrets)

    def _planned_requests(self, r: Resolved) -> int:
        """Measured requests an experiment will send (0 when levels run for a duration);
        twice that when its parent's configuration is interleaved with it."""
        wl = r.workload
        sides = 2 if self.m.campaign.interleave and r.parent else 1
        return (wl.requests_per_level or 0) * len(wl.concurrency) * wl.repetitions * sides

    def _total_requests(self) -> int:
        steps = plan(self.campaign)
        if any(r.workload.requests_per_level is None for r in steps):
            return 0  # duration-based levels: no request count to show
        return sum(self._planned_requests(r) for r in steps)


def _pending(exp: Experiment) -> dict[str, Any]:
    """An experiment's entry in the results before it runs."""
    return {
        "id": exp.id,
        "why": exp.why,
        "expect": exp.expect,
        "based_on": exp.based_on,
        "status": "pending",
        "reason": None,
        "levels": [],
    }


def _prefix_expect(wl: Workload) -> tuple[float, float] | None:
    """The prefix-cache hit rate a workload should see: as the campaign says; else low for
    varied prompts, and no expectation for one fixed prompt (every request shares it)."""
    if wl.prefix_cache_hit_rate is not None:
        lo, hi = wl.prefix_cache_hit_rate
        return float(lo), float(hi)
    return None if wl.prompts.source == "fixed" else checks_mod.DEFAULT_PREFIX_HIT


def _dead(srv: ServerProcess) -> str | None:
    """Why ``srv`` can no longer serve (it exited, or logged a fatal line), or None."""
    failed = srv.failure()
    return None if failed is None else str(failed)


def _check_alive(srv: ServerProcess, when: str) -> None:
    """Raise ServerError if the server exited, or logged a line its engine calls fatal."""
    failed = srv.failure(when)
    if failed is not None:
        raise failed


def _model_from_args(args: dict[str, Any]) -> str | None:
    for key in ("served-model-name", "model", "model-path"):
        if isinstance(args.get(key), str):
            return str(args[key])
    return None


def _utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
