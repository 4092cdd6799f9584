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
from reportgen.history import series
from reportgen.history.record import RunRecord
from reportgen.render import charts, figures, html
from reportgen.render import historytext as text

TEMPLATE = "history.html.j2"
NAMES = {"html": "history.html", "pdf": "history.pdf", "markdown": "history.md",
         "json": "history.json"}  # fmt: skip
CHART_IN = 2.2  # an experiment's chart height (a panel per level): three to a printed page
CHANGE_COLOUR = "#D55E00"
BREAK_COLOUR = "#999999"


def chart(group: Sequence[series.Series], runs: Sequence[RunRecord]) -> Markup:
    """One experiment's series, a panel per level: each run's mean with its interval, each
    stretch's segments (between change points) at their mean, a dashed line where the series
    breaks, a solid one at a change point, labelled with its size."""
    with rc_context(figures.RC):
        fig = figures.new_figure(CHART_IN)
        axes = fig.subplots(1, len(group), squeeze=False)[0]
        for ax, s in zip(axes, group, strict=True):
            _panel(ax, s, len(runs))
        axes[0].set_ylabel(text.metric_label(group[0].metric))
        fig.subplots_adjust(left=0.09, right=0.98, bottom=0.2, top=0.8, wspace=0.3)
        return charts.to_svg(fig)


def _panel(ax: Any, s: series.Series, n: int) -> None:
    cuts = {c.at for c in s.changes}
    for k, stretch in enumerate(s.stretches()):
        xs = [i + 1 for i in stretch]
        got = [text.interval(s.values[i]) for i in stretch]
        means = [m for m, _, _ in got]
        low = [m - lo if not math.isnan(lo) else 0 for m, lo, _ in got]
        high = [hi - m if not math.isnan(hi) else 0 for m, _, hi in got]
        colour = figures.PALETTE[k % len(figures.PALETTE)]
        ax.errorbar(xs, means, yerr=[low, high], fmt="o-", color=colour, markersize=4,
                    linewidth=1, capsize=2)  # fmt: skip
        start = 0
        for end in [k for k, i in enumerate(stretch) if i in cuts] + [len(stretch)]:
            if end > start:
                seg = means[start:end]
                level = math.exp(sum(math.log(v) for v in seg) / len(seg))
                ax.hlines(level, xs[start] - 0.3, xs[end - 1] + 0.3, colors="#444444",
                          linewidth=1.6, alpha=0.6)  # fmt: skip
            start = end
    for b in s.breaks:
        ax.axvline(b.at + 0.5, color=BREAK_COLOUR, linestyle="--", linewidth=1)
    for c in s.changes:
        ax.axvline(c.at + 0.5, color=CHANGE_COLOUR, linewidth=1.4)
        ax.annotate(f"x{c.change.ratio:.2f}", (c.at + 0.5, 1), xycoords=("data", "axes fraction"),
                    fontsize=7, color=CHANGE_COLOUR, ha="center", va="bottom")  # fmt: skip
    ax.set_xlim(0.5, n + 0.5)
    figures.few_ticks(ax)
    ax.set_xticks(range(1, n + 1))
    ax.set_xlabel("run")
    ax.set_title(s.point.label, loc="left", pad=10)


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
