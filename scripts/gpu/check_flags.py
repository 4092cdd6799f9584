#!/usr/bin/env python3
"""Check a campaign's server flags with the engine's own argument parser, where it is installed.

``reportgen validate`` checks flag names and choices against the engine's help text. This goes
further on a host where the engine is installed (the GPU host): every experiment's command, as
reportgen would start it, is parsed by the engine's argparse (SGLang's ``ServerArgs.add_cli_args``,
vLLM's ``serve`` parser), which also checks types, choices and arguments the help does not list.
Nothing is started and no model is read.

    python3 scripts/gpu/check_flags.py campaigns/qwen397b.toml [--out FILE]

Prints one line per experiment (``ok`` or the parser's own error) and exits 1 when any fails.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any


def sglang_parser() -> tuple[argparse.ArgumentParser, str]:
    import sglang
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    return parser, f"sglang {sglang.__version__}"


def vllm_parser() -> tuple[argparse.ArgumentParser, str]:
    import vllm
    from vllm.entrypoints.openai.cli_args import make_arg_parser

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # older layouts
        from vllm.utils import FlexibleArgumentParser  # type: ignore[no-redef,attr-defined]
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    parser.add_argument("model_tag", nargs="?")
    return parser, f"vllm {vllm.__version__}"


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """None when the parser takes ``argv``, else its own error message."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(argv)
    except SystemExit:
        lines = [x for x in err.getvalue().splitlines() if x.strip()]
        return lines[-1] if lines else "rejected"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("campaign", type=Path)
    ap.add_argument("--out", type=Path, help="also write the results as JSON here")
    opts = ap.parse_args()

    from reportgen import campaign as campaign_mod
    from reportgen import engines
    from reportgen.run.plan import plan

    camp = campaign_mod.load(opts.campaign)
    name = camp.model.server.engine
    make = {"sglang": sglang_parser, "vllm": vllm_parser}.get(name)
    if make is None:
        print(f"check_flags: engine {name!r} has no parser to check with (sglang, vllm)")
        return 2
    parser, version = make()
    engine = engines.get(name)
    rows: list[dict[str, Any]] = []
    for r in plan(camp):
        argv = engine.format_args(r.args)
        error = parse(parser, argv)
        rows.append({"experiment": r.id, "argv": argv, "error": error})
        print(f"{r.id}: {'ok' if error is None else error}")
    bad = sum(row["error"] is not None for row in rows)
    print(
        f"check_flags: {opts.campaign} against {version}'s parser: {len(rows) - bad} of "
        f"{len(rows)} experiments' flags accepted"
    )
    if opts.out:
        opts.out.write_text(
            json.dumps(
                {"campaign": str(opts.campaign), "engine": version, "experiments": rows}, indent=1
            )
            + "\n"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
