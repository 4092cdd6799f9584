"""The command line as a user meets it: help, exit codes, no tracebacks, secrets hidden."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, Ran, free_port, reportgen_main, small_demo

COMMANDS = [
    "validate", "plan", "run", "bench", "render", "verify", "diff", "sim", "calibrate", "schema",
    "completion",
]  # fmt: skip


def reportgen(*args: str) -> Ran:
    """`reportgen ARGS` from the checkout's root, in this process."""
    return reportgen_main(*args)


def test_the_command_runs_as_a_program() -> None:
    """`python -m reportgen` (what the tests below call in-process): exit codes and streams."""
    run = [sys.executable, "-m", "reportgen"]
    ok = subprocess.run([*run, "validate", "campaigns/demo.toml"], capture_output=True,
                        text=True, cwd=ROOT, timeout=60)  # fmt: skip
    assert ok.returncode == 0 and "campaigns/demo.toml: ok (6 experiments)" in ok.stdout
    bad = subprocess.run([*run, "render", "/nonexistent"], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "no results file here" in bad.stderr and not bad.stdout
    usage = subprocess.run([*run, "no-such-command"], capture_output=True, text=True,
                           cwd=ROOT, timeout=60)  # fmt: skip
    assert usage.returncode == 2 and "invalid choice" in usage.stderr


@pytest.mark.parametrize(
    "command", [[], *[[c] for c in COMMANDS]], ids=lambda c: " ".join(c) or "reportgen"
)
def test_every_help_ends_with_an_example(command: list[str]) -> None:
    res = reportgen(*command, "--help")
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stdout.strip().splitlines() if ln.strip()]
    assert lines[-2].strip() == "example:", res.stdout
    assert lines[-1].strip().startswith("reportgen "), res.stdout


def test_every_command_is_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    for c in COMMANDS:
        assert f"reportgen {c}" in readme, f"README does not mention `reportgen {c}`"


def test_validate_exit_codes_and_no_traceback(tmp_path: Path) -> None:
    ok = reportgen("validate", "campaigns/demo.toml")
    assert ok.returncode == 0 and "ok" in ok.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[campaign]\nname = "x"\ntitle = "t"\nmargin = "big"\n'
        '[[experiment]]\nid = "a"\nwhy = "b"\nrequests = 3\n'
    )
    res = reportgen("validate", str(bad), "campaigns/demo.toml")
    assert res.returncode == 2
    assert "Traceback" not in res.stderr + res.stdout
    assert f"{bad}: campaign.margin = 'big'" in res.stderr
    assert f"{bad}: experiment[0] (id='a').requests = 3: unknown key" in res.stderr
    assert "2 problems found." in res.stderr
    for garbage in (b"\xff\xfe\x00", b"[[[", b"experiment = 3"):
        bad.write_bytes(garbage)
        res = reportgen("validate", str(bad))
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert str(bad) in res.stderr


def test_validate_json_for_scripts(tmp_path: Path) -> None:
    """`validate --json`: one JSON object on stdout, nothing else there; each file's errors
    and warnings with their key, value and the line validate would print; exit codes as
    without it (2 when a file has an error)."""
    bad = tmp_path / "bad.toml"
    bad.write_text('[campaign]\nname = "x"\ntitle = "t"\nmargin = "big"\n')
    vllm = ROOT / "campaigns" / "vllm-h200.toml"  # vLLM is not installed here: warnings
    res = reportgen("validate", "--json", "campaigns/demo.toml", str(bad), str(vllm))
    assert res.returncode == 2 and not res.stderr
    data = json.loads(res.stdout)
    demo, broken, other = data["files"]
    assert data["ok"] is False
    # the demo's typo-in-flag experiment fails to start on purpose: a warning, not an error
    (typo,) = demo.pop("warnings")
    assert typo["key"] == "experiment 'typo-in-flag': args"
    assert "unrecognized arguments: --itl-msec 2" in typo["message"]
    assert demo == {"path": "campaigns/demo.toml", "ok": True, "experiments": 6, "errors": []}
    assert broken["ok"] is False and broken["experiments"] is None
    margin = next(e for e in broken["errors"] if e["key"] == "campaign.margin")
    assert margin["value"] == "big" and margin["line"].startswith(f"{bad}: campaign.margin = ")
    assert other["ok"] is True and other["errors"] == []
    assert any("no module named 'vllm'" in w["message"] for w in other["warnings"])
    ok = reportgen("validate", "--json", "campaigns/demo.toml")
    assert ok.returncode == 0 and json.loads(ok.stdout)["ok"] is True


