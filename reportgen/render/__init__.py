"""The render stage: a run's saved results in, report.html, report.pdf and exports out.

    results.json --load--> results --view.build--> Report (formatted strings, pure)
                                            \\--charts--> inline SVG (ours, deterministic)
    Report + charts --html (jinja2, autoescaped)--> report.html
                    \\--the same template for print--> (WeasyPrint) --> report.pdf

``report`` ties them together. Reads only saved files (``reportgen.results``), so any report
can be rebuilt later without a GPU or a server; imports results and analysis, never run.
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
