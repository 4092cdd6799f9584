"""Hugging Face transformers' own server (``transformers serve``)."""

from __future__ import annotations

import sys

from reportgen.engines.base import Engine

ENGINE = Engine(
    name="transformers",
    default_command=(sys.executable, "-m", "transformers.cli.transformers", "serve"),
    default_port=8000,
    health_path="/health",
    ready_log_line="Uvicorn running on",
    # It answers 422 to fields it does not know (ignore_eos, min_tokens): none are sent;
    # its outputs run to max_tokens only where the model's end-of-sequence never comes.
    exact_length_fields=(),
    metrics_path=None,  # transformers serve has no Prometheus endpoint
    info_paths=(),  # nor a version; its /v1/models scans the hub's cache (500 without one)
    log_patterns=(
        ("continuous_batching", r"CB: (True|False)"),
        ("unsupported_fields", r"Ignoring unsupported fields"),
    ),
    positional=("model",),  # `transformers serve MODEL` (its FORCE_MODEL)
    negate="no-",  # typer's --compile / --no-compile
    help_flag="--help",
    # Its continuous-batching loop died (seen on an H200 with float16 and CUDA graphs):
    # the process lives on and answers 503 to every request.
    fatal_patterns=(r"Error in generation loop",),
    preopen_paths=("/health",),
    packages=("transformers",),
    env_prefixes=("TRANSFORMERS_",),
)
