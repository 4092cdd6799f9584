"""``reportgen run --resume``: continue a run in its own directory, keeping what finished.

The campaign file may have changed since in what is still to run: experiments after the
finished ones edited, added or removed, comments. A complete run goes on when experiments
were added to its file (a campaign grows one change at a time). Anything the finished
experiments ran with must be as it was: a refusal names each difference.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from pathlib import Path
from typing import Any

from reportgen import __version__
from reportgen import results as store
from reportgen.campaign import Campaign
from reportgen.errors import ResultsError
from reportgen.observe.environment import Environment
from reportgen.redact import REDACTED
from reportgen.results.differences import differences, flatten
from reportgen.results.model import CampaignFile, Experiment, Resumption, Run
from reportgen.results.rundir import RunDir
from reportgen.run.plan import campaign_secrets


def resumable(campaign: Campaign, run_dir: Path) -> Run:
    """The saved results of an unfinished run of ``campaign``, to continue with ``--resume``;
    a ResultsError saying what to do when the run cannot be continued (complete, with nothing
    new to run, or the campaign file changed in what its finished experiments were run with)."""
    saved = store.load(run_dir)
    # nothing finished (stopped in the first experiment): nothing is kept, so any edit goes
    if saved.campaign_file.sha256 != campaign.sha256 and saved.finished_prefix():
        changed = campaign_changes(saved, campaign)
        if changed:
            more = f"; and {len(changed) - 3} more" if len(changed) > 3 else ""
            shown = "; ".join(changed[:3]) + more
            raise ResultsError(
                f"{campaign.path}: the campaign file changed since run {run_dir.name} started, "
                f"in what its finished experiments were run with ({shown}). Run it without "
                "--resume for a new run, or resume from the file as it was: "
                f"{RunDir(run_dir).campaign} (only experiments after the finished ones may "
                "change)"
            )
    if saved.status == "complete" and saved.finished_prefix() >= len(campaign.experiments):
        raise ResultsError(
            f"{run_dir}: this run is complete, there is nothing to resume; run the campaign "
            "without --resume for a new run, or add experiments to its file to continue this one"
        )
    return saved


def campaign_changes(saved: Run, campaign: Campaign) -> list[str]:
    """What differs, between the campaign a saved run was started with and ``campaign``, in
    what its finished experiments ran with: every section but the experiments, and the
    finished experiments themselves ("workload.output_tokens: 64 then, 32 now")."""
    text = json.dumps(campaign.model.recorded())
    for value in campaign_secrets(campaign):  # compared as saved: secrets hidden
        text = text.replace(json.dumps(value)[1:-1], REDACTED)
    now: dict[str, Any] = json.loads(text)
    then: dict[str, Any] = saved.campaign
    # a setting the saved run's reportgen did not have yet (campaign.starts, say) is no
    # change where it has its default (what that reportgen did), nor anywhere in [campaign]
    # (those change only what is still to run); one set to something else is
    top = ({k: v for k, v in then.items() if k != "experiment"},
           {k: v for k, v in now.items() if k != "experiment"})  # fmt: skip
    known = set(flatten(top[0]))
    found = [
        d
        for d in differences(*top)
        if not _new_default(d, known) and not d[0].startswith(WHERE + LATER)
    ]
    old, new = then.get("experiment") or [], now.get("experiment") or []
    finished = saved.experiments[: saved.finished_prefix()]
    # (the campaign's own: a re-measurement of the baseline among them is none of its file's)
    for i in range(sum(e.role == "experiment" for e in finished)):
        label = (
            f"experiment {i + 1} ({old[i].get('id')})" if i < len(old) else f"experiment {i + 1}"
        )
        before = old[i] if i < len(old) else None
        found += [
            d
            for d in differences(before, new[i] if i < len(new) else None, label)
            if not _new_default(d, set(flatten(before or {}, label)))
        ]
    return [f"{key}: {_short(a)} then, {_short(b)} now" for key, a, b in found]


# Where the servers run (here, over SSH, on Slurm, how many at once) is no change of what
# they run: a run may go on from another machine (each resumption records the host it ran on).
WHERE = ("host.executor", "host.ssh", "host.slurm", "campaign.parallel")
# What only adds runs still to come (the baseline measured again, the best run again at the
# end) is no change of what the finished experiments ran either.
LATER = ("campaign.anchors", "campaign.confirm")


def _new_default(d: tuple[str, Any, Any], known: set[str]) -> bool:
    """Whether a difference is only a setting the saved run's reportgen did not have
    (absent from ``known``, the saved keys) at its default, or any in [campaign]."""
    key, _, now = d
    if key in known:
        return False
    if key.startswith("campaign."):
        return True
    # only a key new within a table the saved run had: a whole table added since (a
    # workload override on a finished experiment) is a change, whatever its values
    table = key.rsplit(".", 1)[0] + "."
    if not any(k.startswith(table) for k in known):
        # ... but a table a later reportgen added inside one the saved run had (its
        # workload's warm-up policy, say) is new the same way, key by key
        outer = table[:-1].rsplit(".", 1)[0] + "."
        if not (outer.endswith("workload.") and any(k.startswith(outer) for k in known)):
            return False
    # "experiment 2 (fast).workload.prompts.time_scale" -> "workload.prompts.time_scale"
    name = key.split(").", 1)[1] if key.startswith("experiment ") and ")." in key else key
    defaults = _defaults()
    return name in defaults and defaults[name] == now


@functools.cache
def _defaults() -> dict[str, Any]:
    """Every [workload] and [server] setting's default, by dotted key (built once)."""
    from reportgen.campaign.schema import Server
    from reportgen.campaign.workload import Workload

    return {
        **flatten(Workload().model_dump(mode="json"), "workload"),  # type: ignore[call-arg]
        **flatten(Server().model_dump(mode="json"), "server"),  # type: ignore[call-arg]
    }


