"""pydantic's validation errors as a campaign's problems, one line each: the key as the file
writes it, the value found, and what to write instead (the allowed keys, a near name, a peer's
name for the key)."""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Union

from pydantic import BaseModel, ValidationError

from reportgen.campaign.schema import CampaignModel
from reportgen.errors import MISSING, Problem


def _allowed_keys() -> dict[tuple[str, ...], list[str]]:
    """Map each table path (list indices dropped) to the keys allowed there."""
    table: dict[tuple[str, ...], list[str]] = {}

    def walk(model: type[BaseModel], prefix: tuple[str, ...]) -> None:
        table[prefix] = list(model.model_fields)
        for name, info in model.model_fields.items():
            for sub in _models_in(info.annotation):
                walk(sub, prefix + (name,))

    walk(CampaignModel, ())
    return table


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin in (list, Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in _models_in(a)]
    return []


_ALLOWED = _allowed_keys()


# What `vllm bench serve` and SGLang's bench_serving call a setting, and where it lives here
PEER_NAMES = {
    "num_prompts": "workload.requests_per_level (per level) or workload.duration_s",
    "random_input_len": "workload.input_tokens",
    "random_output_len": "workload.output_tokens",
    "random_range_ratio": "workload.range_ratio",
    "max_concurrency": "workload.concurrency (a list of levels)",
    "request_rate": "workload.request_rate",
    "dataset_name": 'workload.prompts.source ("random", "sharegpt", "trace"...)',
    "dataset_path": "workload.prompts.path",
    "sharegpt_output_len": "workload.output_tokens (with prompts.answer_lengths = false)",
    "goodput": "workload.slo (ttft_ms, tpot_ms, e2e_ms)",
    "ignore_eos": "nothing: reportgen asks the engine for exact lengths itself",
    "backend": "server.engine",
    "endpoint": 'workload.api ("chat" or "completions")',
    "model": "server.args.model (a server reportgen starts) or server.model (one running)",
    "host": "server.host",
    "port": "server.args.port",
    "num_rounds": "workload.turns",
    "num_turns": "workload.turns",
}


def _peer_hint(word: str) -> str:
    """Where a setting named as the peers' benchmark tools name it lives here ("")."""
    peer = PEER_NAMES.get(word.replace("-", "_"))
    return f"; as the benchmark tools call it: here it is {peer}" if peer else ""


