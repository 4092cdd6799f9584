"""How long does a large campaign's report take to render? HTML and PDF against their budgets.

    python benchmarks/render_speed.py                  # 20 x 8 x 3 x 500, 4 GPUs of telemetry
    python benchmarks/render_speed.py --gpus 0         # no telemetry (a host without NVML)
    python benchmarks/render_speed.py --no-pdf --repeat 5
    python benchmarks/render_speed.py --experiments 5 --requests 100 --out /tmp/small-run
    python benchmarks/render_speed.py --out /tmp/big-run --snapshot   # keep the run
    python benchmarks/render_speed.py --out /tmp/big-run --reuse --repeat 0 --profile

The target: a campaign of 20 experiments x 8 concurrency levels x 3 repetitions x 500
requests renders report.html in under 5 s and report.pdf in under 30 s on this 2-core
machine.

The script first writes a synthetic run directory of that size, the way a run writes one:
a typed ``results.model.Run`` saved with ``results.save`` after every experiment. A campaign
file parsed by ``reportgen.campaign`` (a vLLM campaign: Llama 3.3 70B on 4 GPUs, one flag
change per experiment, most built on the best so far), its experiments from
``run.plan.pending`` and ``describe``; per-request ``RequestRecord``s (start, first token,
the arrival of each of 64 output chunks, end) from a seeded closed-loop model of an engine
whose latencies grow with concurrency, saved with ``results.save_requests``; each ``Level``'s
``Summary`` from ``analysis.summary.summarize``, the aggregates from ``by_level``; its
session, warm-up and stop, engine counters, golden-prompt answers (``ProbeAnswer``), a server
log and ``evidence.log_evidence``; GPU telemetry rows at 20 Hz for ``--gpus`` GPUs
(``results.save_telemetry``, windows from ``telemetry.window``); the assumption checks from
``run.experiment.check`` (``analysis.checks.run_checks``, as the runner calls it); the
decision from ``analysis.verdict.decide_experiment`` (every headline metric and the p99
bootstrap included) and the best so far from ``drift.best_after``, the runner's own calls.
None of that is timed against the target (its time is printed apart).

Then it times, in this process, ``reportgen.render.render(run_dir, pdf=False)`` (all that
``reportgen render --no-pdf`` does: load results.json and the saved tables, build the view,
draw the charts, fill the template, write report.html and its companions) and
``render(run_dir, pdf=True)`` (all of ``reportgen render``: the same, plus the page for print
laid out and written by WeasyPrint; the PDF's budget pays for the HTML too), each
``--repeat`` times, or fewer when a run took over twice its target. The first HTML run
includes compiling the template, the first PDF run importing WeasyPrint (both also happen
once in every ``reportgen render``); the budget is compared with the median. Exit status 0
when both medians are within their budgets, 1 otherwise. ``--profile`` then runs each step
once more under cProfile (the charts drawn in this process, so that their work shows) and
prints its top entries by cumulative and by own time. ``--snapshot`` runs against a copy of
reportgen/ and templates/ taken at start, so that edits made to the tree during a run (a
template changed under an already imported view) cannot reach it halfway.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import gc
import heapq
import io
import json
import math
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SNAPSHOT_ENV = "RENDER_SPEED_SNAPSHOT"
if not os.environ.get(SNAPSHOT_ENV):  # this checkout's reportgen, whichever the venv holds
    sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # (--snapshot: its copy's)

from reportgen import __version__, engines, results  # noqa: E402
from reportgen.analysis import drift, verdict  # noqa: E402
from reportgen.analysis.summary import by_level, summarize  # noqa: E402
from reportgen.campaign import Resolved, parent_id, resolve  # noqa: E402
from reportgen.campaign import loads as load_campaign  # noqa: E402
from reportgen.load import sizing  # noqa: E402
from reportgen.load.records import RequestRecord  # noqa: E402
from reportgen.observe import evidence, fingerprint, sources, telemetry  # noqa: E402
from reportgen.results.engine_log import LogEvidence  # noqa: E402
from reportgen.results.levels import ClientLoad, GpuWindow, Level, Summary, Window  # noqa: E402
from reportgen.results.model import (  # noqa: E402
    EngineRecord,
    ProbeAnswer,
    Ready,
    Run,
    Session,
    Stop,
    TelemetryInfo,
    Warmup,
)
from reportgen.run.experiment import check  # noqa: E402
from reportgen.run.plan import describe, pending  # noqa: E402
from reportgen.run.progress import Quiet  # noqa: E402
from reportgen.run.resume import campaign_file  # noqa: E402
from reportgen.run.session import Context  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "tests" / "fixtures" / "gpu" / "h200-capture.json.xz"
HTML_TARGET_S = 5.0
PDF_TARGET_S = 30.0

MODEL = "meta-llama/Llama-3.3-70B-Instruct"
SERVED = "llama-3.3-70b"
INPUT_TOKENS = 512
OUTPUT_TOKENS = 64
TTFT0_MS = 45.0  # time to first token of a lone request (512-token prompt)
ITL0_MS = 13.0  # inter-token latency of a lone request
TTFT_GROWTH = 0.03  # TTFT x (1 + growth x C)
ITL_GROWTH = 0.03  # ITL x (1 + growth x C^0.85)
RUN_NOISE = 0.012  # sd of log speed from one repetition to the next
HZ = 20.0  # telemetry rate, as a run samples
CAMPAIGN_START = dt.datetime(2026, 11, 20, 6, 0, 0, tzinfo=dt.UTC)
MONO_START = 412_345.0  # perf_counter() at the campaign's start (the host's uptime)
ERROR_TEXT = (
    "RemoteProtocolError: peer closed connection without sending complete message body "
    "(incomplete chunked read)"
)


@dataclass(frozen=True)
class Spec:
    """One experiment of the synthetic campaign and its effect on the engine's latencies
    (multipliers: inter-token latency at C=1 and at the highest level, time to first token)."""

    id: str
    based_on: str | None
    args: dict[str, Any]
    why: str
    expect: str
    effect: tuple[float, float, float] = (1.0, 1.0, 1.0)
    env: dict[str, str] | None = None


SPECS = (
    Spec("baseline", None, {}, "The configuration everything else is measured against.",
         "Steady numbers across three repetitions."),
    Spec("fp8-kv-cache", "best", {"kv-cache-dtype": "fp8"},
         "An FP8 KV cache halves the cache's memory traffic in decode.",
         "Faster decode at high concurrency, no change at C=1", (0.99, 0.92, 1.0)),
    Spec("max-num-seqs-512", "best", {"max-num-seqs": 512},
         "More sequences per batch only matter past 256 in flight.",
         "Within noise up to C=128"),
    Spec("batched-tokens-16k", "best", {"max-num-batched-tokens": 16384},
         "A larger token budget per step prefills more prompts at once.",
         "Lower TTFT at high concurrency, decode a little slower", (1.0, 1.03, 0.88)),
    Spec("async-scheduling", "best", {"async-scheduling": True},
         "Scheduling the next step while the GPU runs this one hides the CPU's share.",
         "A few percent faster decode everywhere", (0.95, 0.96, 0.98)),
    Spec("enforce-eager", None, {"enforce-eager": True},
         "Without CUDA graphs every decode step pays its kernel launches.",
         "Much slower decode at low concurrency", (1.45, 1.12, 1.02)),
    Spec("gpu-mem-0.95", "best", {"gpu-memory-utilization": 0.95},
         "A larger KV cache admits more sequences before preemption.",
         "Within noise: nothing is preempted at these levels"),
    Spec("block-size-32", "best", {"block-size": 32},
         "Larger KV blocks mean fewer page-table entries per sequence.",
         "Within noise", (1.0, 1.01, 1.0)),
    Spec("flashinfer-attention", "best", {},
         "FlashInfer's decode kernels against the default attention backend.",
         "A few percent either way", (0.98, 0.97, 1.01), {"VLLM_ATTENTION_BACKEND": "FLASHINFER"}),
    Spec("ngram-speculation", "best",
         {"speculative-config": {"method": "ngram", "num_speculative_tokens": 4,
                                 "prompt_lookup_max": 4}},
         "Prompt-lookup speculation drafts tokens for free; it wins while the GPU idles.",
         "Faster at C=1, slower once batches are full", (0.72, 1.18, 1.03)),
    Spec("cuda-graph-sizes", "best", {"cuda-graph-sizes": [1, 2, 4, 8, 16, 32, 64, 128, 256]},
         "Capture a graph for every level measured, so no batch is padded.",
         "A small gain between captured sizes", (1.0, 0.98, 1.0)),
    Spec("long-prefill-2k", "best", {"long-prefill-token-threshold": 2048},
         "Long prompts prefill in 2k-token pieces between decode steps.",
         "Within noise for 512-token prompts", (1.0, 1.0, 1.01)),
    Spec("prefix-caching-off", "best", {"no-enable-prefix-caching": True},
         "Random prompts never hit the prefix cache; its bookkeeping may cost a little.",
         "Within noise", (1.0, 0.995, 1.0)),
    Spec("max-model-len-8k", "best", {"max-model-len": 8192},
         "A shorter context limit leaves more of the cache to concurrent sequences.",
         "Within noise at these lengths"),
    Spec("compile-level-3", "best", {"compilation-config": {"level": 3}},
         "Full torch.compile of the model fuses more elementwise kernels.",
         "One to three percent faster decode", (0.98, 0.985, 1.0)),
    Spec("scheduling-priority", "best", {"scheduling-policy": "priority"},
         "Priority scheduling with equal priorities should act as first come, first served.",
         "Within noise"),
    Spec("fp8-weights", "best", {"quantization": "fp8"},
         "FP8 weights halve the bytes read per decode step.",
         "Faster decode everywhere, and faster prefill", (0.78, 0.83, 0.86)),
    Spec("max-num-seqs-1024", "best", {"max-num-seqs": 1024},
         "A higher cap on sequences changes nothing below 512 in flight.", "Within noise"),
    Spec("custom-all-reduce-off", "best", {"disable-custom-all-reduce": True},
         "NCCL's all-reduce instead of vLLM's custom kernel across the four GPUs.",
         "Slower decode at low concurrency", (1.08, 1.03, 1.02)),
    Spec("swap-space-0", "best", {"swap-space": 0},
         "No CPU swap space: a preempted sequence is recomputed instead.",
         "Within noise: nothing is preempted"),
)  # fmt: skip

# Golden prompts: (prompt, expect, the answer, the answer with FP8 numerics).
PROBES = (
    ("Repeat after me: The capital of France is Paris.", "Paris",
     " The capital of France is Paris.", " The capital of France is Paris."),
    ("What is 17 + 25? Answer with the number only.", "42", " 42", " 42"),
    ("Name the largest planet in the solar system in one sentence.", "Jupiter",
     " The largest planet in the solar system is Jupiter.",
     " Jupiter is the largest planet in the solar system."),
)  # fmt: skip

SENTENCE = (
    "the model serves tokens in batches while the scheduler admits new requests and the "
    "cache keeps each sequence's keys and values on the device until it finishes"
)
WORDS = tuple(SENTENCE.split())


def specs(n: int) -> list[Spec]:
    out = list(SPECS[:n])
    for i in range(len(out), n):  # more than the named ones: harmless knobs
        out.append(
            Spec(f"tweak-{i + 1}", "best", {"max-num-seqs": 256 + 8 * i},
                 "A knob that should not matter at these levels.", "Within noise")
        )  # fmt: skip
    return out


# -- the campaign file ---------------------------------------------------------------------


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def campaign_text(args: argparse.Namespace, levels: list[int], exps: list[Spec]) -> str:
    wanted = [c for c in (1, 16, 128) if c in levels] or [levels[-1]]
    expect = (
        f'expect = {{ gpu_count = {args.gpus}, compute_capability = "9.0", gpu_name = "H200" }}'
        if args.gpus
        else ""
    )
    lines = [
        "# Synthetic campaign written by benchmarks/render_speed.py: the numbers are modelled,",
        "# not measured. It exists to time how long its report takes to render.",
        "",
        "[campaign]",
        'name = "render-speed"',
        f'title = "Render benchmark: {len(exps)} vLLM configurations of Llama 3.3 70B '
        f'on 4x H200 (synthetic)"',
        'description = "A synthetic campaign of the size the render target names; every number '
        'in it comes from a seeded model of an engine, not from a server."',
        f'objective = {{ metric = "output_tok_s", concurrency = {toml_value(wanted)}, '
        'direction = "higher" }',
        "margin = 0.03",
        "",
        "[host]",
        expect,
        "",
        "[server]",
        'engine = "vllm"',
        "args = "
        + toml_value(
            {
                "model": MODEL,
                "served-model-name": SERVED,
                "port": 8000,
                "tensor-parallel-size": 4,
                "max-num-seqs": 256,
                "max-num-batched-tokens": 8192,
                "gpu-memory-utilization": 0.9,
                "seed": 0,
            }
        ),
        'env = { NCCL_DEBUG = "WARN" }',
        "ready_timeout_s = 1200",
        "",
        "[workload]",
        'api = "chat"',
        f"concurrency = {toml_value(levels)}",
        f"requests_per_level = {args.requests}",
        f"input_tokens = {INPUT_TOKENS}",
        f"output_tokens = {OUTPUT_TOKENS}",
        f"repetitions = {args.repetitions}",
        "warmup_requests = 32",
        "seed = 0",
        "",
        "[[reference]]",
        'name = "synthetic reference point"',
        'metric = "output_tok_s"',
        f"concurrency = {levels[-1]}",
        "value = 3000",
        "gpus = 4",
        'source = "benchmarks/render_speed.py (a made-up number, to fill the table)"',
        'conditions = "512 input tokens, 64 output tokens, closed loop"',
    ]
    for prompt, expect_re, _, _ in PROBES:
        lines += [
            "",
            "[[probe]]",
            f"prompt = {json.dumps(prompt)}",
            f"expect = {json.dumps(expect_re)}",
        ]
    lines += [
        "",
        "[[check]]",
        'metric = "ttft_ms"',
        'stat = "p99"',
        "max = 3000",
        'description = "TTFT p99 under three seconds at every level"',
        "",
        "[[check]]",
        'log_absent = "CUDA out of memory"',
        "invalidates = true",
        'description = "No out-of-memory error in the server log"',
    ]
    for s in exps:
        lines += ["", "[[experiment]]", f'id = "{s.id}"']
        if s.based_on:
            lines.append(f'based_on = "{s.based_on}"')
        lines += [f"why = {json.dumps(s.why)}", f"expect = {json.dumps(s.expect)}"]
        if s.args:
            lines.append(f"args = {toml_value(s.args)}")
        if s.env:
            lines.append(f"env = {toml_value(s.env)}")
    return "\n".join(lines) + "\n"


# -- the engine model ----------------------------------------------------------------------


@dataclass(frozen=True)
class Effect:
    itl_low: float = 1.0
    itl_high: float = 1.0
    ttft: float = 1.0

    def times(self, other: tuple[float, float, float]) -> Effect:
        return Effect(self.itl_low * other[0], self.itl_high * other[1], self.ttft * other[2])

    def latencies(self, c: int, top: int) -> tuple[float, float]:
        """(TTFT ms, ITL ms) of the modelled engine at concurrency ``c``."""
        share = math.log2(c) / math.log2(top) if top > 1 else 0.0
        itl_mult = self.itl_low + (self.itl_high - self.itl_low) * share
        ttft = TTFT0_MS * (1 + TTFT_GROWTH * c) * self.ttft
        itl = ITL0_MS * (1 + ITL_GROWTH * c**0.85) * itl_mult
        return ttft, itl


TEXTS = tuple(
    " " + " ".join(WORDS[(k + j * 7) % len(WORDS)] for j in range(OUTPUT_TOKENS * 3 // 4))
    for k in range(len(WORDS))
)


def level_records(
    rng: np.random.Generator, c: int, rep: int, n: int, ttft_ms: float, itl_ms: float
) -> tuple[list[RequestRecord], float]:
    """Repetition ``rep`` of a closed loop of ``c`` clients against the modelled engine: its
    request records (times in seconds from the level's t0) and its duration."""
    run = rng.lognormal(0.0, RUN_NOISE)
    ttft = ttft_ms * run * rng.lognormal(0.0, 0.15, n) / 1e3
    gaps = itl_ms * run * rng.lognormal(0.0, 0.08, (n, OUTPUT_TOKENS - 1)) / 1e3
    stalls = rng.random(gaps.shape) < 0.004  # a prefill scheduled between decode steps
    gaps[stalls] *= rng.uniform(2.0, 6.0, int(stalls.sum()))
    service = ttft + gaps.sum(axis=1) + 0.0004
    starts = np.empty(n)
    free = [0.0003 + k * 0.00015 for k in range(min(c, n))]  # connections open before t0
    heapq.heapify(free)
    for i in range(n):
        t = heapq.heappop(free)
        starts[i] = t
        heapq.heappush(free, t + service[i] + 0.0001)
    first = starts + ttft
    chunks = first[:, None] + np.concatenate([np.zeros((n, 1)), np.cumsum(gaps, axis=1)], axis=1)
    ends = chunks[:, -1] + 0.0004
    failed = rng.random(n) < (1 / 4000 if c >= 64 else 0.0)  # a dropped connection, rarely
    chars = rng.integers(2, 8, (n, OUTPUT_TOKENS))  # output characters of each chunk
    prompt = rng.integers(INPUT_TOKENS - 3, INPUT_TOKENS + 4, n)
    texts = rng.integers(0, len(TEXTS), n)
    recs = []
    for i in range(n):
        times, sizes = chunks[i], chars[i]
        out = OUTPUT_TOKENS
        end = float(ends[i])
        status, error, text = "ok", None, TEXTS[texts[i]]
        if failed[i]:
            out = int(rng.integers(1, OUTPUT_TOKENS))
            times, sizes = times[:out], sizes[:out]
            end = float(times[-1]) + 0.002
            status, error, text = "error", ERROR_TEXT, text[: out * 4]
        recs.append(
            RequestRecord(
                index=i,
                start=float(starts[i]),
                first_token=float(first[i]),
                end=end,
                chunk_times=times.tolist(),
                chunk_chars=sizes.tolist(),
                input_tokens=int(prompt[i]),
                output_tokens=out,
                output_tokens_source="usage",
                requested_output_tokens=OUTPUT_TOKENS,
                status=status,
                http_status=200,
                error=error,
                output_text=text,
                concurrency=c,
                repetition=rep,
            )
        )
    return recs, float(ends.max()) + 0.0005


def client_stats(c: int, summary: Summary, ceiling: dict[str, Any]) -> ClientLoad:
    """What the driver records about the client's own load (``Driver._client``)."""
    workers = sizing.auto_workers(c, None, OUTPUT_TOKENS)
    cpu_s = summary.chunks / ceiling["chunks_per_cpu_s"] * 1.15 + 0.02
    limit = ceiling["chunks_per_cpu_s"] * workers
    load = (summary.chunk_s or 0.0) / limit
    return ClientLoad(
        workers=workers,
        cpu_s=cpu_s,
        cpu_util=cpu_s / summary.duration_s,
        loop_lag_ms={"p50": 0.4 + c / 400, "p99": 1.6 + c / 60, "max": 3.1 + c / 25},
        preopen_s=0.0018 + 0.00009 * c,
        ceiling_chunk_s=limit,
        load=load,
        limited=load > 0.8,
    )


def engine_metrics(summary: Summary, recs: list[RequestRecord], started: float) -> dict[str, Any]:
    """A vLLM scrape's deltas over one level (``evidence.deltas``'s shape)."""
    label = f'{{model_name="{SERVED}"}}'
    ok = [r for r in recs if r.status == "ok"]
    prompt = float(summary.input_tokens)
    e2e = sum(r.end - r.start for r in ok)
    ttft = sum((r.first_token or r.start) - r.start for r in ok)
    n = float(len(ok))
    gen = float(summary.output_tokens)
    counters = {
        f"vllm:prompt_tokens_total{label}": prompt,
        f"vllm:generation_tokens_total{label}": gen,
        f'vllm:request_success_total{{finished_reason="length",model_name="{SERVED}"}}': n,
        f"vllm:prefix_cache_queries_total{label}": prompt,
        f"vllm:prefix_cache_hits_total{label}": 16.0 * n,  # the chat template's shared start
        f"vllm:e2e_request_latency_seconds_sum{label}": e2e,
        f"vllm:e2e_request_latency_seconds_count{label}": n,
        f"vllm:time_to_first_token_seconds_sum{label}": ttft,
        f"vllm:time_to_first_token_seconds_count{label}": n,
        f"vllm:time_per_output_token_seconds_sum{label}": (e2e - ttft),
        f"vllm:time_per_output_token_seconds_count{label}": gen - n,
        f"vllm:request_queue_time_seconds_sum{label}": 0.0008 * n,
        f"vllm:request_queue_time_seconds_count{label}": n,
        f"vllm:request_prefill_time_seconds_sum{label}": ttft * 0.8,
        f"vllm:request_prefill_time_seconds_count{label}": n,
        f"vllm:request_decode_time_seconds_sum{label}": e2e - ttft,
        f"vllm:request_decode_time_seconds_count{label}": n,
        f"vllm:request_prompt_tokens_sum{label}": prompt,
        f"vllm:request_prompt_tokens_count{label}": n,
        f"vllm:request_generation_tokens_sum{label}": gen,
        f"vllm:request_generation_tokens_count{label}": n,
        f"vllm:iteration_tokens_total_sum{label}": prompt + gen,
        f"vllm:iteration_tokens_total_count{label}": gen
        / max(1.0, summary.achieved_concurrency or 0.0),
    }
    gauges = {
        "process_start_time_seconds": started,
        f"vllm:num_requests_running{label}": 0.0,
        f"vllm:num_requests_waiting{label}": 0.0,
        f"vllm:gpu_cache_usage_perc{label}": 0.0,
    }
    return {"counters": counters, "gauges": gauges}


def telemetry_rows(
    rng: np.random.Generator,
    gpus: int,
    begin: float,
    ready: float,
    end: float,
    windows: Sequence[tuple[float, float, int]],
    top: int,
) -> list[dict[str, Any]]:
    """Rows as ``Telemetry`` samples them (every GPU at each tick), on the perf_counter
    clock: loading until ``ready``, idle between levels, busy in each level's window."""
    t = np.arange(begin, end, 1 / HZ)
    k = t.size
    starts = np.array([w[0] for w in windows])
    stops = np.array([w[1] for w in windows])
    levels = np.array([w[2] for w in windows])
    idx = np.searchsorted(starts, t, side="right") - 1
    inside = (idx >= 0) & (t <= stops[np.clip(idx, 0, None)])
    c = np.where(inside, levels[np.clip(idx, 0, None)], 0)
    loading = t < ready
    load = np.where(c > 0, np.log2(c + 1) / math.log2(top + 1), 0.0)
    cols: list[list[Any]] = []
    for g in range(gpus):
        demand = np.where(c > 0, 260 + 520 * load, 78.0) + rng.normal(0, 6, k)
        demand = np.where(loading, 95 + 40 * rng.random(k), demand)
        capped = demand > 695
        power = np.where(capped, 690 + rng.normal(0, 2.5, k), demand)
        clock = np.where(c > 0, 1980, 345)
        clock = np.where(loading, 1980, clock)
        clock = np.where(capped, (1980 * 695 / demand).astype(int) // 15 * 15, clock)
        events = np.where((c == 0) & ~loading, 0x1, 0) | np.where(capped, 0x4, 0)
        util = np.where(c > 0, np.minimum(100, 78 + 40 * load).astype(int), 0)
        util = np.where(loading, rng.integers(0, 35, k), util)
        mem = np.where(loading, np.linspace(0.6e9, 128.1e9, k).astype(np.int64), int(128.4e9))
        temp = (31 + (power - 78) / 21).astype(int) + g % 2
        # NVML's energy counter (mJ since the driver loaded): the power integrated
        energy = (5e9 + np.cumsum(power / HZ) * 1000).astype(np.int64)
        cols.append(
            [
                t.tolist(),
                [g] * k,
                clock.astype(int).tolist(),
                [3201] * k,
                np.round(power, 3).tolist(),
                temp.tolist(),
                util.tolist(),
                (util * 3 // 10).tolist(),
                mem.tolist(),
                events.tolist(),
                energy.tolist(),
            ]
        )
    keys = results.TELEMETRY_COLUMNS
    rows: list[dict[str, Any]] = []
    for i in range(k):  # tick by tick, every GPU: the sampler's order
        for g in range(gpus):
            rows.append({key: col[i] for key, col in zip(keys, cols[g], strict=True)})
    return rows


def server_log(r: Resolved, ready_s: float, levels: Sequence[tuple[int, float, float]]) -> str:
    """A vLLM server log, enough for ``evidence.log_evidence`` to find what it looks for."""
    args = {k.replace("-", "_"): v for k, v in r.args.items() if k != "port"}
    ts = 0.0
    lines = [
        "INFO 11-20 06:00:01 [api_server.py:1896] vLLM API server version 0.11.0",
        f"INFO 11-20 06:00:01 [utils.py:328] non-default args: {args!r}",
        "INFO 11-20 06:00:09 [model.py:547] Resolved architecture: LlamaForCausalLM",
        "WARNING 11-20 06:00:09 [__init__.py:2891] We must use the `spawn` multiprocessing "
        "start method.",
        "INFO 11-20 06:00:41 [gpu_model_runner.py:2602] Model loading took 32.8945 GiB and "
        "29.11 seconds",
        "INFO 11-20 06:00:58 [kv_cache_utils.py:1087] GPU KV cache size: 1,207,584 tokens",
        f"INFO 11-20 06:01:{int(ready_s) % 60:02d} [gpu_model_runner.py:3480] Graph capturing "
        "finished in 14 secs, took 1.12 GiB",
        "INFO 11-20 06:01:30 [launcher.py:44] Route: /v1/chat/completions, Methods: POST",
        "INFO:     Application startup complete.",
    ]
    for c, t0, dur in levels:  # vLLM's periodic stats line, every 10 s
        ts = t0
        while ts < t0 + dur:
            lines.append(
                f"INFO [loggers.py:123] Engine 000: Avg prompt throughput: "
                f"{INPUT_TOKENS * c / 2:.1f} tokens/s, Avg generation throughput: "
                f"{c * 40:.1f} tokens/s, Running: {c} reqs, Waiting: 0 reqs, GPU KV cache "
                f"usage: {min(99.0, c * 0.06):.1f}%, Prefix cache hit rate: 3.1%"
            )
            ts += 10.0
    lines.append("INFO:     Shutting down")
    return "\n".join(lines) + "\n"


def probe_answers(r: Resolved, latency_s: float) -> list[ProbeAnswer]:
    fp8 = "quantization" in r.args or "kv-cache-dtype" in r.args
    return [
        ProbeAnswer(
            prompt=prompt,
            expect=expect,
            answer=(answer_fp8 if fp8 else answer),
            finish_reason="stop",
            output_tokens=len((answer_fp8 if fp8 else answer).split()) + 1,
            latency_s=latency_s * (1 + len(answer.split())),
        )
        for prompt, expect, answer, answer_fp8 in PROBES
    ]


# -- the run directory ---------------------------------------------------------------------


def iso(offset_s: float) -> str:
    return (CAMPAIGN_START + dt.timedelta(seconds=offset_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


def gpu_source(gpus: int) -> sources.FakeSource:
    """The H200 capture as ``gpus`` GPUs: its info and error counters, one per GPU."""
    cap = sources.read_capture(CAPTURE)
    dev = cap["info"]["devices"][0]
    cap["info"]["devices"] = [
        {
            **dev,
            "index": g,
            "uuid": f"{dev['uuid'][:-2]}{g:02d}",
            "pci_bus_id": f"0:{g + 6:02X}:00.0",
        }
        for g in range(gpus)
    ]
    cap["info"]["count"] = gpus
    cap["counters_before"] = [{**cap["counters_before"][0], "gpu": g} for g in range(gpus)]
    return sources.FakeSource(cap)


def light(recs: Sequence[RequestRecord]) -> list[RequestRecord]:
    """The records without their chunk lists: what the checks (``steady_state``) and the p99
    comparisons (``tails.request_latencies``) read of them, kept for every experiment so that
    later ones compare with it without reading its table back (the runner reads it back)."""
    return [
        RequestRecord(
            index=r.index,
            start=r.start,
            end=r.end,
            first_token=r.first_token,
            output_tokens=r.output_tokens,
            status=r.status,
            concurrency=r.concurrency,
            repetition=r.repetition,
        )
        for r in recs
    ]


def build_run(
    run_dir: Path, args: argparse.Namespace, say: Callable[[str], None]
) -> dict[str, Any]:
    """Write a synthetic run directory of the asked size; returns counts of what it holds."""
    levels = [2**i for i in range(args.levels)]
    exps = specs(args.experiments)
    text = campaign_text(args, levels, exps)
    campaign = load_campaign(text, "campaigns/render-speed.toml")
    engine = engines.get(campaign.model.server.engine)
    results.atomic_write_bytes(run_dir / "campaign.toml", text.encode("utf-8"))
    source = gpu_source(args.gpus) if args.gpus else None
    environment = fingerprint.collect(
        source, None if source else "NVML unavailable: NVML Shared Library Not Found", [], []
    )
    ceiling = {
        "measured_at": iso(-3600),
        "reportgen_version": __version__,
        "host": environment["host"].get("hostname"),
        "cpu_count": environment["host"].get("cpu_count"),
        "concurrency": 64,
        "requests": 400,
        "chunks": 102400,
        "duration_s": 3.58,
        "client_cpu_s": 2.89,
        "chunks_per_cpu_s": 35392.6,
        "requests_per_cpu_s": 138.3,
        "chunk_s": 28590.9,
    }
    run = Run(
        reportgen_version=__version__,
        run_id=run_dir.name,
        started_at=iso(0),
        campaign=campaign.model.model_dump(mode="json"),
        campaign_file=campaign_file(campaign),
        engine=EngineRecord(name=engine.name, simulated=engine.simulated),
        environment=environment,
        client_ceiling=ceiling,
        experiments=pending(campaign),
    )
    # What the runner's steps share; ``run.experiment.check`` reads the campaign and engine.
    ctx = Context(campaign, run_dir, Quiet(), [])
    rng = np.random.default_rng(args.seed)
    resolved: dict[str, Resolved] = {}
    effects: dict[str, Effect] = {}
    kept: dict[str, list[RequestRecord]] = {}  # every experiment's records, ``light``
    clock = 0.0  # seconds since the campaign started
    counts = {"requests": 0, "telemetry_rows": 0}
    top = levels[-1]
    for i, (exp, spec) in enumerate(zip(campaign.experiments, exps, strict=True)):
        began = time.perf_counter()
        pid = parent_id(exp, i, exps[0].id, run.best or exps[0].id)
        r = resolve(campaign.model, exp, resolved[pid] if pid else None)
        resolved[exp.id] = r
        effects[exp.id] = (effects[pid] if pid else Effect()).times(spec.effect)
        entry = run.experiments[i]
        describe(campaign, r, entry)
        entry.status = "running"
        entry.started_at = iso(clock)
        exp_clock = clock
        ready_s = float(rng.uniform(70, 110))
        clock += ready_s
        session = Session(
            index=0,
            role="experiment",
            config=r.id,
            repetitions=list(range(args.repetitions)),
            log_file=str(entry.log_file),
            ready_s=ready_s,
        )
        entry.sessions = [session]
        if source is not None:
            entry.gpu_counters = {"before": source.counters()}
        else:
            entry.telemetry = TelemetryInfo(
                error=f"no GPU telemetry: {environment['gpus']['reason']}"
            )
        entry.server = Ready(
            ready_s=ready_s, model=SERVED, health_checks=int(ready_s // 2), generation_checks=1
        )
        entry.engine_info = {
            "/version": {"version": "0.11.0"},
            "/v1/models": {
                "object": "list",
                "data": [{"id": SERVED, "object": "model", "root": MODEL, "max_model_len": 131072}],
            },
        }
        ttft1, _ = effects[exp.id].latencies(1, top)
        entry.probes = probe_answers(r, ttft1 / 1e3)
        clock += 2.0
        session.warmup = Warmup(requests=32, errors=0, duration_s=3.1, words_per_token=1.3)
        entry.warmup = session.warmup
        clock += 3.5
        rows: list[RequestRecord] = []
        windows: list[tuple[float, float, int]] = []
        logged: list[tuple[int, float, float]] = []
        started_unix = CAMPAIGN_START.timestamp() + exp_clock
        for c in r.workload.concurrency:
            ttft_ms, itl_ms = effects[exp.id].latencies(c, top)
            for rep in range(args.repetitions):
                clock += 0.3  # the metrics scrape before the level
                recs, duration = level_records(rng, c, rep, args.requests, ttft_ms, itl_ms)
                summary = summarize(
                    recs, duration, slo=r.workload.slo.model_dump(), trim=r.workload.trims
                )
                summary.client = client_stats(c, summary, ceiling)
                t0 = MONO_START + clock
                entry.levels.append(
                    Level(
                        concurrency=c,
                        repetition=rep,
                        session=0,
                        started_at_unix=CAMPAIGN_START.timestamp() + clock,
                        window=Window(t0_monotonic=t0, duration_s=duration),
                        summary=summary,
                        engine_metrics=engine_metrics(summary, recs, started_unix),
                    )
                )
                windows.append((t0, t0 + duration, c))
                logged.append((c, clock - exp_clock, duration))
                rows += recs
                clock += duration
        clock += 0.3
        session.stop = Stop(
            signals=["SIGINT"],
            exit_code=0,
            stop_s=float(rng.uniform(2.5, 4.5)),
            group_gone=True,
            port_free=True,
        )
        entry.stop = session.stop
        clock += session.stop.stop_s
        if source is not None:
            tele = telemetry_rows(
                rng,
                args.gpus,
                MONO_START + exp_clock,
                MONO_START + exp_clock + ready_s,
                MONO_START + clock,
                windows,
                top,
            )
            ts = [row["t"] for row in tele]
            for lv in entry.levels:
                assert lv.window is not None
                w0, w1 = lv.window.t0_monotonic, lv.window.end
                lo = int(np.searchsorted(ts, w0, side="left"))
                hi = int(np.searchsorted(ts, w1, side="right"))
                lv.telemetry = [
                    GpuWindow.model_validate(g) for g in telemetry.window(tele[lo:hi], w0, w1)
                ]
            entry.telemetry = TelemetryInfo(hz=HZ, rows=len(tele), late_samples=0, error=None)
            results.save_telemetry(run_dir, r.id, tele)
            counts["telemetry_rows"] += len(tele)
            before = entry.gpu_counters["before"]
            after = source.counters()
            entry.gpu_counters.update(
                after=after, new_errors=telemetry.counter_deltas(before, after)
            )
            del tele, ts
        entry.campaign_checks = [chk.model_dump() for chk in r.checks]
        patterns = engine.patterns()
        for k, chk in enumerate(r.checks):
            if chk.log_contains or chk.log_absent:
                patterns[f"campaign:{k}"] = str(chk.log_contains or chk.log_absent)
        log = server_log(r, ready_s, logged)
        results.atomic_write_bytes(run_dir / str(entry.log_file), log.encode("utf-8"))
        entry.log_evidence = LogEvidence.model_validate(evidence.log_evidence(log, patterns))
        entry.model_files = evidence.model_files(r.args, run_dir)
        entry.status = "ok"
        entry.finished_at = iso(clock)
        entry.by_level = by_level(entry.levels)
        results.save_requests(run_dir, entry.table, rows)
        counts["requests"] += len(rows)
        # Then as ``Runner.run`` goes on: the checks, the verdict and the best so far.
        check(ctx, run, entry, r, rows)
        kept[entry.table] = light(rows)
        del rows
        entry.decision = verdict.decide_experiment(run, entry, kept)
        run.best = drift.best_after(run, entry)
        results.save(run_dir, run)
        clock += 1.0
        say(
            f"  [{i + 1}/{len(exps)}] {exp.id}: {entry.decision.verdict} "
            f"({time.perf_counter() - began:.1f} s)"
        )
    run.status = "complete"
    run.finished_at = iso(clock)
    results.save(run_dir, run)
    counts["campaign_hours"] = clock / 3600
    return counts


# -- timing --------------------------------------------------------------------------------


def timed(fn: Callable[[], Any], repeat: int, name: str, target: float) -> tuple[list[float], Any]:
    """``fn`` run ``repeat`` times, each timed; fewer when one run took over twice the
    target (one such run already says the step is over budget)."""
    times, out = [], None
    for k in range(repeat):
        gc.collect()
        began = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - began)
        print(f"  {name} run {k + 1}: {times[-1]:.2f} s", flush=True)
        if times[-1] > 2 * target and k + 1 < repeat:
            print(f"  {name}: over twice its {target:g} s target; not repeated")
            break
    return times, out


def profile(fn: Callable[[], Any], title: str, top: int = 15) -> None:
    """Run ``fn`` once under cProfile; print its top entries by cumulative time and by time
    spent in the function itself."""
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    for key, what in (("cumulative", "cumulative time"), ("tottime", "own time")):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(top)
        body = buf.getvalue()
        start = body.find("   ncalls")
        print(f"\n-- profile: {title} (top {top} by {what})")
        print(body[start:].rstrip() if start >= 0 else body.rstrip())


def serial_charts(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` with the report's charts drawn in this process: with many charts reportgen draws
    them in a process pool, whose work cProfile does not see."""

    def run() -> Any:
        from reportgen.render import charts

        saved = getattr(charts, "PARALLEL_FROM", None)
        if saved is None:
            return fn()
        charts.PARALLEL_FROM = 10**9
        try:
            return fn()
        finally:
            charts.PARALLEL_FROM = saved

    return run


def size(path: Path) -> str:
    n = path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*"))
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def time_steps(run_dir: Path, args: argparse.Namespace, render_mod: Any, size_text: str) -> bool:
    """Time the HTML and PDF steps and print the table; True when both are within target."""
    print(f"\nrendering, {args.repeat} time(s) each ...", flush=True)
    html_times, rendered = timed(
        lambda: render_mod.render(run_dir, pdf=False), args.repeat, "HTML", HTML_TARGET_S
    )
    html_path = rendered.html
    rows = [("HTML", html_times, HTML_TARGET_S)]
    pdf_path = run_dir / render_mod.PDF_NAME
    if not args.no_pdf:
        # The whole of `reportgen render` with the PDF: the HTML again, the page for print,
        # WeasyPrint, every file written. Conservative: the PDF's budget pays for the HTML too.
        pdf_times, _ = timed(
            lambda: render_mod.render(run_dir, pdf=True), args.repeat, "PDF", PDF_TARGET_S
        )
        rows.append(("PDF", pdf_times, PDF_TARGET_S))

    print(f"\n{size_text}")
    print(f"{'step':<6} {'first':>8} {'best':>8} {'median':>8} {'target':>8} {'median/target':>14}")
    ok = True
    for name, times, target in rows:
        med = statistics.median(times)
        ok &= med <= target
        print(
            f"{name:<6} {times[0]:>7.2f}s {min(times):>7.2f}s {med:>7.2f}s "
            f"{target:>7.0f}s {med / target:>13.2f}x"
        )
    for name, times, target in rows:
        med = statistics.median(times)
        verdict = "within" if med <= target else "OVER"
        print(
            f"{name} {med:.2f} s (median of {len(times)}), target {target:g} s, "
            f"{med / target:.2f}x of the budget: {verdict}"
        )
    if len(rows) == 2:  # the PDF step alone, by difference (not judged: the budget is total)
        alone = statistics.median(rows[1][1]) - statistics.median(html_times)
        print(f"PDF step alone (PDF median - HTML median): about {alone:.2f} s")
    print(f"report.html {size(html_path)}")
    if not args.no_pdf:
        from pypdf import PdfReader

        pages = len(PdfReader(pdf_path).pages)
        print(f"report.pdf {size(pdf_path)}, {pages} pages")
    return ok


def run_on_snapshot() -> None:
    """Copy reportgen/ and templates/ to a temporary folder and run this script again with
    that copy first on the import path (``--snapshot``): edits made to the tree while the
    benchmark runs (a template changed under an already imported view, say) cannot reach it
    halfway. Does not return."""
    snap = Path(tempfile.mkdtemp(prefix="render-speed-src-"))
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "reportgen", snap / "reportgen", ignore=skip)
    shutil.copytree(ROOT / "templates", snap / "templates", ignore=skip)
    env = {**os.environ, SNAPSHOT_ENV: str(snap)}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(snap), env.get("PYTHONPATH")) if x)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]], env)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0].strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--experiments", type=int, default=20)
    parser.add_argument("--levels", type=int, default=8, help="C = 1, 2, 4 ... 2^(levels-1)")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--requests", type=int, default=500, help="requests per level run")
    parser.add_argument("--gpus", type=int, default=4, help="GPUs in the telemetry (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the run here (kept) instead of a temp dir")
    parser.add_argument("--reuse", action="store_true", help="--out already holds a run: time it")
    parser.add_argument("--keep", action="store_true", help="keep the temporary run directory")
    parser.add_argument(
        "--repeat", type=int, default=3, help="timings of each step (0: none, with --profile)"
    )
    parser.add_argument("--no-pdf", action="store_true", help="time the HTML only")
    parser.add_argument("--profile", action="store_true", help="cProfile each step once more")
    parser.add_argument(
        "--snapshot",
        action="store_true",
        help="run against a copy of reportgen/ and templates/ taken at start",
    )
    args = parser.parse_args()
    if args.experiments < 1 or args.levels < 1 or args.repetitions < 1 or args.requests < 2:
        parser.error("--experiments, --levels and --repetitions >= 1, --requests >= 2")
    if args.repeat < 0 or (args.repeat == 0 and not args.profile):
        parser.error("--repeat >= 1, or 0 with --profile")
    if args.reuse and not args.out:
        parser.error("--reuse needs --out")
    snapshot = os.environ.get(SNAPSHOT_ENV)
    if args.snapshot and not snapshot:
        run_on_snapshot()
    os.environ.setdefault("GIT_OPTIONAL_LOCKS", "0")  # git status below and in fingerprint
    tree = fingerprint.git_state(ROOT)
    print(
        f"reportgen {__version__} from {Path(results.__file__).parent}"
        + (" (a copy taken at start)" if snapshot else "")
        + f"; tree at {str(tree.get('commit'))[:10]}"
        + (f", {tree.get('changed_files')} changed file(s)" if tree.get("dirty") else "")
    )

    if args.out:
        run_dir = args.out.resolve()
        keep = True
    else:
        run_dir = Path(tempfile.mkdtemp(prefix="render-speed-")) / "20261120T060000Z-synthetic"
        keep = args.keep
    # Imported before anything is generated, so data and renderer come from one source tree.
    began = time.perf_counter()
    from reportgen import render as render_mod

    import_s = time.perf_counter() - began
    try:
        size_text = (
            f"{args.experiments} experiments x {args.levels} levels x {args.repetitions} "
            f"repetitions x {args.requests} requests, "
            + (f"{args.gpus} GPUs of telemetry at {HZ:g} Hz" if args.gpus else "no telemetry")
        )
        if args.reuse:
            print(f"run directory: {run_dir} (reused; its own size, not the options')")
            gen_s = None
        else:
            if (run_dir / results.RESULTS).exists():
                print(f"{run_dir} already holds a run: use --reuse, or another --out")
                return 2
            run_dir.mkdir(parents=True, exist_ok=True)
            print(f"run directory: {run_dir}")
            print(f"generating: {size_text}")
            began = time.perf_counter()
            counts = build_run(run_dir, args, print)
            gen_s = time.perf_counter() - began
            print(
                f"synthetic data: {gen_s:.1f} s to generate (not part of the target); "
                f"{counts['requests']:,} requests, {counts['telemetry_rows']:,} telemetry rows, "
                f"a campaign of {counts['campaign_hours']:.1f} h of modelled time"
            )
        tele_dir = run_dir / "telemetry"
        print(
            f"results.json {size(run_dir / results.RESULTS)}, requests/ "
            f"{size(run_dir / 'requests')}"
            + (f", telemetry/ {size(tele_dir)}" if tele_dir.is_dir() else "")
        )

        print(f"import reportgen.render (jinja2, matplotlib): {import_s:.2f} s (not timed below)")
        ok = True
        if args.repeat:
            ok = time_steps(run_dir, args, render_mod, size_text)
        if gen_s is not None:
            print(f"generating the synthetic run: {gen_s:.1f} s (not part of the target)")
        if args.profile:
            profile(
                serial_charts(lambda: render_mod.render(run_dir, pdf=False)),
                "render(run_dir, pdf=False), charts drawn in this process",
            )
            if not args.no_pdf:
                profile(
                    lambda: render_mod.render(run_dir, pdf=True),
                    "render(run_dir, pdf=True): HTML, the page for print, WeasyPrint, write",
                )
        if args.repeat:
            print(f"\nexit status {0 if ok else 1}: {'within' if ok else 'over'} target")
        return 0 if ok else 1
    finally:
        if keep:
            print(f"kept: {run_dir}")
        else:
            shutil.rmtree(run_dir.parent, ignore_errors=True)
        if snapshot:
            shutil.rmtree(snapshot, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
