"""The typed results: schema 1 files read through the migration, nothing lost on the way, bad
files refused in one line, and the verdict as a pure function of the results."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reportgen import results
from reportgen.analysis import drift, verdict
from reportgen.errors import ResultsError
from reportgen.load.records import RequestRecord
from reportgen.results.levels import Level, Summary
from reportgen.results.model import SCHEMA_VERSION, Control, Experiment, Run
from reportgen.results.records import FlagChange
from reportgen.results.verdicts import Check
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures"
SAMPLE = FIXTURES / "sample-run"
H200 = FIXTURES / "h200-schema-1"  # the H200 run's results as the first reportgen wrote them


@pytest.mark.parametrize("run_dir", [SAMPLE, H200], ids=["sample", "h200"])
def test_schema_1_files_load_through_the_migration(run_dir: Path) -> None:
    raw = json.loads(results.RunDir(run_dir).read_bytes("results.json"))
    assert raw["schema_version"] == 1
    run = results.load(run_dir)
    assert run.schema_version == SCHEMA_VERSION == 3
    assert [e.id for e in run.experiments] == [e["id"] for e in raw["experiments"]]
    # every experiment that ran names its workload now (schema 1 left some out)
    assert all(e.workload for e in run.experiments if e.status != "pending")
    # nothing is lost: every value of the old file is in the new one, where it was
    assert _contains(run.dump(), {**raw, "schema_version": 3})
    # and a saved Run reads back as itself
    again = results.parse(json.loads(json.dumps(run.dump())))
    assert again == run
    baseline = run.experiments[0]
    assert baseline.decision is not None and baseline.decision.verdict == "baseline"
    assert baseline.by_level[0].output_tok_s.n == baseline.by_level[0].repetitions


def test_a_failure_is_data_and_older_words_are_read_once_by_the_migration() -> None:
    """A failed experiment says what happened as data (``Failure``): the kind, the exit code,
    the level run it died in. Results of version 2 said it only in words; the migration reads
    them once, and everything after reads the data: the levels finished before the failure,
    the server-stability check."""
    from reportgen.analysis.checks_server import server_stable
    from reportgen.results.model import Point
    from reportgen.results.records import Failure

    run = results.load(H200)  # version 1: its words, read by the migration
    died = next(e for e in run.experiments if e.id == "eager-attention")
    assert died.failure == Failure(kind="fatal", level=Point(64), repetition=0)
    assert died.finished_before_failure() == [Point(1), Point(4), Point(16)]
    assert server_stable(died).status == "fail"
    never = next(e for e in run.experiments if e.id == "float16")
    assert never.failure == Failure(kind="fatal") and never.finished_before_failure() == []
    # new runs write it as data: words that say otherwise no longer decide anything
    died.reason = "it went wrong"
    assert died.finished_before_failure() == [Point(1), Point(4), Point(16)]
    assert server_stable(died).status == "fail"
    sample = results.load(SAMPLE)
    typo = next(e for e in sample.experiments if e.id == "typo-in-flag")
    assert typo.failure == Failure(kind="exited", exit_code=2)


def _contains(new: object, old: object) -> bool:
    """Every key and value of ``old`` is in ``new`` (which may have more keys)."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(
            k in new and _contains(new[k], v) for k, v in old.items()
        )
    if isinstance(old, list):
        return isinstance(new, list) and len(new) == len(old) and all(map(_contains, new, old))
    return new == old


def test_keys_of_a_later_reportgen_are_kept(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_bytes(results.RunDir(SAMPLE).read_bytes("results.json"))
    data = json.loads((tmp_path / "results.json").read_text())
    data["experiments"][0]["levels"][0]["summary"]["tokens_per_joule"] = 3.5
    data["experiments"][0]["energy"] = {"joules": 12}
    (tmp_path / "results.json").write_text(json.dumps(data))
    run = results.load(tmp_path)
    results.save(tmp_path, run)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["experiments"][0]["levels"][0]["summary"]["tokens_per_joule"] == 3.5
    assert saved["experiments"][0]["energy"] == {"joules": 12}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"schema_version": 4}, "schema_version = 4, but this reportgen reads versions 1 to 3"),
        ({"schema_version": "1"}, "schema_version = '1'"),
        ({"status": "halfway"}, "status: Input should be 'running', 'complete' or 'incomplete'"),
        ({"campaign": "x"}, "campaign: Input should be a valid dictionary (got 'x')"),
        ({"experiments": [1, 2]}, "experiments.0: Input should be a valid dictionary"),
    ],
)
def test_a_bad_file_is_refused_in_one_line(
    tmp_path: Path, edit: dict[str, object], message: str
) -> None:
    data = {**json.loads(results.RunDir(SAMPLE).read_bytes("results.json")), **edit}
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsError, match=re.escape(message)) as err:
        results.load(tmp_path)
    assert "\n" not in str(err.value) and str(tmp_path) in str(err.value)


