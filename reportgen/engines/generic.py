"""Any OpenAI-compatible server: the campaign gives its command; nothing engine-specific is read."""

from __future__ import annotations

from reportgen.engines.base import Engine

ENGINE = Engine(
    name="generic",
    default_command=None,
    default_port=8000,
    health_path=None,
    metrics_path=None,
)
