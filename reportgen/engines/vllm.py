"""vLLM (``vllm serve``), as of 0.26.0."""

from __future__ import annotations

import sys

from reportgen.engines.base import Engine

ENGINE = Engine(
    name="vllm",
    default_command=(sys.executable, "-m", "vllm.entrypoints.cli.main", "serve"),
    default_port=8000,
    health_path="/health",
    ready_log_line="Application startup complete.",
    exact_length_fields=("ignore_eos", "min_tokens"),
    info_paths=("/version", "/v1/models"),
    # 0.26.0: "Initializing a V1 LLM engine (v0.26.0) with config: model=..., ...,
    # compilation_config={..., 'cudagraph_capture_sizes': [...], ...}, ..."; the scheduler's
    # and the memory's settings on lines of their own
    config_lines=(r"Initializing a V1 LLM engine \(\S+\) with config: (.*)$",),
    # a decode step of N running requests is N tokens; no line per step says whether it
    # ran as a graph
    graph_max_keys=("compilation_config.max_cudagraph_capture_size",),
    config_values=(
        (
            "max_num_batched_tokens",
            r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)",
        ),
        ("async_scheduling", r"Asynchronous scheduling is (enabled|disabled)"),
        ("cuda_graph_memory_gib", r"Graph capturing finished in \S+ secs?, took ([0-9.]+) GiB"),
        ("kv_cache_tokens", r"GPU KV cache size: ([0-9,]+) tokens"),
    ),
    config_volatile=("cache_dir", "local_cache_dir", "debug_dump_path"),
    log_patterns=(
        ("non_default_args", r"non-default args:"),
        ("cuda_graph_captured", r"Graph capturing finished"),
        # 0.26.0 with --enforce-eager: "Enforce eager set, disabling torch.compile and
        # CUDAGraphs"
        ("cuda_graph_disabled", r"disabling torch\.compile and CUDAGraphs"),
        ("kv_cache", r"GPU KV cache size"),  # 0.26: "GPU KV cache size: 10,241,024 tokens"
    ),
    counters=(
        ("generation_tokens", "vllm:generation_tokens_total"),
        ("prompt_tokens", "vllm:prompt_tokens_total"),
        ("prefix_hits", "vllm:prefix_cache_hits_total"),
        ("prefix_queries", "vllm:prefix_cache_queries_total"),
        ("spec_drafts", "vllm:spec_decode_num_drafts_total"),
        ("spec_draft_tokens", "vllm:spec_decode_num_draft_tokens_total"),
        ("spec_accepted", "vllm:spec_decode_num_accepted_tokens_total"),
        ("preemptions", "vllm:num_preemptions_total"),  # an engine event when it grows
        ("server_cpu", "process_cpu_seconds_total"),  # its API server process
    ),
    # 0.26: "SpecDecoding metrics: Mean acceptance length: 3.66, Accepted throughput: ..."
    spec_accept_log=r"Mean acceptance length: ([0-9.]+)",
    positional=("model",),  # `vllm serve MODEL`
    negate="no-",  # --enable-prefix-caching / --no-enable-prefix-caching
    help_flag="--help=all",  # plain --help lists only the groups
    fatal_patterns=(r"EngineCore encountered a fatal error", r"Engine core proc \S+ died"),
    # vLLM's multi-node serve with its multiprocessing backend (docs: "Running vLLM with
    # MultiProcessing"): the same serve on every node, the ranks after 0 --headless
    node_flags=(
        "--nnodes",
        "{nnodes}",
        "--node-rank",
        "{rank}",
        "--master-addr",
        "{addr}",
        "--master-port",
        "{port}",
    ),  # fmt: skip
    worker_flags=("--headless",),
    graphs_off=(("enforce-eager",),),
    event_patterns=(
        # 0.26 (its JIT monitor): "Triton kernel JIT compilation during inference:
        # fused_moe_kernel. This causes a latency spike; consider extending warmup ..."
        ("jit", r"JIT compilation during inference"),
        ("recompile", r"[Rr]ecompiling function|recompile_limit"),
        ("graph_capture", r"Capturing CUDA graphs"),
    ),
    packages=("vllm", "flashinfer-python"),
    env_prefixes=("VLLM_",),
    metric_prefix="vllm:",
    detect_paths=(("/version", "version"),),
    compiles=True,
)
