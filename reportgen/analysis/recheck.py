"""Take a finished run's assumption checks again with this reportgen's checks and adapters.

A run keeps its checks as they were taken. When a later reportgen reads an engine better (a
log line it did not know, a counter it misread), ``reportgen render RUN --recheck`` takes them
again from what the run saved: the engine's log lines re-read from each experiment's saved
server log (the adapter's patterns now), every other input from the results and the request
tables; a failed experiment's log excerpt is distilled again from its log (the first error's
traceback: the engine's frames, the message whole). The lines' error and warning counts stay
as the run counted them (only the run knew where each server's stop began). What each check
said before is recorded in ``Run.redecided``; the decisions are then taken again, since a failed
check can decide a verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from reportgen import engines, tracebacks
from reportgen.analysis import checks as checks_mod
from reportgen.analysis import engine_config
from reportgen.campaign import Workload
from reportgen.load.records import RequestRecord
from reportgen.observe import evidence
from reportgen.redact import redact_text
from reportgen.results import store
from reportgen.results.engine_log import LogValues
from reportgen.results.model import Run


def prefix_expect(wl: Workload) -> tuple[float, float] | None:
    """The prefix-cache hit rate a workload should see: as the campaign says; else low for
    varied prompts, and no expectation where prompts share text on purpose (one fixed prompt,
    or shared prefixes, a trace's shared blocks, conversations re-sending their history:
    whether the cache hits them is the experiment's question)."""
    if wl.prefix_cache_hit_rate is not None:
        lo, hi = wl.prefix_cache_hit_rate
        return float(lo), float(hi)
    shared = wl.prompts.source in ("fixed", "shared-prefix", "trace") or wl.turns > 1
    return None if shared else checks_mod.DEFAULT_PREFIX_HIT


def _failure_again(entry: Any, engine: engines.Engine, text: str) -> None:
    """A failed experiment's log excerpt distilled again (the first error's traceback, the
    engine's frames, the message whole), and its reason's message made whole where the run
    cut it."""
    got = tracebacks.excerpt_of_failure(engine, text)
    if got is None:
        return
    excerpt, line = got
    entry.log_tail = redact_text(excerpt)
    entry.log_heading = tracebacks.DISTILLED_HEADING
    head, sep, said = (entry.reason or "").partition(": ")
    if (
        sep
        and len(said) >= 40
        and line.startswith(said[:40])
        and len(line) > len(said)
        or not sep
        and entry.failure is not None
        and entry.failure.kind == "exited"
    ):
        entry.reason = f"{head}: {redact_text(line)[:2000]}"


def recheck(
    run: Run, run_dir: Path, rows_of: Callable[[str], Sequence[RequestRecord]]
) -> dict[str, dict[str, str]]:
    """Every experiment's checks taken again, in place; returns, per experiment whose checks
    changed, each changed check's status before ("absent" for a check it did not have)."""
    engine = engines.get(run.engine.name)
    patterns = engine.patterns()
    campaign: dict[str, Any] = run.campaign
    info = campaign.get("campaign") or {}
    host_expect = (campaign.get("host") or {}).get("expect") or {}
    baseline = run.baseline
    environment = run.fingerprint  # typed once: the same for every experiment
    changed: dict[str, dict[str, str]] = {}
    for entry in run.experiments:
        if not entry.checks and entry.status != "ok":
            continue
        text = store.read_log(run_dir, entry.log_file) if entry.log_file else None
        if text is not None and entry.log_evidence is not None:
            ours = dict(patterns)
            for i, chk in enumerate(entry.campaign_checks or []):
                wanted = chk.get("log_contains") or chk.get("log_absent")
                if wanted:
                    ours[f"campaign:{i}"] = str(wanted)
            if entry.status == "failed" or entry.log_heading:
                _failure_again(entry, engine, text)
            found = evidence.log_evidence(text, ours)["found"]
            entry.log_evidence.found = found
            entry.server_args_resolved = evidence.server_args(found)
            entry.engine_config = evidence.engine_config(
                text, engine.config_lines, engine.config_values
            )
            accept = evidence.log_values(text, engine.spec_accept_log)
            if accept is not None:
                entry.log_evidence.spec_accept_length = LogValues.model_validate(accept)
        parent = run.experiment(entry.parent) if entry.parent else None  # read before it
        entry.also_changed = engine_config.also_changed(
            parent.engine_config if parent is not None else None,
            entry.engine_config,
            [f.key for f in entry.flag_diff],
            engine.config_volatile,
        )
        wl = Workload.model_validate(entry.workload or run.default_workload)
        before = {c.id: c.status for c in entry.checks}
        entry.checks = checks_mod.run_checks(
            entry,
            environment,
            log_patterns=list(patterns),
            cv_bound=float(info.get("cv_bound", checks_mod.CV_BOUND)),
            host_expect=host_expect,
            rows=rows_of(entry.table) if entry.levels else [],
            counters=dict(engine.counters),
            prefix_expect=prefix_expect(wl),
            baseline=None if baseline is None or baseline.id == entry.id else baseline,
            random_weights=bool(info.get("random_weights", False)),
            graphs_off=engine.graphs_disabled(entry.args),
            known=run.known_at(entry.id),
            metric=run.metric,
        )
        after = {c.id: c.status for c in entry.checks}
        diff = {k: before.get(k, "absent") for k in after if before.get(k) != after[k]}
        diff.update({k: v for k, v in before.items() if k not in after})
        if diff:
            changed[entry.id] = diff
    return changed
