"""``reportgen diff``: two runs compared (``reportgen.diff``), a table on the terminal, the
files (``render.diffpage``), and the CI gate's exit code."""

from __future__ import annotations

import argparse
import re

from rich.console import Console
from rich.table import Table

from reportgen.cli.codes import EXIT_FAILED, EXIT_OK
from reportgen.errors import ResultsError


def gate_threshold(text: str | None) -> float | None:
    """``--fail-on-regression``'s value as a share (``diff.parse_threshold``), None when not
    given; one it cannot read is refused (ResultsError, one line)."""
    from reportgen import diff

    if text is None:
        return None
    try:
        return diff.parse_threshold(text)
    except ValueError as exc:
        raise ResultsError(f"--fail-on-regression {text}: {exc}") from None


def cmd_diff(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen import diff, results
    from reportgen.render import diffpage

    threshold = gate_threshold(args.fail_on_regression)
    from reportgen.analysis.findings import attach

    a, b = attach(results.load(args.run_a)), attach(results.load(args.run_b))
    paths = (str(results.results_path(args.run_a)), str(results.results_path(args.run_b)))
    d = diff.compare(a, b, margin=args.margin, paths=paths)
    folder = args.run_b if args.run_b.is_dir() else args.run_b.parent
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", f"diff-{d.a.run_id}-vs-{d.b.run_id}")
    out_dir = args.out or folder.parent / name

    out.print(f"A: {d.a.run_id} ({d.a.campaign}); B: {d.b.run_id} ({d.b.campaign})", markup=False)
    if threshold is not None:  # how the gate was read, before anything it decides
        which = ", ".join(args.metric) if args.metric else "any headline metric"
        out.print(
            f"gate: exit 1 if {which} is certainly worse in B by more than {threshold:.1%} "
            f"(--fail-on-regression {args.fail_on_regression})",
            markup=False,
        )
    if d.incomparable:
        out.print("[bold red]NOT COMPARABLE[/]: the runs differ in", end=" ")
        out.print("; ".join(c.said() for c in d.incomparable), markup=False)
    table = Table(
        caption="comparisons of a headline metric at a level, B / A: + improved, - regressed, "
        "= equivalent, ? inconclusive"
    )
    table.add_column("experiment", no_wrap=True)
    table.add_column("verdict (A -> B)")
    for name in "+-=?":
        table.add_column(name, justify="right")
    table.add_column("notes")
    for e in d.experiments:
        n = {v: sum(m.verdict == v for m in e.metrics) for v in diff.VERDICT.values()}
        notes = []
        if e.new_failure:
            notes.append(f"failed in B: {e.reason[1] or e.status[1]}")
        if e.recovered:
            notes.append("failed in A only")
        if e.newly_failed:
            notes.append(f"checks failing only in B: {', '.join(e.newly_failed)}")
        verdict = f"{e.verdict[0]} -> {e.verdict[1]}" if e.flipped else e.verdict[1]
        table.add_row(e.id, verdict, *(str(n[v]) for v in diff.VERDICT.values()), "; ".join(notes))
    out.print(table)
    if d.only_a or d.only_b:
        out.print(
            f"only in A: {', '.join(d.only_a) or '-'}; only in B: {', '.join(d.only_b) or '-'}",
            markup=False,
        )
    out.print(f"what else changed: {len(d.changed)} difference(s)", markup=False)
    for c in d.changed[:8]:
        out.print(f"  {c.area}: {c.key}: {c.a} -> {c.b} ({diffpage.where(c)})", markup=False)
    if len(d.changed) > 8:
        out.print(f"  ... {len(d.changed) - 8} more in diff.html", markup=False)
    pairs = diffpage.cost_pairs(a, b)
    drawn = diffpage.efficiency_svg(a, b)
    written = diffpage.write(
        d, out_dir, threshold, pdf=not args.no_pdf, pairs=pairs, efficiency=drawn
    )
    for path in written.values():
        out.print(f"diff: {path}", markup=False)
    if threshold is None:
        return EXIT_OK
    worse = d.regressions(threshold, args.metric)
    for m in worse:
        err.print(
            f"regression: {m.experiment} {m.metric} at {m.level}: B/A "
            f"{m.ratio:.3f} (95% CI {m.ci_low:.3f}-{m.ci_high:.3f}), beyond {threshold:.0%}",
            markup=False,
        )
    if worse:
        return EXIT_FAILED
    out.print(f"no regression beyond {threshold:.0%} is certain", markup=False)
    return EXIT_OK
