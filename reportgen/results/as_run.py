"""A saved campaign's tables typed as the run that wrote them ran them.

Results keep the [campaign] table and the workload as they were dumped; a later reportgen may
have added keys since, whose absence meant something then (one server start an experiment
before ``starts``, no level warm-ups before ``warmup``). These functions read a saved table
into today's schema with those meanings, so every rule over it (the objective's levels, the
protocol's switches) has one implementation: the schema's.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from reportgen.campaign.host import Host
from reportgen.campaign.schema import CampaignInfo, Objective, Reference
from reportgen.campaign.workload import Workload


def workload_as_run(saved: Mapping[str, Any]) -> Workload:
    """A saved workload (a dumped ``Workload``) typed, as the run that wrote it ran it: the
    keys a later reportgen added filled with what their absence meant then (no level warm-ups
    before ``warmup`` existed; a duration level exactly ``duration_s`` long before
    ``max_duration_s``), keys a later reportgen wrote left out; every other key a saved
    workload lacks has today's default, which the reportgens before shared."""
    known = {k: v for k, v in saved.items() if k in Workload.model_fields}
    known.setdefault("warmup", {"steady": False})
    if "max_duration_s" not in known and known.get("duration_s") is not None:
        known["max_duration_s"] = known["duration_s"]
    return Workload.model_validate(known)


def info_as_run(saved: Mapping[str, Any]) -> CampaignInfo:
    """A saved [campaign] table (a dumped ``CampaignInfo``) typed, as the run that wrote it
    ran it: what the absence of a key a later reportgen added meant then (one server start
    an experiment before ``starts``, no priming start before ``prime``, no bracket before
    ``bracket``, false alarms held per experiment without ``alpha_scope``), keys a later
    reportgen wrote left out, the objective read as ``Run.goal`` reads it; every other key
    it lacks has today's default, which the reportgens before shared."""
    known = {k: v for k, v in saved.items() if k in CampaignInfo.model_fields}
    # a name as stored, whatever it is (results are read, not judged: the report escapes it);
    # results put together by hand (tests, benchmarks) may have none
    name = str(known.pop("name", "campaign"))
    known.setdefault("title", "")
    known.setdefault("starts", 1)
    known.setdefault("prime", False)
    known.setdefault("bracket", False)
    known.setdefault("alpha_scope", "experiment")  # the default before 2026-12-07
    known.setdefault("anchors", 0)  # none before 2026-12-07
    known.setdefault("confirm", False)  # off unless asked before 2026-12-07
    known.setdefault("start_spread", 0.015)  # the default until 2026-12-07
    known["objective"] = _objective(json.dumps(known.get("objective") or {}, sort_keys=True))
    return CampaignInfo.model_validate({**known, "name": "campaign"}).model_copy(
        update={"name": name}
    )


_UNREAD_REFERENCE = {"name": "", "metric": "", "value": 0.0, "concurrency": None, "gpus": 1,
                     "source": "", "conditions": ""}  # fmt: skip


def references_as_run(saved: Any) -> list[Reference]:
    """A saved campaign's [[reference]] tables typed. One this version's schema refuses (a
    metric since renamed, say) is kept as it was saved rather than dropped: results are read,
    not judged."""
    out = []
    for table in saved if isinstance(saved, list) else []:
        try:
            out.append(Reference.model_validate(table))
        except ValidationError:
            kept = table if isinstance(table, dict) else {}
            out.append(Reference.model_construct(**{**_UNREAD_REFERENCE, **kept}))
    return out


def host_as_run(saved: Any) -> Host:
    """A saved campaign's [host] table typed; one this version's schema refuses reads as the
    default host (nothing expected, no price): results are read, not judged."""
    try:
        return Host.model_validate(saved if isinstance(saved, dict) else {})
    except ValidationError:
        return Host.model_validate({})


@functools.lru_cache(maxsize=256)
def _workload_as_run(text: str) -> Workload:
    return workload_as_run(json.loads(text))


@functools.lru_cache(maxsize=64)
def _info_as_run(text: str) -> CampaignInfo:
    return info_as_run(json.loads(text))


@functools.lru_cache(maxsize=64)
def _objective(text: str) -> Objective:
    """A stored objective (JSON text: the cache's key) as the schema's ``Objective``. An
    empty list of levels, written before the schema refused one, reads as none given: every
    level decides, as these results' own rule said then."""
    raw = {k: v for k, v in json.loads(text).items() if v != []}
    return Objective.model_validate(raw)
