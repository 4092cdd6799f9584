"""The campaign stage: a TOML file in, a frozen ``Campaign`` out, every problem at once.

``schema`` holds the file's models and loading. Imports only ``reportgen.errors``: every
later stage reads a ``Campaign``, none is read from here.
"""

from reportgen.campaign.schema import (
    DEFAULT_REQUESTS_PER_LEVEL,
    ENGINES,
    METRICS,
    STATS,
    Campaign,
    CampaignModel,
    Check,
    Experiment,
    FlagChange,
    Host,
    HostExpect,
    Objective,
    Probe,
    PromptSource,
    Reference,
    Resolved,
    Server,
    Slo,
    Workload,
    WorkloadOverride,
    json_schema,
    load,
    loads,
    parent_id,
    resolve,
)
from reportgen.errors import CampaignError

__all__ = [
    "DEFAULT_REQUESTS_PER_LEVEL",
    "ENGINES",
    "METRICS",
    "STATS",
    "Campaign",
    "CampaignError",
    "CampaignModel",
    "Check",
    "Experiment",
    "FlagChange",
    "Host",
    "HostExpect",
    "Objective",
    "Probe",
    "PromptSource",
    "Reference",
    "Resolved",
    "Server",
    "Slo",
    "Workload",
    "WorkloadOverride",
    "json_schema",
    "load",
    "loads",
    "parent_id",
    "resolve",
]