def did_you_mean(word: str, options: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _value_at(data: Any, loc: Sequence[int | str]) -> Any:
    cur = data
    for part in loc:
        try:
            cur = cur[part]
        except (KeyError, IndexError, TypeError):
            return MISSING
    return cur


def _key_path(data: Mapping[str, Any], loc: Sequence[int | str]) -> str:
    parts: list[str] = []
    for i, part in enumerate(loc):
        if isinstance(part, int):
            item = _value_at(data, loc[: i + 1])
            ident = item.get("id") if isinstance(item, dict) else None
            parts[-1] += f"[{part}]" + (f" (id={ident!r})" if isinstance(ident, str) else "")
        else:
            parts.append(part)
    return ".".join(parts)


# a union's branch tag in an error's location ("str", "list[Expect]", a model's class name
# "Expect"): never a key of a campaign file (they are lower case)
_UNION_NOISE = re.compile(r"^(bool|int|float|str|list\[.*\]|dict\[.*\]|[A-Z][A-Za-z]*)$")
# a branch of a union that refused the value's type, where another branch went deeper
_TYPE_ONLY = ("string_type", "list_type", "dict_type", "model_type", "int_type", "bool_type")


def _arg_value_loc(loc: Sequence[int | str]) -> list[int | str] | None:
    """For an error inside a flag's value (``...args.<flag>...``), the flag's location."""
    for i, part in enumerate(loc[:-1]):
        if part == "args" and isinstance(loc[i + 1], str):
            return list(loc[: i + 2])
    return None


def problems_from_pydantic(
    exc: ValidationError,
    data: Mapping[str, Any],
    filename: str,
    said: Collection[str] = (),
) -> list[Problem]:
    """Pydantic's errors as problems, one a key. ``said``: keys whose value a rule across the
    file already refused (``problems._unstorable``: nan, 1e400): only the key's own rule (a
    validator's ``value_error``) speaks of them again, not a bound that nan fails to meet."""
    problems: list[Problem] = []
    seen: set[str] = set()

    def where(err: Any) -> list[int | str]:
        loc = [p for p in err["loc"] if not (isinstance(p, str) and _UNION_NOISE.match(p))]
        return loc or list(err["loc"])  # a key of the file named like a type ("int")

    deeper = [where(e) for e in exc.errors()]
    for err in exc.errors():
        loc = where(err)
        kind = err["type"]
        if kind in _TYPE_ONLY and any(len(d) > len(loc) and d[: len(loc)] == loc for d in deeper):
            continue  # {verdict = "slower"} for str | Expect: Expect's error says what is wrong
        arg_at = _arg_value_loc(loc)
        if arg_at is not None:
            key = _key_path(data, arg_at)
            if key in seen:
                continue
            seen.add(key)
            problems.append(
                Problem(
                    filename,
                    key,
                    _value_at(data, arg_at),
                    "a flag value must be a string, number, boolean, a list of "
                    "those, or a table (for JSON arguments)",
                )
            )
            continue
        # Union members that failed each add an error; keep the first per location.
        key = _key_path(data, loc)
        if key in seen or (key in said and kind != "value_error"):
            continue
        seen.add(key)
        if kind == "extra_forbidden":
            table = tuple(p for p in loc[:-1] if isinstance(p, str))
            allowed = _ALLOWED.get(table, [])
            word = str(loc[-1])
            hint = _peer_hint(word) or did_you_mean(word, allowed)
            if not hint and allowed:
                hint = f"; allowed keys: {', '.join(allowed)}"
            problems.append(Problem(filename, key, _value_at(data, loc), f"unknown key{hint}"))
        elif kind == "missing":
            problems.append(Problem(filename, key, MISSING, "required key is missing"))
        elif kind == "too_short" and tuple(loc[:2]) == ("campaign", "objective"):
            problems.append(
                Problem(
                    filename,
                    key,
                    _value_at(data, loc),
                    "an empty list judges no level, so every verdict would be inconclusive: "
                    "name the levels that decide, or leave the key out to judge every level",
                )
            )
        elif kind == "literal_error":
            expected = err.get("ctx", {}).get("expected", "")
            value = _value_at(data, loc)
            options = re.findall(r"'([^']*)'", str(expected))
            hint = ""
            if isinstance(value, str) and value:
                # 'ttft' for 'ttft_ms', 'chat-completions' for 'chat': the one option it
                # begins or begins with, else one near it
                begun = [o for o in options if o and (o.startswith(value) or value.startswith(o))]
                hint = f"; did you mean {begun[0]!r}?" if len(begun) == 1 else ""
                hint = hint or did_you_mean(value, options)
            problems.append(Problem(filename, key, value, f"must be one of {expected}{hint}"))
        elif kind == "string_pattern_mismatch" and tuple(loc[-2:]) == ("ssh", "host"):
            problems.append(
                Problem(
                    filename,
                    key,
                    _value_at(data, loc),
                    "the GPU host as ssh takes it: a name or address, user@host, or a Host "
                    "of ~/.ssh/config (its port in host.ssh.port)",
                )
            )
        elif kind == "string_pattern_mismatch" and tuple(loc[-2:]) == ("slurm", "time"):
            problems.append(
                Problem(
                    filename,
                    key,
                    _value_at(data, loc),
                    'a time limit as Slurm writes it: minutes ("90"), "1:30:00" or "1-00:00:00"',
                )
            )
        elif kind == "string_pattern_mismatch" and loc and loc[-1] == "host":
            problems.append(
                Problem(
                    filename,
                    key,
                    _value_at(data, loc),
                    "a host name or address alone (127.0.0.1, ::1, localhost), without "
                    "http:// or a port: the port is the server's own flag (server.args.port)",
                )
            )
        elif kind == "string_pattern_mismatch" and loc and loc[-1] == "base_url":
            problems.append(
                Problem(
                    filename,
                    key,
                    _value_at(data, loc),
                    "not a server address: write http://host:port (https:// too), as "
                    "`vllm bench serve --base-url` takes it",
                )
            )
        else:
            msg = err["msg"]
            if msg.lower().startswith("value error, "):
                msg = msg[len("Value error, ") :]
            value = _value_at(data, loc)
            if (
                isinstance(value, Mapping) and kind == "value_error"
            ):  # a rule across a table: it names
                value = MISSING  # the keys; the whole table would bury its message
            problems.append(Problem(filename, key, value, msg[0].lower() + msg[1:]))
    return problems
