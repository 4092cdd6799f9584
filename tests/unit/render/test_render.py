"""Tests for reportgen.render: a real run directory in, real HTML and a real PDF (read back) out.

The fixture tests/fixtures/sample-run is the output of ``reportgen run campaigns/demo.toml``
(simulated engine) without its request tables, which the renderer does not need.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pypdf
import pytest
from rich.console import Console

from reportgen import metrics, results
from reportgen.cli import summary
from reportgen.errors import RenderError, ResultsError
from reportgen.render import (
    Rendered,
    charts,
    exports,
    figures,
    fmt,
    html,
    pdf,
    render,
    render_html,
    render_pages,
    view,
)
from reportgen.results.embed import extract, table_hashes
from reportgen.results.engine_log import LogEvidence
from reportgen.results.model import Run
from reportgen.results.records import FlagChange
from reportgen.results.verdicts import Check
from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "sample-run"
IDS = ("baseline", "fast-decode-kernel", "bigger-batches", "prefill-chunk", "typo-in-flag")
EVIL = "<script>alert(1)</script>"


def _copy(dest: Path) -> Path:
    shutil.copytree(FIXTURE, dest)
    return dest


def _save(run_dir: Path, data: dict[str, Any]) -> None:
    (run_dir / "results.json").write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    return _copy(tmp_path / "run")


@pytest.fixture(scope="module")
def sample() -> Run:
    return results.load(FIXTURE)


def _copy_of(run: Run) -> Run:
    """A copy to edit: the module's sample is shared by its tests."""
    return run.model_copy(deep=True)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rendered]:
    """The sample rendered once, HTML and PDF (the PDF takes a few seconds)."""
    yield render(_copy(tmp_path_factory.mktemp("rendered") / "run"))


@pytest.fixture(scope="module")
def page(rendered: Rendered) -> str:
    return rendered.html.read_text(encoding="utf-8")


