"""The campaign stage: a TOML file in, a frozen ``Campaign`` out, every problem at once.

- ``schema``: the file's tables and keys (pydantic models): the campaign, its objective,
  server, checks and experiments; ``workload`` (the [workload] table, its own tables in
  ``workload_tables``), ``prompts`` (where prompts come from), ``host`` (where it runs) and
  ``base`` (the metrics, the engines, the margin's default and which way each metric improves)
  hold the rest of it.
- ``problems``: loading, with every problem reported at once, located and explained.
- ``resolve``: experiments to configurations (parents, flags, environment, workload).

Imports only ``reportgen.errors``: every later stage reads a ``Campaign``.
"""

from reportgen.campaign.base import (
    DEFAULT_MARGIN,
    DEFAULT_REQUESTS_PER_LEVEL,
    ENGINES,
    METRICS,
    higher_is_better,
)
from reportgen.campaign.host import Host, HostExpect
from reportgen.campaign.problems import Campaign, load, loads
from reportgen.campaign.prompts import PromptSource
from reportgen.campaign.resolve import FlagChange, Resolved, parent_id, resolve
from reportgen.campaign.schema import (
    STATS,
    CampaignModel,
    Check,
    ExperimentSpec,
    GoldenPrompt,
    Objective,
    Reference,
    Server,
    WorkloadOverride,
    json_schema,
)
from reportgen.campaign.workload import Workload, repetitions_range, resolve_trim
from reportgen.campaign.workload_tables import Repetitions, Slo
from reportgen.errors import CampaignError

__all__ = [
    "DEFAULT_MARGIN",
    "DEFAULT_REQUESTS_PER_LEVEL",
    "ENGINES",
    "METRICS",
    "STATS",
    "Campaign",
    "CampaignError",
    "CampaignModel",
    "Check",
    "ExperimentSpec",
    "FlagChange",
    "Host",
    "HostExpect",
    "Objective",
    "GoldenPrompt",
    "PromptSource",
    "Reference",
    "Repetitions",
    "Resolved",
    "Server",
    "Slo",
    "Workload",
    "WorkloadOverride",
    "higher_is_better",
    "json_schema",
    "load",
    "loads",
    "parent_id",
    "repetitions_range",
    "resolve",
    "resolve_trim",
]
