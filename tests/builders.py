"""Builders the tests share: the demo campaign as data, campaign documents written as TOML
(with hypothesis strategies for any value), and a small campaign run to its end in this
process."""

from __future__ import annotations

import json
import math
import shutil
import tomllib
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from reportgen import results
from reportgen.observe.sources import CAPTURE_ENV
from reportgen.results.rundir import RunDir
from tests.conftest import ROOT, free_port, reportgen_main

DEMO: dict[str, Any] = tomllib.loads((ROOT / "campaigns" / "demo.toml").read_text())

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


SMALL = """
[campaign]
name = "small"
title = "small"

[server]
engine = "sim"
args = {{ port = {port}, ttft-ms = 5, itl-ms = 1 }}
ready_timeout_s = 30

[workload]
concurrency = [1, 4]
requests_per_level = 12
input_tokens = 8
output_tokens = 6
warmup_requests = 2
# Each level warmed up in windows of 0.1 s for 1 s at most: requests of about 10 ms on a
# simulator that is steady from its first one, so a level the busy test host keeps from
# settling is measured after 1 s (with 10 s, both levels of every such run spent 10 s
# at full speed, about 3,700 requests, to measure 24)
warmup = {{ max_s = 1, window_s = 0.1 }}
{extra}

[[experiment]]
id = "baseline"
why = "reference"
"""


def run_small(
    tmp_path: Path,
    extra: str,
    cache: Path,
    env_extra: dict[str, str] | None = None,
    template: str = SMALL,
) -> dict:
    """`reportgen run` of SMALL (with ``extra`` in its workload) in this process, to its end;
    its results, with the baseline's request and telemetry tables."""
    path = tmp_path / "c.toml"
    path.write_text(template.format(port=free_port(), extra=extra))
    out = tmp_path / "out"
    # no GPU capture unless the test names one, as in a clean environment
    env = {CAPTURE_ENV: None, **(env_extra or {})}
    res = reportgen_main("run", path, "--output", out, "--quiet", "--no-pdf", cache=cache, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    run_dir = next((out / "small").iterdir())
    data = json.loads((run_dir / "results.json").read_text())
    data["_requests"] = results.load_requests(run_dir, "baseline")
    data["_telemetry"] = results.load_telemetry(run_dir, "baseline")
    data["_run_dir"] = run_dir
    return data


def widened(source: Path, dest: Path, experiments: int) -> Path:
    """A copy of the run directory ``source`` at ``dest`` with ``experiments`` experiments:
    its measured experiments after the baseline cloned (each clone its original's parent,
    tables, logs and decision, under the id ``<id>-<n>``) until there are that many. For what
    a report of a long campaign looks like (its length), without running one."""
    shutil.copytree(source, dest)
    d = RunDir(dest)
    run = results.load(dest)
    measured = [e for e in run.experiments[1:] if e.levels and e.role != "bracket"]
    clones = []
    for n in range(experiments - len(run.experiments)):
        e = measured[n % len(measured)]
        new = f"{e.id}-{n // len(measured) + 2}"
        clones.append(e.model_copy(update={"id": new}, deep=True))
        for path in (d.requests(e.id), d.telemetry(e.id)):
            if path.exists():
                shutil.copy(path, path.with_name(f"{new}.parquet"))
    at = max(i for i, e in enumerate(run.experiments) if e.role != "bracket") + 1
    run.experiments[at:at] = clones
    results.save(dest, run)
    return dest


# scripts/build_model.py --preset dense8b's config.json, as the roofline reads it: Llama-3.1-8B's
# shape with an 8,192-token vocabulary
DENSE8B = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 14336,
    "vocab_size": 8192,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
