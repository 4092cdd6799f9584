"""SGLang (``python -m sglang.launch_server``), as of 0.5.17."""

from __future__ import annotations

import sys

from reportgen.engines.base import Engine

# SGLang's multi-node launch (the simulator's stand-in speaks it too): every node runs the
# server with its rank; rank 0 serves HTTP, the others join its torch.distributed rendezvous.
SGLANG_NODE_FLAGS = ("--nnodes", "{nnodes}", "--node-rank", "{rank}", "--dist-init-addr",
                     "{host}:{port}")  # fmt: skip

ENGINE = Engine(
    name="sglang",
    default_command=(sys.executable, "-m", "sglang.launch_server"),
    default_port=30000,
    health_path="/health",
    ready_log_line="The server is fired up and ready to roll!",
    exact_length_fields=("ignore_eos", "min_tokens"),
    info_paths=("/server_info", "/get_server_info", "/get_model_info", "/v1/models"),
    # 0.5.17: "server_args=ServerArgs(model_path=..., cuda_graph_max_bs=..., ...)" at start;
    # "max_total_num_tokens=..., chunked_prefill_size=..., max_running_requests=..." once
    # the memory is sized
    config_lines=(r"server_args=ServerArgs\((.*)\)\s*$", r"\] (max_total_num_tokens=.*)$"),
    # 0.5.17: "Decode batch, #running-req: 64, ..., cuda graph: True, gen throughput ..."
    graph_step=r"Decode batch,.*\bcuda graph: (True|False)",
    graph_max_keys=("cuda_graph_config.decode.max_bs", "cuda_graph_max_bs"),
    running_max_keys=("max_running_requests",),
    config_volatile=(
        "random_seed",
        "nccl_port",
        "port",
        "dist_init_addr",
        "file_storage_path",
        "available_gpu_mem",
    ),  # fmt: skip
    log_patterns=(
        ("server_args", r"server_args=ServerArgs\("),
        # 0.5.17: "Capture target decode CUDA graph end. elapsed=...", with speculative
        # decoding "Capture target verify CUDA graph end" (no decode graphs); before:
        # "Capture cuda graph end"
        (
            "cuda_graph_captured",
            r"Capture cuda graph end|Capture cuda graph bs"
            r"|Capture target (?:decode|verify) CUDA graph end",
        ),
        # 0.5.17, where another setting rules graphs out: "Cuda graph is disabled because
        # of using torch native attention backend"
        ("cuda_graph_disabled", r"Cuda graph is disabled because"),
        ("custom_all_reduce_disabled", r"[Cc]ustom all-?reduce is disabled"),
        ("decode_batch", r"Decode batch[.,]"),  # 0.5.17: "Decode batch, #running-req: ..."
        # 0.5.17: "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 9641083, K size:
        # 55.17 GB, V size: 55.17 GB"
        ("kv_cache", r"KV Cache is allocated"),
    ),
    counters=(
        ("generation_tokens", "sglang:generation_tokens_total"),
        ("prompt_tokens", "sglang:prompt_tokens_total"),
        ("prefix_hits", "sglang:cached_tokens_total"),
        ("spec_accept_length", "sglang:spec_accept_length"),
        ("server_cpu", "sglang:process_cpu_seconds_total"),  # tokenizer and detokenizer
    ),
    spec_accept_log=r"accept len: ([0-9.]+)",
    help_flag="--help",
    # A scheduler's exception; the launcher then stops the whole server.
    fatal_patterns=(r"Scheduler hit an exception", r"Received sigquit from a child process"),
    node_flags=SGLANG_NODE_FLAGS,
    event_patterns=(
        # the scheduler ran out of KV cache and sent requests back to the queue
        ("preemption", r"Decode out of memory happened|KV cache pool is full\. Retract"),
        ("recompile", r"[Rr]ecompiling function|recompile_limit"),
        ("graph_capture", r"Capture (?:target )?(?:decode |prefill |verify )?cuda graph begin"),
    ),
    graphs_off=(
        ("disable-cuda-graph",),
        ("disable-decode-cuda-graph", "disable-prefill-cuda-graph"),  # 0.5.17
        ("disable-decode-cuda-graph",),
    ),
    packages=("sglang", "flashinfer-python"),
    env_prefixes=("SGLANG_",),
    metric_prefix="sglang:",
    detect_paths=(("/server_info", None), ("/get_server_info", None)),
    compiles=True,
)