def test_calibrate_says_whose_cached_figure_it_shows(tmp_path: Path, cache: Path) -> None:
    """The cache is per host and version, shared by every checkout: a figure another
    installation measured was shown as this one's."""
    from reportgen.run import calibrate

    (cached,) = (cache / "reportgen").glob("calibration-*.json")
    mine = tmp_path / "reportgen" / cached.name
    mine.parent.mkdir()
    data = json.loads(cached.read_text())
    for by, said in (
        (calibrate.installation(), "by this installation:"),
        ("/elsewhere/reportgen (/usr/bin/python3)", "by another installation, /elsewhere/"
         "reportgen (/usr/bin/python3); `reportgen calibrate --refresh` measures this one:"),
    ):  # fmt: skip
        mine.write_text(json.dumps({**data, "measured_by": by}))
        res = reportgen_main("calibrate", cache=tmp_path)
        assert res.returncode == 0, res.stderr
        assert f"cached, measured {data['measured_at']} {said}" in " ".join(res.stdout.split())


def test_the_readmes_completion_lines_work_on_a_fresh_machine(tmp_path: Path) -> None:
    """They wrote into ~/.local/share/bash-completion/completions/, which a fresh machine does
    not have: the shell refused the redirection."""
    readme = (ROOT / "README.md").read_text().splitlines()
    lines = [ln.split("  #")[0] for ln in readme if "bash-completion/completions" in ln]
    assert len(lines) == 2 and lines[0].startswith("mkdir -p"), lines
    env = {**os.environ, "HOME": str(tmp_path), "PATH": f"{Path(sys.executable).parent}:"
           + os.environ["PATH"]}  # fmt: skip
    got = subprocess.run(
        ["bash", "-ec", "\n".join(lines)], capture_output=True, text=True, env=env, timeout=60
    )
    assert got.returncode == 0, got.stderr
    written = tmp_path / ".local/share/bash-completion/completions/reportgen"
    assert "_shtab_reportgen" in written.read_text()


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_scripts_complete_commands_and_flags(shell: str) -> None:
    res = reportgen("completion", shell)
    assert res.returncode == 0, res.stderr
    script = res.stdout
    for word in ("validate", "--resume", "--fail-on-regression", "--ttft-ms"):  # sim's too
        assert word in script, word
    if shell == "zsh":
        assert script.startswith("#compdef reportgen")
        return
    # bash: load it and ask what `reportgen ru<TAB>` and `reportgen run --re<TAB>` complete
    probe = (
        f"source /dev/stdin <<'EOF'\n{script}\nEOF\n"
        'COMP_WORDS=(reportgen ru); COMP_CWORD=1; _shtab_reportgen; echo "${COMPREPLY[@]}"\n'
        "COMP_WORDS=(reportgen run --re); COMP_CWORD=2; _shtab_reportgen; "
        'echo "${COMPREPLY[@]}"\n'
    )
    got = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert got.stdout.split("\n")[:2] == ["run", "--resume"], got.stdout + got.stderr


def test_plan_prints_commands_and_redacts_secrets(tmp_path: Path) -> None:
    text = (ROOT / "campaigns" / "demo.toml").read_text()
    text = text.replace(
        "args = { port = 18427,",
        'env = { HF_TOKEN = "hf_secretsecretsecretsecret1234" }\n'
        'args = { api-key = "sk-verysecretvalue123456", port = 18427,',
    )
    path = tmp_path / "c.toml"
    path.write_text(text)
    res = reportgen("plan", str(path))
    assert res.returncode == 0, res.stderr
    assert "secret" not in res.stdout
    assert "HF_TOKEN='***'" in res.stdout and "--api-key '***'" in res.stdout
    assert "-m reportgen.sim --api-key" in res.stdout
    assert "changes:  itl-ms: 4 -> 3" in res.stdout
    assert res.stdout.count("workload: chat, C=1,4,16") == 6


