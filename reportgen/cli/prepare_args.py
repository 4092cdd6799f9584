"""The arguments of ``validate``, ``plan``, ``calibrate``, ``fingerprint``, ``schema`` and
``completion`` (their handlers: ``cli.prepare``), and where a campaign runs (``--ssh``,
``--slurm``: ``validate``, ``plan`` and ``run``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from reportgen.cli.argtypes import (
    FILE,
    _Formatter,
)


def validate_parser(sub: Any) -> None:
    """``validate``."""
    v = sub.add_parser(
        "validate",
        help="check campaign files (schema and references)",
        description="Check campaign files and report every problem at once, "
        "each with the file, the key and the value. Starts nothing.",
        epilog="example:\n  reportgen validate campaigns/demo.toml",
        formatter_class=_Formatter,
    )
    v.add_argument("campaigns", nargs="+", type=Path, metavar="CAMPAIGN").complete = FILE
    v.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: each file's errors and warnings (exit code as without)",
    )
    where_arguments(v)


def plan_parser(sub: Any) -> None:
    """``plan``."""
    pl = sub.add_parser(
        "plan",
        help="print each experiment's resolved command, env and workload",
        description="Print, for each experiment, the exact server command line, "
        "its environment (secrets redacted) and workload, without "
        "starting anything.",
        epilog="example:\n  reportgen plan campaigns/demo.toml",
        formatter_class=_Formatter,
    )
    pl.add_argument("campaign", type=Path).complete = FILE
    pl.add_argument("--json", action="store_true", help="print the plan as JSON")
    where_arguments(pl)


def calibrate_parser(sub: Any) -> None:
    """``calibrate``."""
    cal = sub.add_parser(
        "calibrate",
        help="measure this host's client ceiling (chunks per CPU-second)",
        description="Measure how much streaming the load generator can process on this host, "
        "against a zero-delay simulator. Runs record it and flag levels that came within 80% "
        "of it as client-limited. Cached per host and reportgen version.",
        epilog="example:\n  reportgen calibrate --refresh",
        formatter_class=_Formatter,
    )
    cal.add_argument("--refresh", action="store_true", help="measure again even if cached")
    cal.add_argument("--json", action="store_true", help="print the result as JSON")


def fingerprint_parser(sub: Any) -> None:
    """``fingerprint``."""
    fp = sub.add_parser(
        "fingerprint",
        help="print this host's fingerprint (host, software, GPUs) as a table or JSON",
        description="Print what a run records about its environment: the host, the software "
        "stack and every GPU through NVML, each field best-effort (one that cannot be read "
        "says why).",
        epilog="example:\n  reportgen fingerprint --json > host.json",
        formatter_class=_Formatter,
    )
    fp.add_argument("--json", action="store_true", help="print JSON instead of a table")


def schema_parser(sub: Any) -> None:
    """``schema``."""
    sc = sub.add_parser(
        "schema",
        help="print the campaign file's JSON Schema",
        description="Print the JSON Schema of campaign files (for editors).",
        epilog="example:\n  reportgen schema > campaign.schema.json",
        formatter_class=_Formatter,
    )
    sc.set_defaults()


def completion_parser(sub: Any) -> None:
    """``completion``."""
    co = sub.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print a completion script for reportgen's commands, flags and file "
        "arguments: bash reads it from ~/.local/share/bash-completion/completions/reportgen, "
        "zsh from a file named _reportgen in a folder of its $fpath (e.g. ~/.zfunc).",
        epilog="example:\n  reportgen completion bash > "
        "~/.local/share/bash-completion/completions/reportgen",
        formatter_class=_Formatter,
    )
    co.add_argument("shell", choices=["bash", "zsh"])


def where_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the servers and the load run (``validate``, ``plan`` and ``run``): over host.*
    and campaign.parallel in the file, before it is checked."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--ssh",
        metavar="[USER@]HOST",
        help="run the servers and the load on this GPU host over SSH (host.executor = "
        '"ssh"; the rest of host.ssh, such as python, from the campaign); the run directory '
        "and the report stay here",
    )
    where.add_argument(
        "--slurm",
        nargs="?",
        const="",
        metavar="PARTITION",
        help='run each experiment as a Slurm job (host.executor = "slurm"), in PARTITION '
        "(default: host.slurm.partition, else the cluster's); the rest of host.slurm from the "
        "campaign. Put it after the campaign file, or write --slurm=PARTITION",
    )
    parser.add_argument(
        "--parallel",
        type=int,
        metavar="N",
        help="with Slurm: up to N experiments at once, each on a node of its own, as soon as "
        "the one it builds on is decided (campaign.parallel)",
    )
