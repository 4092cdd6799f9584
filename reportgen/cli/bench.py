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
from reportgen.errors import CampaignError, Problem

# --dataset NAME[:PATH]: the campaign's prompt sources
DATASETS = ("random", "shared-prefix", "sharegpt", "jsonl")


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
    else:
        workload["requests_per_level"] = args.requests
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
    return {
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
