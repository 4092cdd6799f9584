"""A campaign's history (``reportgen history report``) as HTML, PDF, Markdown and JSON.

The report's rules: one self-contained page (its stylesheet inlined, nothing fetched), every
value autoescaped, the PDF printed from the same page, nothing from the time of rendering in
it. Per series a chart (each run's mean and 95% interval, the comparable stretches' means,
breaks and change points marked), a table of change points with their suspects, and the
newest run's answer against the runs before it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup
from matplotlib import rc_context

from reportgen import __version__
from reportgen.history import series, text
from reportgen.history.record import RunRecord
from reportgen.render import charts, figures, html

TEMPLATE = "history.html.j2"
NAMES = {"html": "history.html", "pdf": "history.pdf", "markdown": "history.md",
         "json": "history.json"}  # fmt: skip
CHART_IN = 2.3  # a series' chart height: three to a printed page with their captions
CHANGE_COLOUR = "#D55E00"
BREAK_COLOUR = "#999999"


def chart(s: series.Series, runs: Sequence[RunRecord]) -> Markup:
    """One series: each run's mean with its interval, each stretch's segments (between change
    points) at their mean, a dashed line where the series breaks, a solid one at a change."""
    with rc_context(figures.RC):
        fig = figures.new_figure(CHART_IN)
        ax = fig.add_axes((0.09, 0.2, 0.89, 0.68))
        cuts = {c.at for c in s.changes}
        for stretch in s.stretches():
            xs = [i + 1 for i in stretch]
            stats = [text.interval(s.values[i]) for i in stretch]
            means = [m for m, _, _ in stats]
            low = [m - lo if not math.isnan(lo) else 0 for m, lo, _ in stats]
            high = [hi - m if not math.isnan(hi) else 0 for m, _, hi in stats]
            ax.errorbar(xs, means, yerr=[low, high], fmt="o-", color=figures.PALETTE[0],
                        markersize=4, linewidth=1, capsize=2)  # fmt: skip
            start = 0
            bounds = [k for k, i in enumerate(stretch) if i in cuts] + [len(stretch)]
            for end in bounds:
                if end > start:
                    seg = means[start:end]
                    level = math.exp(sum(math.log(v) for v in seg) / len(seg))
                    ax.hlines(level, xs[start] - 0.3, xs[end - 1] + 0.3, colors="#444444",
                              linewidth=1.6, alpha=0.6)  # fmt: skip
                start = end
        for b in s.breaks:
            ax.axvline(b.at + 0.5, color=BREAK_COLOUR, linestyle="--", linewidth=1)
            ax.annotate("break", (b.at + 0.5, 1), xycoords=("data", "axes fraction"),
                        fontsize=7, color=BREAK_COLOUR, ha="center", va="bottom")  # fmt: skip
        for c in s.changes:
            ax.axvline(c.at + 0.5, color=CHANGE_COLOUR, linewidth=1.4)
            ax.annotate(f"x{c.change.ratio:.2f}", (c.at + 0.5, 1),
                        xycoords=("data", "axes fraction"), fontsize=7, color=CHANGE_COLOUR,
                        ha="center", va="bottom")  # fmt: skip
        ax.set_xlim(0.5, len(runs) + 0.5)
        ax.set_xticks(range(1, len(runs) + 1))
        ax.set_xlabel("run (oldest first)")
        ax.set_ylabel(text.metric_label(s.metric))
        ax.set_title(s.label, loc="left", pad=12)
        figures.few_ticks(ax)
        ax.set_xticks(range(1, len(runs) + 1))
        return charts.to_svg(fig)


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
                "since": _since(runs, i),
            }  # fmt: skip
            for i, r in enumerate(runs)
        ],
        "series": [
            {
                "label": s.label,
                "chart": chart(s, runs),
                "findings": text.findings(s, runs),
                "changes": [
                    {
                        "run": c.at + 1,
                        "id": runs[c.at].run_id,
                        "kind": text.direction(c.change, s.higher_is_better),
                        "size": text.change_said(c.change),
                        "p": f"{c.change.p_value:.2g}",
                        "suspects": [f.said() for f in c.suspects],
                    }  # fmt: skip
                    for c in s.changes
                ],
            }
            for s in found
        ],
        "verdicts": [
            {"series": v.series.label, "said": text.gate_said(v.gate), "answer": v.gate.answer}
            for v in verdicts
        ],  # fmt: skip
        "answer": series.overall(verdicts),
        "threshold": threshold,
        "newest": text.run_name(newest),
    }


def _since(runs: Sequence[RunRecord], i: int) -> str:
    """What differs from the run before (``text.between``)."""
    return "–" if i == 0 else text.between(runs)[i - 1].split(": ", 1)[1]


def markdown(ctx: dict[str, Any]) -> str:
    lines = [f"# reportgen history: {ctx['title']}", "", ctx["heading"], ""]
    lines += ["| # | run | version | started | GPUs |", "|---|---|---|---|---|"]
    lines += [f"| {r['n']} | `{r['id']}` | {r['version']} | {r['started']} | {r['gpus']} |"
              for r in ctx["runs"]]  # fmt: skip
    lines += ["", f"**Newest run** {ctx['newest']}: **{ctx['answer']}** "
                  f"(threshold {ctx['threshold']:.0%})", ""]  # fmt: skip
    lines += [f"- {v['series']}: {v['said']}" for v in ctx["verdicts"]]
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
