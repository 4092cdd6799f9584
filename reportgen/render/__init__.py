"""The render stage: a run's saved results in, report.html, report.pdf and exports out.

    results.json --results.load--> Run --view.build--> Report (``content``: strings, pure)
                                     \\--charts (figures)--> inline SVG (ours, deterministic)
    Report + charts --html (jinja2, autoescaped)--> report.html (the Run's dump embedded)
                    \\--the same template for print--> (WeasyPrint, ``pdf``) --> report.pdf
    Run, Report --exports--> report.md, tables/*.csv

``view`` builds the report from ``header``, ``brief`` (the first page, with ``expectations``),
``experiment`` (one experiment's section, its table from ``levels``), ``sentences`` (the
summary and the run's other sentences), ``methods`` (with ``workload``, the workload in words)
and ``evidence`` (the engine's and the GPUs' evidence), ``costs`` (the cost and efficiency
table: price, energy, the roofline); ``text`` writes the rest of the prose,
``fmt`` every number. ``report`` ties them together. ``figures`` draws the charts, on ``axes``
(where the levels sit, linear or log), ``tradeoffs`` the trade-off and efficiency charts.
``diffpage`` and ``historypage`` are the pages of ``reportgen diff`` and ``reportgen history``.
Imports go one way: ``content`` and ``fmt`` import nothing of render; evidence <- experiment <-
view <- report, sentences <- view; axes <- figures <- tradeoffs, timeline <- charts <- report.
Reads only saved files (``reportgen.results``), so any report can be rebuilt later without a GPU
or a server. It formats what the run's analysis found (``Run.findings``, given by the caller
through ``render(attach=...)`` where a run was saved before them) and imports of
``reportgen.analysis`` only what findings do not carry yet (the decision's words, the methods
text, page one's unjudged reasons, the history's interval); never run.
"""

from reportgen.render.report import (
    HTML_NAME,
    MARKDOWN_NAME,
    PDF_NAME,
    TABLES_DIR,
    Pages,
    Rendered,
    chart_inputs,
    chart_list,
    render,
    render_html,
    render_pages,
)

__all__ = [
    "HTML_NAME",
    "MARKDOWN_NAME",
    "PDF_NAME",
    "TABLES_DIR",
    "Pages",
    "Rendered",
    "chart_inputs",
    "chart_list",
    "render",
    "render_html",
    "render_pages",
]
