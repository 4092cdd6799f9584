"""Run one reportgen load level in a process of its own and write what it saw as JSON.

    python benchmarks/lgbench/reportgen_worker.py JOB.json OUT.json

Run as a subprocess so its CPU is measured exactly like the peers' (the whole process tree,
start-up included, plus the measured window alone). Uses `reportgen.load.loadgen.run_load` (sync,
may use worker processes) when this checkout has it, else the async `run_level`.

Times: reportgen's records are seconds since its level's t0 on time.perf_counter
(CLOCK_MONOTONIC, shared by all processes). We read time.time() and time.perf_counter()
together just before the level starts; with the level's `t0_monotonic` that converts t0 to
wall clock (time.time(), CLOCK_REALTIME, the clock of the simulator's send log) to within a
microsecond or so. Without `t0_monotonic` (the older `run_level`), `started_at_unix` is used.

Optional job keys (the workloads comparison): `turns` and `think_s` (conversations, passed to
`run_load`), and `measure_sent`: after the level (outside its measured window), each record
gets the size of the JSON body it sent (`body_bytes`, rebuilt with `RequestSpec.body` from its
prompt and, for a later turn, its conversation's earlier prompts and the answers the records
kept) and the characters of its messages' contents (`prompt_chars`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(1, str(Path(__file__).resolve().parents[2]))  # this checkout's reportgen


def main(job_path: str, out_path: str) -> int:
    from reportgen.load import loadgen

    job = json.loads(Path(job_path).read_text())
    prompts = Path(job["prompts"]).read_text().splitlines()
    spec = loadgen.RequestSpec(
        api=job["api"], model=job["model"], output_tokens=job["output_tokens"]
    )
    keep_chunks = job["keep_chunk_times"]
    wall0, perf0 = time.time(), time.perf_counter()
    run_load = getattr(loadgen, "run_load", None)
    if run_load is not None:
        api = "run_load"
        kwargs: dict[str, Any] = {"requests": job["requests"]}
        params = inspect.signature(run_load).parameters
        if "workers" in params:
            kwargs["workers"] = job.get("workers")
        for key in ("turns", "think_s"):  # conversations (only when the job asks)
            if key in job:
                if key not in params:
                    raise SystemExit(f"this checkout's run_load has no {key!r}")
                kwargs[key] = job[key]
        run = run_load(job["url"], spec, prompts, job["concurrency"], **kwargs)
    else:
        api = "run_level"
        run = asyncio.run(
            loadgen.run_level(
                job["url"], spec, prompts, job["concurrency"], requests=job["requests"]
            )
        )
    records = []
    for r in run.records:
        chunk_times = list(getattr(r, "chunk_times", []) or [])
        records.append(
            {
                "index": r.index,
                "prompt_id": prompts[r.index % len(prompts)].split(" ", 1)[0],
                "status": getattr(r, "status", "ok"),
                "start": r.start,
                "first_token": r.first_token,
                "end": getattr(r, "end", None),
                "chunks": len(chunk_times),
                "output_tokens": getattr(r, "output_tokens", None),
                "chunk_times": chunk_times if keep_chunks else None,
                "error": getattr(r, "error", None),
            }
        )
    if job.get("measure_sent"):
        _measure_sent(spec, prompts, run.records, records)
    # Wall clock of t0: from our own (time.time(), perf_counter()) pair read together, when
    # the level tells its t0 on perf_counter (precise); else its own started_at_unix.
    t0_mono = getattr(run, "t0_monotonic", 0.0) or 0.0
    t0_wall = wall0 + (t0_mono - perf0) if t0_mono else run.started_at_unix
    summary = None
    with contextlib.suppress(ImportError):  # the report's own numbers, where this checkout has them
        from reportgen.analysis.summary import summarize

        full = summarize(run.records, run.duration_s)
        summary = {"output_tok_s": full.output_tok_s, "ttft_p50_ms": full.ttft_ms.p50}
    out = {
        "api": api,
        "summary": summary,
        "t0_wall": t0_wall,
        "t0_from": "t0_monotonic + anchor" if t0_mono else "started_at_unix",
        "workers": getattr(run, "workers", 1),
        "loop_lag_ms": getattr(run, "loop_lag_ms", None),
        "started_at_unix": run.started_at_unix,
        "duration_s": run.duration_s,
        "client_cpu_s": getattr(run, "client_cpu_s", None),
        "anchor": {"wall": wall0, "perf": perf0},
        "records": records,
    }
    Path(out_path).write_text(json.dumps(out))
    return 0


def _measure_sent(
    spec: Any, prompts: list[str], recs: list[Any], out: list[dict[str, Any]]
) -> None:
    """Each request's JSON body size and message characters, rebuilt as `client.send` built
    them: turn t of a conversation carried the t turns before it (their prompts, and their
    answers as the records kept them: whole, unless longer than `keep_text_chars`)."""
    import orjson

    n = len(prompts)
    by_index = {r.index: r for r in recs}
    for r, row in zip(recs, out, strict=True):
        turn = getattr(r, "turn", 0) or 0
        history: list[tuple[str, str]] = []
        cut = False
        for j in range(r.index - turn, r.index):
            prev = by_index.get(j)
            text = prev.output_text if prev is not None else ""
            cut |= prev is None or len(text) >= spec.keep_text_chars
            history += [("user", prompts[j % n]), ("assistant", text)]
        body = spec.body(prompts[r.index % n], None, history)[1]
        row["turn"] = turn
        row["body_bytes"] = len(orjson.dumps(body))
        row["prompt_chars"] = sum(len(t) for _, t in history) + len(prompts[r.index % n])
        row["sent_exact"] = not cut


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