def _short(value: Any) -> str:
    text = "absent" if value is None else json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def campaign_file(campaign: Campaign) -> CampaignFile:
    return CampaignFile(path=campaign.path, sha256=campaign.sha256, text=campaign.text)


def continue_run(
    run: Run,
    campaign: Campaign,
    run_dir: Path,
    *,
    environment: dict[str, Any],
    flag_check: dict[str, Any] | None,
    pending: list[Experiment],
) -> bool:
    """Make ``run`` (saved, unfinished) ready to go on: finished experiments stay as they
    are, the others start again from nothing (their saved tables removed), and the
    resumption is recorded with the host it runs on. Returns whether the campaign file
    changed (the caller then rewrites the run's copy of it)."""
    n = run.finished_prefix()
    entries = run.experiments
    for entry in entries[n:]:  # started again from nothing, or no longer in the file
        for table in (entry.table, entry.control_table):  # what a try saved
            RunDir(run_dir).requests(table).unlink(missing_ok=True)
            RunDir(run_dir).telemetry(table).unlink(missing_ok=True)
    kept = {e.id for e in entries[:n]}  # (re-measurements of the baseline among them)
    run.experiments = entries[:n] + [e for e in pending if e.id not in kept]
    changed: dict[str, Any] = {}
    if run.campaign_file.sha256 != campaign.sha256:  # only what is still to run
        old_ids = [e.id for e in entries[n:]]
        new_ids = [e.id for e in campaign.experiments[n:]]
        changed = {
            "sha256_before": run.campaign_file.sha256,
            "added": [i for i in new_ids if i not in old_ids],
            "removed": [i for i in old_ids if i not in new_ids],
        }
        run.campaign = campaign.model.recorded()
        run.campaign_file = campaign_file(campaign)
    here = Environment.of(environment)
    run.resumed.append(
        Resumption(
            at=utc_now(),
            after=run.status,
            kept=[e.id for e in entries[:n]],
            campaign_changed=changed or None,
            reportgen_version=__version__,
            host=here.host.hostname,
            gpus=[g.name for g in here.gpus.devices],
            gpu_uuids=[g.uuid for g in here.gpus.devices],
        )
    )
    run.status = "running"
    run.status_reason = None
    run.finished_at = None
    run.engine.flag_check = flag_check
    return bool(changed)


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
