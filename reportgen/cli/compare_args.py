"""The arguments of the commands that compare runs: ``reportgen diff`` (two runs) and
``reportgen history`` (every run of a campaign)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reportgen.cli.argtypes import DIRECTORY, _Formatter, _margin
from reportgen.metrics import HEADLINE, REGISTRY


def compare_parsers(sub: Any) -> None:
    """``diff`` and ``history`` on the command's subparsers."""
    _diff_parser(sub)
    _history_parser(sub)


def _diff_parser(sub: Any) -> None:
    df = sub.add_parser(
        "diff",
        help="compare two runs: what changed in the environment, which differences are real",
        description="Compare run B (after) with run A (before), e.g. the same campaign before "
        "and after an engine upgrade: differences that make the runs incomparable (GPUs, "
        "model checkpoint, workload) in a banner, every other difference in the environment "
        "and the setup, and per experiment and level each headline metric B / A with its 95% "
        "confidence interval and a verdict (improved, regressed, equivalent, inconclusive), "
        "verdicts that changed and new failures. Writes diff.html, diff.pdf, diff.md and "
        "diff.json. Exit 1 when --fail-on-regression is given and a regression beyond it is "
        "certain, 0 otherwise.",
        epilog="example:\n  reportgen diff output/demo/RUN_A output/demo/RUN_B "
        "--fail-on-regression 5%",
        formatter_class=_Formatter,
    )
    for name, when in (("run_a", "before"), ("run_b", "after")):
        df.add_argument(
            name,
            type=Path,
            metavar=name[-1].upper(),
            help=f"run directory (or results.json): {when}",
        ).complete = DIRECTORY
    df.add_argument(
        "--fail-on-regression",
        metavar="PCT",
        default=None,
        help="exit 1 when some metric is certainly worse in B by more than PCT: 5%% or 0.05 "
        "(a bare 5 is refused: 5%% or 500%%?)",
    )
    df.add_argument(
        "--metric",
        action="append",
        choices=[*(m for m, _ in HEADLINE), "output_tok_per_j"],
        help="only these metrics count for --fail-on-regression (repeatable; default: all)",
    )
    df.add_argument(
        "--margin",
        metavar="SHARE",
        type=_margin,
        default=None,
        help="changes within this share are equivalent: 3%% or 0.03 (default: B's campaign margin)",
    )
    df.add_argument(
        "--out", type=Path, default=None, help="folder for the files (default: beside B's run)"
    )
    df.add_argument("--no-pdf", action="store_true", help="skip the PDF")


def _history_parser(sub: Any) -> None:
    """``reportgen history add|show|check|report``."""
    hp = sub.add_parser(
        "history",
        help="record runs across software versions; find where a regression happened",
        description="A history of runs of the same campaign, kept in one SQLite file "
        "(default output/history.sqlite): each run's fingerprint and each experiment's level "
        "summaries with their repetitions; the raw tables stay in the run directories, named "
        "by their sha256. Series per experiment and objective level break where the GPUs, "
        "model checkpoint or workload change; change points within them are located at the "
        "run where they happened, with the fingerprint fields that changed there.",
        formatter_class=_Formatter,
    )
    hsub = hp.add_subparsers(dest="history_command", metavar="ACTION", required=True)
    add = hsub.add_parser(
        "add",
        help="record runs (a run recorded already is left as it is)",
        epilog="example:\n  reportgen history add output/demo/*/",
        formatter_class=_Formatter,
    )
    runs = add.add_argument("runs", type=Path, nargs="+", metavar="RUN_DIR", help="run directories")
    runs.complete = DIRECTORY
    add.add_argument(
        "--label", default=None, help="a version label for these runs (default: the engine's)"
    )
    for name, what in (
        ("show", "per experiment and level, the series, breaks and change points"),
        ("check", "the newest run against the runs before it: exit 0 not regressed, 1 "
                  "regressed, 3 cannot tell"),
        ("report", "history.html, history.pdf, history.md and history.json"),
    ):  # fmt: skip
        cp = hsub.add_parser(name, help=what, description=what[:1].upper() + what[1:] + ".",
                             epilog=f"example:\n  reportgen history {name} demo"
                             + (" --fail-on-regression 5%" if name == "check" else ""),
                             formatter_class=_Formatter)  # fmt: skip
        cp.add_argument("campaign", metavar="CAMPAIGN", help="the campaign's name")
        cp.add_argument("--by", choices=("time", "version"), default="time",
                        help="order runs by when they started, or by version (the label, "
                        "else the engine's version)")  # fmt: skip
        cp.add_argument("--metric", default=None, choices=sorted(REGISTRY),
                        help="the metric (default: the newest run's objective)")  # fmt: skip
        cp.add_argument("--all-levels", action="store_true",
                        help="every level, not only those the objective decides on")  # fmt: skip
        if name in ("check", "report"):
            cp.add_argument("--fail-on-regression", metavar="PCT",
                            required=name == "check", default=None,
                            help="the regression threshold: 5%% or 0.05" + (
                                "" if name == "check" else " (default 5%%)"))  # fmt: skip
        if name == "report":
            cp.add_argument("--out", type=Path, default=None,
                            help="folder for the files (default: history-CAMPAIGN beside "
                            "the store)")  # fmt: skip
            cp.add_argument("--no-pdf", action="store_true", help="skip the PDF")
    for p in (add, *(hsub.choices[n] for n in ("show", "check", "report"))):
        p.add_argument("--store", type=Path, default=Path("output") / "history.sqlite",
                       help="the history file (default: output/history.sqlite)")  # fmt: skip
