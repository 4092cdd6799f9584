"""The HTML report: the view model placed into a jinja2 template, one self-contained file.

Self-contained means the file works when mailed, archived or opened years later offline: the
stylesheet is inlined, charts are inline SVG, and nothing is fetched (no fonts, scripts or
images from anywhere). The same HTML is what the PDF is printed from.

Escaping: the environment autoescapes every variable. The only values that reach the page
unescaped are ``Markup`` objects built here or in ``charts`` from our own files and code (the
stylesheet and the chart SVG); the template never uses ``|safe``, so text from a results file
(experiment ids, reasons, log lines, the campaign file) is always shown as text.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from reportgen.render.content import Report
from reportgen.results.embed import stamp

# The templates: installed as reportgen/templates/ by a wheel; in a source tree (or an
# editable install) the top-level templates/ folder (render/ -> reportgen/ -> the root).
_PACKAGE = Path(__file__).resolve().parents[1]
TEMPLATES = next(
    (p for p in (_PACKAGE / "templates", _PACKAGE.parent / "templates") if p.is_dir()),
    _PACKAGE / "templates",
)
TEMPLATE = "report.html.j2"
STYLESHEET = "report.css"

VERDICT_CLASSES = (
    "adopted",
    "rejected",
    "equivalent",
    "inconclusive",
    "failed",
    "baseline",
    "pending",
    "better",
    "worse",
    "improved",
    "regressed",
)


def verdict_class(verdict: str) -> str:
    """A CSS class for a verdict badge; unknown verdicts get the neutral style."""
    if verdict == "not started":  # a pending experiment of a run that has ended
        verdict = "pending"
    return f"v-{verdict}" if verdict in VERDICT_CLASSES else "v-other"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The jinja2 environment (built once: loading and compiling the template is most of the
    cost of a small report)."""
    if not (TEMPLATES / TEMPLATE).is_file():
        # Only in a broken install: say where we looked instead of a bare TemplateNotFound.
        raise FileNotFoundError(f"report template not found: {TEMPLATES / TEMPLATE}")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,  # a typo in the template fails loudly, not blankly
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["verdict_class"] = verdict_class
    env.filters["plural"] = _plural
    return env


@functools.lru_cache(maxsize=1)
def stylesheet() -> Markup:
    """The CSS, inlined into <style>. Markup: it is our own file, not user text, and escaping
    would turn its quotes and child selectors into entities."""
    return Markup((TEMPLATES / STYLESHEET).read_text(encoding="utf-8"))


def render_page(
    report: Report,
    charts: Mapping[str, Markup],
    data: Markup | None = None,
    for_print: bool = False,
) -> str:
    """The report's HTML from its view model, chart SVGs and the embedded data (JSON already
    made safe inside a script element by ``results.embed.embed``). ``for_print``: the page the PDF
    is printed from, without what only a screen can use (collapsed details, the embedded
    data), so the printer lays out less."""
    context: dict[str, Any] = {
        "data": data,
        "for_print": for_print,
        "r": report,
        "h": report.header,
        "obj": report.objective,
        "charts": charts,
        "css": stylesheet(),
        "lone_print": for_print and lone(report),
        "sections": (shown := sections(report, for_print)),
        "number": {anchor: i + 1 for i, (anchor, _) in enumerate(shown)},
    }
    page = environment().get_template(TEMPLATE).render(context)
    return page if for_print else stamp(page)


def sections(report: Report, for_print: bool = False) -> list[tuple[str, str]]:
    """The report's sections, in order: all of them but the references where the campaign
    names none (an empty section is a page of boilerplate in print), and in print the
    decision log of a run of one configuration (it decided nothing: its why and its command
    are on page one, the rest in the HTML report)."""
    short = for_print and lone(report)
    return [
        s
        for s in SECTIONS
        if (s[0] != "references" or report.references) and not (short and s[0] == "decisions")
    ]


def lone(report: Report) -> bool:
    """A run of one configuration (``reportgen bench``): on paper it is kept to what it can
    say, with no decision log, trade-off chart, contents or verdict rules."""
    return len(report.experiments) == 1


# The table of contents and the section anchors, in report order.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("summary", "Summary"),
    ("decisions", "Decision log"),
    ("performance", "Throughput and latency"),
    ("references", "References"),
    ("assumptions", "Assumptions checked"),
    ("environment", "Environment"),
    ("methods", "Methods"),
    ("reproduce", "Reproducibility"),
)