def test_a_damaged_level_names_its_key(tmp_path: Path) -> None:
    data = json.loads(results.RunDir(SAMPLE).read_bytes("results.json"))
    data["experiments"][1]["levels"][2]["concurrency"] = "sixteen"
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsError, match=r"experiments\.1\.levels\.2\.concurrency"):
        results.load(tmp_path)


# -- the verdict, a pure function -------------------------------------------------------------


def _level(c: int, rep: int, tok_s: float) -> Level:
    return Level(concurrency=c, repetition=rep, summary=Summary(output_tok_s=tok_s, requests=8))


def _exp(exp_id: str, speeds: dict[int, list[float]], parent: str | None = None) -> Experiment:
    levels = [_level(c, k, v) for c, vs in speeds.items() for k, v in enumerate(vs)]
    return Experiment(id=exp_id, status="ok", parent=parent, levels=levels)


def _run(*experiments: Experiment) -> Run:
    run = results.load(SAMPLE)  # its campaign: output_tok_s at C=1 and 16, margin 5%
    return run.model_copy(update={"experiments": list(experiments), "best": None})


def test_verdict_of_a_campaign_decided_one_experiment_at_a_time() -> None:
    base = _exp("base", {1: [100, 101, 99], 16: [800, 810, 790]})
    faster = _exp("faster", {1: [130, 131, 129], 16: [1040, 1050, 1030]}, parent="base")
    faster.flag_diff = [FlagChange(key="itl-ms", kind="changed", before=4, after=3)]
    same = _exp("same", {1: [130, 130.5, 129.5], 16: [1040, 1041, 1039]}, parent="faster")
    broken = _exp("broken", {1: [500, 500, 500], 16: [4000, 4000, 4000]}, parent="faster")
    broken.checks = [
        Check(
            id="request_errors", title="few requests failed", status="fail", evidence="30% failed"
        )
    ]
    run = _run(base, faster, same, broken)
    for e in run.experiments:
        e.decision = verdict.decide_experiment(run, e, {})
        run.best = drift.best_after(run, e)
    # "same" ran on one start, as every experiment here: its start cannot be told from
    # faster's by 1%, with the stated spread between starts (1.5%), so it is not shown
    # equivalent; the "levels" method took that spread as nothing where none was measured
    assert [e.decision.verdict for e in run.experiments if e.decision] == [
        "baseline",
        "adopted",
        "inconclusive",
        "failed",
    ]
    assert same.decision is not None and all(
        c.bound is not None and c.bound > 0.03 for c in same.decision.vs_parent
    )
    assert verdict.decide_experiment(run, same, {}, "levels").verdict == "equivalent"
    assert run.best == "faster"  # the broken one's numbers were never believed
    d = faster.decision
    assert d is not None and d.paired is False
    assert d.explanation.startswith("Changed from base: --itl-ms 4 -> 3. output_tok_s vs base:")
    assert [(c.concurrency, c.verdict) for c in d.vs_parent] == [(1, "better"), (16, "better")]
    assert d.vs_parent == d.vs_baseline  # its parent is the baseline
    assert d.metrics is not None and {c.metric for c in d.metrics["vs_parent"]} == {
        "output_tok_s"
    }  # no latencies in these hand-made summaries
    assert "failed few requests failed (30% failed)" in str(
        broken.decision and broken.decision.explanation
    )


def test_verdict_with_interleaved_runs_compares_pairs_and_a_failed_parent_decides_nothing() -> None:
    base = _exp("base", {1: [100, 100]})
    child = _exp("child", {1: [110, 121]}, parent="base")
    child.control = Control(of="base", levels=[_level(1, 0, 100), _level(1, 1, 110)])
    run = _run(base, child)
    d = verdict.decide_experiment(run, child, {})
    assert d.paired and all(c.paired for c in d.vs_parent) and not d.vs_baseline[0].paired
    assert d.vs_parent[0].ratio == pytest.approx(1.1) and "pair by pair" in d.explanation
    base.status, base.reason = "failed", "server exited with code 1 before it was ready"
    child.control = None
    d = verdict.decide_experiment(run, child, {})
    assert d.verdict == "inconclusive" and "its parent base failed" in d.explanation
    assert d.vs_parent == [] and d.vs_baseline == []


def test_tail_comparisons_read_the_rows_of_each_side() -> None:
    base = _exp("base", {1: [100, 100, 100]})
    child = _exp("child", {1: [100, 100, 100]}, parent="base")

    def rows(ttft: float) -> list[RequestRecord]:
        return [
            RequestRecord(
                index=i, start=0.0, first_token=ttft, end=1.0, repetition=k, concurrency=1
            )
            for k in range(3)
            for i in range(20)
        ]

    run = _run(base, child)
    # the pooled method's two-level bootstrap reads the request rows (the levels method reads
    # each run's p99 from its summary: tests/unit/analysis/test_noise.py)
    rows_of = {"base": rows(0.1), "child": rows(0.3)}
    d = verdict.decide_experiment(run, child, rows_of, "pooled")
    tails = {c.metric: c for c in (d.metrics or {})["vs_baseline"] if c.metric.endswith("p99")}
    assert tails["ttft_ms_p99"].ratio == pytest.approx(3.0)
    assert tails["ttft_ms_p99"].verdict == "worse"