def test_plan_says_where_the_parent_is_measured_again(tmp_path: Path) -> None:
    """The demo's six experiments with `campaign.anchors = 2`: the parent of the experiment
    just run again after the second and the fourth, each said after the experiment it
    follows; the demo builds them on the best so far, so that is what is measured again (the
    baseline where nothing was adopted by then); a campaign whose experiments all build on
    the baseline measures the baseline again."""
    text = (ROOT / "campaigns" / "demo.toml").read_text()
    path = tmp_path / "c.toml"
    path.write_text(text.replace("[campaign]\n", "[campaign]\nanchors = 2\n", 1))
    res = reportgen("plan", str(path))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    said = [i for i, x in enumerate(lines) if x.startswith("then (campaign.anchors)")]
    assert [lines[i].split(",")[0] for i in said] == [
        "then (campaign.anchors): <best>-again-1",
        "then (campaign.anchors): <best>-again-2",
    ]
    assert "the best so far (what bigger-batches is built on) measured again" in lines[said[0]]
    heads = [i for i, x in enumerate(lines) if x.startswith("[")]
    assert [sum(h < i for h in heads) for i in said] == [3, 5]  # after [3/6] and [5/6]
    plain = text.replace('based_on = "best"', 'based_on = "baseline"')
    path.write_text(plain.replace("[campaign]\n", "[campaign]\nanchors = 2\n", 1))
    res = reportgen("plan", str(path))
    assert res.returncode == 0, res.stderr
    said = [x.split(",")[0] for x in res.stdout.splitlines() if x.startswith("then (campaign.an")]
    assert said == [
        "then (campaign.anchors): baseline-again-1",
        "then (campaign.anchors): baseline-again-2",
    ]


def test_plan_shows_the_python_that_runs_the_servers_over_ssh(tmp_path: Path) -> None:
    """With host.ssh.python set, the far side runs that interpreter: the plan (and what the
    run records) said this machine's instead."""
    text = (ROOT / "campaigns" / "demo.toml").read_text()
    there = "/opt/serving/venv/bin/python"
    path = tmp_path / "c.toml"
    path.write_text(
        text.replace(
            "[server]\n",
            f'[host]\nexecutor = "ssh"\nssh = {{ host = "gpu-box", python = "{there}" }}\n\n'
            "[server]\n",
            1,
        )
    )
    res = reportgen("plan", str(path), "--json")
    assert res.returncode == 0, res.stderr
    commands = [e["command"] for e in json.loads(res.stdout) if e["command"]]
    assert commands and all(c[:3] == [there, "-m", "reportgen.sim"] for c in commands)
    res = reportgen("plan", str(path))
    assert f"command:  {there} -m reportgen.sim" in res.stdout
    assert sys.executable not in res.stdout


def test_plan_says_what_one_repetition_per_start_would_buy(tmp_path: Path) -> None:
    """Three repetitions an experiment on the default two starts: `plan` says what one
    repetition per start did in simulated campaigns, and where to read it; set to three
    starts, or with interleaved runs, it says nothing."""
    text = (ROOT / "campaigns" / "demo.toml").read_text()
    path = tmp_path / "c.toml"
    path.write_text(text)
    res = reportgen("plan", str(path))
    assert res.returncode == 0, res.stderr
    said = [x for x in res.stdout.splitlines() if x.startswith("allocation:")]
    assert len(said) == 1, res.stdout
    assert "3 repetitions an experiment on 2 server starts" in said[0]
    assert "campaign.starts = 3" in said[0] and "51-58%" in said[0]
    # the simulator is not bracketed by default: the plan says the drift goes unchecked
    assert "no bracket (campaign.bracket is off for the simulator)" in res.stdout
    for setting in ("starts = 3", "interleave = true"):
        path.write_text(text.replace("[campaign]\n", f"[campaign]\n{setting}\n", 1))
        res = reportgen("plan", str(path))
        assert res.returncode == 0, res.stderr
        assert "allocation:" not in res.stdout, setting


def test_render_of_a_missing_run_is_a_clear_error(tmp_path: Path) -> None:
    res = reportgen("render", str(tmp_path))
    assert res.returncode == 2
    assert "no results file here" in res.stderr and "Traceback" not in res.stderr


def test_run_into_an_unwritable_output_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    campaign = tmp_path / "c.toml"
    text = (ROOT / "campaigns" / "demo.toml").read_text()
    campaign.write_text(text.replace("port = 18427", f"port = {free_port()}"))
    res = reportgen("run", str(campaign), "--output", str(blocker), "--quiet")
    assert res.returncode == 2, res.stderr
    assert "cannot write the run directory" in res.stderr and "--output" in res.stderr
    assert "Traceback" not in res.stderr


