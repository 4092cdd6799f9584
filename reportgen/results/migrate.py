"""Older results files, brought to this schema before they are read (``store.parse``).

Each step takes one version to the next, so a file of any older version goes through every
step after it. A step only adds what the older version left out or renames what moved; it
never drops a value, so nothing a run measured is lost by reading it again.

- 1 -> 2: every experiment that ran names its workload (version 1 left it out where the
  experiment ran with the campaign's own). Request tables of version 1 lack ``scheduled``,
  which reads as None (``store.read_requests``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from reportgen.results.model import SCHEMA_VERSION


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    campaign = data.get("campaign")
    default = campaign.get("workload") if isinstance(campaign, dict) else None
    experiments = data.get("experiments")
    for e in experiments if isinstance(experiments, list) else []:
        if isinstance(e, dict) and e.get("workload") is None and e.get("status") != "pending":
            e["workload"] = copy.deepcopy(default)
    return data


STEPS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}


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
