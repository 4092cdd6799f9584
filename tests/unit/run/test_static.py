"""What `validate` finds without starting a server, and `run` refuses on before it starts one:
files the campaign names, the engine's package, the URL reportgen will poll."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import free_port, reportgen_main

BASE = """
[campaign]
name = "static"
title = "What is checked before anything starts"
objective = {{ metric = "output_tok_s", concurrency = [1] }}

[server]
engine = "{engine}"
{server}

[workload]
concurrency = [1]
requests_per_level = 4
input_tokens = 16
output_tokens = 4
warmup_requests = 0
# requests of 4 tokens: too few for windows of output tokens to agree on a busy host, where
# a level warm-up then ran to its 120 s limit; what is tested here is what is said
warmup = {{ steady = false }}
{workload}

[[experiment]]
id = "baseline"
why = "The reference."
"""


def campaign(tmp_path: Path, engine: str = "sim", server: str = "", workload: str = "") -> Path:
    path = tmp_path / "c.toml"
    path.write_text(BASE.format(engine=engine, server=server, workload=workload))
    return path


def test_a_prompt_file_that_is_missing_or_unreadable_is_named_by_validate(tmp_path: Path) -> None:
    path = campaign(tmp_path, workload='prompts = { source = "sharegpt", path = "chats.json" }')
    res = reportgen_main("validate", path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert (
        f"{path}: experiment 'baseline': workload.prompts.path = 'chats.json': file not found; "
        "paths are relative to the campaign file"
    ) in res.stderr
    (tmp_path / "chats.json").write_text('[{"id": 1}]')
    res = reportgen_main("validate", path)
    assert res.returncode == 2 and 'no prompts found (expected items with "conversations"' in (
        res.stderr
    )
    # ShareGPT copies in the chat form: "messages" of role and content
    chats = [{"messages": [{"role": "system", "content": "Be brief."},
                           {"role": "user", "content": "Why is the sky blue?"}]}]  # fmt: skip
    (tmp_path / "chats.json").write_text(json.dumps(chats))
    res = reportgen_main("validate", path)
    assert res.returncode == 0, res.stderr
    from reportgen.load.prompts import load_dataset

    assert load_dataset("sharegpt", tmp_path / "chats.json") == ["Why is the sky blue?"]


def test_a_dataset_path_without_its_source_and_a_byte_order_mark(tmp_path: Path) -> None:
    """`prompts = { path = ... }` alone used random prompts silently; a file saved with a
    byte-order mark was "invalid TOML at line 1"."""
    path = campaign(tmp_path, workload='prompts = { path = "chats.json" }')
    res = reportgen_main("validate", path)
    assert res.returncode == 2
    assert "prompts.path is given but prompts.source = 'random' reads no file" in res.stderr
    plain = campaign(tmp_path)
    plain.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    res = reportgen_main("validate", plain)
    assert res.returncode == 0, res.stderr


def test_an_engine_that_is_not_installed_is_a_warning_for_validate_and_refused_by_run(
    tmp_path: Path,
) -> None:
    """The vLLM engine on a machine without vLLM (as CI is): every experiment would start and
    fail with "exited with code 1". validate warns (it may be installed where the campaign
    runs); run refuses before starting anything, in one line per problem, exit 2."""
    path = campaign(tmp_path, engine="vllm", server='args = { model = "org/model" }')
    said = (
        "server.engine = 'vllm': its default command `"
        f"{__import__('sys').executable} -m vllm.entrypoints.cli.main`: no module named 'vllm'"
    )
    res = reportgen_main("validate", path)
    assert res.returncode == 0, res.stderr
    assert f"warning: {path}: {said}" in res.stderr
    out = tmp_path / "out"
    res = reportgen_main("run", path, "--output", out, "--quiet", "--no-pdf")
    assert res.returncode == 2 and "Traceback" not in res.stderr + res.stdout
    assert said in res.stderr and "nothing was started" in res.stderr
    assert not list(out.glob("static/*/logs/*.server.log"))  # no server was started


def test_a_port_set_inside_a_generic_command_is_found_before_polling_the_wrong_one(
    tmp_path: Path,
) -> None:
    port = free_port()
    server = f'command = ["python3", "-m", "reportgen.sim", "--port", "{port}"]'
    path = campaign(tmp_path, engine="generic", server=server)
    res = reportgen_main("validate", path)
    assert res.returncode == 2
    assert (
        f"{path}: experiment 'baseline': server.command = '--port {port}': reportgen polls "
        f"http://127.0.0.1:8000 (server.args.port, or the engine's default); set "
        f"server.args.port = {port} instead of the port in the command"
    ) in res.stderr
    fixed = campaign(tmp_path, engine="generic", server=server + f"\nargs = {{ port = {port} }}")
    text = fixed.read_text().replace(f'"--port", "{port}"', "").replace(", ]", "]")
    fixed.write_text(text)
    assert reportgen_main("validate", fixed).returncode == 0


def test_a_tokenizer_folder_and_a_local_model_folder(tmp_path: Path) -> None:
    path = campaign(tmp_path, workload='tokenizer = "tok"', server='args = { model = "./m" }')
    res = reportgen_main("validate", path, cwd=tmp_path)
    assert res.returncode == 2
    assert "workload.tokenizer = 'tok': no such folder" in res.stderr
    assert "args.model = './m': no such folder here" in res.stderr  # a warning only
    (tmp_path / "m").mkdir()
    (tmp_path / "tok").mkdir()
    res = reportgen_main("validate", path, cwd=tmp_path)
    assert res.returncode == 2 and "args.model = './m': the folder has no config.json" in (
        res.stderr
    )
    # a tokenizer folder that exists but holds no tokenizer, or one that does not parse
    assert "workload.tokenizer = 'tok': no tokenizer file in this folder" in res.stderr
    (tmp_path / "tok" / "tokenizer.json").write_text("garbage")
    res = reportgen_main("validate", path, cwd=tmp_path)
    assert "workload.tokenizer = 'tok': tokenizer.json does not parse" in res.stderr
    # SGLang names it model-path: the line names the key the campaign wrote
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "m").mkdir()
    sglang = campaign(tmp_path / "s", server='args = { model-path = "./m" }')
    res = reportgen_main("validate", sglang, cwd=tmp_path / "s")
    assert "args.model-path = './m': the folder has no config.json" in res.stderr
    assert "args.model =" not in res.stderr


def test_ports_out_of_range_and_infinite_timeouts_are_refused_by_validate_and_plan(
    tmp_path: Path,
) -> None:
    for args, said in (
        ("{ port = 70000 }", "args.port = 70000: a TCP port is a whole number from 1 to 65535"),
        ('{ port = "abc" }', "args.port = 'abc': a TCP port is a whole number from 1 to 65535"),
    ):
        path = campaign(tmp_path, server=f"args = {args}")
        for command in ("validate", "plan"):
            res = reportgen_main(command, path)
            assert res.returncode == 2 and said in res.stderr, (command, res.stderr)
            assert "Traceback" not in res.stderr
    path = campaign(tmp_path, server="stop_timeout_s = inf")
    res = reportgen_main("validate", path)
    assert res.returncode == 2
    assert "server.stop_timeout_s = inf: input should be a finite number" in res.stderr


def test_an_experiment_at_none_of_the_objective_levels_is_said_to_be_undecidable(
    tmp_path: Path, cache: Path
) -> None:
    """An experiment run only at C=2 while the objective is judged at C=1: validate, plan and
    run warn that its verdict can only be inconclusive, and the verdict's words agree with it
    (they said "nothing to compare" under "inconclusive"). A run decided in the old words
    still verifies."""
    path = campaign(tmp_path, server=f"args = {{ port = {free_port()} }}")
    with path.open("a") as f:
        f.write(
            '\n[[experiment]]\nid = "high"\nbased_on = "baseline"\nwhy = "Only higher up."\n'
            "workload = { concurrency = [2] }\nargs = { itl-ms = 1 }\n"
        )
    said = (
        "experiment 'high': workload.concurrency = [2]: shares none of the objective's levels "
        "(campaign.objective.concurrency = [1]) with 'baseline', so its verdict can only be "
        "'inconclusive'; run it at one of them too"
    )
    for command in ("validate", "plan"):
        res = reportgen_main(command, path)
        assert res.returncode == 0, res.stderr
        assert f"warning: {path}: {said}" in res.stderr
    out = tmp_path / "out"
    res = reportgen_main("run", path, "--output", out, "--quiet", "--no-pdf", cache=cache)
    assert res.returncode == 0, res.stderr
    assert said in res.stdout
    assert "high: ok - inconclusive" in res.stdout
    (run_dir,) = (p.parent for p in out.glob("static/*/results.json"))
    data = json.loads((run_dir / "results.json").read_text())
    decision = data["experiments"][1]["decision"]
    assert decision["verdict"] == "inconclusive"
    assert (
        "high and baseline ran at no common level of the objective, so it cannot be judged "
        "either way: inconclusive. Run it at one of baseline's objective levels to decide."
    ) in decision["explanation"]
    assert "nothing to compare" not in (run_dir / "report.md").read_text()
    assert reportgen_main("verify", run_dir).returncode == 0
    # as reportgen worded it before: the report says it in today's words, made from the
    # decision's structure, and verify compares that structure, not the words
    decision["explanation"] = decision["explanation"].replace(
        "high and baseline ran at no common level of the objective, so it cannot be judged "
        "either way: inconclusive. Run it at one of baseline's objective levels to decide.",
        "high shares no objective concurrency level with baseline; nothing to compare.",
    )
    (run_dir / "results.json").write_text(json.dumps(data))
    assert reportgen_main("render", run_dir, "--no-pdf").returncode == 0
    shown = (run_dir / "report.html").read_text().split('<script type="application/json"')[0]
    assert "nothing to compare" not in shown and "ran at no common level" in shown
    res = reportgen_main("verify", run_dir)
    assert res.returncode == 0, res.stdout
    decision["verdict"] = "rejected"  # a verdict its numbers do not give is caught
    (run_dir / "results.json").write_text(json.dumps(data))
    assert reportgen_main("render", run_dir, "--no-pdf").returncode == 0
    res = reportgen_main("verify", run_dir)
    assert res.returncode == 1 and "high: the verdict would be 'inconclusive'" in res.stdout


def test_what_a_new_user_mistypes_is_said_before_anything_starts(tmp_path: Path) -> None:
    """From a new user's pass: a host that is not this machine or carries a scheme, a check
    bound of nan, a simulator flag its parser refuses, ShareGPT items with nothing to send."""
    path = campaign(tmp_path, server='host = "http://localhost"')
    res = reportgen_main("validate", path)
    assert res.returncode == 2
    assert "server.host = 'http://localhost': a host name or address alone (127.0.0.1" in (
        res.stderr
    )
    # not this machine: a warning here (it may be the GPU host's address), refused by run
    path = campaign(tmp_path, server='host = "999.0.0.1"')
    res = reportgen_main("validate", path)
    assert res.returncode == 0
    assert "warning: " in res.stderr and "server.host = '999.0.0.1': not an address of " in (
        res.stderr
    )
    res = reportgen_main("run", path, "--output", tmp_path / "o", "--quiet", "--no-pdf")
    assert res.returncode == 2 and "nothing was started" in res.stderr
    path = campaign(tmp_path, server="args = { port = 19333, ttft_ms = 10 }")
    res = reportgen_main("validate", path)
    assert res.returncode == 0  # a warning: the experiment would fail at start, as the demo's
    assert "experiment 'baseline': args = " in res.stderr
    assert "unrecognized arguments: --ttft_ms 10 (see `reportgen sim --help`" in res.stderr
    path.write_text(
        path.read_text().replace("ttft_ms = 10", "ttft-ms = 10")
        + '[[check]]\nmetric = "ttft_ms"\nstat = "p99"\nmax = nan\n'
    )
    res = reportgen_main("validate", path)
    assert res.returncode == 2 and "check[0].max = nan: nan is no bound" in res.stderr
    items = [
        {"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Yo"}]},
        {"foo": 1},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "in parts"}]}]},
        {"conversations": [{"from": "gpt", "value": "only the answer"}]},
    ]
    (tmp_path / "chats.json").write_text(json.dumps(items))
    path = campaign(tmp_path, workload='prompts = { source = "sharegpt", path = "chats.json" }')
    res = reportgen_main("validate", path)
    assert res.returncode == 0
    assert "'chats.json': 2 of 4 items have no user turn with text and are skipped" in res.stderr
    from reportgen.load.prompts import load_pairs

    assert load_pairs("sharegpt", tmp_path / "chats.json") == [("Hi", "Yo"), ("in parts", None)]


def test_settings_for_several_sessions_that_a_running_server_cannot_honour(
    tmp_path: Path,
) -> None:
    path = campaign(tmp_path, server='base_url = "http://127.0.0.1:19999"')
    path.write_text(path.read_text().replace("objective = {", "interleave = true\nobjective = {"))
    res = reportgen_main("validate", path)
    assert res.returncode == 0, res.stderr
    assert (
        "experiment 'baseline': runs in one server session (its server is already running at "
        "base_url): campaign.interleave does not apply to it" in res.stderr
    )


def test_one_server_start_per_experiment_is_a_warning_naming_what_it_costs(tmp_path: Path) -> None:
    """`campaign.starts = 1`: each experiment's repetitions on one server start, whose own
    speed its verdicts cannot tell from the change (benchmarks/verdicts.py --start-levels:
    an identical configuration adopted or rejected in 6-13% of campaigns). A warning, not
    an error; none with two starts (the default), a fresh server per repetition, or one
    repetition."""
    path = campaign(tmp_path, workload="repetitions = 3")
    text = path.read_text().replace("[server]", "starts = 1\n\n[server]", 1)
    text += (
        '\n[[experiment]]\nid = "faster"\nbased_on = "baseline"\nwhy = "A change."\n'
        "args = { itl-ms = 1 }\n"
    )
    path.write_text(text)
    res = reportgen_main("validate", path)
    assert res.returncode == 0, res.stderr
    assert (
        f"warning: {path}: campaign.starts = 1: 1 experiment(s) (faster) run on one server "
        "start each, so their verdicts cannot tell a change from that start's own speed"
    ) in res.stderr
    assert "6-13%" in res.stderr and "Leave campaign.starts at 2" in res.stderr
    for fix in (
        ("starts = 1\n", ""),
        ("repetitions = 3", "repetitions = 3\nfresh_server = true"),
        ("repetitions = 3", "repetitions = 1"),
    ):
        path.write_text(text.replace(*fix, 1))
        res = reportgen_main("validate", path)
        assert res.returncode == 0, res.stderr
        assert "campaign.starts" not in res.stderr, fix
    # where the baseline is measured again between experiments (campaign.anchors), the
    # verdicts rest on the stated spread between starts instead: the warning says so
    path.write_text(text.replace("starts = 1\n", "starts = 1\nbracket = true\nanchors = 1\n", 1))
    res = reportgen_main("validate", path)
    assert res.returncode == 0, res.stderr
    assert (
        "run on one server start each, so their verdicts rest on the stated spread between "
        "starts (campaign.start_spread = 0.02)"
    ) in res.stderr
    assert "adopted in 11-29% of them against 50-89% on two starts" in res.stderr
    # ... and none once the campaign states the spread its host has shown
    path.write_text(
        text.replace("starts = 1\n", "starts = 1\nbracket = true\nanchors = 1\n"
                     "start_spread = 0.005\n", 1)
    )  # fmt: skip
    res = reportgen_main("validate", path)
    assert res.returncode == 0 and "campaign.starts" not in res.stderr, res.stderr
