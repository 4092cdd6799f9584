"""Experiments whose numbers are no verdict on a server change: one that only runs another load
than its parent (shorter answers: faster per request, and no server flag changed), and one
whose expectation says it fails but ran. Neither is adopted, rejected or made the best, none
is offered repetitions that would decide it, and `validate` says so before anything runs."""

from __future__ import annotations

import csv
import html
import io
import json
import re
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from markupsafe import Markup

from reportgen import results
from reportgen.analysis.unjudged import load_changes, model_changes, reason, unjudged
from reportgen.campaign.workload import Workload
from reportgen.render import brief
from reportgen.results import RunDir
from reportgen.results.model import Experiment
from tests.conftest import FAST_WARMUP, ROOT, reportgen_main, run_campaign

GPU_CAPTURE = ROOT / "tests" / "fixtures" / "gpu" / "h200-capture.json.xz"

pytestmark = pytest.mark.slow

CAMPAIGN = """
[campaign]
name = "loads"
title = "a change of load is not a server change"
margin = 0.05
starts = 1

[server]
engine = "sim"
# (a first token of 10 ms: answers of 8 tokens take 31 ms for 8 tokens, of 24 tokens 79 ms for
# 24, so the shorter ones give about 0.85x the tok/s and 2.5x the requests a second, clear of
# a loaded host's noise; with 5 ms the tok/s came within 5%, and one run read 1.04x)
args = { port = PORT, ttft-ms = 10, itl-ms = 3, seed = 2 }
ready_timeout_s = 30

[workload]
concurrency = [1, 4]
requests_per_level = 8
input_tokens = 8
output_tokens = 24
repetitions = 2
warmup_requests = 1
warmup = FAST_WARMUP

[[experiment]]
id = "baseline"
why = "the reference"

[[experiment]]
id = "shorter-answers"
why = "answers of 8 tokens instead of 24: three times the requests a second"
workload = { output_tokens = 8 }

[[experiment]]
id = "too-little-memory"
why = "a setting meant to be refused at start"
expect = "Fails at start: the engine refuses it"
args = { itl-ms = 2 }

[[experiment]]
id = "speculation-over-loops"
why = "speculative decoding, measured on an engine whose answers loop"
args = { spec-draft-tokens = 3, repeat-after = 4 }
""".replace("FAST_WARMUP", FAST_WARMUP)


