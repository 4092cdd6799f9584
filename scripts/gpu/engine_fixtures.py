#!/usr/bin/env python3
"""Record what a real engine answers, raw, for tests/fixtures/engines/<engine>-<version>/.

Two modes, standard library only (it runs on a GPU host beside the engine):

``watch``: beside a campaign (``reportgen run``), poll the port its servers listen on. For
each server that comes up it saves the first ``/metrics`` text it answers (before the load)
and the last one (after it), and the info endpoints' answers once, then waits for the next
server. One GET of ``/metrics`` every ``--interval`` seconds is all it adds to the load.

    python3 scripts/gpu/engine_fixtures.py watch --port 18700 --out /tmp/fx/vllm &

``load``: against a server already running, scrape ``/metrics``, send ``--requests``
completions whose prompts share a long prefix (so a prefix cache has something to hit),
scrape again. Used for the prefix-cache counters, which random campaign prompts never move.

    python3 scripts/gpu/engine_fixtures.py load --port 18700 --model M --out /tmp/fx/vllm-load

Files: ``server<N>-metrics-first.txt``, ``server<N>-metrics-last.txt``, ``server<N>-info.json``
(every info path: status and body), ``watch.jsonl`` (one line per server: when it answered
first and last); for ``load``: ``metrics-before.txt``, ``metrics-after.txt``, ``load.json``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import random
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

INFO_PATHS = (
    "/version",
    "/v1/models",
    "/server_info",
    "/get_server_info",
    "/get_model_info",
    "/model_info",
    "/load",
    "/health",
)


def get(base: str, path: str, timeout: float = 3.0) -> tuple[int, str]:
    """(status, body); status 0 with the reason when nothing answered."""
    try:
        with urllib.request.urlopen(base + path, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        return 0, f"{type(exc).__name__}: {exc}"


def info(base: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in INFO_PATHS:
        status, body = get(base, path)
        try:
            parsed: Any = json.loads(body)
        except ValueError:
            parsed = body[:20000]
        out[path] = {"status": status, "body": parsed}
    return out


def watch(args: argparse.Namespace) -> int:
    base = f"http://{args.host}:{args.port}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n, up, misses, first_at = 0, False, 0, 0.0
    stop = Path(args.stop_file) if args.stop_file else None
    while not (stop and stop.exists()):
        status, body = get(base, "/metrics")
        if status == 200 and not up:
            n, up, misses, first_at = n + 1, True, 0, time.time()
            (out / f"server{n}-metrics-first.txt").write_text(body)
            (out / f"server{n}-info.json").write_text(json.dumps(info(base), indent=1) + "\n")
        elif status == 200:
            misses = 0
            (out / f"server{n}-metrics-last.txt").write_text(body)
            with (out / "watch.jsonl").open("a") as f:
                f.write(json.dumps({"server": n, "first_at": first_at, "last_at": time.time()}))
                f.write("\n")
        elif up:
            misses += 1
            if misses >= 2:  # gone: wait for the next one
                up = False
        time.sleep(args.interval if up else 1.0)
    return 0


WORDS = [c + v for c in "kmtnrsvpdghlbf" for v in "aeiou"]


def shared_prefix_prompts(count: int, prefix_words: int, suffix_words: int, seed: int) -> list[str]:
    """``count`` prompts: one long shared prefix (a system prompt), then distinct words."""
    rng = random.Random(seed)
    prefix = " ".join(rng.choice(WORDS) + rng.choice(WORDS) for _ in range(prefix_words))
    return [
        f"{prefix}\nquestion {i}: "
        + " ".join(rng.choice(WORDS) + rng.choice(WORDS) for _ in range(suffix_words))
        for i in range(count)
    ]


def complete(base: str, model: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
    }
    req = urllib.request.Request(
        base + "/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            data = json.loads(resp.read())
        return {"status": 200, "s": time.perf_counter() - t0, "usage": data.get("usage")}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "error": exc.read().decode("utf-8", "replace")[:2000]}
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        return {"status": 0, "error": f"{type(exc).__name__}: {exc}"}


def load(args: argparse.Namespace) -> int:
    base = f"http://{args.host}:{args.port}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics-before.txt").write_text(get(base, "/metrics")[1])
    (out / "info.json").write_text(json.dumps(info(base), indent=1) + "\n")
    prompts = shared_prefix_prompts(args.requests, args.prefix_words, args.suffix_words, 0)
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        answers = list(pool.map(lambda p: complete(base, args.model, p, args.max_tokens), prompts))
    took = time.time() - t0
    time.sleep(args.settle)  # engines log and export some counters on an interval
    (out / "metrics-after.txt").write_text(get(base, "/metrics")[1])
    ok = [a for a in answers if a["status"] == 200]
    summary = {
        "requests": len(answers),
        "ok": len(ok),
        "seconds": took,
        "prefix_words": args.prefix_words,
        "suffix_words": args.suffix_words,
        "usage_first": ok[0]["usage"] if ok else None,
        "errors": [a for a in answers if a["status"] != 200][:5],
    }
    (out / "load.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"engine_fixtures: {len(ok)}/{len(answers)} answered in {took:.1f} s")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    w = sub.add_parser("watch", help="save /metrics and info answers of each server that comes up")
    w.add_argument("--port", type=int, required=True)
    w.add_argument("--host", default="127.0.0.1")
    w.add_argument("--out", required=True)
    w.add_argument("--interval", type=float, default=5.0)
    w.add_argument("--stop-file", help="stop once this file exists (else run until killed)")
    lo = sub.add_parser("load", help="shared-prefix requests between two /metrics scrapes")
    lo.add_argument("--port", type=int, required=True)
    lo.add_argument("--host", default="127.0.0.1")
    lo.add_argument("--out", required=True)
    lo.add_argument("--model", required=True, help="the model name the server answers to")
    lo.add_argument("--requests", type=int, default=64)
    lo.add_argument("--concurrency", type=int, default=8)
    lo.add_argument("--prefix-words", type=int, default=200)
    lo.add_argument("--suffix-words", type=int, default=20)
    lo.add_argument("--max-tokens", type=int, default=32)
    lo.add_argument("--settle", type=float, default=3.0, help="seconds before the last scrape")
    args = ap.parse_args(argv)
    return watch(args) if args.mode == "watch" else load(args)


if __name__ == "__main__":
    sys.exit(main())
