"""A campaign's history (``reportgen history report``) as HTML, PDF, Markdown and JSON.

The report's rules: one self-contained page (its stylesheet inlined, nothing fetched), every
value autoescaped, the PDF printed from the same page, nothing from the time of rendering in
it. Per series a chart (each run's mean and 95% interval, the comparable stretches' means,
breaks and change points marked), a table of change points with their suspects, and the
newest run's answer against the runs before it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup

from reportgen import __version__
from reportgen.history import series
from reportgen.history.record import RunRecord
from reportgen.render import charts, html
from reportgen.render import historytext as text

TEMPLATE = "history.html.j2"
NAMES = {"html": "history.html", "pdf": "history.pdf", "markdown": "history.md",
         "json": "history.json"}  # fmt: skip


def chart(group: Sequence[series.Series], runs: Sequence[RunRecord]) -> Markup:
    """One experiment's series drawn (``historychart``), as the reports' charts are."""
    name = f"history-{group[0].experiment}"
    return charts.draw(charts.Chart(name, "history", (group, len(runs))))[1]


def context(
    runs: Sequence[RunRecord],
    found: Sequence[series.Series],
    verdicts: Sequence[series.Verdict],
    threshold: float,
    by: str,
) -> dict[str, Any]:
    newest = runs[-1]
    return {
        "version": __version__,
        "css": html.stylesheet(),
        "title": newest.title or newest.campaign,
        "campaign": newest.campaign,
        "heading": text.heading(runs, by),
        "runs": [
            {
                "n": i + 1,
                "id": r.run_id,
                "engine": r.engine,
                "version": series.version_of(r) or "–",
                "started": r.started_at,
                "status": r.status,
                "gpus": r.gate.get("GPUs", "–"),
            }  # fmt: skip
            for i, r in enumerate(runs)
        ],
        "between": text.between(runs),
        "series": [_experiment(group, runs) for group in text.by_experiment(found)],
        "verdicts": text.gate_lines(verdicts),
        "answer": series.overall(verdicts),
        "threshold": threshold,
        "newest": text.run_name(newest),
    }


def _experiment(group: Sequence[series.Series], runs: Sequence[RunRecord]) -> dict[str, Any]:
    few = text.too_few(group)
    return {
        "label": group[0].experiment,
        "chart": chart(group, runs),
        "findings": [x for s in group for x in text.findings(s, runs)] + ([few] if few else []),
        "changes": [
            {
                "run": c.at + 1,
                "id": runs[c.at].run_id,
                "level": s.point.label,
                "kind": text.direction(c.change, s.higher_is_better),
                "size": text.change_said(c.change),
                "p": f"{c.change.p_value:.2g}",
                "suspects": [f.said() for f in c.suspects],
            }
            for s in group
            for c in s.changes
        ],
    }


def markdown(ctx: dict[str, Any]) -> str:
    lines = [f"# reportgen history: {ctx['title']}", "", ctx["heading"], ""]
    lines += ["| # | run | version | started | GPUs |", "|---|---|---|---|---|"]
    lines += [f"| {r['n']} | `{r['id']}` | {r['version']} | {r['started']} | {r['gpus']} |"
              for r in ctx["runs"]]  # fmt: skip
    lines += ["", f"**Newest run** {ctx['newest']}: **{ctx['answer']}** "
                  f"(threshold {ctx['threshold']:.0%})", ""]  # fmt: skip
    lines += [f"- {v['said']}" for v in ctx["verdicts"]]
    lines += ["", "What changed from one run to the next:", ""] + [f"- {x}" for x in ctx["between"]]
    for s in ctx["series"]:
        lines += ["", f"## {s['label']}", ""] + [f"- {f}" for f in s["findings"]]
    return "\n".join(lines) + "\n"


def write(
    runs: Sequence[RunRecord],
    found: Sequence[series.Series],
    verdicts: Sequence[series.Verdict],
    threshold: float,
    by: str,
    out_dir: Path,
    pdf: bool = True,
) -> dict[str, Path]:
    """history.html, history.pdf, history.md and history.json in ``out_dir``."""
    from reportgen.render import pdf as printer
    from reportgen.render.report import _write

    ctx = context(runs, found, verdicts, threshold, by)
    page = html.environment().get_template(TEMPLATE).render(ctx)
    instead = "give reportgen history report another folder with --out"
    out = {"html": _write(out_dir / NAMES["html"], page.encode("utf-8"), instead)}
    if pdf:
        out["pdf"] = _write(out_dir / NAMES["pdf"], printer.html_to_pdf(page, out_dir).data,
                            instead)  # fmt: skip
    out["markdown"] = _write(out_dir / NAMES["markdown"], markdown(ctx).encode(), instead)
    data = {
        "reportgen_version": __version__,
        "campaign": ctx["campaign"],
        "threshold": threshold,
        "answer": ctx["answer"],
        "runs": ctx["runs"],
        "series": [{k: v for k, v in s.items() if k != "chart"} for s in ctx["series"]],
        "verdicts": ctx["verdicts"],
    }
    text_ = json.dumps(data, indent=1, allow_nan=False) + "\n"
    out["json"] = _write(out_dir / NAMES["json"], text_.encode("utf-8"), instead)
    return out
