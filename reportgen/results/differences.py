"""Two nested values compared leaf by leaf: the one walker for saying what differs between
two records (two runs' environments in ``reportgen diff``, a saved campaign and its file now).

Pure. Mappings are walked into dotted keys (``gpus.driver``), lists of mappings by index
(``devices[0].name``); any other value, a list of scalars included, is one leaf, and so is any
value ``leaf`` says is one (a collector's ``{"error": why}``, say). A pydantic model is walked
as its JSON dump. Keys named in ``skip`` are left out at any depth (fields that change from one
run to the next without saying anything, say). The report's environment tables show a
fingerprint through the same walk (``render.fmt.field_rows``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from pydantic import BaseModel

Difference = tuple[str, Any, Any]  # (dotted key, a's value, b's value); None where absent


def _never(value: Any) -> bool:
    return False


def flatten(
    value: Any,
    prefix: str = "",
    skip: Collection[str] = (),
    leaf: Callable[[Any], bool] = _never,
) -> dict[str, Any]:
    """``value``'s leaves by dotted key, under ``prefix`` (a leaf at the top is ``prefix``
    itself). An empty mapping has no leaves (unless ``leaf`` makes it one)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    out: dict[str, Any] = {}
    if leaf(value):
        out[prefix] = value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if str(k) in skip:
                continue
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k), skip, leaf))
    elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]", skip, leaf))
    else:
        out[prefix] = value
    return out


def differences(a: Any, b: Any, prefix: str = "", skip: Collection[str] = ()) -> list[Difference]:
    """Every leaf (``flatten``) where ``a`` and ``b`` differ, sorted by key: (key, a's value,
    b's value), None for a side without that leaf."""
    fa, fb = flatten(a, prefix, skip), flatten(b, prefix, skip)
    return [
        (key, fa.get(key), fb.get(key))
        for key in sorted(set(fa) | set(fb))
        if fa.get(key) != fb.get(key)
    ]
