"""From experiments to configurations: each one's parent resolved, its flags, environment
and workload filled in, and what changed from the parent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from reportgen.campaign.schema import CampaignModel, Check, ExperimentSpec
from reportgen.campaign.workload import Workload


@dataclass(frozen=True)
class FlagChange:
    key: str
    before: Any  # None when the flag was absent
    after: Any  # None when the flag was removed

    @property
    def kind(self) -> Literal["added", "removed", "changed"]:
        if self.before is None:
            return "added"
        if self.after is None:
            return "removed"
        return "changed"


@dataclass(frozen=True)
class Resolved:
    """One experiment with everything filled in: what will actually be started and sent."""

    id: str
    why: str
    expect: str
    based_on: str | None  # as written
    parent: str | None  # the experiment it was built on, "best" resolved
    args: dict[str, Any]
    env: dict[str, str]
    workload: Workload
    checks: list[Check] = field(default_factory=list)
    flag_diff: list[FlagChange] = field(default_factory=list)
    # a server already running there (``base_url``): reportgen starts nothing for it, and its
    # flags and environment are not reportgen's to know (args and env stay empty)
    base_url: str | None = None
    nodes: int = 1  # the nodes its server spans (``server.nodes``)
    # its structured expectations (``ExperimentSpec.expects``); None: ``expect``'s words only
    expects: list[dict[str, Any]] | None = None

    @property
    def one_session(self) -> str | None:
        """Why it runs in one server session whatever the campaign asks (starts,
        interleave, fresh servers), or None: a server already running cannot be started
        again, and a search's next probe depends on the last."""
        if self.base_url is not None:
            return "its server is already running at base_url"
        if self.workload.find_max is not None:
            return "its find_max search"
        return None


def resolve(campaign: CampaignModel, exp: ExperimentSpec, parent: Resolved | None) -> Resolved:
    """Build an experiment's configuration from its parent's (or the server defaults)."""
    base_url = exp.base_url or campaign.server.base_url
    # a parent already running elsewhere has no flags to build on: the server's defaults
    start_from = parent if parent is not None and parent.base_url is None else None
    base_args = dict(start_from.args) if start_from else dict(campaign.server.args)
    base_env = dict(start_from.env) if start_from else dict(campaign.server.env)
    if base_url is not None:
        base_args, base_env = {}, {}
    args = {**base_args, **exp.args}
    for key in exp.unset:
        args.pop(key, None)
    env = {**base_env, **exp.env}
    overrides: dict[str, Any] = exp.workload.model_dump(exclude_none=True) if exp.workload else {}
    if "requests_per_level" in overrides:
        overrides.setdefault("duration_s", None)
    if "duration_s" in overrides:
        overrides.setdefault("requests_per_level", None)
    base = campaign.workload.model_dump()
    base["trim"] = campaign.workload.trim  # as written: its default follows the merged amount
    if "concurrency" not in campaign.workload.model_fields_set:
        del base["concurrency"]  # its default follows the merged rates (``Workload.points``)
    workload = Workload.model_validate({**base, **overrides})
    diff = [
        FlagChange(k, base_args.get(k), args.get(k))
        for k in sorted(set(base_args) | set(args))
        if base_args.get(k) != args.get(k)
    ]
    base_nodes = start_from.nodes if start_from else campaign.server.nodes
    nodes = exp.nodes or base_nodes
    if nodes != base_nodes and base_url is None:  # the launcher's flag (``run.nodes``)
        diff.append(FlagChange("nodes", base_nodes, nodes))
    return Resolved(
        id=exp.id,
        why=exp.why,
        expect=exp.expect_text,
        expects=exp.expects,
        based_on=exp.based_on,
        parent=parent.id if parent else None,
        args=args,
        env=env,
        workload=workload,
        checks=list(campaign.check) + list(exp.checks),
        flag_diff=diff,
        base_url=base_url.rstrip("/").removesuffix("/v1") if base_url else None,
        nodes=1 if base_url else nodes,
    )


def parent_id(exp: ExperimentSpec, index: int, baseline_id: str, best_id: str) -> str | None:
    """The id an experiment builds on: None for the baseline; ``best`` resolved to best_id."""
    if index == 0:
        return None
    if exp.based_on is None:
        return baseline_id
    if exp.based_on == "best":
        return best_id
    return exp.based_on