def test_the_qwen397b_campaign_validates_plans_and_stops_on_another_host(tmp_path: Path) -> None:
    """The campaign the project was born from: SGLang flags as the engine spells them, the
    speculative cap raised, the all-reduce check; on a host without its 8 GPUs nothing starts."""
    campaign = str(ROOT / "campaigns" / "qwen397b.toml")
    assert reportgen("validate", campaign).returncode == 0
    plan = reportgen("plan", campaign)
    assert plan.returncode == 0, plan.stderr
    out = plan.stdout
    assert "--moe-runner-backend flashinfer_cutlass --fp4-gemm-backend flashinfer_cudnn" in out
    assert "--disable-custom-all-reduce" in out
    spec = "--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1"
    assert f"{spec} --speculative-num-draft-tokens 4 --max-running-requests 64" in out
    assert "C=1,2,4,8,16,32,64" in plan.stdout
    res = reportgen("run", campaign, "--output", str(tmp_path / "out"))
    assert res.returncode == 1 and "host.expect does not match this host" in res.stderr
    assert "Nothing was started" in res.stderr and "Traceback" not in res.stderr
    assert not list((tmp_path / "out").glob("*/*/results.json"))


def test_files_of_the_wrong_kind_and_bad_flags_get_one_line_not_a_traceback(
    tmp_path: Path,
) -> None:
    """What a new user types by mistake: a campaign file to render, a page that is not a
    report (or not text) to verify, a port out of range for the simulator, `-V`."""
    res = reportgen("render", "campaigns/demo.toml")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert (
        "campaigns/demo.toml: a campaign file, not results: to run it, reportgen run "
        "campaigns/demo.toml"
    ) in res.stderr
    binary = tmp_path / "report.html"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    res = reportgen("verify", str(binary))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"{binary}: cannot read it as a report" in res.stderr
    binary.write_text("<html><body>a page</body></html>")
    res = reportgen("verify", str(binary))
    assert res.returncode == 2 and f"{binary} carries no reportgen data" in res.stderr
    res = reportgen("sim", "--port", "70000")
    assert res.returncode == 2 and "must be a TCP port from 0 to 65535, got 70000" in res.stderr
    res = reportgen("-V")
    assert res.returncode == 0 and res.stdout.startswith("reportgen ")


