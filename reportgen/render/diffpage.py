"""The comparison of two runs (``reportgen diff``) as HTML, PDF, Markdown and JSON.

The same rules as the report: one self-contained page (the report's stylesheet inlined,
nothing fetched), every value autoescaped, the PDF printed from the same page, nothing from
the time of rendering in it (the same two runs give the same bytes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import Markup

from reportgen import __version__
from reportgen.diff import COMPARED, Change, ExperimentDiff, RunDiff
from reportgen.metrics import REGISTRY
from reportgen.render import costs, html
from reportgen.render.fmt import fmt_ci, fmt_num, fmt_ratio, fmt_time, level_head
from reportgen.results.model import Run

TEMPLATE = "diff.html.j2"
NAMES = {"html": "diff.html", "pdf": "diff.pdf", "markdown": "diff.md", "json": "diff.json"}
METRIC_LABELS = {m: REGISTRY[m].labelled(unit=True) for m, _ in COMPARED}


@dataclass(frozen=True)
class Row:
    concurrency: str  # the level's cell (``Point``: "8", "R=2/s")
    metric: str
    a: str
    b: str
    ratio: str
    ci: str
    verdict: str
    beyond: bool  # a regression beyond the threshold


def where(change: Change) -> str:
    return ", ".join(change.experiments) if change.experiments else "every experiment"


def summary(d: RunDiff, threshold: float | None) -> str:
    """One paragraph: how many comparisons went which way, flips, failures, the gate."""
    n = d.counts()
    total = sum(n.values())
    parts = [
        f"{len(d.experiments)} experiment(s) in both runs, {total} comparisons of a headline "
        f"metric at a level: {n['improved']} improved, {n['regressed']} regressed, "
        f"{n['equivalent']} equivalent (within ±{d.margin:.0%}), {n['inconclusive']} "
        "inconclusive."
    ]
    flips = [e for e in d.experiments if e.flipped]
    if flips:
        parts.append(
            "Verdicts that changed: "
            + "; ".join(f"{e.id} {e.verdict[0]} → {e.verdict[1]}" for e in flips)
            + "."
        )
    fails = [e.id for e in d.experiments if e.new_failure]
    if fails:
        parts.append(f"Failed only in B: {', '.join(fails)}.")
    if threshold is not None:
        worse = d.regressions(threshold)
        parts.append(
            f"{len(worse)} regression(s) beyond {threshold:.0%} are certain "
            "(the whole 95% interval beyond it)."
            if worse
            else f"No regression beyond {threshold:.0%} is certain."
        )
    return " ".join(parts)


def rows(e: ExperimentDiff, threshold: float | None) -> list[Row]:
    out = []
    for m in sorted(e.metrics, key=lambda m: (m.point.order, _order(m.metric))):
        out.append(
            Row(
                concurrency=str(m.point),
                metric=METRIC_LABELS.get(m.metric, m.metric),
                a=fmt_num(m.a),
                b=fmt_num(m.b),
                ratio=fmt_ratio(m.ratio),
                ci=fmt_ci(m.ci_low, m.ci_high),
                verdict=m.verdict,
                beyond=threshold is not None and m.regression_beyond(threshold),
            )
        )
    return out


def _order(metric: str) -> int:
    names = list(METRIC_LABELS)
    return names.index(metric) if metric in names else len(names)


def cost_pairs(a: Run, b: Run) -> list[dict[str, str]]:
    """The cost and efficiency table of each run (``costs.cost_rows``, each at its own price)
    side by side, per experiment both ran and level either decided: output tok/s, the cost
    of a million output tokens, output tokens per joule and decode's share of its bound, A
    then B. Empty where neither run has a price, energy or a bound."""
    rows_a = {(r["id"], r["level"]): r for r in costs.table(a).rows}
    rows_b = {(r["id"], r["level"]): r for r in costs.table(b).rows}
    out = []
    for key in [k for k in rows_a if k in rows_b]:
        ra, rb = rows_a[key], rows_b[key]
        out.append(
            {
                "id": key[0],
                "level": key[1],
                **{f"{k}_{side}": r[k] for side, r in (("a", ra), ("b", rb)) for k in COST_KEYS},
            }
        )
    return out


COST_KEYS = ("out_tok_s", "out_cost", "per_j", "decode_pct")


def efficiency_svg(a: Run, b: Run) -> str:
    """Both runs' configurations on the report's efficiency chart (output tok/s per GPU
    against output tokens per joule, a point per level), each line named with its run ("A"
    or "B"); "" where neither run has the GPUs' energy."""
    from dataclasses import replace

    from reportgen.render import charts, figures, view
    from reportgen.render.content import Series

    series: list[Series] = []
    for tag, run in (("A", a), ("B", b)):
        base = run.baseline.id if run.baseline is not None else None
        for i, e in enumerate(run.experiments, start=1):
            if not e.ok or not e.by_level:
                continue
            # B's baseline drawn as a report draws its baseline; A's in a colour of its own
            ours = tag == "B"
            s = view.series_of(i, e, ours and e.id == base, ours and e.id == run.best)
            series.append(replace(s, id=f"{e.id} ({tag})", index=len(series) + 1))
    if not any(j is not None for s in series for j in s.mean.get("output_tok_per_j", ())):
        return ""
    gpus = max(len(a.fingerprint.gpus.devices), len(b.fingerprint.gpus.devices), 1)
    chart = charts.Chart("diff-efficiency", "efficiency", (series, gpus),
                         tuple(figures.entries(series)))  # fmt: skip
    return str(charts.draw(chart)[1])


