"""Golden prompts: ask a ready server each of the campaign's probes at temperature 0.

One request per probe, not streamed, with the engine's own end of sequence (no ``ignore_eos``,
no ``min_tokens``), before warm-up, so a configuration that produces noise is caught before
its numbers are believed. What the answers mean is judged in ``analysis.checks``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx

from reportgen import tls
from reportgen.campaign import GoldenPrompt
from reportgen.load.answer import http_error, read_whole
from reportgen.load.records import api_path


def ask(
    base_url: str,
    api: str,
    model: str | None,
    probes: Sequence[GoldenPrompt],
    *,
    timeout_s: float = 120.0,
    headers: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Each probe's answer: ``{prompt, expect, answer, finish_reason, output_tokens,
    latency_s, error}`` (``error`` set and ``answer`` None when the request failed)."""
    out: list[dict[str, Any]] = []
    path = api_path(api)
    with httpx.Client(
        base_url=base_url, timeout=timeout_s, headers=headers, verify=tls.context()
    ) as client:
        for p in probes:
            body: dict[str, Any] = {"max_tokens": p.max_tokens, "temperature": 0, "stream": False}
            if model:
                body["model"] = model
            if api == "chat":
                body["messages"] = [{"role": "user", "content": p.prompt}]
            else:
                body["prompt"] = p.prompt
            row: dict[str, Any] = {
                "prompt": p.prompt,
                "expect": p.expect,
                "answer": None,
                "finish_reason": None,
                "output_tokens": None,
                "latency_s": None,
                "error": None,
            }
            t0 = time.perf_counter()
            try:
                resp = client.post(path, json=body)
                row["latency_s"] = time.perf_counter() - t0
                if resp.status_code != 200:
                    row["error"] = http_error(resp.status_code, resp.content)
                else:
                    got = read_whole(resp.content)
                    if got.error is not None:
                        row["error"] = got.error
                    else:
                        row["answer"] = got.content
                        row["finish_reason"] = got.finish_reason
                        row["output_tokens"] = got.completion_tokens
            except httpx.HTTPError as exc:
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            out.append(row)
    return out
