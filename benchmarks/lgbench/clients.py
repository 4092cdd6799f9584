"""One adapter per load generator: the command that runs one level, and a parser of the
tool's own output files into the same shape.

Every client gets the same work: chat API, streaming, the same prompts (each starts with a
unique id such as "r007-000123"), the same output length, the same number of requests, a
closed loop of `concurrency` requests in flight, no warm-up, no progress display.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "benchmarks" / ".peers-venv"
# The peers must never reach for the Hub (no network here, and no surprise downloads).
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


@dataclass
class Job:
    run_id: str  # also every prompt's prefix, e.g. "r007"
    client: str
    workload: str  # zero | paced | workloads
    url: str
    concurrency: int
    requests: int
    output_tokens: int
    prompts: list[str]
    workdir: Path
    tokenizer: Path
    model: str = "sim-model"
    # reportgen only (the workloads comparison): conversations of `turns` turns, and each
    # request's sent body measured after the level (see reportgen_worker.py)
    turns: int = 1
    think_s: float = 0.0
    measure_sent: bool = False


@dataclass
class PerRequest:
    """One request as the client reported it; times in seconds."""

    key: str  # prompt id ("r007-000123"), a response id, or generated text (see key_kind)
    key_kind: str  # prompt | response_id | text
    ttft_s: float | None
    itls_s: list[float] | None = None  # gap before each content chunk after the first
    mean_itl_s: float | None = None
    start_wall: float | None = None  # time.time() when the client started the request
    output_tokens: int | None = None


@dataclass
class Parsed:
    completed: int
    failed: int
    req_s: float  # as the tool reports it
    out_tok_s: float | None  # as the tool reports it
    duration_s: float  # as the tool reports it
    window: tuple[float, float] | None  # wall clock of the measured window, from the tool
    requests: list[PerRequest] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class Client:
    name = ""
    venv: str | None = None  # folder under .peers-venv; None = this checkout's venv
    # How a paced request is matched to the server's send log (see accuracy.py).
    matching = ""

    def available(self) -> str | None:
        """None when runnable, else why not."""
        if self.venv is None:
            return None
        python = PEERS / self.venv / "bin" / "python"
        return None if python.exists() else f"not installed ({python} missing)"

    def python(self) -> str:
        return str(PEERS / self.venv / "bin" / "python") if self.venv else sys.executable

    def command(self, job: Job) -> list[str]:
        raise NotImplementedError

    def parse(self, job: Job) -> Parsed:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(OFFLINE_ENV)


def _ms(x: Any) -> float | None:
    return None if x is None else float(x) / 1000.0


def prompt_id(prompt: str) -> str:
    return prompt.split(" ", 1)[0]


class Reportgen(Client):
    name = "reportgen"
    matching = "prompt id"

    def command(self, job: Job) -> list[str]:
        prompts = job.workdir / "prompts.txt"
        prompts.write_text("\n".join(job.prompts) + "\n")
        spec = {
            "url": job.url,
            "api": "chat",
            "model": job.model,
            "output_tokens": job.output_tokens,
            "prompts": str(prompts),
            "concurrency": job.concurrency,
            "requests": job.requests,
            "keep_chunk_times": job.workload == "paced",
        }
        if job.turns > 1:
            spec.update(turns=job.turns, think_s=job.think_s)
        if job.measure_sent:
            spec["measure_sent"] = True
        (job.workdir / "job.json").write_text(json.dumps(spec))
        worker = ROOT / "benchmarks" / "lgbench" / "reportgen_worker.py"
        out = job.workdir / "reportgen.json"
        return [sys.executable, str(worker), str(job.workdir / "job.json"), str(out)]

    def parse(self, job: Job) -> Parsed:
        out = json.loads((job.workdir / "reportgen.json").read_text())
        t0, dur = out["t0_wall"], out["duration_s"]
        ok = [r for r in out["records"] if r["status"] == "ok"]
        reqs = []
        for r in ok:
            times = r["chunk_times"]
            ttft = None if r["first_token"] is None else r["first_token"] - r["start"]
            itls = [b - a for a, b in zip(times, times[1:], strict=False)] if times else None
            reqs.append(
                PerRequest(
                    key=r["prompt_id"],
                    key_kind="prompt",
                    ttft_s=ttft,
                    itls_s=itls,
                    start_wall=t0 + r["start"],
                    output_tokens=r["output_tokens"],
                )
            )
        tokens = sum(r["output_tokens"] or r["chunks"] for r in ok)
        notes = [f"API: reportgen.load.loadgen.{out['api']}, {out['workers']} worker(s)"]
        if out.get("loop_lag_ms"):
            notes.append(f"own loop lag ms: {out['loop_lag_ms']}")
        if out.get("client_cpu_s") is not None:
            notes.append(f"own client_cpu_s={out['client_cpu_s']:.2f}")
        return Parsed(
            completed=len(ok),
            failed=len(out["records"]) - len(ok),
            req_s=len(ok) / dur,
            out_tok_s=tokens / dur,
            duration_s=dur,
            window=(t0, t0 + dur),
            requests=reqs,
            notes=notes,
        )


class GuideLLM(Client):
    name = "guidellm"
    venv = "guidellm"
    matching = "response id"

    def command(self, job: Job) -> list[str]:
        data = job.workdir / "data.jsonl"
        with data.open("w") as f:
            for p in job.prompts:
                f.write(json.dumps({"prompt": p, "output_tokens_count": job.output_tokens}) + "\n")
        scenario = {
            "spec": {
                "backend": {
                    "kind": "openai_http",
                    "target": job.url,
                    "model": job.model,
                    "request_format": "/v1/chat/completions",
                    "stream": True,
                },
                "profile": {"kind": "concurrent", "streams": job.concurrency},
                "constraints": [{"kind": "max_requests", "count": job.requests}],
                "tokenizer": {"kind": "huggingface_auto", "model": str(job.tokenizer)},
                "data": [{"kind": "json_file", "path": str(data)}],
                "outputs": [{"kind": "json", "path": str(job.workdir / "guidellm.json")}],
            }
        }
        (job.workdir / "scenario.json").write_text(json.dumps(scenario, indent=1))
        exe = str(PEERS / "guidellm" / "bin" / "guidellm")
        return [
            exe,
            "run",
            "--scenario",
            str(job.workdir / "scenario.json"),
            "--disable-console-interactive",
        ]

    def parse(self, job: Job) -> Parsed:
        bench = json.loads((job.workdir / "guidellm.json").read_text())["benchmarks"][0]
        metrics, sched = bench["metrics"], bench["scheduler_metrics"]
        ok = bench["requests"]["successful"]
        reqs = [
            PerRequest(
                key=r["response_id"],
                key_kind="response_id",
                ttft_s=_ms(r.get("time_to_first_token_ms")),
                mean_itl_s=_ms(r.get("inter_token_latency_ms")),
                start_wall=r.get("request_start_time"),
                output_tokens=r.get("output_tokens"),
            )
            for r in ok
        ]
        totals = metrics["request_totals"]
        start, end = sched["measure_start_time"], sched["measure_end_time"]
        failed = len(bench["requests"].get("errored") or []) + len(
            bench["requests"].get("incomplete") or []
        )
        notes = ["per-request ITL exported as a mean only"]
        if totals["successful"] != len(ok):
            notes.append(
                f"its metrics count {totals['successful']} of the {len(ok)} successful requests"
            )
        return Parsed(
            completed=len(ok),
            failed=failed,
            req_s=metrics["requests_per_second"]["successful"]["mean"],
            out_tok_s=metrics["output_tokens_per_second"]["successful"]["mean"],
            duration_s=end - start,
            window=(start, end),
            requests=reqs,
            notes=notes,
        )


class AIPerf(Client):
    name = "aiperf"
    venv = "aiperf"
    matching = "conversation id -> prompt"

    def command(self, job: Job) -> list[str]:
        data = job.workdir / "data.jsonl"
        with data.open("w") as f:
            for p in job.prompts:
                f.write(json.dumps({"text": p}) + "\n")
        exe = str(PEERS / "aiperf" / "bin" / "aiperf")
        return [
            exe,
            "profile",
            "--url",
            job.url,
            "--endpoint-type",
            "chat",
            "--streaming",
            "--model",
            job.model,
            "--tokenizer",
            str(job.tokenizer),
            "--input-file",
            str(data),
            "--custom-dataset-type",
            "single_turn",
            "--dataset-sampling-strategy",
            "sequential",
            "--osl",
            str(job.output_tokens),
            "--concurrency",
            str(job.concurrency),
            "--request-count",
            str(job.requests),
            "--use-server-token-count",  # count tokens from usage, as the other clients do
            "--ui",
            "none",
            "--no-server-metrics",
            "--no-gpu-telemetry",
            "--artifact-dir",
            str(job.workdir / "aiperf"),
        ]

    def env(self) -> dict[str, str]:
        # With HF_HUB_OFFLINE set, AIPerf 0.13 sends a local tokenizer path to the Hub's
        # snapshot resolver, which rejects it; without it, a local path loads from disk.
        return {}

    def parse(self, job: Job) -> Parsed:
        art = job.workdir / "aiperf"
        summary = json.loads((art / "profile_export_aiperf.json").read_text())
        sessions = {}
        inputs = json.loads((art / "inputs.json").read_text())
        for s in inputs["data"]:
            content = s["payloads"][0]["messages"][0]["content"]
            sessions[s["session_id"]] = prompt_id(content)
        reqs, starts, ends, failed = [], [], [], 0
        for line in (art / "profile_export.jsonl").read_text().splitlines():
            rec = json.loads(line)
            meta, m = rec["metadata"], rec.get("metrics") or {}
            if rec.get("error") or "time_to_first_token" not in m:
                failed += 1
                continue
            starts.append(meta["request_start_ns"] / 1e9)
            ends.append(meta["request_end_ns"] / 1e9)
            icl = m.get("inter_chunk_latency", {}).get("value")
            out = m.get("output_sequence_length", {}).get("value")
            reqs.append(
                PerRequest(
                    key=sessions.get(meta["conversation_id"], meta["conversation_id"]),
                    key_kind="prompt",
                    ttft_s=_ms(m["time_to_first_token"]["value"]),
                    itls_s=[x / 1000.0 for x in icl] if icl is not None else None,
                    start_wall=meta["request_start_ns"] / 1e9,
                    output_tokens=int(out) if out is not None else None,
                )
            )
        tok = summary.get("output_token_throughput") or {}
        return Parsed(
            completed=int(summary["request_count"]["avg"]),
            failed=failed,
            req_s=summary["request_throughput"]["avg"],
            out_tok_s=tok.get("avg"),
            duration_s=summary["benchmark_duration"]["avg"],
            window=(min(starts), max(ends)) if starts else None,
            requests=reqs,
        )


class SGLang(Client):
    name = "sglang"
    venv = "sglang"
    matching = "generated text"

    def command(self, job: Job) -> list[str]:
        data = job.workdir / "data.jsonl"
        with data.open("w") as f:
            for p in job.prompts:
                turns = [{"content": p}, {"content": "unused"}]
                f.write(json.dumps({"conversations": turns}) + "\n")
        return [
            self.python(),
            "-m",
            "sglang.benchmark.serving",
            "--backend",
            "sglang-oai-chat",
            "--base-url",
            job.url,
            "--model",
            job.model,
            "--tokenizer",
            str(job.tokenizer),
            "--dataset-name",
            "custom",
            "--dataset-path",
            str(data),
            "--num-prompts",
            str(job.requests),
            "--sharegpt-output-len",
            str(job.output_tokens),
            "--request-rate",
            "inf",
            "--max-concurrency",
            str(job.concurrency),
            "--warmup-requests",
            "0",
            "--disable-tqdm",
            "--output-file",
            str(job.workdir / "sglang.jsonl"),
            "--output-details",
        ]

    def parse(self, job: Job) -> Parsed:
        lines = (job.workdir / "sglang.jsonl").read_text().splitlines()
        out = json.loads(lines[-1])
        reqs = []
        failed = 0
        for ttft, itls, text, err, n in zip(
            out["ttfts"],
            out["itls"],
            out["generated_texts"],
            out["errors"],
            out["output_lens"],
            strict=False,
        ):
            if err:
                failed += 1
                continue
            reqs.append(
                PerRequest(key=text, key_kind="text", ttft_s=ttft, itls_s=itls, output_tokens=n)
            )
        return Parsed(
            completed=out["completed"],
            failed=failed,
            req_s=out["request_throughput"],
            out_tok_s=out.get("output_throughput"),
            duration_s=out["duration"],
            window=None,  # no wall-clock times exported: the server's view is used
            requests=reqs,
        )


class VLLM(Client):
    name = "vllm"
    venv = "vllm"
    matching = "generated text"

    def command(self, job: Job) -> list[str]:
        data = job.workdir / "data.jsonl"
        with data.open("w") as f:
            for p in job.prompts:
                f.write(json.dumps({"prompt": p}) + "\n")
        return [
            str(PEERS / "vllm" / "bin" / "vllm"),
            "bench",
            "serve",
            "--backend",
            "openai-chat",
            "--endpoint",
            "/v1/chat/completions",
            "--base-url",
            job.url,
            "--model",
            job.model,
            "--tokenizer",
            str(job.tokenizer),
            "--dataset-name",
            "custom",
            "--dataset-path",
            str(data),
            "--custom-output-len",
            str(job.output_tokens),
            "--skip-chat-template",
            "--num-prompts",
            str(job.requests),
            "--request-rate",
            "inf",
            "--max-concurrency",
            str(job.concurrency),
            "--num-warmups",
            "0",
            "--disable-tqdm",
            "--ignore-eos",
            "--save-result",
            "--save-detailed",
            "--result-dir",
            str(job.workdir),
            "--result-filename",
            "vllm.json",
        ]

    def parse(self, job: Job) -> Parsed:
        out = json.loads((job.workdir / "vllm.json").read_text())
        reqs = []
        failed = 0
        errors = out.get("errors") or [""] * len(out.get("ttfts", []))
        for ttft, itls, text, err, n in zip(
            out.get("ttfts", []),
            out.get("itls", []),
            out.get("generated_texts", []),
            errors,
            out.get("output_lens", []),
            strict=False,
        ):
            if err:
                failed += 1
                continue
            reqs.append(
                PerRequest(key=text, key_kind="text", ttft_s=ttft, itls_s=itls, output_tokens=n)
            )
        return Parsed(
            completed=out["completed"],
            failed=failed,
            req_s=out["request_throughput"],
            out_tok_s=out.get("output_throughput"),
            duration_s=out["duration"],
            window=None,
            requests=reqs,
        )


CLIENTS: dict[str, Client] = {
    c.name: c for c in (Reportgen(), GuideLLM(), AIPerf(), SGLang(), VLLM())
}
