"""The arguments of ``bench`` (its handler: ``cli.bench``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reportgen import engines
from reportgen.cli.argtypes import (
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


def bench_parser(sub: Any) -> None:
    """``bench``."""
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
