"""Property tests: whatever a campaign file holds (bytes, broken TOML, wrong types, missing or
unknown keys), loading it gives a Campaign or reportgen's own CampaignError with each problem
located (file, key path); never another exception, never a traceback."""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reportgen import campaign
from reportgen.errors import CampaignError
from tests.conftest import reportgen_main

ROOT = Path(__file__).resolve().parent.parent
DEMO = tomllib.loads((ROOT / "campaigns" / "demo.toml").read_text())
FILE = "fuzz.toml"

scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)


def toml_value(value: Any) -> str:
    """A value as TOML (inline tables and arrays), enough for these tests."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON's escapes are TOML's basic-string escapes
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_document(data: dict[str, Any]) -> str:
    return "\n".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in data.items()) + "\n"


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """The demo campaign with one to three changes deep inside: a value replaced by another
    of any type, a key removed, or an unknown key added."""
    data = json.loads(json.dumps(DEMO))
    for _ in range(draw(st.integers(1, 3))):
        node: Any = data
        while True:  # walk down to a random table or array
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            if not keys:
                break
            key = draw(st.sampled_from(keys))
            child = node[key]
            if not isinstance(child, (dict, list)) or draw(st.booleans()):
                break
            node = child
        if not (list(node) if isinstance(node, dict) else node):
            continue
        key = draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "replace":
            node[key] = draw(values)
        elif action == "remove":
            del node[key]
        elif isinstance(node, dict):
            node[draw(st.text(min_size=1, max_size=12))] = draw(values)
    return data


def outcome(text: str) -> campaign.Campaign | CampaignError:
    try:
        return campaign.loads(text, FILE)
    except CampaignError as exc:
        return exc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_wrong_types_and_keys_give_located_problems(data: dict[str, Any]) -> None:
    got = outcome(toml_document(data))
    if isinstance(got, CampaignError):
        assert got.problems
        for p in got.problems:
            assert str(p).startswith(f"{FILE}: "), str(p)
            assert p.key or "invalid TOML" in p.message, str(p)  # located, or unparsable


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_gives_a_campaign_or_problems(text: str) -> None:
    got = outcome(text)
    if isinstance(got, CampaignError):
        assert got.problems and all(str(p).startswith(f"{FILE}: ") for p in got.problems)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_on_disk_give_a_campaign_or_problems(tmp_path_factory: Any, raw: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "c.toml"
    path.write_bytes(raw)
    try:
        campaign.load(path)
    except CampaignError as exc:
        assert all(str(p).startswith(f"{path}: ") for p in exc.problems)


def test_the_command_line_shows_no_traceback_for_a_broken_file(tmp_path: Path) -> None:
    broken = dict(DEMO)
    broken["workload"] = {**DEMO["workload"], "concurrency": {"a": [1, "x"]}, "seed": "zero"}
    path = tmp_path / "broken.toml"
    path.write_text(toml_document(broken))
    res = reportgen_main("validate", path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert any(f"{path}: workload.concurrency = " in ln for ln in lines), res.stderr
    assert any(f"{path}: workload.seed = 'zero'" in ln for ln in lines), res.stderr
