"""The simulator (``reportgen sim``): a stand-in engine whose speed comes from its flags."""

from __future__ import annotations

import sys

from reportgen.engines.base import Engine
from reportgen.engines.sglang import SGLANG_NODE_FLAGS

ENGINE = Engine(
    name="sim",
    default_command=(sys.executable, "-m", "reportgen.sim"),
    default_port=8000,
    health_path="/health",
    ready_log_line="sim: ready on",
    simulated=True,
    info_paths=("/version", "/v1/models"),
    log_patterns=(("server_args", r"server_args=ServerArgs\("),),
    config_lines=(r"server_args=ServerArgs\((.*)\)\s*$", r"sim: resolved (.*)$"),
    config_volatile=("port", "seed", "starts_file", "record_sends"),
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
    fatal_patterns=(r"sim: error in generation loop",),  # --fault dead-loop
    node_flags=SGLANG_NODE_FLAGS,
    event_patterns=(("jit", r"JIT compilation during inference"),),  # --compile-ms
    metric_prefix="sim:",
)
