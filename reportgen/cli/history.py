"""``reportgen history``: runs recorded across software versions (``reportgen.history``).

- ``add RUN_DIR...``: record runs (a run recorded already is left as it is);
- ``show CAMPAIGN``: per experiment and objective level, the series with each run's interval,
  what changed between neighbours, breaks and change points;
- ``check CAMPAIGN --fail-on-regression 5%``: the newest run against the runs before it,
  regressed (exit 1), not regressed (exit 0) or cannot tell (exit 3);
- ``report CAMPAIGN``: history.html, history.pdf, history.md and history.json.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from reportgen.cli.codes import EXIT_FAILED, EXIT_OK, EXIT_UNDECIDED
from reportgen.cli.compare import gate_threshold
from reportgen.errors import ResultsError

if TYPE_CHECKING:
    from reportgen.history.record import RunRecord
    from reportgen.history.series import Series


def cmd_history(args: argparse.Namespace, out: Console, err: Console) -> int:
    return {
        "add": _add,
        "show": _show,
        "check": _check,
        "report": _report,
    }[args.history_command](args, out, err)


def _add(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen import results
    from reportgen.history import record, store

    records = []
    for target in args.runs:  # every run read before any is written: one bad, none added
        if not target.exists():
            raise ResultsError(f"{target}: no such run directory")
        run = results.load(target)
        records.append(record.of_run(run, target, label=args.label))
    with store.open_store(args.store) as db:
        for r in records:
            got = db.add(r)
            if got.new:
                out.print(f"added {got.run_id} ({got.campaign}) to {args.store}", markup=False)
            elif got.updated:
                out.print(
                    f"updated {got.run_id} in {args.store}: its results file has changed since "
                    "it was added (resumed, or rendered again)",
                    markup=False,
                )
            else:
                out.print(f"{got.run_id} is in {args.store} already: nothing added", markup=False)
    return EXIT_OK


def _load(args: argparse.Namespace) -> tuple[list[RunRecord], list[Series]]:
    """The campaign's runs in the order asked for, and their series."""
    from reportgen.history import series, store

    with store.open_store(args.store, create=False) as db:
        runs = db.runs(args.campaign)
        if not runs:
            known = ", ".join(db.campaigns()) or "none"
            raise ResultsError(
                f"{args.store}: no runs of campaign {args.campaign!r} (campaigns there: "
                f"{known}); record one with reportgen history add RUN_DIR"
            )
    ordered = series.order(runs, args.by)
    return ordered, series.build(ordered, metric=args.metric, objective_only=not args.all_levels)


def _show(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen.render import historytext as text

    runs, found = _load(args)
    out.print(text.heading(runs, args.by), markup=False)
    for i, line in enumerate(text.run_lines(runs)):
        out.print(f"  {i + 1}. {line}", markup=False)
    if len(runs) > 1:
        out.print("what changed from one run to the next:", markup=False)
        for line in text.between(runs):
            out.print(f"  {line}", markup=False)
    for group in text.by_experiment(found):
        table = Table(title=Text(f"{group[0].experiment}: {text.metric_label(group[0].metric)}"),
                      title_justify="left")  # fmt: skip
        table.add_column("#", justify="right")
        for s in group:
            table.add_column(s.point.label, justify="right")
        table.add_column("break or change here")
        for row in text.table(group, runs):
            table.add_row(*(Text(cell) for cell in row))
        out.print(table)
        lines = [line for s in group for line in text.findings(s, runs)]
        few = text.too_few(group)
        for line in [*lines, *([few] if few else [])]:
            out.print(f"  {line}", markup=False)
    return EXIT_OK


def _check(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen.history import series
    from reportgen.render import historytext as text

    threshold = gate_threshold(args.fail_on_regression)
    assert threshold is not None  # required by the parser
    runs, found = _load(args)
    verdicts = series.check(found, len(runs) - 1, threshold)
    answer = series.overall(verdicts)
    out.print(text.gate_heading(runs, threshold), markup=False)
    for line in text.gate_lines(verdicts):
        out.print(f"  {line['said']}", markup=False)
    out.print(f"{answer}", markup=False)
    if answer == "regressed":
        return EXIT_FAILED
    if answer == "cannot tell":
        return EXIT_UNDECIDED
    return EXIT_OK


def _report(args: argparse.Namespace, out: Console, err: Console) -> int:
    from reportgen.history import series
    from reportgen.render import historypage

    threshold = gate_threshold(args.fail_on_regression) or 0.05
    runs, found = _load(args)
    verdicts = series.check(found, len(runs) - 1, threshold)
    folder = args.out or Path(args.store).parent / f"history-{args.campaign}"
    written = historypage.write(runs, found, verdicts, threshold, args.by, folder,
                                pdf=not args.no_pdf)  # fmt: skip
    for path in written.values():
        out.print(f"history: {path}", markup=False)
    return EXIT_OK