def test_another_load_and_an_expected_failure_that_ran_are_not_judged(
    tmp_path: Path, cache: Path
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.replace("PORT", "18431"))
    said = reportgen_main("validate", path)
    assert said.returncode == 0, said.stderr
    told = " ".join((said.stdout + said.stderr).split())
    assert "experiment 'shorter-answers': workload.output_tokens" in told
    assert "runs another load than 'baseline' (output_tokens 24 -> 8)" in told
    assert "name an experiment that runs the same load in based_on" in told

    data, run_dir = run_campaign(tmp_path / "run", CAMPAIGN, cache)
    exps = {e["id"]: e for e in data["experiments"]}
    assert data["best"] == "baseline"
    shorter = exps["shorter-answers"]["decision"]
    assert shorter["verdict"] == "inconclusive"
    assert shorter["unjudged"] == [
        {"kind": "load", "changes": ["output_tokens 24 -> 8"], "outputs": []}
    ]
    # the load's difference, measured all the same: more requests a second, fewer tokens
    # (a larger share of each request is the wait for its first token)
    ratios = [c["ratio"] for c in shorter["vs_parent"]]
    assert len(ratios) == 2 and all(r < 1 for r in ratios), ratios
    # (2.5x the requests a second on an idle host; 1.68x at C=4 seen with the suite's other
    # workers on the same two cores, where the client's own time per request counts more)
    req_s = [c["ratio"] for c in shorter["metrics"]["vs_parent"] if c["metric"] == "req_s"]
    assert len(req_s) == 2 and all(r > 1.3 for r in req_s), req_s
    failing = exps["too-little-memory"]["decision"]
    assert failing["verdict"] == "inconclusive"
    assert failing["unjudged"] == [{"kind": "expected failure", "changes": [], "outputs": []}]
    assert "unjudged" not in exps["baseline"]["decision"]  # (the baseline is not compared)
    spec = exps["speculation-over-loops"]
    (why,) = spec["decision"]["unjudged"]
    assert why["kind"] == "degenerate outputs" and why["changes"] == ["spec-draft-tokens"]
    assert why["outputs"][0].startswith("speculation-over-loops's answers: 100% of ")
    # the answers are measured on every experiment: looping only where the engine loops
    varied = {e["id"]: next(c for c in e["checks"] if c["id"] == "outputs_varied") for e in
              data["experiments"]}  # fmt: skip
    assert varied["speculation-over-loops"]["status"] == "warn"
    assert varied["baseline"]["status"] == "pass"
    assert varied["shorter-answers"]["status"] == "skip"  # answers of 8 tokens: too short
    assert varied["baseline"]["evidence"].startswith("0% of ")

    page = " ".join((run_dir / "report.html").read_text().split())
    assert "Not judged: it runs another load than baseline (output_tokens 24 -&gt; 8)" in page
    assert "The expected failure did not happen" in page
    assert "3 tried, none adopted over it; 3 not judged (each decision says why)." in page
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert "and the text it was measured on is degenerate (speculation-over-loops" in text
    # page one names each, with why in a few words
    first = text[: text.index("Decision log Experiments in the order")]
    assert "Not judged: their numbers are shown, but are no verdict on a server change:" in first
    assert "shorter-answers : runs another load than baseline (output_tokens 24 -> 8)" in (
        html.unescape(first)
    )
    assert "too-little-memory : expected to fail, and ran" in first
    assert "speculation-over-loops : changes speculative decoding or sampling" in first
    assert "outputs_varied the measured requests" in text  # in the methods' glossary
    for exp in ("shorter-answers", "too-little-memory", "speculation-over-loops"):
        section = text[text.index(f"{exp} not judged ran") :][:3000]
        assert "repetitions a side would decide" not in section, exp
    assert reportgen_main("verify", run_dir).returncode == 0


def test_what_changes_the_load_and_what_only_measures_it() -> None:
    base = Workload(concurrency=[1], input_tokens=64, output_tokens=32)
    assert load_changes(base, base.model_copy(update={"repetitions": 5, "seed": 3})) == []
    assert load_changes(base, base.model_copy(update={"concurrency": [1, 8]})) == []
    shared = Workload.model_validate(
        {"concurrency": [1], "input_tokens": 64, "output_tokens": 32,
         "prompts": {"source": "shared-prefix", "prefix_tokens": 48}}
    )  # fmt: skip
    assert load_changes(base, shared) == [
        "prompts.prefix_tokens null -> 48",
        "prompts.source random -> shared-prefix",
    ]


def test_the_h200_runs_shared_prefix_and_memory_experiments_are_not_judged_when_decided_again(
    tmp_path: Path,
) -> None:
    """SGLang's H200 run (0.5 B MoE): shared-prefix prompts were "rejected" against the
    baseline's random ones, and memory-too-small, meant to fail at start, ran and was
    "inconclusive" with repetitions offered. Decided again by this reportgen, neither is
    judged, and the best does not move."""
    run_dir = shutil.copytree(
        ROOT / "tests" / "fixtures" / "runs" / "sglang-h200-moe", tmp_path / "r"
    )
    res = reportgen_main("render", run_dir, "--redecide", "--no-pdf")
    assert res.returncode == 0, res.stderr
    assert "shared-prefix: rejected -> inconclusive" in res.stdout
    assert "best: ngram-spec -> ngram-spec" in res.stdout
    md = (run_dir / "report.md").read_text()
    assert "| memory-too-small | not judged |" in md and "| shared-prefix | not judged |" in md
    data = json.loads(RunDir(run_dir).read_text("results.json") or "{}")
    said = {e["id"]: e["decision"].get("unjudged") for e in data["experiments"]}
    assert said["memory-too-small"] == [{"kind": "expected failure", "changes": [], "outputs": []}]
    load = next(u for u in said["shared-prefix"] if u["kind"] == "load")
    assert "prompts.source random -> shared-prefix" in load["changes"]


