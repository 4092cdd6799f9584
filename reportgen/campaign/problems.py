"""Loading a campaign file: TOML in, a frozen ``Campaign`` out, or every problem at once.

Each problem names the file, the key path and the value, and what to do ("did you mean
`concurrency`?"): pydantic's errors are translated, and rules that span several keys (ids,
parents, unset keys, objective levels) are checked on the raw data beside them.
"""

from __future__ import annotations

import hashlib
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from reportgen.campaign.messages import did_you_mean, problems_from_pydantic
from reportgen.campaign.schema import CampaignModel, ExperimentSpec
from reportgen.errors import MISSING, CampaignError, Problem


@dataclass(frozen=True)
class Campaign:
    """A validated campaign with where it came from."""

    model: CampaignModel
    path: str
    text: str
    sha256: str

    @property
    def name(self) -> str:
        return self.model.campaign.name

    @property
    def experiments(self) -> list[ExperimentSpec]:
        return list(self.model.experiment)


def load(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Campaign:
    """Read and validate a campaign file; raise CampaignError listing every problem.
    ``overrides`` (tables of keys, as TOML's) are merged over the file's before it is
    validated: the command line's ``--ssh``, ``--slurm``, ``--parallel`` (``cli.runs``)."""
    p = Path(path)
    shown = str(path)
    try:
        raw_bytes = p.read_bytes()
    except FileNotFoundError:
        raise CampaignError(
            [Problem(shown, "", MISSING, "file not found; check the path")]
        ) from None
    except OSError as exc:
        raise CampaignError([Problem(shown, "", MISSING, f"cannot read: {exc.strerror}")]) from None
    try:
        text = raw_bytes.decode("utf-8-sig")  # a byte-order mark (some editors write one)
    except UnicodeDecodeError as exc:
        msg = f"not UTF-8 text (byte {exc.start}); save the file as UTF-8"
        raise CampaignError([Problem(shown, "", MISSING, msg)]) from None
    return loads(text, shown, overrides)


def _merged(data: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(data)
    for key, value in over.items():
        mine = out.get(key)
        both = isinstance(value, Mapping) and isinstance(mine, Mapping)
        out[key] = _merged(dict(mine), value) if both else value  # type: ignore[arg-type]
    return out


def loads(
    text: str, filename: str = "<campaign>", overrides: Mapping[str, Any] | None = None
) -> Campaign:
    try:
        data = tomllib.loads(text, parse_float=_float)
    except tomllib.TOMLDecodeError as exc:
        raise CampaignError([Problem(filename, "", MISSING, f"invalid TOML: {exc}")]) from None
    if overrides:
        data = _merged(data, overrides)
    problems: list[Problem] = []
    model: CampaignModel | None = None
    unstorable = _unstorable(data, filename)
    try:
        model = CampaignModel.model_validate(data)
    except ValidationError as exc:
        # a value said to be unstorable is said once: as that (nan: not "less than 1"), or by
        # the key's own rule where it has one ("nan is no bound")
        found = problems_from_pydantic(exc, data, filename, {p.key for p in unstorable})
        own = {p.key for p in found}
        unstorable = [p for p in unstorable if p.key not in own]
        problems.extend(found)
    problems.extend(_cross_checks(data, filename))
    problems.extend(unstorable)
    if model is not None and not problems:
        problems.extend(_merged_workloads(model, filename))
    if problems or model is None:
        raise CampaignError(problems)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return Campaign(model=model, path=filename, text=text, sha256=digest)


def _cross_checks(data: Mapping[str, Any], filename: str) -> list[Problem]:
    """Rules that span several keys: ids, parents, unset keys, objective levels.

    Works on the raw TOML data, defensively, so these problems are reported together with
    the schema's own even when the schema check failed.
    """
    out: list[Problem] = []

    def table(value: Any) -> Mapping[str, Any]:
        return value if isinstance(value, Mapping) else {}

    server_args = table(table(data.get("server")).get("args"))
    experiments = data.get("experiment")
    experiments = (
        [e for e in experiments if isinstance(e, Mapping)] if isinstance(experiments, list) else []
    )
    seen: dict[str, int] = {}
    known_args: set[str] = {str(k) for k in server_args}
    all_ids = [e.get("id") for e in experiments]
    for i, exp in enumerate(experiments):
        ident = exp.get("id")
        where = f"experiment[{i}]" + (f" (id={ident!r})" if isinstance(ident, str) else "")
        based_on = exp.get("based_on")
        if isinstance(ident, str) and ident in seen:
            out.append(
                Problem(
                    filename,
                    f"{where}.id",
                    ident,
                    f"duplicate id (also experiment[{seen[ident]}]); ids must be unique",
                )
            )
        if i == 0 and based_on is not None:
            out.append(
                Problem(
                    filename,
                    f"{where}.based_on",
                    based_on,
                    "the first experiment is the baseline and cannot have a parent; "
                    "remove based_on",
                )
            )
        elif isinstance(based_on, str) and based_on == ident:
            out.append(
                Problem(
                    filename,
                    f"{where}.based_on",
                    based_on,
                    'names this experiment itself; a parent is an earlier experiment (or "best")',
                )
            )
        elif isinstance(based_on, str) and based_on != "best" and based_on not in seen:
            hint = did_you_mean(based_on, list(seen) + ["best"])
            later = " (it comes later; parents must come first)" if based_on in all_ids[i:] else ""
            out.append(
                Problem(
                    filename,
                    f"{where}.based_on",
                    based_on,
                    f'not an earlier experiment id{later}; use an earlier id or "best"{hint}',
                )
            )
        unset = exp.get("unset")
        for key in unset if isinstance(unset, list) else []:
            if isinstance(key, str) and key not in known_args:
                hint = did_you_mean(key, sorted(known_args))
                out.append(
                    Problem(
                        filename,
                        f"{where}.unset",
                        key,
                        f"no earlier configuration sets this flag{hint}",
                    )
                )
        args = table(exp.get("args"))
        for key in args:
            if str(key).startswith("-"):
                out.append(
                    Problem(
                        filename,
                        f"{where}.args",
                        key,
                        f"write flag names without dashes: {str(key).lstrip('-')!r}",
                    )
                )
        known_args |= {str(k) for k in args}
        if isinstance(ident, str):
            seen.setdefault(ident, i)
        out += _not_started(filename, where, exp, table(data.get("server")).get("base_url"))
    for key in server_args:
        if str(key).startswith("-"):
            out.append(
                Problem(
                    filename,
                    "server.args",
                    key,
                    f"write flag names without dashes: {str(key).lstrip('-')!r}",
                )
            )
    server = table(data.get("server"))
    if server.get("base_url") is not None:
        for key in ("command", "args", "env"):
            if server.get(key):
                out.append(
                    Problem(
                        filename,
                        f"server.{key}",
                        server[key],
                        "server.base_url names a server that is already running: reportgen "
                        f"starts none, so its {key} would not apply; remove one of the two",
                    )
                )
    levels: set[Any] = set()
    workload = table(data.get("workload"))
    rated = workload.get("request_rate") is not None  # every level a rate, capped by concurrency
    for source in [workload] + [table(e.get("workload")) for e in experiments]:
        conc = source.get("concurrency")
        if isinstance(conc, list) and not rated and source.get("request_rate") is None:
            levels |= {c for c in conc if isinstance(c, int)}
    if not isinstance(workload.get("concurrency"), list) and not rated:
        levels.add(1)  # the default level
    objective = table(table(data.get("campaign")).get("objective"))
    wanted = objective.get("concurrency")
    if isinstance(wanted, list) and wanted and rated and not levels:
        out.append(
            Problem(
                filename,
                "campaign.objective.concurrency",
                wanted,
                "no level runs closed-loop: the levels are workload.request_rate's rates, which "
                "workload.concurrency only caps; choose among them with objective.request_rate "
                "(or remove objective.concurrency: every level counts)",
            )
        )
        wanted = []
    for c in wanted if isinstance(wanted, list) else []:
        if isinstance(c, int) and c not in levels:
            out.append(
                Problem(
                    filename,
                    "campaign.objective.concurrency",
                    c,
                    f"no experiment runs at concurrency {c}; levels are {sorted(levels)}",
                )
            )
    metric = objective.get("metric")
    if metric == "goodput_req_s":
        stream = workload.get("stream", True)
        bounds = []
        for source in [workload] + [table(e.get("workload")) for e in experiments]:
            slo = dict(table(source.get("slo")) or table(workload.get("slo")))
            if source.get("stream", stream) is False:  # no first token is seen apart
                slo.pop("ttft_ms", None)
                slo.pop("tpot_ms", None)
            bounds.append(slo)
        if not any(v is not None for b in bounds for v in b.values()):
            out.append(
                Problem(
                    filename,
                    "campaign.objective.metric",
                    metric,
                    "goodput counts the requests that meet workload.slo, and no SLO applies "
                    "(TTFT and TPOT bounds need streamed responses): add one, e.g. "
                    "workload.slo = { ttft_ms = 500, tpot_ms = 50 }, or e2e_ms unstreamed",
                )
            )
    return out


def _merged_workloads(model: CampaignModel, filename: str) -> list[Problem]:
    """Each experiment's workload as it will run (the campaign's with its own changes) is
    checked whole: rules across keys (turns with request_rate, find_max with adaptive
    repetitions) can be broken by the two together, neither alone."""
    from reportgen.campaign.resolve import resolve

    out: list[Problem] = []
    for i, exp in enumerate(model.experiment):
        if exp.workload is None:
            continue
        try:
            resolve(model, exp, None)
        except ValidationError as exc:
            for err in exc.errors():
                msg = str(err["msg"]).removeprefix("Value error, ")
                out.append(
                    Problem(
                        filename,
                        f"experiment[{i}] (id={exp.id!r}).workload",
                        MISSING,
                        f"with the campaign's [workload]: {msg[0].lower() + msg[1:]}",
                    )
                )
    return out


_INT64 = 2**63


class _Overflow(float):
    """A number written too large for a float (1e400): TOML reads it as infinity; kept with
    its text so that it is refused rather than taken for inf ("every request at once")."""

    text = ""

    def __repr__(self) -> str:  # as written: 1e400
        return self.text


def _float(text: str) -> float:
    """TOML's floats, as ``float`` reads them, but a finite number too large to hold is an
    ``_Overflow`` (``tomllib``'s ``parse_float``; it passes "inf", "+inf" and "-inf" too)."""
    value = float(text)
    if math.isinf(value) and text.lstrip("+-") != "inf":
        out = _Overflow(value)
        out.text = text
        return out
    return value


def _unstorable(data: Any, filename: str, path: str = "") -> list[Problem]:
    """Values a run could not record or pass on: whole numbers beyond 64 bits (JSON tools
    and results cannot hold them), text with a NUL character (no program argument or
    environment variable can), nan (no setting means "not a number", and strict JSON cannot
    hold it), numbers too large to hold (1e400, which TOML reads as infinity), each said with
    its key."""
    out: list[Problem] = []
    items = (
        data.items()
        if isinstance(data, Mapping)
        else enumerate(data)
        if isinstance(data, list)
        else []
    )
    for key, value in items:
        where = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else key
        if isinstance(value, Mapping | list):
            out += _unstorable(value, filename, where)
        elif isinstance(value, int) and not isinstance(value, bool):
            if not -_INT64 <= value < _INT64:
                out.append(
                    Problem(filename, where, value, "too large: whole numbers must fit in 64 bits")
                )
        elif isinstance(value, _Overflow):
            out.append(
                Problem(
                    filename,
                    where,
                    value,
                    "too large to hold as a number (it would be read as infinity); write inf "
                    "where infinity is meant, or a smaller number",
                )
            )
        elif isinstance(value, float) and math.isnan(value):
            out.append(Problem(filename, where, value, "not a number; give a number"))
        elif isinstance(value, str) and "\x00" in value:
            out.append(
                Problem(
                    filename,
                    where,
                    value,
                    "contains a NUL character, which no command line or environment can hold",
                )
            )
    return out


def _not_started(
    filename: str, where: str, exp: Mapping[str, Any], server_url: Any
) -> list[Problem]:
    """An experiment whose server is already running (its own base_url, or the server's)
    cannot change that server's flags or environment."""
    url = exp.get("base_url") or server_url
    if url is None:
        return []
    whose = "its base_url" if exp.get("base_url") else "server.base_url"
    return [
        Problem(
            filename,
            f"{where}.{key}",
            exp[key],
            f"{whose} names a server that is already running ({url}): reportgen starts "
            f"none, so it cannot apply {key}; remove {key}, or base_url to have reportgen "
            "start the server",
        )
        for key in ("args", "unset", "env")
        if exp.get(key)
    ]


# --------------------------------------------------------------------------------------------
# Turning pydantic's errors into problems a person can act on