def render_html(
    d: RunDiff,
    threshold: float | None = None,
    pairs: list[dict[str, str]] | None = None,
    efficiency: str = "",
) -> str:
    env = html.environment()
    context: dict[str, Any] = {
        "d": d,
        "a": d.a,
        "b": d.b,
        "version": __version__,
        "css": html.stylesheet(),
        "summary": summary(d, threshold),
        "threshold": threshold,
        "rows": {e.id: rows(e, threshold) for e in d.experiments},
        "where": where,
        "fmt_time": fmt_time,
        "regressions": d.regressions(threshold) if threshold is not None else [],
        "labels": METRIC_LABELS,
        "costs": pairs or [],
        "efficiency": Markup(efficiency),
        "level_head": level_head(m.point for e in d.experiments for m in e.metrics),
    }
    return env.get_template(TEMPLATE).render(context)


def markdown(d: RunDiff, threshold: float | None = None, limit: int = 20) -> str:
    """A short Markdown summary for a pull request or a chat."""
    lines = [
        f"# reportgen diff: `{d.a.run_id}` → `{d.b.run_id}`",
        "",
        f"A: {d.a.campaign} (`{d.a.run_id}`, {d.a.status}); "
        f"B: {d.b.campaign} (`{d.b.run_id}`, {d.b.status})",
        "",
    ]
    if d.incomparable:
        lines += ["**Not comparable:** the runs differ in what makes numbers comparable:", ""]
        lines += [f"- {c.area}: `{c.key}`: {c.a} → {c.b} ({where(c)})" for c in d.incomparable]
        lines.append("")
    lines += [summary(d, threshold), ""]
    lines += ["| experiment | verdict A → B | objective changes |", "|---|---|---|"]
    for e in d.experiments:
        worst = [m for m in e.metrics if m.verdict in ("improved", "regressed")]
        moved = "; ".join(
            f"{METRIC_LABELS.get(m.metric, m.metric)} {m.level} {fmt_ratio(m.ratio)} "
            f"({fmt_ci(m.ci_low, m.ci_high)}) {m.verdict}"
            for m in worst[:4]
        ) + (f"; {len(worst) - 4} more" if len(worst) > 4 else "")
        verdict = f"{e.verdict[0]} → {e.verdict[1]}" if e.flipped else e.verdict[1]
        lines.append(f"| {_md(e.id)} | {_md(verdict)} | {_md(moved or 'no certain change')} |")
    if d.only_a or d.only_b:
        lines += ["", f"Only in A: {', '.join(d.only_a) or '–'}; only in B: "
                      f"{', '.join(d.only_b) or '–'}."]  # fmt: skip
    if d.changed:
        lines += ["", "What else changed:", ""]
        lines += [f"- {c.area}: `{c.key}`: {c.a} → {c.b} ({where(c)})" for c in d.changed[:limit]]
        if len(d.changed) > limit:
            lines.append(f"- … and {len(d.changed) - limit} more (see diff.html)")
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write(
    d: RunDiff,
    out_dir: Path,
    threshold: float | None = None,
    pdf: bool = True,
    pairs: list[dict[str, str]] | None = None,
    efficiency: str = "",
) -> dict[str, Path]:
    """diff.html, diff.pdf, diff.md and diff.json in ``out_dir`` (each written atomically);
    ``pairs``: the runs' cost and efficiency tables side by side (``cost_pairs``),
    ``efficiency``: both runs on the efficiency chart (``efficiency_svg``)."""
    from reportgen.render import pdf as printer
    from reportgen.render.report import _write

    page = render_html(d, threshold, pairs, efficiency)
    instead = "give reportgen diff another folder with --out"
    out = {"html": _write(out_dir / NAMES["html"], page.encode("utf-8"), instead)}
    if pdf:
        out["pdf"] = _write(
            out_dir / NAMES["pdf"], printer.html_to_pdf(page, out_dir).data, instead
        )
    out["markdown"] = _write(out_dir / NAMES["markdown"], markdown(d, threshold).encode(), instead)
    data = {
        **d.as_dict(),
        "threshold": threshold,
        "reportgen_version": __version__,
        "costs": pairs or [],
    }
    text = json.dumps(data, indent=1, allow_nan=False) + "\n"
    out["json"] = _write(out_dir / NAMES["json"], text.encode("utf-8"), instead)
    return out
