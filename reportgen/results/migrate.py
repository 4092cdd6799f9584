"""Older results files, brought to this schema before they are read (``store.parse``).

Each step takes one version to the next, so a file of any older version goes through every
step after it. A step only adds what the older version left out or renames what moved; it
never drops a value, so nothing a run measured is lost by reading it again.

- 1 -> 2: every experiment that ran names its workload (version 1 left it out where the
  experiment ran with the campaign's own). Request tables of version 1 lack ``scheduled``,
  which reads as None (``store.read_requests``).
- 2 -> 3: a failed experiment's ``failure`` (what happened, the exit code, the level run and
  repetition it failed during), read from the words of its ``reason`` as version 2 wrote
  them: the one place those words are read back.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from reportgen.results.model import SCHEMA_VERSION, Point


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    campaign = data.get("campaign")
    default = campaign.get("workload") if isinstance(campaign, dict) else None
    experiments = data.get("experiments")
    for e in experiments if isinstance(experiments, list) else []:
        if isinstance(e, dict) and e.get("workload") is None and e.get("status") != "pending":
            e["workload"] = copy.deepcopy(default)
    return data


# How version 2 said a failure (``run.server``): the words and what they mean
_V2_KINDS = (
    (re.compile(r"^server exited with code (-?\d+)"), "exited"),
    (re.compile(r"^server reported a fatal error"), "fatal"),
    (re.compile(r"^server was not ready after"), "not ready"),
    (re.compile(r"^(port \d+ on \S+ is already in use|command not found|command not "
                r"executable|cannot start )"), "start"),
)  # fmt: skip
_V2_DURING = re.compile(r"\bduring (C=\d+|R=\S+/s) repetition (\d+)")


def _v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    experiments = data.get("experiments")
    for e in experiments if isinstance(experiments, list) else []:
        if not isinstance(e, dict):
            continue  # not an experiment: the model says so, in one line
        reason = e.get("reason")
        if e.get("status") != "failed" or not isinstance(reason, str) or "failure" in e:
            continue
        failure: dict[str, Any] = {"kind": "other"}
        for rx, kind in _V2_KINDS:
            found = rx.search(reason)
            if found:
                failure["kind"] = kind
                if kind == "exited":
                    failure["exit_code"] = int(found.group(1))
                break
        during = _V2_DURING.search(reason)
        point = Point.parse(during.group(1)) if during else None
        if during and point is not None:
            failure["level"] = point.dump()
            failure["repetition"] = int(during.group(2)) - 1
        e["failure"] = failure
    return data


STEPS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2, 2: _v2_to_v3}


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a results dict of any version up to this one's) as this version's; the
    argument is left as it was."""
    version = int(data["schema_version"])
    if version == SCHEMA_VERSION:
        return data
    out = copy.deepcopy(data)
    while version < SCHEMA_VERSION:
        out = STEPS[version](out)
        version += 1
        out["schema_version"] = version
    return out
