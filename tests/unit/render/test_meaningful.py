"""The report claims only what the run did: a bench run against one running server does not
say its repetitions were split over server starts, and a server that speculated nothing gets
no table of accepted lengths (SGLang exports its acceptance-length gauge as 0 then)."""

from __future__ import annotations

import lzma
import re

from reportgen.analysis.checks_engine import spec_length
from reportgen.engines import get
from reportgen.results.levels import Level
from tests.conftest import ROOT

EXAMPLES = ROOT / "docs" / "examples"


def page(name: str) -> str:
    return lzma.decompress((EXAMPLES / name / "report.html.xz").read_bytes()).decode()


def test_one_running_server_is_not_called_two_starts() -> None:
    bench = page("bench-sglang-h200")  # `reportgen bench` of a server already running
    assert "split over" not in bench
    # the campaign that started each experiment's server twice says so
    assert "repetitions were split over 2 server starts" in page("sglang-h200")


def test_nothing_speculated_gives_no_acceptance_table() -> None:
    assert "accepted length</th>" not in page("bench-sglang-h200")
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


def test_an_empty_references_section_is_left_out_and_the_rest_numbered_on() -> None:
    bench = page("bench-sglang-h200")  # its campaign names no [[reference]]
    assert 'id="references"' not in bench and "names no reference numbers" not in bench
    numbered = re.findall(r"<h2>(\d)\. ([^<]+)</h2>", bench)
    assert [int(n) for n, _ in numbered] == list(range(1, len(numbered) + 1))
    assert ("4", "Assumptions checked") in numbered
    toc = bench[bench.index('<nav class="toc"') : bench.index("</nav>")]
    assert "References" not in toc and toc.count("<li>") == len(numbered)
    golden = (ROOT / "tests" / "golden" / "sample-report.html").read_text()
    assert "<h2>4. References</h2>" in golden and "<h2>5. Assumptions checked</h2>" in golden
