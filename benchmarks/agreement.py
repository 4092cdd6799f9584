"""Do reportgen's numbers agree with SGLang's bench_serving and vLLM's bench client?

    python benchmarks/agreement.py                   # 3 repetitions of C=1, 8, 32: ~7 minutes
    python benchmarks/agreement.py --reps 5 --levels 1,16 --tolerance 0.03
    python benchmarks/agreement.py --ttft-ms 150 --itl-ms 15   # paced like a larger model

Same server, same work: `reportgen sim` paced like a served model (by default TTFT 50 ms,
ITL 10 ms, with 5% lognormal jitter so streams drift out of step as they do on a real engine),
the same
prompts, 32 output tokens, a closed loop of C requests in flight, the same request count, no
warm-up. Every tool runs every level once per repetition, in an order that rotates between
repetitions, each run against a fresh server (seeded by repetition, so within a repetition
every tool meets the same server).

Compared: output tok/s and TTFT p50 as each tool reports them (bench_serving's and vLLM's
own `output_throughput` and `median_ttft_ms`; for reportgen, what its report shows:
`reportgen.analysis.summary.summarize`). Per level, metric and peer: the ratio reportgen /
peer in each repetition, then their geometric mean with a 95% t interval. A pair agrees when
the mean ratio is within the tolerance (3%). Exit status: 0 all agree, 1 some disagree, 2 a
tool could not run. Peers come from benchmarks/.peers-venv (see loadgen.py, which installs
them); results go to benchmarks/results/agreement-latest.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from lgbench import env, procs, servers, tokenizer  # noqa: E402
from lgbench.clients import CLIENTS, Job  # noqa: E402
from scipy import stats  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
FILLER = "please write a short story about the quiet river at night and the city light"
PEERS = ("sglang", "vllm")
METRICS = ("output_tok_s", "ttft_p50_ms")
JITTER = 0.05
OUTPUT_TOKENS = 32


def requests_for(c: int) -> int:
    return max(20, 4 * c)


def numbers(client: str, rundir: Path) -> dict[str, float]:
    """The tool's own output tok/s and TTFT p50 (ms)."""
    if client == "reportgen":
        summary = json.loads((rundir / "reportgen.json").read_text())["summary"]
        return {"output_tok_s": summary["output_tok_s"], "ttft_p50_ms": summary["ttft_p50_ms"]}
    if client == "sglang":
        out = json.loads((rundir / "sglang.jsonl").read_text().splitlines()[-1])
    else:
        out = json.loads((rundir / "vllm.json").read_text())
    return {"output_tok_s": out["output_throughput"], "ttft_p50_ms": out["median_ttft_ms"]}