class _Links(HTMLParser):
    """Every URL-bearing attribute, and every tag name, of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[tuple[str, str, str]] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for name, value in attrs:
            if name in ("src", "href", "xlink:href", "srcset", "data", "action") and value:
                self.urls.append((tag, name, value))


def _links(text: str) -> _Links:
    parser = _Links()
    parser.feed(text)
    return parser


# -- render(): files, errors ----------------------------------------------------------------


def test_render_writes_html_and_pdf(rendered: Rendered) -> None:
    assert rendered.html.name == "report.html" and rendered.html.is_file()
    assert rendered.pdf is not None and rendered.pdf.name == "report.pdf"
    assert rendered.pdf.read_bytes().startswith(b"%PDF-")
    # atomic writes leave no temporary files behind
    assert not list(rendered.html.parent.glob(".report.*"))


def test_render_html_only(run_dir: Path) -> None:
    out = render(run_dir, pdf=False)
    assert out.pdf is None
    assert out.html.is_file()
    assert not (run_dir / "report.pdf").exists()


@pytest.mark.usefixtures("fresh_charts")
def test_rendering_twice_gives_identical_html(run_dir: Path, sample: Run) -> None:
    first = render(run_dir, pdf=False).html.read_bytes()
    second = render(run_dir, pdf=False).html.read_bytes()
    assert first == second
    assert render_html(sample) == render_html(_copy_of(sample))


@pytest.mark.usefixtures("fresh_charts")
def test_charts_drawn_by_workers_or_here_give_the_same_page(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers draw charts only while the host has idle cores; either way the same page."""
    pools: list[object] = []
    made = charts.ProcessPoolExecutor
    monkeypatch.setattr(
        charts, "ProcessPoolExecutor", lambda *a, **k: pools.append(1) or made(*a, **k)
    )
    monkeypatch.setattr(charts.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(charts, "PARALLEL_FROM", 2)  # (the sample run has fewer than 8)
    monkeypatch.setattr(charts.os, "getloadavg", lambda: (1.9, 0.0, 0.0))
    pooled = render(run_dir, pdf=False).html.read_bytes()
    assert pools == [1]
    monkeypatch.setattr(charts.os, "getloadavg", lambda: (2.0, 0.0, 0.0))
    assert render(run_dir, pdf=False).html.read_bytes() == pooled and pools == [1]


@pytest.mark.usefixtures("fresh_charts")
def test_embedded_results_render_the_same_page(run_dir: Path) -> None:
    """What ``reportgen verify`` relies on: the results a report embeds (this schema's dump,
    whatever schema results.json had) render the same page again, byte for byte."""
    page = render(run_dir, pdf=False).html.read_text(encoding="utf-8")
    data = extract(page)
    assert data["results"]["schema_version"] == results.SCHEMA_VERSION
    assert data["results"] == results.load(run_dir).dump()
    again = results.parse(data["results"])
    assert render_html(again, tables=data["tables"]) == page


def test_unknown_schema_version_is_refused(run_dir: Path, sample: Run) -> None:
    _save(run_dir, {**sample.dump(), "schema_version": 999})
    with pytest.raises(ResultsError, match="schema_version = 999"):
        render(run_dir)
    assert not (run_dir / "report.html").exists()


def test_unwritable_report_raises_render_error(run_dir: Path) -> None:
    # A directory where the report should go: the write fails even when running as root.
    (run_dir / "report.html").mkdir()
    with pytest.raises(RenderError, match="cannot write the report") as err:
        render(run_dir, pdf=False)
    assert "\n" not in str(err.value)
    assert "writable" in str(err.value)


# -- the HTML -------------------------------------------------------------------------------


def test_html_is_self_contained(page: str) -> None:
    parsed = _links(page)
    external = [u for u in parsed.urls if re.match(r"(?i)\s*(https?:)?//", u[2])]
    assert external == []  # the sample's only reference source is not an https URL
    assert not parsed.tags & {"link", "img", "iframe", "object", "embed"}
    # one script element: the embedded results, data the browser never runs
    assert page.count("<script") == 1
    assert '<script type="application/json" id="reportgen-data">' in page
    assert "@import" not in page and "url(http" not in page
    assert '<meta name="viewport"' in page
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page


def test_only_https_reference_sources_become_links(sample: Run) -> None:
    data = _copy_of(sample)
    refs = data.campaign["reference"]
    refs.append({**refs[0], "name": "published", "source": "https://example.org/bench?a=1&b=2"})
    refs.append({**refs[0], "name": "sneaky", "source": "javascript:alert(1)"})
    parsed = _links(render_html(data))
    external = [u for u in parsed.urls if re.match(r"(?i)\s*(https?:)?//|javascript:", u[2])]
    assert external == [("a", "href", "https://example.org/bench?a=1&b=2")]


def test_html_names_every_experiment_verdict_and_the_simulator(page: str) -> None:
    for exp_id in IDS:
        assert exp_id in page
    assert view.SIMULATED_NOTICE.replace("'", "&#39;") in page
    assert "Simulated" in page
    for verdict in ("baseline", "adopted", "rejected", "inconclusive", "failed"):
        assert f'class="badge v-{verdict}">{verdict}</span>' in page
    assert "INCOMPLETE" not in page


def test_html_has_sections_in_order_and_a_contents_list(page: str) -> None:
    positions = [page.index(f'<section id="{anchor}">') for anchor, _ in html.SECTIONS]
    assert positions == sorted(positions)
    for anchor, _ in html.SECTIONS:
        assert f'href="#{anchor}"' in page
    assert page.index("Simulated engine:") < positions[0]


def test_summary_sentence_gives_best_against_baseline(page: str) -> None:
    # from fast-decode-kernel's decision.vs_baseline in the fixture: better at C=1, but at
    # C=16 its interval spans the margin, so the summary does not say "delivers"
    assert (
        "fast-decode-kernel is the best configuration adopted; against the baseline it "
        "measured 1.21× (95% CI 1.19–1.23, better) the baseline&#39;s output_tok_s at C=1 and "
        "1.12× (95% CI 0.98–1.28, inconclusive) at C=16: only a level marked better is beyond "
        "the margin at that confidence."
    ) in page
    assert "delivers" not in page.split("<main")[-1].split("</header>")[0]


def test_summary_when_nothing_beats_the_baseline(sample: Run) -> None:
    report = view.build(sample.model_copy(update={"best": "baseline"}))
    assert report.summary.startswith(
        "No experiment beat the baseline (baseline) on output_tok_s at C=1, 16"
    )


def test_failed_experiment_shows_reason_and_log_tail(page: str) -> None:
    assert "server exited with code 2 before it was ready" in page
    log = re.search(r'<pre class="log">(.*?)</pre>', page, re.S)
    assert log is not None
    assert "unrecognized arguments: --itl-msec 2" in log.group(1)


def test_decision_log_shows_flag_diff_and_comparisons(page: str) -> None:
    decisions = page[page.index('<section id="decisions">') : page.index('<section id="perf')]
    assert (
        "<code>itl-growth</code></td><td><code>0.03</code></td><td><code>0.09</code>" in decisions
    )
    assert "<code>itl-msec</code></td><td><code>(added)</code></td><td><code>2</code>" in decisions
    assert "0.73–0.99" in decisions  # bigger-batches vs its parent at C=16, worse
    assert 'class="verdict v-worse">worse' in decisions


def test_methods_define_every_metric_from_the_analysis_docstring(page: str) -> None:
    methods = page[page.index('<section id="methods">') : page.index('<section id="reproduce">')]
    for metric in metrics.LATENCIES + metrics.THROUGHPUTS:
        assert f"<dt><code>{metric}</code></dt>" in methods
    assert "Welch" in methods
    assert "equivalent" in methods and "margin m is 5%" in methods


def test_reproducibility_has_campaign_file_and_commands(page: str, sample: Run) -> None:
    repro = page[page.index('<section id="reproduce">') :]
    assert sample.campaign_file.sha256 in repro
    assert "[[experiment]]" in repro and "id = &#34;typo-in-flag&#34;" in repro
    assert "reportgen run campaigns/demo.toml" in repro
    assert "-m reportgen.sim --port 18427 --ttft-ms 30 --itl-ms 3" in repro


def test_environment_says_no_gpu_and_why(page: str) -> None:
    assert "No GPU visible" in page
    assert "NVML Shared Library Not Found" in page


def test_incomplete_run_gets_a_banner(run_dir: Path, sample: Run) -> None:
    data = sample.dump()
    data.update(
        status="incomplete",
        finished_at="2026-11-29T15:13:40Z",
        status_reason="interrupted by the user (Ctrl-C or SIGTERM)",
    )
    for e in data["experiments"][2:]:
        e.update(status="pending", levels=[], by_level=[], decision=None)
        for key in ("command", "log_tail", "reason"):
            e.pop(key, None)
    _save(run_dir, data)
    page = render(run_dir, pdf=False).html.read_text(encoding="utf-8")
    banner = re.search(r'<div class="banner banner-incomplete".*?</div>', page, re.S)
    assert banner is not None
    assert "INCOMPLETE" in banner.group(0)
    assert "interrupted by the user (Ctrl-C or SIGTERM)" in banner.group(0)
    assert 'class="badge v-pending">not started</span>' in page


def test_user_text_is_escaped_everywhere(sample: Run) -> None:
    data = _copy_of(sample)
    exp = data.experiments[1]
    old = exp.id
    exp.id, exp.why, exp.expect = EVIL, f"why {EVIL}", "</pre><script>x</script>"
    data.best = EVIL
    data.experiments[4].log_tail = "</pre><script>alert(2)</script>"
    data.campaign["campaign"]["title"] = f"title {EVIL}"
    data.campaign_file.text += f"\n# {EVIL}\n"
    for e in data.experiments:
        if e.parent == old:
            e.parent = EVIL
    page = render_html(data)
    body, _, embedded = page.partition('<script type="application/json" id="reportgen-data">')
    assert "<script" not in body.lower()
    # the embedded results carry the text as data, with no "<" that could close the element
    data_text = embedded.split("</script>")[0]
    assert "<" not in data_text and "\\u003cscript\\u003ealert(1)" in data_text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # the chart legend (SVG text written by matplotlib) is escaped too
    svg = charts.throughput(view.build(data).series)
    assert "<script" not in svg and "&lt;script&gt;" in svg


@pytest.mark.usefixtures("fresh_charts")
def test_charts_are_inline_svg_and_deterministic(sample: Run) -> None:
    series = view.build(sample).series
    first, second = charts.all_charts(series), charts.all_charts(series)
    assert first == second
    for svg in first.values():
        assert svg.startswith("<svg")
        # the only URLs are the SVG namespace names, which are never fetched
        assert set(re.findall(r"https?://[^\s\"']*", svg)) <= {
            "http://www.w3.org/2000/svg",
            "http://www.w3.org/1999/xlink",
        }
        assert 'id="figure_1"' not in svg
    # each chart's clip-path and marker ids are distinct from the other's
    ids = [set(re.findall(r'id="([^"]+)"', str(svg))) for svg in first.values()]
    assert not ids[0] & ids[1]


def test_chart_labels_are_literal(sample: Run) -> None:
    data = _copy_of(sample)
    data.experiments[1].id = "cost $5 or $6"  # would be mathtext
    data.experiments[2].id = "_leading-underscore"  # would be left out of the legend
    data.experiments[3].id = "x" * 80  # longer than campaign ids may be
    svg = charts.throughput(view.build(data).series)
    assert "cost $5 or $6" in svg
    assert "_leading-underscore" in svg
    assert f"4. {'x' * 31}…{'x' * 31}" in svg  # cut in the middle, numbered as in the tables


def test_template_never_marks_text_safe() -> None:
    source = (html.TEMPLATES / html.TEMPLATE).read_text(encoding="utf-8")
    assert not re.search(r"\|\s*safe\b", source)


# -- numbers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (187.85166850382805, "187.9"),
        (4.3133, "4.31"),
        (1373.0, "1,373"),
        (0.0, "0.00"),
        (None, "–"),
        (float("nan"), "–"),
    ],
)
def test_fmt_num(value: float | None, text: str) -> None:
    assert fmt.fmt_num(value) == text


