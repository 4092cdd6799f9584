"""Property tests of the command line, not only the loader: generated campaigns through
`validate`, `plan` and `run`, generated results files through `render`, `verify` and `diff`.
Whatever they hold, the answer is an exit code of 0 (it worked), 1 (the check or run failed)
or 2 (bad input, each problem one line naming the file), never a traceback, and a run never
leaves its results at "running"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import DEMO, toml_document, values
from tests.conftest import free_port, reportgen_main


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
        derandomize=True,  # the same examples on every run: CI stays deterministic
    )


def clean(res: Any, path: Path | None = None) -> None:
    """What every answer must be: a known exit code, no traceback, problems located."""
    both = res.stdout + res.stderr
    assert res.returncode in (0, 1, 2), (res.returncode, both[-2000:])
    assert "Traceback" not in both, both[-3000:]
    if res.returncode == 2 and path is not None:
        errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
        assert errors, res.stderr
        assert any(str(path) in ln for ln in errors), res.stderr


# a workload key and the values a user may plausibly type there, and then some
WORKLOAD = st.fixed_dictionaries(
    {},
    optional={
        "concurrency": st.one_of(
            st.lists(st.integers(-2, 70000), max_size=3), st.integers(0, 4), values
        ),
        "requests_per_level": st.one_of(st.integers(-1, 5), st.floats(), st.text(max_size=3)),
        "duration_s": st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none()),
        "input_tokens": st.one_of(st.integers(-5, 10**9), st.floats(allow_nan=True)),
        "output_tokens": st.integers(-1, 10**7),
        "request_rate": st.one_of(st.floats(allow_nan=True, allow_infinity=True), values),
        "arrival": st.sampled_from(["poisson", "constant", "burst", ""]),
        "stream": st.one_of(st.booleans(), st.text(max_size=3)),
        "repetitions": st.one_of(
            st.integers(-1, 40),
            st.fixed_dictionaries({"min": st.integers(-1, 5), "max": st.integers(-1, 50)}),
        ),
        "prompts": st.one_of(
            st.fixed_dictionaries(
                {"source": st.sampled_from(["random", "sharegpt", "jsonl", "fixed", "x"])},
                optional={"path": st.text(max_size=8), "text": st.text(max_size=8)},
            ),
            values,
        ),
        "slo": st.dictionaries(
            st.sampled_from(["ttft_ms", "tpot_ms", "e2e_ms", "itl"]),
            st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5)),
            max_size=3,
        ),
    },
)
SERVER = st.fixed_dictionaries(
    {},
    optional={
        "engine": st.sampled_from(["sim", "generic", "vllm", "sglang", "nope"]),
        "host": st.sampled_from(["127.0.0.1", "::1", "", "999.1.1.1"]),
        "ready_timeout_s": st.one_of(st.floats(allow_nan=True, allow_infinity=True), values),
        "command": st.one_of(st.lists(st.text(max_size=6), max_size=3), values),
    },
)


def demo_with(tmp_path: Path, workload: dict[str, Any], server: dict[str, Any]) -> Path:
    data = json.loads(json.dumps(DEMO))
    # TOML has no null: a None drops the key
    data["workload"] = {**data["workload"], **workload}
    data["server"] = {**data["server"], **server}
    for table in ("workload", "server"):
        data[table] = {k: v for k, v in data[table].items() if v is not None}
    path = tmp_path / "fuzz.toml"
    path.write_text(toml_document(data), encoding="utf-8")
    return path


@fuzz(120)
@given(workload=WORKLOAD, server=SERVER)
def test_validate_and_plan_answer_any_campaign_in_one_line_per_problem(
    tmp_path_factory: pytest.TempPathFactory, workload: dict[str, Any], server: dict[str, Any]
) -> None:
    tmp = tmp_path_factory.mktemp("cli")
    path = demo_with(tmp, workload, server)
    for command in ("validate", "plan"):
        clean(reportgen_main(command, path), path)


# workloads small enough to run: each example is a real run against the simulator
RUNNABLE = st.fixed_dictionaries(
    {
        "concurrency": st.lists(st.integers(1, 3), min_size=1, max_size=2, unique=True),
        "requests_per_level": st.integers(1, 3),
        "input_tokens": st.integers(1, 64),
        "output_tokens": st.integers(1, 6),
        "repetitions": st.integers(1, 2),
        "warmup_requests": st.integers(0, 2),
    },
    optional={
        "stream": st.booleans(),
        "api": st.sampled_from(["chat", "completions"]),
        "request_rate": st.sampled_from([0.5, 50.0, float("inf")]),
        "prompts": st.sampled_from([{"source": "fixed", "text": "hi"}, {"source": "random"}]),
        "slo": st.fixed_dictionaries({"ttft_ms": st.sampled_from([0.001, 1e9])}),
    },
)


@pytest.mark.slow
@fuzz(3)
@given(workload=RUNNABLE)
def test_run_of_any_valid_campaign_finishes_without_a_traceback_or_a_running_status(
    tmp_path_factory: pytest.TempPathFactory, cache: Path, workload: dict[str, Any]
) -> None:
    tmp = tmp_path_factory.mktemp("run")
    data = json.loads(json.dumps(DEMO))
    data["workload"] = {**data["workload"], **workload}
    data["server"]["args"] = {**data["server"]["args"], "port": free_port()}
    data["experiment"] = data["experiment"][:2]
    data["campaign"]["objective"]["concurrency"] = workload["concurrency"][:1]
    data["probe"] = []
    path = tmp / "fuzz.toml"
    path.write_text(toml_document(data), encoding="utf-8")
    out = tmp / "out"
    res = reportgen_main("run", path, "--output", out, "--quiet", "--no-pdf", cache=cache)
    clean(res, path)
    for results in out.glob("*/*/results.json"):
        assert json.loads(results.read_text())["status"] != "running"
        verified = reportgen_main("verify", results.parent / "report.html")
        clean(verified)
        assert verified.returncode == 0, verified.stdout


RESULTS = st.one_of(
    st.binary(max_size=64),
    values.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {"schema_version": st.one_of(st.integers(-1, 9), values)},
        optional={"experiments": values, "campaign": values, "run_id": values},
    ).map(lambda v: json.dumps(v).encode()),
)


@fuzz(60)
@given(raw=RESULTS)
def test_render_verify_and_diff_answer_any_results_file_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, raw: bytes
) -> None:
    run_dir = tmp_path_factory.mktemp("results")
    (run_dir / "results.json").write_bytes(raw)
    (run_dir / "report.html").write_bytes(raw)
    for args in (
        ("render", run_dir, "--no-pdf"),
        ("verify", run_dir / "report.html"),
        ("diff", run_dir, run_dir, "--out", run_dir / "diff"),
    ):
        res = reportgen_main(*args)
        clean(res)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