def test_the_h200_runs_ngram_speculation_over_looping_answers_is_not_judged(tmp_path: Path) -> None:
    """vLLM's H200 run (0.5 B MoE, random weights) adopted n-gram speculation as its best:
    every answer of the baseline and of ngram-spec repeats a short string, on which 77-91% of
    drafts were accepted. Decided again by this reportgen, it is not judged, and the best is
    chosen without it."""
    fixture = ROOT / "tests" / "fixtures" / "runs" / "vllm-h200-moe"
    run_dir = shutil.copytree(fixture, tmp_path / "r")
    res = reportgen_main("render", run_dir, "--redecide", "--no-pdf")
    assert res.returncode == 0, res.stderr
    assert "best: ngram-spec -> baseline" in res.stdout
    data = json.loads(RunDir(run_dir).read_text("results.json") or "{}")
    (why,) = next(e for e in data["experiments"] if e["id"] == "ngram-spec")["decision"]["unjudged"]
    assert why["kind"] == "degenerate outputs" and why["changes"] == ["speculative-config"]
    assert [x.split(":")[0] for x in why["outputs"]] == [
        "ngram-spec's answers",
        "baseline's answers",
    ]
    assert all(" 100% of " in x for x in why["outputs"])
    md = (run_dir / "report.md").read_text()
    assert "| ngram-spec | not judged |" in md
    said = dict(brief.build(results.load(run_dir)).unjudged)  # page one says so
    assert said["ngram-spec"].startswith(
        "changes speculative decoding or sampling (speculative-config) over degenerate answers"
    )
    # shared-prefix ran after a resumption on another H200 than its parent (the baseline), and
    # with other prompts: neither difference is a server change's
    (machine, load) = next(e for e in data["experiments"] if e["id"] == "shared-prefix")[
        "decision"]["unjudged"]  # fmt: skip
    assert machine == {
        "kind": "machine",
        "changes": ["GPU-ec6d01f5-d0b1-19f6-a0a8-d67a39d27a2e -> "
                    "GPU-7db21abd-c550-2610-f3be-2f827f688d78"],
        "outputs": [],
    }  # fmt: skip
    assert load["kind"] == "load"
    # its child, measured on the same machine as it, is judged
    child = next(e for e in data["experiments"] if e["id"] == "shared-prefix-no-cache")
    assert child["decision"]["unjudged"] == []


def test_another_build_of_the_same_model_folder_is_not_a_server_change() -> None:
    files = {"config.json": "e0b4ec21" + "0" * 56, "tokenizer_config.json": "86bb616f" + "0" * 56}
    parent = Experiment(id="a", status="ok", model_files={"model": "m", "files": files})
    rebuilt = {**files, "tokenizer_config.json": "7a1c0d2e" + "0" * 56}
    child = Experiment(id="b", status="ok", parent="a",
                       model_files={"model": "m", "files": rebuilt})  # fmt: skip
    assert model_changes(parent, child) == ["tokenizer_config.json 86bb616f -> 7a1c0d2e"]
    (why,) = unjudged(child, parent)
    assert why.kind == "model build"
    assert "another build of a's model" in reason(why, "a")
    # another model on purpose (a flag naming another folder) is a configuration change
    other = child.model_copy(update={"model_files": {"model": "m-awq", "files": rebuilt}})
    assert model_changes(parent, other) == [] and unjudged(other, parent) == []