def test_level_table_ratio_is_against_the_baseline(sample: Run) -> None:
    report = view.build(sample)
    fast = report.experiments[1]
    c1 = [row for row in fast.levels if row.concurrency == "1"]
    assert [row.label for row in c1] == ["this", "baseline"]
    assert c1[0].output.value == "227.0" and c1[1].output.value == "187.9"
    assert c1[0].ratio == "1.21×"  # 227.011 / 187.852


def _level_rows(page: str, index: int) -> tuple[list[str], list[list[str]]]:
    """The header cells and the rows (cell texts) of experiment ``index``'s level table."""
    block = page[page.index(f'<h4 id="levels-{index}">') :]
    table = block[: block.index("</table>")]
    heads = [re.sub(r"<[^>]+>", "", h).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", table)]
    rows = [
        [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        for tr in re.findall(r"<tr class=\"[^\"]*\">(.*?)</tr>", table, re.S)
    ]
    return heads, rows


def test_level_tables_show_achieved_beside_target_concurrency_and_requests(
    page: str, sample: Run
) -> None:
    heads, rows = _level_rows(page, 1)  # the baseline's
    assert heads[:3] == ["C", "achieved", "run"] and heads[11:13] == ["n", "errors"]
    assert heads[9] == "TPOT (ms)"  # the trade-off chart's axis, in the table too
    by_c = {int(r[0]): r for r in rows}
    for c in (1, 4, 16):
        runs = [lv.summary for lv in sample.baseline.levels if lv.concurrency == c]
        mean = sum(float(s.achieved_concurrency or 0) for s in runs) / len(runs)
        # under 0.9 x C marked beside the number
        assert by_c[c][1] == fmt.fmt_num(mean) + (" (low)" if mean < 0.9 * c else "")
        assert by_c[c][-2] == str(runs[0].ok)  # n: 32 requests behind each percentile
    # 32 requests at C=16: two waves, 13 in flight on average: not the load it is named by
    assert by_c[16][1] == "13.3 (low)" and "(low)" not in by_c[4][1]  # 3.82 of 4
    assert "“achieved” the mean number of requests in flight" in page
    # the Markdown summary too, beside the objective's levels
    md = exports.markdown(view.build(sample))
    assert "| achieved C |" in md and "| 0.99 / 13.3 |" in md


# -- the PDF --------------------------------------------------------------------------------


def test_pdf_contains_every_experiment_and_the_baseline_number(
    rendered: Rendered, sample: Run
) -> None:
    assert rendered.pdf is not None
    reader = pypdf.PdfReader(rendered.pdf)
    assert len(reader.pages) >= 3
    text = "\n".join(p.extract_text() for p in reader.pages)
    for exp_id in IDS:
        assert exp_id in text
    base_c1 = sample.experiments[0].aggregate(1)
    assert base_c1 is not None
    number = fmt.fmt_num(base_c1.mean("output_tok_s"))
    assert number == "187.9"
    assert number in text
    assert "Simulated engine" in text
    assert f"1 / {len(reader.pages)}" in text  # page numbers in the footer


def test_pdf_printer_ignores_no_style_and_is_reproducible(page: str, rendered: Rendered) -> None:
    from reportgen.render import chart_inputs

    assert rendered.pdf is not None
    run_dir = rendered.pdf.parent
    assert pdf.html_to_pdf(page, run_dir).warnings == []  # the screen page too
    data = results.load(run_dir)
    telemetry, latencies = chart_inputs(run_dir, data)
    pages = render_pages(data, telemetry, table_hashes(run_dir), latencies, for_print=True)
    screen, for_print = pages.screen, pages.printed
    assert screen == page and for_print is not None
    # the page for print leaves out what only a screen uses, and says where it is
    assert "reportgen-data" not in for_print and "reportgen-data" in page
    printed = pdf.html_to_pdf(for_print, rendered.pdf.parent, pages.chart_pdfs)
    assert printed.warnings == []  # every CSS rule the PDF needs is one WeasyPrint applies
    # no clock and no random identifier: the same HTML prints to the same bytes
    assert printed.data == rendered.pdf.read_bytes()


def test_printed_report_has_nothing_past_the_page_edge(sample: Run) -> None:
    """Long unbreakable text where users put it (ids, flag values, model paths, log lines,
    check evidence) and many levels: every table still fits the page's width."""
    data = _copy_of(sample)
    long = "x" * 40
    path = "/models/" + "very-long-model-directory-name-" * 6 + "Qwen3.5-397B-A17B-NVFP4"
    exp = data.experiments[1]
    exp.id = "speculative-nextn-mtp-with-four-draft-tokens-and-topk-one-" + long[:6]
    spec = json.dumps({"method": "eagle3", "model": path})
    exp.flag_diff.append(FlagChange(key="model-path", kind="added", after=path))
    exp.flag_diff.append(FlagChange(key="speculative-config", kind="added", after=spec))
    exp.checks = [Check(id="campaign_0", title=f"log shows /{long}{long}/", status="fail",
                        evidence="line " + "A" * 300, hint=path)]  # fmt: skip
    exp.log_evidence = LogEvidence(found={"server_args": "server_args=ServerArgs(" + "k" * 400})
    data.experiments[4].log_tail = "E" * 500
    page = render_html(data)
    assert pdf.overflowing(page, FIXTURE) == []
    printed = render_pages(data, for_print=True).printed
    assert printed is not None and pdf.overflowing(printed, FIXTURE) == []


def test_printed_report_of_twenty_experiments_fits_the_page(sample: Run) -> None:
    """A wide campaign: on paper the checks matrix (a column per experiment) is headed by
    the experiments' numbers, at most twelve a table, and split into tables alike."""
    data = _copy_of(sample)
    extra = []
    for n in range(16):
        exp = data.experiments[1 + n % 3].model_copy(deep=True)
        exp.id = f"variant-{n:02d}-of-a-longer-experiment-name"
        exp.parent = data.experiments[0].id
        extra.append(exp)
    data.experiments.extend(extra)
    for i, exp in enumerate(data.experiments):
        exp.checks = [
            Check(id="errors", title="every request succeeded", status="pass",
                  evidence="0 of 600 failed"),
            Check(id="clocks", title="SM clocks steady", status="warn" if i % 5 else "pass",
                  evidence="1,980 MHz"),
        ]  # fmt: skip
    printed = render_pages(data, for_print=True).printed
    assert printed is not None
    assert len(data.experiments) == 21
    assert printed.count('<table class="checks-matrix">') == 2  # 11 and 10 experiments
    matrix = printed[printed.index('<table class="checks-matrix">') :]
    heads = re.findall(r'<th class="status">([^<]*)</th>', matrix[: matrix.index("</thead>")])
    assert heads == [str(n) for n in range(1, 12)]
    assert pdf.overflowing(printed, FIXTURE) == []


def _telemetry_columns(gpus: int, seconds: float, power: bool = True) -> dict[str, Any]:
    rng = np.random.default_rng(gpus)
    t = np.repeat(np.arange(0, seconds, 0.05), gpus)
    gpu = np.tile(np.arange(gpus, dtype=float), t.size // gpus)
    clock = 1980 - 40 * rng.random(t.size)
    watts = 300 + 200 * rng.random(t.size) if power else np.full(t.size, np.nan)
    util = 100 * rng.random(t.size)
    memory = 1e11 + 1e9 * rng.random(t.size)
    return {"t": t, "gpu": gpu, "sm_clock_mhz": clock, "power_w": watts,
            "util_gpu_pct": util, "mem_used_bytes": memory}  # fmt: skip


def _percentiles(levels: list[int], scale: float) -> dict[int, dict[str, list[float]]]:
    q = np.linspace(0, 1, 101)
    return {
        c: {"ttft_ms": list(scale * c * (1 + q)), "e2e_ms": list(10 * scale * c * (1 + q))}
        for c in levels
    }


@pytest.mark.usefixtures("fresh_charts")
def test_charts_drawn_on_kept_figures_are_byte_identical_to_new_ones() -> None:
    """The per-experiment charts reuse one figure per kind and process; whatever was drawn
    before (more levels, more GPUs, a legend, an empty panel), a chart comes out the same."""
    windows = [(0.0, 30.0, "C=1"), (40.0, 70.0, "C=4"), (80.0, 99.0, "")]
    eight = [1, 2, 4, 8, 16, 32, 64, 128]
    todo = [
        charts.distributions_chart("dist-1", _percentiles(eight, 1), eight),
        charts.distributions_chart("dist-2", _percentiles([1, 4], 3), [1, 4]),
        charts.distributions_chart("dist-3", {1: {"ttft_ms": [5.0, 6.0]}}, [1, 4]),  # no e2e
        charts.telemetry_chart("telemetry-1", _telemetry_columns(4, 100), windows),
        charts.telemetry_chart("telemetry-2", _telemetry_columns(1, 20), windows[:1]),
        charts.telemetry_chart("telemetry-3", _telemetry_columns(2, 50, power=False), windows),
    ]
    saved = figures.REUSE
    try:
        figures.REUSE = False
        new = {c.name: charts.draw(c, pdf=True)[1:] for c in todo}
        figures.REUSE = True
        for order in (todo, todo[::-1], todo[1::2] + todo[::2]):
            kept = {c.name: charts.draw(c, pdf=True)[1:] for c in order}
            assert kept == new
    finally:
        figures.REUSE = saved


def test_a_partial_runs_summary_says_what_ran_what_stopped_and_what_never_started(
    sample: Run,
) -> None:
    """After one Ctrl-C in the baseline, its levels measured so far are said, not "no
    measurements" above its row of numbers; after one in the second experiment, the count
    says one was tried, one interrupted and the rest never started (not "N tried")."""
    from reportgen.render import exports, view

    data = _copy_of(sample)
    data.status = "incomplete"
    base = data.experiments[0]
    base.status, base.decision = "interrupted", None
    for e in data.experiments[1:]:
        e.status, e.decision, e.levels, e.by_level = "pending", None, [], []
    report = view.build(data)
    assert report.summary.startswith(
        "The baseline (baseline) was interrupted after measuring C=1, C=4, C=16: with the "
        "baseline "
        "unfinished, nothing was compared with it."
    )
    assert "has no measurements" not in exports.markdown(report)

    data = _copy_of(sample)
    data.status, data.best = "incomplete", data.experiments[0].id
    data.experiments[1].decision.verdict = "rejected"  # tried, not adopted
    data.experiments[2].status, data.experiments[2].decision = "interrupted", None
    for e in data.experiments[3:]:
        e.status, e.decision, e.levels, e.by_level = "pending", None, [], []
    said = view.build(data).summary
    assert said.endswith(
        f"1 tried, none adopted over it; 1 interrupted; {len(data.experiments) - 3} not started."
    ), said
    # the first page, the tables, report.md and the console's table say the same
    report = view.build(data)
    stopped, waiting = data.experiments[2].id, [e.id for e in data.experiments[3:]]
    assert stopped not in dict(report.brief.failed)
    assert not set(waiting) & set(dict(report.brief.failed))
    assert [i for i, _ in report.brief.unfinished] == [stopped, *waiting]
    for x in report.brief.expectations:
        if x.id in waiting:
            assert (x.outcome, x.judged) == ("not started", "not judged"), x
        if x.id == stopped:
            assert (x.outcome, x.judged) == ("interrupted before it finished", "not judged"), x
    assert [v.verdict for v in report.experiments[2:]] == ["interrupted"] + ["not started"] * len(
        waiting
    )
    md = exports.markdown(report)
    for eid in waiting:
        assert re.search(rf"\| {re.escape(eid)} \| not started \|", md), md
    assert re.search(rf"\| {re.escape(stopped)} \| interrupted \|", md), md
    console = Console(record=True, width=200)
    summary.summary_table(console, data)
    lines = console.export_text().splitlines()
    for eid in waiting:
        assert any(eid in line and "not started" in line for line in lines), lines
    assert any(stopped in line and "interrupted" in line for line in lines), lines
    # the charts' legends too (it was "failed; levels before it")
    from reportgen.render import figures

    drawn = {s.id: figures._legend_name(s) for s in report.series}
    assert drawn[stopped].endswith("(interrupted; levels before it)"), drawn


def test_the_printed_conclusion_leaves_out_what_the_tables_beside_it_show() -> None:
    """In print, a decision says only its conclusion: its flag changes and its per-level
    sentence (the tables beside it show both) are left out. The words are made from the
    decision's structure (``explain``), the same words the run stored when it decided."""
    from reportgen.analysis import adopt
    from reportgen.analysis.explain import explain

    runs = [results.load(ROOT / "docs" / "examples" / x) for x in ("vllm-h100", "sglang-h100")]
    seen = 0
    for run, e in ((r, e) for r in runs for e in r.experiments):
        d = e.decision
        if d is None or not d.vs_parent or not e.parent:
            continue
        words = explain(run, e, d)
        assert words.text == d.explanation, e.id  # today's words are the ones it stored
        per_level = adopt.per_level(run.metric, e.parent, d.vs_parent)
        said = words.short
        assert said and per_level not in said and "  " not in said, said
        assert not (e.flag_diff and said.startswith("Changed from ")), said
        # nothing else is left out, and nothing added
        rest = " ".join(d.explanation.replace(per_level, " ").split())
        assert rest.endswith(said), (said, rest)
        seen += 1
    assert seen >= 5


def test_a_structured_expectation_is_judged_as_written(sample: Run) -> None:
    """``expect = [{ verdict, at, metric, text }]``: judged level by level as written, with
    no reading of English (words that would read otherwise change nothing)."""
    from reportgen.render.expectations import expectations

    data = _copy_of(sample)
    e = next(x for x in data.experiments[1:] if x.decision and x.decision.vs_parent)
    comps = {c.point: str(c.verdict) for c in e.decision.vs_parent}
    point, verdict = next(iter(comps.items()))
    other = "better" if verdict != "better" else "worse"
    e.expect = "Faster everywhere, surely."  # the words alone would read "better"
    e.expects = [{"verdict": verdict, "at": [point.concurrency]}]
    got = next(x for x in expectations(data) if x.id == e.id)
    assert (got.reading, got.judged) == (f"{verdict} at C={point.concurrency}", "met"), got
    e.expects = [{"verdict": other, "at": [point.concurrency]}]
    got = next(x for x in expectations(data) if x.id == e.id)
    assert got.judged == "not met", got


def test_a_campaign_written_for_another_gpu_says_so_on_page_one() -> None:
    """The H100 runs of a campaign whose title says "one H200": page one says which GPU the
    numbers are, the title left as written; a run on the GPU its title names says nothing."""
    from reportgen.render.header import gpu_notice

    h100 = results.load(ROOT / "docs" / "examples" / "vllm-h100")
    assert "H200" in str(h100.info.get("title"))
    said = gpu_notice(h100)
    assert said.startswith("Written for H200") and "NVIDIA H100 80GB HBM3" in said
    assert said in exports.markdown(view.build(h100))
    assert gpu_notice(results.load(ROOT / "docs" / "examples" / "h200")) == ""


def test_the_report_states_the_runs_findings_and_computes_none() -> None:
    """What bounded each level and the levels run without CUDA graphs come from the run's
    findings (``Run.findings``): the report says what they hold, and without findings it
    says nothing of either rather than working them out itself."""
    from reportgen.analysis.findings import attach
    from reportgen.results.findings import Uncovered

    run = results.load(ROOT / "docs" / "examples" / "sglang-h100")
    bare = view.build(run)
    assert not any(x.bound_by or x.graphs for x in bare.experiments)
    attach(run)
    assert run.findings is not None
    e = run.experiments[1]
    run.findings.graphs[e.id] = [Uncovered(concurrency=64, share=0.75, captured=16, running=64)]
    views = {x.id: x for x in view.build(run).experiments}
    said = [b.said for b in run.findings.bounds[e.id]]
    assert views[e.id].bound_by.startswith(f"{run.findings.bounds[e.id][0].point.label} {said[0]}")
    assert views[e.id].graphs == (
        "C=64: 75% of decode steps without a CUDA graph (the largest captured is 16)"
    )
