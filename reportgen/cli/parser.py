"""Every ``reportgen`` command's arguments and help (each ends with an example)."""

from __future__ import annotations

import argparse
from pathlib import Path

from reportgen import __version__, engines
from reportgen.cli.argtypes import (
    DIRECTORY,
    FILE,
    _count,
    _Formatter,
    _header,
    _json_object,
    _levels,
    _percentiles,
    _positive_float,
    _positive_int,
    _rates,
    _ratio,
    _seconds,
    _seconds_or_none,
    _slo,
)
from reportgen.cli.bench import ramp_and_price_arguments
from reportgen.cli.compare_args import compare_parsers


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

    v = sub.add_parser(
        "validate",
        help="check campaign files (schema and references)",
        description="Check campaign files and report every problem at once, "
        "each with the file, the key and the value. Starts nothing.",
        epilog="example:\n  reportgen validate campaigns/demo.toml",
        formatter_class=_Formatter,
    )
    v.add_argument("campaigns", nargs="+", type=Path, metavar="CAMPAIGN").complete = FILE  # type: ignore[attr-defined]
    v.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: each file's errors and warnings (exit code as without)",
    )
    _where_arguments(v)

    pl = sub.add_parser(
        "plan",
        help="print each experiment's resolved command, env and workload",
        description="Print, for each experiment, the exact server command line, "
        "its environment (secrets redacted) and workload, without "
        "starting anything.",
        epilog="example:\n  reportgen plan campaigns/demo.toml",
        formatter_class=_Formatter,
    )
    pl.add_argument("campaign", type=Path).complete = FILE  # type: ignore[attr-defined]
    pl.add_argument("--json", action="store_true", help="print the plan as JSON")
    _where_arguments(pl)

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
    r.add_argument("campaign", type=Path).complete = FILE  # type: ignore[attr-defined]
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
    _where_arguments(r)

    b = sub.add_parser(
        "bench",
        help="benchmark a server that is already running (no campaign file)",
        description="Benchmark an OpenAI-compatible server that is already up, as `vllm bench "
        "serve --base-url` does: the flags become a campaign of one experiment (written "
        "beside the runs, to run again or grow), run like any campaign into a run directory "
        "with results and a report. The engine is told from the server's endpoints "
        "(/metrics, /server_info, /version) unless --engine names it; its /version, "
        "/server_info and /v1/models answers and /metrics around every level are recorded. "
        "An API key in OPENAI_API_KEY is sent as a bearer token (never recorded).",
        epilog="example:\n  reportgen bench http://127.0.0.1:8000 --concurrency 1,8,32 "
        "--requests 200 --input-tokens 1024 --output-tokens 256",
        formatter_class=_Formatter,
    )
    b.add_argument("url", metavar="URL", help="the server's address: http://host:port")
    b.add_argument(
        "--engine",
        default="auto",
        choices=["auto", *engines.names()],
        help="which engine serves there (default: told from its endpoints)",
    )
    b.add_argument("--model", help="model name to request (default: the first /v1/models lists)")
    b.add_argument(
        "--api",
        choices=["chat", "completions"],
        default=None,
        help="default: the one the URL names (.../v1/completions), else chat",
    )
    b.add_argument(
        "--concurrency",
        type=_levels,
        default=None,
        metavar="C[,C...]",
        help="concurrency levels, comma-separated (default: 1); with --request-rate, one "
        "value: the most requests in flight (default: no cap)",
    )
    b.add_argument(
        "--request-rate",
        type=_rates,
        default=None,
        metavar="R[,R...]",
        help="open loop: request rates as the levels, requests per second, comma-separated "
        "(Poisson arrivals; inf: every request at once), e.g. 1,2,4,inf (default: closed "
        "loop, C clients); with --find-max, the first rate the search tries",
    )
    amount = b.add_mutually_exclusive_group()
    amount.add_argument(
        "--requests",
        type=_positive_int,
        default=None,
        help="requests per level (default 100; with --find-max, 30-second probes instead)",
    )
    amount.add_argument(
        "--duration", type=_seconds, default=None, metavar="S", help="seconds per level instead"
    )
    b.add_argument(
        "--find-max",
        metavar="SLO",
        default=None,
        help="instead of fixed levels, search the highest concurrency (with --request-rate: "
        'the highest rate) meeting these bounds, e.g. "ttft_ms.p99<500,itl_ms.p99<50": from '
        "the first --concurrency level (or rate), doubling then bisecting to within 10%%; each "
        "probe a 30-second level after its own warm-up unless --requests or --duration says",
    )
    b.add_argument(
        "--find-max-probes",
        type=_positive_int,
        default=8,
        metavar="N",
        help="most levels the search runs (default 8)",
    )
    b.add_argument(
        "--max-concurrency",
        type=_positive_int,
        default=1024,
        metavar="C",
        help="the highest concurrency the search tries (default 1024)",
    )
    b.add_argument(
        "--max-rate",
        type=_rates,
        default=None,
        metavar="R",
        help="the highest request rate a rate search tries (default 1024)",
    )
    b.add_argument("--input-tokens", type=_positive_int, default=256, metavar="N")
    b.add_argument("--output-tokens", type=_positive_int, default=128, metavar="N")
    b.add_argument(
        "--range-ratio",
        type=_ratio,
        default=0.0,
        metavar="R",
        help="lengths drawn uniformly within +-R of --input-tokens and --output-tokens, as "
        "vLLM's --random-range-ratio (default 0: all alike; e.g. 0.5, so that requests do "
        "not finish together in waves)",
    )
    b.add_argument(
        "--dataset",
        default="random",
        metavar="NAME[:PATH]",
        help="prompts: random (default), shared-prefix, sharegpt:FILE.json, jsonl:FILE.jsonl",
    )
    b.add_argument(
        "--repetitions", type=_positive_int, default=2, help="runs of each level (default 2)"
    )
    b.add_argument(
        "--warmup",
        type=_count,
        default=8,
        metavar="N",
        help="requests sent first and discarded",
    )
    b.add_argument(
        "--level-warmup-max",
        type=_seconds_or_none,
        default=None,
        metavar="S",
        help="most seconds each level warms up at its own load until steady (default 120; "
        "0: none, only --warmup's requests)",
    )
    b.add_argument(
        "--burstiness",
        type=_positive_float,
        default=1.0,
        metavar="B",
        help="open loop: gamma-distributed gaps of shape B, as vLLM's --burstiness (default 1: "
        "Poisson; below 1 burstier, above 1 more even)",
    )
    ramp_and_price_arguments(b)
    b.add_argument(
        "--extra-body",
        type=_json_object,
        default=None,
        metavar="JSON",
        help="more fields in every request's body, e.g. '{\"top_p\": 0.9}' (reportgen's "
        "own: temperature 0 and the exact lengths)",
    )
    for flag, kind in (("--temperature", float), ("--top-p", float), ("--top-k", int)):
        b.add_argument(flag, type=kind, default=None, help="sampling, sent in every request")
    b.add_argument(
        "--ignore-eos",
        action="store_true",
        help="as vLLM's, and always so here: every request asks the engine for exactly "
        "--output-tokens (ignore_eos, min_tokens where the engine takes them)",
    )
    b.add_argument(
        "--tokenizer",
        default=None,
        metavar="PATH",
        help="the model's tokenizer (a folder or hub name): exact prompt lengths, counted outputs",
    )
    b.add_argument(
        "--goodput",
        nargs="+",
        type=_slo,
        default=None,
        metavar="KEY:MS",
        help="SLOs a request must meet to count as goodput, as vLLM's: ttft:500 tpot:50 e2el:2000 "
        "(milliseconds)",
    )
    b.add_argument(
        "--header",
        action="append",
        type=_header,
        default=None,
        metavar="NAME=VALUE",
        help="an HTTP header sent with every request (repeatable), e.g. X-Route=pool-a; not "
        "a credential: a key goes in OPENAI_API_KEY",
    )
    b.add_argument(
        "--percentiles",
        type=_percentiles,
        default=(),
        metavar="P[,P...]",
        help="also show TTFT, TPOT, ITL and E2E at these percentiles, e.g. 25,50,99.9 (in "
        "--json too; as vLLM's --metric-percentiles)",
    )
    b.add_argument(
        "--multi-turn",
        type=_positive_int,
        default=1,
        metavar="N",
        help="each client holds conversations of N turns, re-sending the history (default 1)",
    )
    b.add_argument("--seed", type=int, default=0)
    b.add_argument(
        "--request-timeout",
        type=_seconds,
        default=600.0,
        metavar="S",
        help="a request not answered in full within S seconds fails as a timeout (default 600)",
    )
    b.add_argument(
        "--ready-timeout",
        type=_seconds,
        default=60.0,
        metavar="S",
        help="how long to wait for a one-token answer before measuring (default 60)",
    )
    b.add_argument("--name", default="bench", help="the run's name: output/NAME/ (default bench)")
    b.add_argument("--title", default=None, help="the report's title")
    b.add_argument("--output", type=Path, default=Path("output"), help="default: output/")
    b.add_argument("--no-pdf", action="store_true", help="render HTML only")
    b.add_argument("--quiet", action="store_true", help="one line per experiment, no live bars")
    b.add_argument("--json", action="store_true", help="print the outcome as JSON (as run)")
    b.add_argument(
        "--save-result",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write that JSON to FILE (as vllm bench serve's --save-result)",
    )

    rd = sub.add_parser(
        "render",
        help="render the report (HTML, PDF, Markdown, CSV) from saved results",
        description="Build report.html (self-contained), report.pdf, report.md (a summary "
        "for a pull request or a chat) and tables/*.csv from a run directory's saved results "
        "alone; no GPU or server needed.",
        epilog="example:\n  reportgen render output/demo/20261129T150000Z-1a2b3c",
        formatter_class=_Formatter,
    )
    rd.add_argument("run_dir", type=Path, metavar="RUN_DIR").complete = DIRECTORY  # type: ignore[attr-defined]
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
    ).complete = FILE  # type: ignore[attr-defined]
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
    ).complete = FILE  # type: ignore[attr-defined]
    vf.add_argument(
        "--run-dir", type=Path, default=None, help="where the raw tables are (default: beside it)"
    )

    compare_parsers(sub)

    # `reportgen sim ...` is handed to the simulator's own parser (see main); listed here for
    # the command overview.
    sub.add_parser("sim", help="run the simulated OpenAI-compatible server (no GPU needed)")

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

    sc = sub.add_parser(
        "schema",
        help="print the campaign file's JSON Schema",
        description="Print the JSON Schema of campaign files (for editors).",
        epilog="example:\n  reportgen schema > campaign.schema.json",
        formatter_class=_Formatter,
    )
    sc.set_defaults()

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
    return p


def _where_arguments(parser: argparse.ArgumentParser) -> None:
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