def ratio_summary(ratios: list[float], tolerance: float) -> dict[str, Any]:
    """Geometric mean of the ratios with a 95% t interval, and whether it is within
    ``tolerance`` of 1."""
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    if len(logs) > 1:
        half = stats.t.ppf(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    else:
        half = float("nan")
    ratio = math.exp(mean)
    return {
        "ratios": ratios,
        "ratio": ratio,
        "ci95": [math.exp(mean - half), math.exp(mean + half)] if len(logs) > 1 else None,
        "agrees": abs(ratio - 1) <= tolerance,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3, help="repetitions (default: 3)")
    parser.add_argument("--levels", default="1,8,32", help="concurrency levels (default: 1,8,32)")
    parser.add_argument("--tolerance", type=float, default=0.03, help="default: 0.03 (3%%)")
    parser.add_argument("--peers", default=",".join(PEERS), help="default: sglang,vllm")
    parser.add_argument("--ttft-ms", type=float, default=50.0, help="server TTFT (default: 50)")
    parser.add_argument("--itl-ms", type=float, default=10.0, help="server ITL (default: 10)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary work folder")
    args = parser.parse_args(argv)
    levels = [int(c) for c in args.levels.split(",") if c]
    server_flags = {"ttft_ms": args.ttft_ms, "itl_ms": args.itl_ms, "jitter": JITTER}
    peers = [p for p in args.peers.split(",") if p]
    t_start = time.monotonic()

    def say(msg: str) -> None:
        print(f"[{time.monotonic() - t_start:6.1f}s] {msg}", flush=True)

    missing = [p for p in peers if not (env.status(p) or {}).get("ok")]
    if missing:
        say(f"not installed: {', '.join(missing)}; run `python benchmarks/loadgen.py` once")
        return 2
    work = Path(tempfile.mkdtemp(prefix="agreement-"))
    tok = tokenizer.write(work / "tokenizer")
    tools = ["reportgen", *peers]
    runs: list[dict[str, Any]] = []
    failed = False
    try:
        for rep in range(args.reps):
            for c in levels:
                order = tools[rep % len(tools) :] + tools[: rep % len(tools)]
                for name in order:
                    client = CLIENTS[name]
                    run_id = f"a{len(runs):03d}"
                    rundir = work / f"{run_id}-{name}-c{c}-rep{rep}"
                    rundir.mkdir()
                    server = servers.start_sim(
                        rundir, "sim", record=False, seed=rep, **server_flags
                    )
                    n = requests_for(c)
                    job = Job(
                        run_id=run_id,
                        client=name,
                        workload="agreement",
                        url=server.url,
                        concurrency=c,
                        requests=n,
                        output_tokens=OUTPUT_TOKENS,
                        prompts=[f"{run_id}-{i:06d} {FILLER}" for i in range(n)],
                        workdir=rundir,
                        tokenizer=tok,
                    )
                    try:
                        fin = procs.run_measured(
                            client.command(job),
                            rundir / "client.log",
                            120 + n,
                            env={**os.environ, **client.env()},
                        )
                    finally:
                        server.stop()
                    row: dict[str, Any] = {"rep": rep, "concurrency": c, "client": name}
                    if fin.returncode != 0:
                        tail = (rundir / "client.log").read_text(errors="replace")[-800:]
                        row["error"] = f"exit code {fin.returncode}: {tail}"
                        failed = True
                        say(f"rep {rep} C={c} {name}: FAILED {row['error'][-300:]}")
                    else:
                        row.update(numbers(name, rundir))
                        say(
                            f"rep {rep} C={c} {name}: {row['output_tok_s']:.1f} output tok/s, "
                            f"TTFT p50 {row['ttft_p50_ms']:.2f} ms"
                        )
                    runs.append(row)
    finally:
        procs.stop_all()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    comparisons = []
    for c in levels:
        for peer in peers:
            for metric in METRICS:
                ratios = []
                for rep in range(args.reps):
                    mine = [
                        r
                        for r in runs
                        if (r["rep"], r["concurrency"], r["client"]) == (rep, c, "reportgen")
                    ]
                    theirs = [
                        r
                        for r in runs
                        if (r["rep"], r["concurrency"], r["client"]) == (rep, c, peer)
                    ]
                    if mine and theirs and metric in mine[0] and metric in theirs[0]:
                        ratios.append(mine[0][metric] / theirs[0][metric])
                if ratios:
                    comparisons.append(
                        {"concurrency": c, "peer": peer, "metric": metric}
                        | ratio_summary(ratios, args.tolerance)
                    )
    versions = {p: (env.status(p) or {}).get("version") for p in peers}
    result = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "server": {"kind": "reportgen sim", **server_flags, "output_tokens": OUTPUT_TOKENS},
        "levels": levels,
        "reps": args.reps,
        "tolerance": args.tolerance,
        "versions": versions,
        "runs": runs,
        "comparisons": comparisons,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "agreement-latest.json").write_text(json.dumps(result, indent=1))
    print()
    print(
        f"Server: reportgen sim, TTFT {args.ttft_ms:g} ms, ITL {args.itl_ms:g} ms, jitter "
        f"{JITTER:g}; {OUTPUT_TOKENS} output tokens; requests per run = max(20, 4*C)."
    )
    print(table(comparisons, runs, args.reps, versions, args.tolerance))
    if failed:
        return 2
    return 0 if all(c["agrees"] for c in comparisons) else 1


def table(
    comparisons: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    reps: int,
    versions: dict[str, Any],
    tolerance: float,
) -> str:
    def mean_of(c: int, client: str, metric: str) -> float | None:
        xs = [
            r[metric]
            for r in runs
            if r["concurrency"] == c and r["client"] == client and metric in r
        ]
        return statistics.fmean(xs) if xs else None

    peers = ", ".join(f"{p} {v}" for p, v in versions.items())
    lines = [
        f"reportgen against {peers}: {reps} repetitions, ratio = reportgen / peer (geometric "
        f"mean, 95% CI); agrees when within {tolerance:.0%}.",
        "",
        "| C | metric | peer | reportgen | peer's | peer - reportgen | ratio | 95% CI | agrees |",
        "|---:|---|---|---:|---:|---:|---:|---|---|",
    ]
    for comp in comparisons:
        c, metric, peer = comp["concurrency"], comp["metric"], comp["peer"]
        mine, theirs = mean_of(c, "reportgen", metric), mean_of(c, peer, metric)
        ci = comp["ci95"]
        lines.append(
            f"| {c} | {metric} | {peer} | {mine:.2f} | {theirs:.2f} | {theirs - mine:+.2f} | "
            f"{comp['ratio']:.3f} | "
            + (f"{ci[0]:.3f}-{ci[1]:.3f}" if ci else "-")
            + f" | {'yes' if comp['agrees'] else 'NO'} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
