"""`reportgen verify` on the committed H200 run: what it accepts (a report of the previous
schema included) and what it catches when results.json is edited and the report rendered
again from it, so that page and results agree but the numbers do not say what they claim."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from reportgen import results as store
from reportgen.analysis.summary import by_level, summarize
from reportgen.results.embed import DATA_ID, without_digest
from reportgen.results.levels import ClientLoad, Level
from tests.builders import DEMO, toml_document
from tests.conftest import ROOT, Ran, free_port, plain_copy, reportgen_main

H200 = ROOT / "docs" / "examples" / "h200"
SCHEMA_1 = ROOT / "tests" / "fixtures" / "h200-schema-1"


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The H200 run directory, copied (without its PDF)."""
    return plain_copy(H200, tmp_path / "h200")


def edit_and_render(run_dir: Path, change: Callable[[dict[str, Any]], None]) -> Ran:
    data = json.loads((run_dir / "results.json").read_text())
    change(data)
    (run_dir / "results.json").write_text(json.dumps(data))
    rendered = reportgen_main("render", run_dir, "--no-pdf")
    assert rendered.returncode == 0, rendered.stderr
    return reportgen_main("verify", run_dir / "report.html")


def test_the_committed_report_and_one_of_the_previous_schema_verify(copy: Path) -> None:
    res = reportgen_main("verify", copy / "report.html")
    assert res.returncode == 0, res.stdout
    assert "ok   report text: the page has the sha256 digest it carries: as rendered" in (
        res.stdout
    )
    # as the first reportgen wrote it: its results as schema 1 (decided each comparison by
    # its own runs, a failed experiment's finished levels not compared), rendered by this
    # reportgen, the page's data embedded as schema 1
    (copy / "results.json").write_bytes(store.RunDir(SCHEMA_1).read_bytes("results.json"))
    rendered = reportgen_main("render", copy, "--no-pdf")
    assert rendered.returncode == 0, rendered.stderr
    page = (copy / "report.html").read_text()
    start = page.index(f'<script type="application/json" id="{DATA_ID}">')
    end = page.index("</script>", start)
    embedded = json.loads(page[start:end].split(">", 1)[1])
    embedded["results"] = json.loads((copy / "results.json").read_text())
    assert embedded["results"]["schema_version"] == 1
    body = orjson.dumps(embedded).decode().replace("<", "\\u003c").replace(">", "\\u003e")
    old = page[:start] + f'<script type="application/json" id="{DATA_ID}">{body}' + page[end:]
    # (and, as pages were then, no digest: it is rendered again to be compared)
    (copy / "report.html").write_text(without_digest(old))
    res = reportgen_main("verify", copy / "report.html")
    assert res.returncode == 0, res.stdout
    assert "(its data embedded as schema 1, read through the migration)" in res.stdout


