"""Property tests: whatever a campaign file holds (bytes, broken TOML, wrong types, missing or
unknown keys), loading it gives a Campaign or reportgen's own CampaignError with each problem
located (file, key path); never another exception, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reportgen import campaign
from reportgen.errors import CampaignError
from tests.builders import DEMO, toml_document, values
from tests.conftest import reportgen_main

FILE = "fuzz.toml"


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
