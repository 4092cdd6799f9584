"""Golden files: the sample run's report, Markdown summary and CSV tables, byte for byte.

A change to what a report says shows up here as a diff to review. When it is intended, write
the new files with ``pytest tests/unit/render/test_golden.py --update-golden`` (or ``make
golden``) and commit them with the change. Charts are compared apart (``test_render``: two
renderings give the same SVG); here each is replaced by a marker, so a matplotlib release that
draws a path a little differently does not hide what changed in the text. The stylesheet
(templates/report.css, inlined as it is) and the results the page embeds for ``verify``
(``test_verify`` reads them back) are replaced by markers too: they were two thirds of the
file and said nothing a reviewer reads.
"""

from __future__ import annotations

import difflib
import functools
import re

import pytest

from reportgen import results
from reportgen.analysis.findings import attach
from reportgen.render import exports, render_html, view
from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "sample-run"
GOLDEN = ROOT / "tests" / "golden"
_SVG = re.compile(r'<svg class="chart".*?</svg>', re.DOTALL)
_STYLE = re.compile(r"<style>.*?</style>", re.DOTALL)
_DATA = re.compile(
    r'(<script type="application/json" id="reportgen-data">).*?(</script>)', re.DOTALL
)


@functools.cache
def _outputs() -> dict[str, str]:
    data = attach(results.load(FIXTURE))  # its findings, as `reportgen render` gives them
    page = render_html(data)
    charts = iter(range(1, 1000))
    masked = _SVG.sub(lambda m: f"<svg><!-- chart {next(charts)} --></svg>", page)
    masked = _STYLE.sub("<style><!-- templates/report.css --></style>", masked, count=1)
    masked = _DATA.sub(r"\1<!-- the run's results -->\2", masked, count=1)
    out = {"sample-report.html": masked, "sample-report.md": exports.markdown(view.build(data))}
    out.update({f"sample-{name}": body for name, body in exports.tables(data).items()})
    return out


# The golden files there are: parametrized by name, so that nothing is rendered while pytest
# collects (the test below checks that the outputs are exactly these).
NAMES = sorted(p.name for p in GOLDEN.glob("sample-*"))


def test_every_output_has_a_golden_file(request: pytest.FixtureRequest) -> None:
    if request.config.getoption("--update-golden"):
        for name, body in _outputs().items():
            (GOLDEN / name).write_text(body, encoding="utf-8")
        return
    assert sorted(_outputs()) == NAMES, (
        "outputs and golden files differ: run "
        "pytest tests/unit/render/test_golden.py --update-golden"
    )


@pytest.mark.parametrize("name", NAMES)
def test_output_matches_its_golden_file(name: str, request: pytest.FixtureRequest) -> None:
    got = _outputs()[name]
    path = GOLDEN / name
    if request.config.getoption("--update-golden"):
        path.write_text(got, encoding="utf-8")
        return
    assert path.exists(), (
        f"{path} is missing: run pytest tests/unit/render/test_golden.py --update-golden"
    )
    want = path.read_text(encoding="utf-8")
    if got != want:
        diff = difflib.unified_diff(
            want.splitlines(), got.splitlines(), f"golden/{name}", "now", lineterm="", n=1
        )
        shown = "\n".join(line[:200] for line in list(diff)[:60])
        pytest.fail(
            f"{name} differs from its golden file (if intended: "
            "pytest tests/unit/render/test_golden.py --update-golden"
            f", then commit tests/golden/):\n{shown}"
        )
