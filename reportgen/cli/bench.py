"""``reportgen bench URL``: benchmark a server that is already running, with no campaign file.

The flags become a campaign of one experiment whose server is ``URL`` (``server.base_url``),
written as a TOML file beside the runs (so the same benchmark can be run again, edited, or
grown into a campaign), then run as ``reportgen run`` runs any campaign: the same run
directory, results, report and exit codes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
from pathlib import Path
from typing import Any

from rich.console import Console

from reportgen.campaign.base import BASE_URL, ID
from reportgen.cli.argtypes import _positive_float, _rps, _steps
from reportgen.errors import CampaignError, Problem

# --dataset NAME[:PATH]: the campaign's prompt sources
DATASETS = ("random", "shared-prefix", "sharegpt", "jsonl")
DEFAULT_REQUESTS = 100  # requests a level, where neither --requests nor --duration is given
FIND_MAX_PROBE_S = 30.0  # ... and the seconds of each --find-max probe (after its warm-up)


def cmd_bench(args: argparse.Namespace, out: Console, err: Console) -> int:
    import tomli_w

    from reportgen import campaign
    from reportgen.cli.runs import RunRequest, run_campaign
    from reportgen.run import external, static

    url, named = args.url.rstrip("/"), None
    for path, api in (("/v1/chat/completions", "chat"), ("/v1/completions", "completions")):
        if url.endswith(path):  # an endpoint, as `vllm bench serve --endpoint` names one
            url, named = url.removesuffix(path), api
    url = url.removesuffix("/v1")
    if args.api and named and args.api != named:
        said = f"the URL names the {named} API's endpoint; give one of the two"
        raise _refused("--api", args.api, said)
    args.api = args.api or named or "chat"
    if not re.match(BASE_URL, url):
        raise _refused("URL", args.url, "write http://host:port (or https://)")
    ramp = ramp_rates(args)
    if ramp:
        args.request_rate = ramp
        (err if args.json else out).print(
            f"ramp-up {args.ramp_up_strategy} from {args.ramp_up_start_rps:g} to "
            f"{args.ramp_up_end_rps:g} req/s: measured as {len(ramp)} rate levels "
            f"({', '.join(f'{r:g}' for r in ramp)} req/s), each rate a level of its own",
            markup=False,
        )
    if args.save_result is not None and args.save_result.is_dir():
        raise _refused("--save-result", str(args.save_result), "a folder: name a file")
    if not re.fullmatch(ID, args.name):  # before the server is asked anything
        raise _refused(
            "--name",
            args.name,
            "the run's folder under --output: letters, digits, '.', '_' and '-' (at most 64, "
            "the first a letter or digit)",
        )
    # the flags checked together as a campaign before the server is asked anything
    campaign.loads(
        tomli_w.dumps(
            campaign_data(args, url, "generic" if args.engine == "auto" else args.engine)
        ),
        "reportgen bench",
    )
    engine, how = args.engine, "as given (--engine)"
    if engine == "auto":
        engine, how = external.detect_engine(url, external.auth_headers())
    (err if args.json else out).print(f"engine: {engine} ({how})", markup=False)
    data = campaign_data(args, url, engine)
    # checked before anything is written: a refused benchmark leaves no file behind (and a
    # name such as ../x never makes a folder outside --output)
    found = static.check(campaign.loads(tomli_w.dumps(data), "reportgen bench"))
    if found.errors or found.not_here:
        raise CampaignError(found.errors + found.not_here)
    folder = args.output / data["campaign"]["name"]
    folder.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = folder / f"bench-{stamp}.toml"
    header = (
        "# Written by `reportgen bench`: the benchmark as a campaign file. Run it again with\n"
        f"#     reportgen run {path}\n"
        "# or add experiments (each with its own base_url, or a server reportgen starts).\n"
    )
    path.write_text(header + tomli_w.dumps(data), encoding="utf-8")
    (err if args.json else out).print(f"campaign file: {path}", markup=False)
    asked = RunRequest(
        campaign=path,
        output=args.output,
        no_pdf=args.no_pdf,
        quiet=args.quiet,
        json=args.json,
        percentiles=args.percentiles,
        save_result=args.save_result,
    )
    return run_campaign(asked, out, err)


def _refused(flag: str, value: str, message: str) -> CampaignError:
    """A flag (or the URL) bench refuses, said as one line naming it."""
    return CampaignError([Problem("reportgen bench", flag, value, message)])


RAMPS = ("linear", "exponential")


def ramp_and_price_arguments(b: argparse.ArgumentParser) -> None:
    """bench's ramp-up flags, as `vllm bench serve` names them (``ramp_rates`` reads them),
    and its price (``host.price``)."""
    b.add_argument("--price", type=_positive_float, default=None, metavar="PER_HOUR",
                   help="what the server's host costs an hour (USD): the report gives the cost "
                   "of a million output and input tokens at each level")  # fmt: skip
    b.add_argument("--price-source", default="given to reportgen bench --price", metavar="TEXT",
                   help="where that price came from, quoted in the report")  # fmt: skip
    b.add_argument(
        "--ramp-up-strategy",
        choices=RAMPS,
        default=None,
        help="as vLLM's: request rates rising from --ramp-up-start-rps to --ramp-up-end-rps, "
        "measured as --ramp-up-steps rate levels (evenly spaced, or by a constant factor), each "
        "rate a level of its own; instead of --request-rate",
    )
    b.add_argument(
        "--ramp-up-start-rps",
        type=_rps,
        default=None,
        metavar="R",
        help="the ramp's first rate (req/s; 0 with linear: one step above 0)",
    )
    b.add_argument(
        "--ramp-up-end-rps",
        type=_rps,
        default=None,
        metavar="R",
        help="the ramp's last rate (req/s)",
    )
    b.add_argument(
        "--ramp-up-steps",
        type=_steps,
        default=5,
        metavar="N",
        help="rate levels the ramp is measured as (default: 5)",
    )


def ramp_rates(args: argparse.Namespace) -> list[float]:
    """`vllm bench serve`'s ramp-up (--ramp-up-strategy, --ramp-up-start-rps,
    --ramp-up-end-rps) as a staircase of --ramp-up-steps request-rate levels from the start
    rate to the end rate, evenly (linear) or by a constant factor (exponential): each rate is
    then measured by itself, where vLLM changes the rate inside one level and reports the
    level as a whole. A linear ramp from 0 starts one step above it (a rate of 0 sends
    nothing). Empty when no ramp was asked."""
    strategy, start, end = args.ramp_up_strategy, args.ramp_up_start_rps, args.ramp_up_end_rps
    if strategy is None:
        for flag, value in (("--ramp-up-start-rps", start), ("--ramp-up-end-rps", end)):
            if value is not None:
                raise _refused(flag, f"{value:g}", "a ramp's rate: give --ramp-up-strategy too")
        return []
    if start is None or end is None:
        missing = "--ramp-up-start-rps" if start is None else "--ramp-up-end-rps"
        raise _refused("--ramp-up-strategy", strategy, f"give {missing} too")
    if args.request_rate:
        said = ",".join(f"{r:g}" for r in args.request_rate)
        raise _refused("--request-rate", said, "the ramp sets the rates: give one of the two")
    if args.find_max:
        raise _refused("--find-max", args.find_max, "a search sets its own rates: drop the ramp")
    if not (0 <= start < end):
        said = f"{start:g} to {end:g}"
        raise _refused(
            "--ramp-up-start-rps", said, "a ramp rises: start at 0 or more, below the end"
        )
    if strategy == "exponential" and start == 0:
        raise _refused("--ramp-up-start-rps", "0", "an exponential ramp starts above 0")
    steps = args.ramp_up_steps
    if strategy == "exponential":
        rates = [start * (end / start) ** (k / (steps - 1)) for k in range(steps)]
    elif start == 0:
        rates = [end * (k + 1) / steps for k in range(steps)]
    else:
        rates = [start + (end - start) * k / (steps - 1) for k in range(steps)]
    # three significant digits between the two ends the user gave, which stay as given
    rates[0], rates[-1] = (rates[0] if start == 0 else start), end  # no rounding error at either
    for digits in range(3, 10):  # three significant digits, more where they would merge rates
        shown = [r if r in (start, end) else float(f"{r:.{digits}g}") for r in rates]
        if len(set(shown)) == len(shown):
            return shown
    raise _refused(
        "--ramp-up-steps", str(steps), f"too many steps for {start:g} to {end:g}: ask fewer"
    )


def campaign_data(args: argparse.Namespace, url: str, engine: str) -> dict[str, Any]:
    """The campaign the flags describe (as TOML data), loaded and checked like any other."""
    rates = args.request_rate
    levels = args.concurrency or ([] if rates else [1])  # rates: no cap unless one is given
    workload: dict[str, Any] = {
        "api": args.api,
        **({"concurrency": levels} if levels else {}),
        "input_tokens": args.input_tokens,
        "output_tokens": args.output_tokens,
        **({"range_ratio": args.range_ratio} if args.range_ratio else {}),
        "repetitions": args.repetitions,
        "warmup_requests": args.warmup,
        "seed": args.seed,
        "request_timeout_s": args.request_timeout,
    }
    if args.burstiness != 1.0:
        workload["burstiness"] = args.burstiness
    if args.level_warmup_max is not None:
        most = args.level_warmup_max
        workload["warmup"] = {"max_s": most} if most > 0 else {"steady": False}
    body = dict(args.extra_body or {})
    for name in ("temperature", "top_p", "top_k"):
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    if body:
        workload["extra_body"] = body
    if args.tokenizer:
        local = Path(args.tokenizer)
        workload["tokenizer"] = str(local.resolve()) if local.exists() else args.tokenizer
    if args.goodput:
        workload["slo"] = dict(args.goodput)
    if args.multi_turn > 1:
        workload["turns"] = args.multi_turn
    if args.header:
        workload["headers"] = dict(args.header)
    if args.duration is not None:
        workload["duration_s"] = args.duration
    elif args.requests is None and args.find_max:
        # each probe a steady load long enough for its tail: the bound is a p99 of requests
        workload["duration_s"] = FIND_MAX_PROBE_S
    else:
        workload["requests_per_level"] = args.requests or DEFAULT_REQUESTS
    objective: dict[str, Any] = {"metric": "output_tok_s"}
    if rates and not args.find_max:
        workload["request_rate"] = rates
    elif not rates:
        objective["concurrency"] = levels
    if args.find_max and rates:  # a search over request rates, from the first given
        most = args.max_rate[0] if args.max_rate else max(1024.0, rates[0])
        workload["find_max"] = {
            "slo": args.find_max,
            "over": "request_rate",
            "start": rates[0],
            "max": most,
            "probes": args.find_max_probes,
        }
    elif args.find_max:
        workload["find_max"] = {
            "slo": args.find_max,
            "start": levels[0],
            "max": args.max_concurrency,
            "probes": args.find_max_probes,
        }
        objective.pop("concurrency")  # the levels are the search's
    name, _, path = args.dataset.partition(":")
    if name != "random":
        workload["prompts"] = {
            "source": name,
            **({"path": str(Path(path).resolve())} if path else {}),
        }
    server: dict[str, Any] = {
        "engine": engine,
        "base_url": url,
        "ready_timeout_s": args.ready_timeout,
    }
    if args.model:
        server["model"] = args.model
    host = {"price": {"per_hour": args.price, "source": args.price_source}} if args.price else {}
    return {
        **({"host": host} if host else {}),
        "campaign": {
            "name": args.name,
            "title": args.title or f"Benchmark of {url}",
            "description": f"reportgen bench {url}: a server that was already running.",
            "objective": objective,
        },
        "server": server,
        "workload": workload,
        "experiment": [
            {
                "id": "bench",
                "why": f"The server as it runs at {url}, measured as found.",
            }
        ],
    }
