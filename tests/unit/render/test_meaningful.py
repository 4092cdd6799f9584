"""The report claims only what the run did: a bench run against one running server does not
say its repetitions were split over server starts, a server that speculated nothing gets no
table of accepted lengths (SGLang exports its acceptance-length gauge as 0 then), and a
campaign that names no published numbers gets no References section."""

from __future__ import annotations

import lzma
import re
import shutil
from pathlib import Path

from pypdf import PdfReader

from reportgen import results
from reportgen.analysis.checks_engine import spec_length
from reportgen.engines import get
from reportgen.render import axes, view
from reportgen.render.report import render_pages
from reportgen.results.levels import Level
from tests.builders import widened
from tests.conftest import ROOT, reportgen_main

EXAMPLES = ROOT / "docs" / "examples"
BENCH = EXAMPLES / "bench-sglang-h200"  # `reportgen bench` of an SGLang server already running


def test_one_running_server_is_not_called_two_starts() -> None:
    said = " ".join(view.build(results.load(BENCH)).methods.load)
    assert "split over" not in said
    # the campaign that started each experiment's server twice says so
    campaign = " ".join(view.build(results.load(EXAMPLES / "sglang-h100")).methods.load)
    assert "repetitions were split over 2 server starts" in campaign


def test_nothing_speculated_gives_no_acceptance_table() -> None:
    assert all(e.spec == [] for e in view.build(results.load(BENCH)).experiments)
    counters = dict(get("sglang").counters)
    gauge = counters["spec_accept_length"]
    zero = Level.model_validate(
        {"concurrency": 1, "repetition": 0, "engine_metrics": {"gauges": {gauge: 0.0}}}
    )
    assert spec_length(zero, counters) == (None, None)
    two = Level.model_validate(
        {"concurrency": 1, "repetition": 0, "engine_metrics": {"gauges": {gauge: 2.4}}}
    )
    assert spec_length(two, counters) == (2.4, None)


def test_an_empty_references_section_is_left_out_and_the_rest_numbered_on(
    tmp_path: Path,
) -> None:
    copy = shutil.copytree(BENCH, tmp_path / "run")  # its campaign names no [[reference]]
    assert reportgen_main("render", copy, "--no-pdf").returncode == 0
    bench = lzma.decompress((copy / "report.html.xz").read_bytes()).decode()
    assert 'id="references"' not in bench and "names no reference numbers" not in bench
    numbered = re.findall(r"<h2>(\d)\. ([^<]+)</h2>", bench)
    assert [int(n) for n, _ in numbered] == list(range(1, len(numbered) + 1))
    assert ("4", "Assumptions checked") in numbered
    toc = bench[bench.index('<nav class="toc"') : bench.index("</nav>")]
    assert "References" not in toc and toc.count("<li>") == len(numbered)
    golden = (ROOT / "tests" / "golden" / "sample-report.html").read_text()
    assert "<h2>4. References</h2>" in golden and "<h2>5. Assumptions checked</h2>" in golden


def test_a_single_configuration_prints_no_verdict_rules_and_no_second_copy_of_its_command() -> None:
    """On paper, a run of one configuration (a bench run) compares nothing: no list of verdict
    rules, and its command (or the address it was found at) said once, in the summary."""
    printed = render_pages(results.load(BENCH), for_print=True).printed or ""
    text = " ".join(re.sub(r"<[^>]+>", " ", printed).split())
    assert "One configuration was measured, so nothing was compared and no verdict taken" in text
    assert "An experiment is then:" not in text and "Server commands" not in text
    # said once: by the banner on page one (the summary's line repeating it is left out)
    assert text.count("Not started by reportgen") == 1 and "did not start it" not in text
    campaign = render_pages(results.load(EXAMPLES / "sglang-h100"), for_print=True).printed or ""
    assert "An experiment is then:" in campaign and "Server commands" in campaign


def test_the_printed_level_table_headers_and_the_value_axis_label_stand_apart(
    tmp_path: Path,
) -> None:
    """The print's level table had "achieved" and "run" run together and "tok/" split from
    "s"; the log-scale throughput chart's label fell off the figure's left edge."""
    copy = shutil.copytree(BENCH, tmp_path / "run")
    assert reportgen_main("render", copy).returncode == 0
    text = " ".join(p.extract_text() for p in PdfReader(copy / "report.pdf").pages)
    assert "C achieved run" in text and "achievedrun" not in text
    assert "tok/\ns" not in text and text.count("tok/s req/s") == 1
    # (matplotlib draws the label as glyphs, at an x the figure's left margin sets)
    assert axes._left(True) > axes._left(False)