def test_an_experiment_measured_on_another_node_than_its_parent_is_not_judged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each experiment run elsewhere (a Slurm job's node, an SSH host) sends back its node's
    GPUs, UUIDs included: a child measured on another node than its parent is not judged
    against it, one on the same node is, and where a node sent none the run's GPUs count."""
    from reportgen.analysis.unjudged import gpus_of
    from reportgen.observe import fingerprint, sources
    from reportgen.results.records import RanOn

    monkeypatch.setenv(sources.CAPTURE_ENV, str(GPU_CAPTURE))
    source, why = sources.open_source()
    node = fingerprint.this_node(source, why)  # what a node sends back, on the H200 capture
    (h200,) = node["uuids"]
    assert h200.startswith("GPU-")
    other = {**node, "uuids": ["GPU-0000aaaa-0000-0000-0000-000000000001"]}
    run = results.load(ROOT / "tests" / "fixtures" / "sample-run")
    parent, child = run.experiments[0], run.experiments[1]  # baseline, fast-decode-kernel

    def on(e: Experiment, fp: dict[str, object] | None) -> Experiment:
        return e.model_copy(update={"ran_on": RanOn(node="n", fingerprint=fp)})

    here, there = on(parent, node), on(child, other)
    assert gpus_of(run, here) == (h200,) and gpus_of(run, there) != (h200,)
    (why_not,) = unjudged(there, here, machines=(gpus_of(run, there), gpus_of(run, here)))
    assert why_not.kind == "machine" and why_not.changes == [f"{h200} -> {other['uuids'][0]}"]
    assert "another machine (a resumption elsewhere, another node)" in reason(why_not, here.id)
    same = on(child, node)
    assert unjudged(same, here, machines=(gpus_of(run, same), gpus_of(run, here))) == []
    # a node that sent no UUIDs (an older reportgen): the run's, here none recorded
    assert gpus_of(run, on(child, {**node, "uuids": None})) is None
    # the node check compares kinds, never UUIDs: two nodes of one kind are alike
    from reportgen.observe.environment import Node

    assert Node.model_validate(other).mismatches(Node.model_validate(node)) == []


def test_the_parents_configuration_measured_again_on_the_childs_gpus_stands_in_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A child measured on other GPUs than its parent (a campaign resumed on another host) is
    compared with the parent's configuration measured again on its GPUs where the campaign
    has that (the bracket at its end, an A/A copy there): judged then, one machine on both
    sides, and the report names what stood in. Measured again on the parent's GPUs instead,
    it stands in for nothing and the child stays not judged."""
    from reportgen.analysis import verdict
    from reportgen.analysis.drift import drift_check
    from reportgen.analysis.unjudged import stand_in
    from reportgen.observe import fingerprint, sources
    from reportgen.render import exports
    from reportgen.render import view as report_view
    from reportgen.render.html import render_page
    from reportgen.results.records import RanOn

    monkeypatch.setenv(sources.CAPTURE_ENV, str(GPU_CAPTURE))
    source, why_none = sources.open_source()
    node_a = fingerprint.this_node(source, why_none)
    node_b = {**node_a, "uuids": ["GPU-0000bbbb-0000-0000-0000-000000000002"]}
    sample = ROOT / "tests" / "fixtures" / "sample-run"
    run = results.load(sample)
    base, fast = run.experiments[0], run.experiments[1]  # baseline, fast-decode-kernel
    rows = {e.table: results.read_requests(sample, e.table) for e in (base, fast)}

    def on(e: Experiment, node: dict[str, object], **update: object) -> Experiment:
        return e.model_copy(update={"ran_on": RanOn(node="n", fingerprint=node), **update})

    def with_bracket(node: dict[str, object]) -> tuple[Experiment, Experiment]:
        """The run with the baseline on node A, fast-decode-kernel on node B and the
        baseline's configuration measured again at the end on ``node``."""
        again = on(base, node, id="baseline-end", role="bracket", parent=base.id,
                   started_at="2099-01-01T00:00:00Z", decision=None)  # fmt: skip
        run.experiments = [on(base, node_a), on(fast, node_b), again]
        rows[again.table] = rows[base.table]
        return run.experiments[1], again

    child, again = with_bracket(node_b)
    assert stand_in(run, child) is again
    decision = verdict.decide_experiment(run, child, rows)
    assert decision.stand_in == "baseline-end" and decision.unjudged == []
    assert decision.verdict == "adopted"  # as against the baseline on one machine
    said = " ".join(decision.explanation.split())
    assert "baseline was measured on other GPUs than fast-decode-kernel" in said
    assert "(baseline-end) stands in for it" in said
    child.decision = decision
    report = report_view.build(run)
    shown = report.experiments[1]
    assert shown.stand_in == "baseline-end" and shown.parent == "baseline"
    page = " ".join(render_page(report, defaultdict(Markup)).split())  # (no charts drawn)
    assert (
        "this experiment / baseline-end (baseline's configuration measured "
        "again on this experiment's GPUs, where baseline ran on others):"
    ) in page
    table = csv.DictReader(io.StringIO(exports.tables(run)["comparisons.csv"]))
    against = {r["against"] for r in table
               if r["experiment"] == child.id and r["kind"] == "objective_vs_parent"}  # fmt: skip
    assert against == {"baseline-end"}

    # the bracket, on another machine than the baseline, measured no drift of one host: the
    # drift check takes nothing again
    again.decision = verdict.decide_experiment(run, again, rows)
    assert [u.kind for u in again.decision.unjudged or []] == ["machine"]
    assert drift_check(run) == [] and child.decision.drift is None

    child, again = with_bracket(node_a)  # measured again where the parent was: no stand-in
    assert stand_in(run, child) is None
    decision = verdict.decide_experiment(run, child, rows)
    assert decision.stand_in is None and decision.verdict == "inconclusive"
    assert [u.kind for u in decision.unjudged or []] == ["machine"]


ADAPTIVE_OVER_LOOPS = """
[campaign]
name = "loops"
title = "adaptive repetitions and what cannot be judged"
starts = 1

[server]
engine = "sim"
# answers that loop after 4 words, as a model with random weights gives
args = { port = PORT, itl-ms = 3.0, ttft-ms = 12.0, jitter = 0.2, repeat-after = 4 }
ready_timeout_s = 30

[workload]
concurrency = [1, 4]
requests_per_level = 16
input_tokens = 8
output_tokens = 24
warmup_requests = 2
warmup = FAST_WARMUP
repetitions = { min = 2, max = 4 }

[[experiment]]
id = "baseline"
why = "the reference"

[[experiment]]
id = "speculation"
why = "one draft token, a tenth of them accepted: the same speed, over looping answers"
args = { spec-draft-tokens = 1, spec-accept-rate = 0.1 }
""".replace("FAST_WARMUP", FAST_WARMUP)


def test_adaptive_repetitions_are_not_spent_on_speculation_over_looping_answers(
    tmp_path: Path, cache: Path
) -> None:
    """Adaptive repetitions run more rounds only where they could decide: speculation measured
    over degenerate answers is not judged whatever it measures, which its request records show
    after the first round, so it gets no further round (the same speed as its parent, it
    would otherwise run to the maximum undecided, as an identical configuration does in
    tests/e2e/test_adaptive.py)."""
    data, _ = run_campaign(tmp_path, ADAPTIVE_OVER_LOOPS, cache)
    spec = next(e for e in data["experiments"] if e["id"] == "speculation")
    assert [u["kind"] for u in spec["decision"]["unjudged"]] == ["degenerate outputs"]
    assert spec["looks"] == [{"repetitions": 2, "open": []}]
    assert sorted({lv["repetition"] for lv in spec["levels"]}) == [0, 1]