def test_an_experiment_that_ran_but_was_not_decided_runs_again_on_resume() -> None:
    """A stop between an experiment's last table and its verdict leaves it "ok" with no
    decision: --resume must not keep it as finished (its verdict and the best would be
    missing)."""
    run = results.load(SAMPLE)
    assert run.finished_prefix() == len(run.experiments)
    run.experiments[2].decision = None
    assert run.experiments[2].status == "ok" and not run.experiments[2].finished
    assert run.finished_prefix() == 2


def test_golden_answers_of_any_shape_are_recorded_as_text() -> None:
    """One reading of a whole answer for the golden prompts and the load: a chat message's
    content parts joined, its reasoning kept apart (the load counts it, a golden answer is the
    content), a completion's text, an error in a 200 body said as one."""
    import orjson

    from reportgen.load.answer import content_text, read_whole

    assert content_text(" Paris.") == " Paris."
    parts = [{"type": "text", "text": " Par"}, {"type": "text", "text": "is."}]
    assert content_text(parts) == " Paris."
    assert content_text(None) == "" and content_text(42) == "42"

    def body(obj: object) -> bytes:
        return orjson.dumps(obj)

    chat = read_whole(
        body(
            {
                "choices": [
                    {
                        "message": {"content": parts, "reasoning_content": "Think."},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3},
            }
        )
    )
    assert (chat.content, chat.reasoning, chat.finish_reason) == (" Paris.", "Think.", "stop")
    assert chat.completion_tokens == 3 and chat.error is None
    text = read_whole(body({"choices": [{"text": " 4", "finish_reason": "length"}]}))
    assert (text.content, text.finish_reason, text.completion_tokens) == (" 4", "length", None)
    assert read_whole(body({"error": {"message": "bad model"}})).error == (
        "error in response: bad model"
    )
    assert read_whole(b"<html>").error == "invalid JSON response: b'<html>'"


def test_the_objective_is_read_by_the_campaign_schemas_own_rules() -> None:
    """Which levels decide, which way is better, the metric's default: ``Run`` reads its
    stored objective through the schema's ``Objective``, so the two cannot disagree (they did
    on an empty list of levels); an objective the schema cannot read is refused on load."""
    from reportgen.campaign.schema import Objective
    from reportgen.results.model import Point

    raw = json.loads(results.RunDir(SAMPLE).read_bytes("results.json"))
    points = [Point(1, None), Point(4, None), Point(16, None), Point(4, 2.0), Point(4, 8.0)]
    for objective in (
        {"metric": "ttft_ms", "concurrency": [4, 1]},
        {"request_rate": [8.0]},
        {"metric": "output_tok_s", "direction": "lower"},
        {},
    ):
        raw["campaign"]["campaign"]["objective"] = objective
        run = results.parse(json.loads(json.dumps(raw)))
        schema = Objective.model_validate(objective)
        assert [run.decides(p) for p in points] == [schema.decides(p) for p in points]
        assert run.metric == schema.metric and run.higher_is_better == (schema.better() == "higher")
    raw["campaign"]["campaign"]["objective"] = {"concurrency": []}  # written before it was refused
    assert all(results.parse(raw).decides(p) for p in points)
    raw["campaign"]["campaign"]["objective"] = {"metric": "tok_per_watt"}
    with pytest.raises(ResultsError) as info:
        results.parse(raw, "r.json")
    assert str(info.value).startswith("r.json: campaign.campaign.objective.metric: Input should")


def test_a_saved_workload_is_typed_as_the_run_that_wrote_it_ran_it() -> None:
    """Render reads a saved workload typed (``workload_as_run``): keys a later reportgen
    added mean what their absence meant then (no level warm-ups before ``warmup``; a
    duration level exactly ``duration_s`` long before ``max_duration_s``), a key of a later
    reportgen is left out, and every other missing key has the schema's default."""
    from reportgen.campaign.workload import Workload
    from reportgen.render import workload as said
    from reportgen.results.as_run import workload_as_run

    old = {"concurrency": [1, 4], "duration_s": 8.0, "tokens_per_watt": 3}  # written long ago
    wl = workload_as_run(old)
    assert not wl.warmup.steady and wl.max_duration_s == 8.0
    assert wl.request_timeout_s == Workload.model_fields["request_timeout_s"].default
    assert said.level_warmup(wl) == ""  # no level warm-ups are claimed for it
    now = workload_as_run({**old, "warmup": {"max_s": 30}, "max_duration_s": None})
    assert now.warmup.steady and now.max_duration_s is None
    assert "for at most 30 s" in said.level_warmup(now)
    # the sample run (schema 1) lacks both: its methods say what it did
    run = results.load(SAMPLE)
    assert not run.workload.warmup.steady
