"""Engine adapters: how each serving engine is started, spoken to and judged ready.

One small object per engine: how it is started, its flags written, readiness judged, exact
output lengths asked for, and where its own evidence is (info endpoints, Prometheus metrics,
log lines worth quoting). The runner only ever talks to an engine through this interface.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Engine:
    name: str
    default_command: tuple[str, ...] | None  # None: the campaign must give one
    default_port: int
    health_path: str | None  # GET path that answers 200 once loaded; None: skip that step
    ready_log_line: str | None = None  # informational: the line the engine prints when ready
    simulated: bool = False
    # Request fields this engine understands for "produce exactly N tokens".
    exact_length_fields: tuple[str, ...] = ()
    info_paths: tuple[str, ...] = ("/v1/models",)  # GETs recorded once the server is ready
    metrics_path: str | None = "/metrics"  # Prometheus text, scraped around every level
    # Named regular expressions whose first matching log line the report shows.
    log_patterns: tuple[tuple[str, str], ...] = ()
    # Prometheus series the checks and the report read, by role: "generation_tokens" (output
    # tokens the engine produced), "prompt_tokens", "prefix_hits" (prompt tokens served from
    # the prefix cache), "prefix_queries" (prompt tokens looked up; prompt_tokens when
    # absent); for speculative decoding "spec_drafts" (draft rounds), "spec_draft_tokens"
    # (tokens proposed), "spec_accepted" (tokens accepted), or the gauge "spec_accept_length"
    # (mean tokens per step) where the engine exports that instead.
    counters: tuple[tuple[str, str], ...] = ()
    # A log line's number that is the speculative acceptance length (SGLang's decode lines).
    spec_accept_log: str | None = None

    def patterns(self) -> dict[str, str]:
        found = dict(self.log_patterns)
        if self.ready_log_line:
            found.setdefault("ready", re.escape(self.ready_log_line))
        return found

    def command(self, configured: list[str] | None) -> list[str]:
        if configured:
            return list(configured)
        if self.default_command is None:
            raise ValueError(f"engine {self.name!r} has no default command; set server.command")
        return list(self.default_command)

    def port(self, args: dict[str, Any]) -> int:
        value = args.get("port", self.default_port)
        return int(value)

    def format_args(self, args: dict[str, Any]) -> list[str]:
        """Flags as the engine's argparse expects them.

        ``true`` becomes a bare ``--flag``; ``false`` leaves the flag out; a list becomes
        ``--flag a b``; a table becomes one JSON argument (vLLM's ``--speculative-config``).
        """
        argv: list[str] = []
        for key, value in args.items():
            flag = f"--{key}"
            if value is True:
                argv.append(flag)
            elif value is False or value is None:
                continue
            elif isinstance(value, list):
                argv.append(flag)
                argv.extend(_scalar(v) for v in value)
            elif isinstance(value, dict):
                argv.extend([flag, json.dumps(value, separators=(",", ":"), sort_keys=True)])
            else:
                argv.extend([flag, _scalar(value)])
        return argv

    def request_extras(self, output_tokens: int) -> dict[str, Any]:
        """Fields that ask the engine for exactly ``output_tokens`` tokens."""
        extras: dict[str, Any] = {}
        if "ignore_eos" in self.exact_length_fields:
            extras["ignore_eos"] = True
        if "min_tokens" in self.exact_length_fields:
            extras["min_tokens"] = output_tokens
        return extras


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


ENGINES: dict[str, Engine] = {
    "sim": Engine(
        name="sim",
        default_command=(sys.executable, "-m", "reportgen.sim"),
        default_port=8000,
        health_path="/health",
        ready_log_line="sim: ready on",
        simulated=True,
        info_paths=("/version", "/v1/models"),
        log_patterns=(("server_args", r"server_args=ServerArgs\("),),
        counters=(
            ("generation_tokens", "sim:generation_tokens_total"),
            ("prompt_tokens", "sim:prompt_tokens_total"),
            ("prefix_hits", "sim:prefix_cache_hits_total"),
            ("prefix_queries", "sim:prefix_cache_queries_total"),
            ("spec_drafts", "sim:spec_decode_num_drafts_total"),
            ("spec_draft_tokens", "sim:spec_decode_num_draft_tokens_total"),
            ("spec_accepted", "sim:spec_decode_num_accepted_tokens_total"),
        ),
        spec_accept_log=r"accept len: ([0-9.]+)",
    ),
    "sglang": Engine(
        name="sglang",
        default_command=(sys.executable, "-m", "sglang.launch_server"),
        default_port=30000,
        health_path="/health",
        ready_log_line="The server is fired up and ready to roll!",
        exact_length_fields=("ignore_eos", "min_tokens"),
        info_paths=("/server_info", "/get_server_info", "/get_model_info", "/v1/models"),
        log_patterns=(
            ("server_args", r"server_args=ServerArgs\("),
            ("cuda_graph_captured", r"Capture cuda graph end|Capture cuda graph bs"),
            ("custom_all_reduce_disabled", r"[Cc]ustom all-?reduce is disabled"),
            ("decode_batch", r"Decode batch\."),
        ),
        counters=(
            ("generation_tokens", "sglang:generation_tokens_total"),
            ("prompt_tokens", "sglang:prompt_tokens_total"),
            ("prefix_hits", "sglang:cached_tokens_total"),
            ("spec_accept_length", "sglang:spec_accept_length"),
        ),
        spec_accept_log=r"accept len: ([0-9.]+)",
    ),
    "vllm": Engine(
        name="vllm",
        default_command=("vllm", "serve"),
        default_port=8000,
        health_path="/health",
        ready_log_line="Application startup complete.",
        exact_length_fields=("ignore_eos", "min_tokens"),
        info_paths=("/version", "/v1/models"),
        log_patterns=(
            ("non_default_args", r"non-default args:"),
            ("cuda_graph_captured", r"Graph capturing finished"),
            ("kv_cache", r"GPU KV cache size"),
        ),
        counters=(
            ("generation_tokens", "vllm:generation_tokens_total"),
            ("prompt_tokens", "vllm:prompt_tokens_total"),
            ("prefix_hits", "vllm:prefix_cache_hits_total"),
            ("prefix_queries", "vllm:prefix_cache_queries_total"),
            ("spec_drafts", "vllm:spec_decode_num_drafts_total"),
            ("spec_draft_tokens", "vllm:spec_decode_num_draft_tokens_total"),
            ("spec_accepted", "vllm:spec_decode_num_accepted_tokens_total"),
        ),
    ),
    "transformers": Engine(
        name="transformers",
        default_command=("transformers", "serve"),
        default_port=8000,
        health_path="/health",
        ready_log_line="Uvicorn running on",
        metrics_path=None,  # transformers serve has no Prometheus endpoint
    ),
    "generic": Engine(
        name="generic",
        default_command=None,
        default_port=8000,
        health_path=None,
        metrics_path=None,
    ),
}


def get(name: str) -> Engine:
    return ENGINES[name]