@pytest.mark.slow
def test_run_json_prints_the_outcome_for_scripts(tmp_path: Path, cache: Path) -> None:
    """`run --json`: stdout is one JSON object (the run's outcome, as the summary table and
    the report say it), the progress and report paths on stderr. Two experiments and the
    bracket's baseline-end: the progress counts the bracket from the first ([1/3] ... [3/3])."""
    campaign = small_demo(tmp_path, free_port())
    text = campaign.read_text()
    third = text.index(
        "[[experiment]]", text.index("[[experiment]]", text.index("[[experiment]]") + 1) + 1
    )
    assert "\nmargin = 0.05\n" in text
    campaign.write_text(
        # (with the bracket on, the best is run again by default: not here, so that the run
        # holds three experiments whichever the verdict)
        text[:third].replace(
            "\nmargin = 0.05\n", "\nmargin = 0.05\nbracket = true\nconfirm = false\n"
        )
    )
    res = reportgen_main(
        "run", campaign, "--output", tmp_path / "out", "--no-pdf", "--json", cache=cache
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    run_dir = Path(data["run_dir"])
    assert f"run directory: {run_dir}" in res.stderr and f"report: {run_dir}/report.html" in (
        res.stderr
    )
    results = json.loads((run_dir / "results.json").read_text())
    assert data["status"] == results["status"] == "complete" and data["exit_code"] == 0
    assert data["best"] == results["best"]
    said = [ln.strip() for ln in res.stderr.splitlines() if ln.strip().startswith("[")]
    assert said[:3] == ["[1/3] baseline", "[2/3] fast-decode-kernel", "[3/3] baseline-end"], said
    assert data["reports"] == {
        "html": f"{run_dir}/report.html",
        "markdown": f"{run_dir}/report.md",
        "tables": f"{run_dir}/tables",
    }
    base, fast, end = data["experiments"]
    assert end["id"] == "baseline-end"
    assert (base["outcome"], fast["outcome"]) == (
        "baseline",
        results["experiments"][1]["decision"]["verdict"],
    )
    stored = {a["concurrency"]: a for a in results["experiments"][1]["by_level"]}
    for level, got in fast["output_tok_s"].items():
        want = stored[int(level)]["output_tok_s"]
        assert (got["mean"], got["sd"], got["repetitions"]) == (want["mean"], want["sd"], 2)
    assert [c["concurrency"] for c in fast["vs_parent"]] == [1, 4]
    keys = ("concurrency", "rate", "ratio", "ci_low", "ci_high", "verdict", "bound", "mde")
    optional = ("eq_low", "eq_high", "confidence", "reps_needed", "requests_needed", "limit")
    assert fast["vs_parent"] == [
        {**{k: c[k] for k in keys}, **{k: c.get(k) for k in optional}}
        for c in results["experiments"][1]["decision"]["vs_parent"]
    ]  # the bound "equivalent" rests on, the two one-sided tests' interval, and what the
    # noise allowed: the smallest change it could detect
    assert all(c["bound"] is not None and c["mde"] > 1 for c in fast["vs_parent"])
    # beyond the objective: every headline metric's comparisons, as the decision took them
    stored_metrics = results["experiments"][1]["decision"]["metrics"]
    assert set(fast["metrics"]) == set(stored_metrics)
    for side, got in fast["metrics"].items():
        assert [(c["metric"], c["concurrency"], c["ratio"]) for c in got] == [
            (c["metric"], c["concurrency"], c["ratio"]) for c in stored_metrics[side]
        ]


def test_values_no_run_could_record_are_refused_by_validate(tmp_path: Path) -> None:
    """A whole number beyond 64 bits (JSON cannot hold it: the run used to end in a
    traceback with no report) and a NUL character (no environment can hold it)."""
    path = tmp_path / "big.toml"
    path.write_text(
        '[campaign]\nname = "b"\ntitle = "t"\n[server]\nengine = "sim"\n'
        'env = { X = "a\\u0000b" }\n[workload]\nseed = 99999999999999999999\n'
        '[[experiment]]\nid = "a"\nwhy = "b"\n'
    )
    res = reportgen("validate", str(path))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"{path}: workload.seed = 99999999999999999999: too large: whole numbers must " in (
        res.stderr
    )
    assert f"{path}: server.env.X = 'a\\x00b': contains a NUL character" in res.stderr


def test_a_damaged_raw_table_is_one_line(tmp_path: Path) -> None:
    run = Path(shutil.copytree(ROOT / "docs" / "examples" / "bench-vllm-h200", tmp_path / "r"))
    (run / "requests" / "bench.parquet").write_text("garbage")
    for command in ("verify", "render"):
        res = reportgen(command, str(run), *(["--no-pdf"] if command == "render" else []))
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert f"{run}/requests/bench.parquet: cannot read this raw table" in res.stderr


def test_a_closed_stdout_does_not_stop_a_run(tmp_path: Path) -> None:
    """`reportgen run ... | head -1`: the run goes on, saves and renders, and exits 0."""
    campaign = small_demo(tmp_path, free_port())
    text = campaign.read_text()
    campaign.write_text(text[: text.index("[[experiment]]", text.index("[[experiment]]") + 1)])
    out = tmp_path / "out"
    cmd = f"{sys.executable} -m reportgen run {campaign} --output {out} --no-pdf --quiet | head -1"
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, cwd=ROOT,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
    (results,) = out.glob("demo/*/results.json")
    assert json.loads(results.read_text())["status"] == "complete"
    assert (results.parent / "report.html").exists()


def test_a_search_probes_steady_load_for_thirty_seconds_unless_told() -> None:
    """`bench --find-max` without --requests or --duration: each probe a 30-second level (after
    its own warm-up), long enough for the p99 its bound is judged on; --requests or
    --duration given keep their meaning; fixed levels keep 100 requests."""
    from reportgen.cli.bench import campaign_data
    from reportgen.cli.parser import build_parser

    def workload(*flags: str) -> dict[str, object]:
        args = build_parser().parse_args(["bench", "http://127.0.0.1:8000", *flags])
        return campaign_data(args, "http://127.0.0.1:8000", "generic")["workload"]

    found = workload("--find-max", "ttft_ms.p99<500")
    assert found["duration_s"] == 30.0 and "requests_per_level" not in found
    assert workload("--find-max", "ttft_ms.p99<500", "--requests", "32")["requests_per_level"] == 32
    assert workload("--find-max", "ttft_ms.p99<500", "--duration", "12")["duration_s"] == 12
    plain = workload("--concurrency", "1,4")
    assert plain["requests_per_level"] == 100 and "duration_s" not in plain