def test_every_interval_beside_a_ratio_says_its_own_confidence() -> None:
    """The table of every headline metric against the baseline said "95% CI" over intervals
    at the decision's level (97.5% with two objective levels). A run decided today has every
    metric's interval at that one level; one decided by the earlier bootstrap of p99s says
    which intervals are at which."""
    today = view.build(results.load(EXAMPLES / "sglang-h100"))
    said = {e.baseline_ci for e in today.experiments if e.baseline_table}
    assert said == {"97.5% CI"}
    earlier = view.build(results.load(EXAMPLES / "h200"))
    said = {e.baseline_ci for e in earlier.experiments if e.baseline_table}
    assert said == {"98.3% CI; 95% CI for ttft_ms p99, e2e_ms p99"}
    page = render_pages(results.load(EXAMPLES / "sglang-h100")).screen
    assert "every headline metric, ratio (97.5% CI)" in page and "(95% CI)" not in page


def test_a_printed_bench_run_leaves_out_what_one_configuration_cannot_say(tmp_path: Path) -> None:
    """On paper a run of one configuration has no decision log (it decided nothing; its why
    and command are on page one), no trade-off chart (it trades off against nothing: its
    points are the by-level table's) nor throughput chart (the by-level table has its
    numbers), its numbers before its chart, the checks that passed everywhere on one line and
    those that did not in one table, and the host fields the OS would not show named on one
    line: four pages, a rate sweep's too."""
    printed = render_pages(results.load(BENCH), for_print=True).printed or ""
    text = " ".join(re.sub(r"<[^>]+>", " ", printed).split())
    assert "Decision log" not in text and 'id="decisions"' not in printed
    # no throughput chart either (the by-level table has its throughputs): the latencies' is
    # Figure 1
    assert "Figure 3" not in text and "Figure 2" not in text
    assert "Figure 1. Time to first token" in text
    assert text.index("By level") < text.index("Figure 1")
    assert "2. Throughput and latency" in text and "3. Assumptions checked" in text
    assert "Passed (or had nothing to judge) in every experiment: Requests succeeded," in text
    # one configuration's checks matrix would be one column: its warnings' table says it
    assert 'class="checks-matrix"' not in printed
    problems = text[text.index("Warnings and failures") :]
    assert problems.index("Repetitions agree") < problems.index("4. Environment")
    assert "Not readable on this host: CPU max MHz, frequency governor, turbo / boost" in text
    # the screen page keeps all of it
    screen = render_pages(results.load(BENCH)).screen
    assert 'id="decisions"' in screen and "Figure 3" in screen
    copy = shutil.copytree(BENCH, tmp_path / "run")
    assert reportgen_main("render", copy).returncode == 0
    assert len(PdfReader(copy / "report.pdf").pages) == 4  # 6 before
    sweep = shutil.copytree(EXAMPLES / "bench-rates-sglang-h200", tmp_path / "sweep")
    assert reportgen_main("render", sweep).returncode == 0
    assert len(PdfReader(sweep / "report.pdf").pages) == 4  # a rate sweep: 5 before


def test_a_campaign_of_ten_experiments_prints_in_ten_pages(tmp_path: Path) -> None:
    """The print of a campaign is held to about a page an experiment, the rest in the HTML:
    each experiment's decision in a few lines (its flags in one row, its ratios to its parent
    in one sentence), every experiment's levels in one table, the checks that passed
    everywhere named on one line. A campaign of ten experiments (the SGLang steady-state run
    widened to ten) prints in at most ten pages, the committed campaigns in fewer."""
    run = widened(EXAMPLES / "sglang-h100", tmp_path / "ten", 10)
    assert reportgen_main("render", run).returncode == 0
    pages = PdfReader(run / "report.pdf").pages
    assert len(pages) <= 10  # 17 before
    text = " ".join(" ".join(p.extract_text().split()) for p in pages)
    # one table of every experiment's levels; each one's own table is on screen
    printed = render_pages(results.load(run), for_print=True).printed or ""
    assert printed.count('class="levels all-levels"') == 1 and 'class="level-block"' not in printed
    ids = [e.id for e in results.load(run).experiments]
    assert len(ids) == 10 and all(f">{i}. {x}</td>" in printed for i, x in enumerate(ids, 1))
    assert "C=64 0.82× (0.73–0.92) worse, ±15.9% detectable" in text
    screen = lzma.decompress((run / "report.html.xz").read_bytes()).decode()
    assert screen.count('class="level-block"') == 10 and "Each level’s own warm-up" in screen
    for name, most in (("h200", 10), ("sglang-h100", 8), ("vllm-h100", 8)):
        assert len(PdfReader(EXAMPLES / name / "report.pdf").pages) <= most, name
