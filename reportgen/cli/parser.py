"""``reportgen``'s parser: each command's arguments are declared beside its handler's module
(``cli.prepare_args``, ``runs_args``, ``bench_args``, ``compare_args``), in the order the
overview lists them."""

from __future__ import annotations

import argparse

from reportgen import __version__
from reportgen.cli.argtypes import _Formatter
from reportgen.cli.bench_args import bench_parser
from reportgen.cli.compare_args import compare_parsers
from reportgen.cli.prepare_args import (
    calibrate_parser,
    completion_parser,
    fingerprint_parser,
    plan_parser,
    schema_parser,
    validate_parser,
)
from reportgen.cli.runs_args import render_parser, run_parser, verify_parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="reportgen",
        description="Reproducible LLM-serving tuning campaigns, from a campaign file to a "
        "shareable engineering report.",
        epilog="example:\n  reportgen run campaigns/demo.toml",
        formatter_class=_Formatter,
    )
    p.add_argument("-V", "--version", action="version", version=f"reportgen {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    validate_parser(sub)
    plan_parser(sub)
    run_parser(sub)
    bench_parser(sub)
    render_parser(sub)
    verify_parser(sub)
    compare_parsers(sub)

    # `reportgen sim ...` is handed to the simulator's own parser (see main); listed here for
    # the command overview.
    sub.add_parser("sim", help="run the simulated OpenAI-compatible server (no GPU needed)")

    calibrate_parser(sub)
    fingerprint_parser(sub)
    schema_parser(sub)
    completion_parser(sub)
    return p
