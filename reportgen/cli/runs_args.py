"""The arguments of ``run``, ``render`` and ``verify`` (their handlers: ``cli.runs``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reportgen.cli.argtypes import (
    DIRECTORY,
    FILE,
    _Formatter,
    _positive_float,
)
from reportgen.cli.prepare_args import where_arguments


def run_parser(sub: Any) -> None:
    """``run``."""
    r = sub.add_parser(
        "run",
        help="run a campaign and render its report",
        description="Run every experiment in order (start the server, wait until "
        "ready, warm up, load each concurrency level, stop), save "
        "results after each experiment, then render the report. After Ctrl-C (or a crash), "
        "the same command with --resume goes on where the run stopped.",
        epilog="example:\n  reportgen run campaigns/demo.toml --output output/",
        formatter_class=_Formatter,
    )
    r.add_argument("campaign", type=Path).complete = FILE
    r.add_argument(
        "--output",
        type=Path,
        default=Path("output"),
        help="root folder for run directories (default: output/)",
    )
    r.add_argument("--no-pdf", action="store_true", help="render HTML only")
    r.add_argument("--quiet", action="store_true", help="one line per experiment, no live bars")
    r.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object at the end (run directory, status, each experiment's "
        "verdict and objective per level, report paths) instead of the summary table; "
        "progress goes to stderr",
    )
    r.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when any experiment failed (default: failures are results)",
    )
    r.add_argument(
        "--history",
        type=Path,
        metavar="FILE",
        help="a history of earlier runs (reportgen history add): where it holds runs of this "
        "campaign on the same GPUs, engine version, model and workload, the spread between "
        "server starts they measured is what the verdicts start from, instead of "
        "campaign.start_spread (unless the campaign states it); default: history.sqlite "
        "in the --output folder (output/history.sqlite, history's own default), where it "
        "exists",
    )
    r.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        metavar="RUN_DIR",
        help="continue an interrupted run instead of starting a new one: its finished "
        "experiments are kept, the others run (default: the latest unfinished run of this "
        "campaign under --output)",
    )
    where_arguments(r)


def render_parser(sub: Any) -> None:
    """``render``."""
    rd = sub.add_parser(
        "render",
        help="render the report (HTML, PDF, Markdown, CSV) from saved results",
        description="Build report.html (self-contained), report.pdf, report.md (a summary "
        "for a pull request or a chat) and tables/*.csv from a run directory's saved results "
        "alone; no GPU or server needed.",
        epilog="example:\n  reportgen render output/demo/20261129T150000Z-1a2b3c",
        formatter_class=_Formatter,
    )
    rd.add_argument("run_dir", type=Path, metavar="RUN_DIR").complete = DIRECTORY
    rd.add_argument("--no-pdf", action="store_true", help="skip the PDF")
    rd.add_argument(
        "--redecide",
        action="store_true",
        help="take every decision again with this reportgen's statistics (the run's noise "
        "model) and save them, recording what they were; for runs decided by an earlier one",
    )
    rd.add_argument(
        "--recheck",
        action="store_true",
        help="take every assumption check again with this reportgen's checks and engine "
        "adapters (log lines re-read from the saved server logs), then every decision "
        "(as --redecide); what changed is saved with the run",
    )
    rd.add_argument(
        "--model-config",
        type=Path,
        metavar="CONFIG_JSON",
        help="the model's config.json, for a run recorded before reportgen kept the model's "
        "shape: read into every experiment whose recorded config.json has the same sha256 "
        "(the roofline needs it), and saved with the run",
    ).complete = FILE
    rd.add_argument(
        "--price",
        type=_positive_float,
        default=None,
        metavar="PER_HOUR",
        help="what the serving host costs an hour (the campaign's [host] price, for a run "
        "recorded without one): the cost of a million output and input tokens per level, "
        "saved with the run; --price-source says where it came from",
    )
    rd.add_argument(
        "--price-source",
        default=None,
        metavar="TEXT",
        help="where that price came from (a provider's list price and its date), quoted in "
        "the report; required with --price",
    )
    rd.add_argument(
        "--energy",
        action="store_true",
        help="each level's GPU energy, mean power and output tokens per joule computed from "
        "the run's telemetry tables and saved (runs recorded before reportgen kept them)",
    )


def verify_parser(sub: Any) -> None:
    """``verify``."""
    vf = sub.add_parser(
        "verify",
        help="check that a report still matches the raw data it summarises",
        description="Recompute every summary of a report from the raw request tables beside "
        "it (raw table hashes, level summaries, aggregates across repetitions, every "
        "comparison in the decisions, the page's own text) and say whether the report still "
        "matches. Exit 0 when everything matches, 1 when something differs.",
        epilog="example:\n  reportgen verify output/demo/20261129T150000Z-1a2b3c/report.html",
        formatter_class=_Formatter,
    )
    vf.add_argument(
        "report", type=Path, metavar="REPORT", help="report.html, or its run directory"
    ).complete = FILE
    vf.add_argument(
        "--run-dir", type=Path, default=None, help="where the raw tables are (default: beside it)"
    )