def test_a_page_carries_its_digest_so_a_later_reportgen_verifies_it_and_an_edit_is_caught(
    copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rendered now, the page carries the sha256 of its own HTML: it verifies by that digest,
    even where this reportgen would now render it otherwise (another stylesheet, say: a
    report of an older version under a newer one), and a page whose text was edited after
    rendering (one number on it) does not."""
    rendered = reportgen_main("render", copy, "--no-pdf")
    assert rendered.returncode == 0, rendered.stderr
    page = (copy / "report.html").read_text()
    assert re.search(r'<meta name="reportgen-digest" content="sha256:[0-9a-f]{64}">', page)
    from reportgen.render import html

    monkeypatch.setattr(html, "stylesheet", lambda: "body { color: red }")
    res = reportgen_main("verify", copy / "report.html")
    assert res.returncode == 0, res.stdout
    assert "ok   report text: the page has the sha256 digest it carries: as rendered" in (
        res.stdout
    )
    first = re.search(r"<td[^>]*>(\d[\d,]*)</td>", page)
    assert first is not None
    edited = page[: first.start(1)] + "9" + page[first.start(1) + 1 :]
    assert edited != page
    (copy / "report.html").write_text(edited)
    res = reportgen_main("verify", copy / "report.html")
    assert res.returncode == 1
    assert "DIFF report text: the page does not have the digest it carries: it was edited " in (
        res.stdout
    )


def test_a_failed_experiment_made_best_and_telemetry_taken_out_are_caught(copy: Path) -> None:
    """Both edits in one results.json, the report rendered again from it (one render: the
    H200 report's charts take seconds)."""

    def edit(data: dict[str, Any]) -> None:
        e = next(x for x in data["experiments"] if x["id"] == "float16")
        e["decision"]["verdict"] = "adopted"
        data["best"] = "float16"
        for lv in data["experiments"][0]["levels"]:
            lv["telemetry"] = None

    res = edit_and_render(copy, edit)
    assert res.returncode == 1
    assert "ok   report text" in res.stdout and "ok   results.json" in res.stdout
    assert "DIFF decisions: float16: the verdict would be 'failed' (float16 failed: " in res.stdout
    assert "best: 'float16' in the report, 'cuda-graphs' from the decisions" in res.stdout
    assert "DIFF telemetry windows: baseline C=1 repetition 1: GPU telemetry window" in (res.stdout)


def test_recheck_takes_the_checks_again_from_the_saved_logs_and_tables(tmp_path: Path) -> None:
    """A run's checks as an older reportgen took them (eager warned of no capture line; no
    speculative-decoding agreement check): ``render --recheck`` takes them again with this
    reportgen's adapters, records what they were, and the report still verifies."""
    vllm = ROOT / "tests" / "fixtures" / "runs" / "vllm-h200-moe"
    run_dir = plain_copy(vllm, tmp_path / "v")
    data = json.loads((run_dir / "results.json").read_text())
    keep = ("baseline", "eager", "ngram-spec")  # fewer to render and verify
    data["experiments"] = [e for e in data["experiments"] if e["id"] in keep]
    exps = {e["id"]: e for e in data["experiments"]}
    for c in exps["eager"]["checks"]:
        if c["id"] == "cuda_graphs":
            c.update(status="warn", evidence="no capture line in the server log")
    exps["ngram-spec"]["checks"] = [
        c for c in exps["ngram-spec"]["checks"] if c["id"] != "spec_agreement"
    ]
    (run_dir / "results.json").write_text(json.dumps(data))
    res = reportgen_main("render", run_dir, "--no-pdf", "--recheck")
    assert res.returncode == 0, res.stderr
    # a line per experiment: what changed (checks this reportgen adds appear as "absent")
    assert re.search(r"^eager: .*cuda_graphs warn -> skip", res.stdout, re.M), res.stdout
    assert re.search(r"^ngram-spec: .*spec_agreement absent -> pass", res.stdout, re.M)
    data = json.loads((run_dir / "results.json").read_text())
    exps = {e["id"]: e for e in data["experiments"]}
    graphs = next(c for c in exps["eager"]["checks"] if c["id"] == "cuda_graphs")
    assert graphs["status"] == "skip" and "--enforce-eager" in graphs["evidence"]
    assert data["redecided"][-1]["checks_before"]["eager"]["cuda_graphs"] == "warn"
    assert reportgen_main("verify", run_dir).returncode == 0


@pytest.mark.slow
def test_a_non_streamed_run_recorded_with_its_ttft_slo_still_verifies(
    tmp_path: Path, cache: Path
) -> None:
    """Before reportgen stopped taking a non-streamed response's end for its first token, a
    TTFT SLO was applied to it. Such a run (its records carry that first token, its goodput
    counts it) verifies as it was recorded; a run of today (no first token, no TTFT SLO) too."""
    data = json.loads(json.dumps(DEMO))
    data["server"]["args"] = {**data["server"]["args"], "port": free_port()}
    data["workload"].update(
        concurrency=[2], requests_per_level=4, repetitions=1, warmup_requests=0, stream=False
    )
    # every response takes longer than 1 ms: its goodput was 0 when TTFT was the E2E latency
    data["workload"]["slo"] = {"ttft_ms": 1.0, "e2e_ms": 1e6}
    data["experiment"], data["probe"], data["check"] = data["experiment"][:1], [], []
    data["campaign"]["objective"]["concurrency"] = [2]
    path = tmp_path / "nostream.toml"
    path.write_text(toml_document(data), encoding="utf-8")
    res = reportgen_main(
        "run", path, "--output", tmp_path / "out", "--quiet", "--no-pdf", cache=cache
    )
    assert res.returncode == 0, res.stderr
    (run_dir,) = (p.parent for p in (tmp_path / "out").glob("*/*/results.json"))
    assert reportgen_main("verify", run_dir).returncode == 0
    results = json.loads((run_dir / "results.json").read_text())
    exp = results["experiments"][0]
    assert exp["levels"][0]["summary"]["goodput_req_s"] > 0  # no TTFT SLO applied

    # the same run as the older reportgen recorded it
    rows = store.read_requests(run_dir, exp["id"])
    for r in rows:
        r.first_token = r.end
    store.save_requests(run_dir, exp["id"], rows)
    for lv in exp["levels"]:
        old = summarize(
            [r for r in rows if r.repetition == lv["repetition"]],
            lv["summary"]["duration_s"],
            slo=exp["workload"]["slo"] if exp.get("workload") else data["workload"]["slo"],
            client=ClientLoad.model_validate(c) if (c := lv["summary"]["client"]) else None,
        )
        assert old.goodput_req_s == 0
        lv["summary"] = old.model_dump(mode="json")
    levels = [Level.model_validate(lv) for lv in exp["levels"]]
    exp["by_level"] = [a.model_dump(mode="json") for a in by_level(levels)]
    res = edit_and_render(run_dir, lambda d: d.update(experiments=[exp]))
    assert res.returncode == 0, res.stdout


def test_findings_are_saved_given_to_the_report_and_taken_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rendered, the report embeds the run's findings (``analysis.findings``: here the
    advice on splitting repetitions over starts, which its methods state), and ``verify``
    takes them again from the recomputed decisions; findings that do not follow from them
    (a render whose analysis advised otherwise) are caught."""
    from reportgen.analysis import findings
    from reportgen.results.embed import extract

    copy = plain_copy(ROOT / "docs" / "examples" / "sglang-h100", tmp_path / "r")
    rendered = reportgen_main("render", copy, "--no-pdf")
    assert rendered.returncode == 0, rendered.stderr
    page = (copy / "report.html").read_text()
    embedded = store.parse(extract(page)["results"])
    assert embedded.findings is not None and embedded.findings.allocation is not None
    advice = embedded.findings.allocation.suggested_starts
    assert f"campaign.starts = {advice}" in page
    res = reportgen_main("verify", copy / "report.html")
    assert res.returncode == 0, res.stdout
    assert "ok   findings: what the report states beyond the decisions, taken again" in res.stdout

    real = findings.findings

    def off(run: Any) -> Any:
        got = real(run)
        assert got.allocation is not None
        got.allocation.suggested_starts += 1
        return got

    monkeypatch.setattr(findings, "findings", off)
    assert reportgen_main("render", copy, "--no-pdf").returncode == 0
    monkeypatch.setattr(findings, "findings", real)
    res = reportgen_main("verify", copy / "report.html")
    assert res.returncode == 1
    assert "DIFF findings: allocation differs when taken again" in res.stdout
