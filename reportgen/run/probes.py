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
                    row["error"] = f"HTTP {resp.status_code}: {resp.text[:200]}"
                else:
                    data = resp.json()
                    choice = data["choices"][0]
                    text = (choice.get("message") or {}).get("content") if api == "chat" else None
                    row["answer"] = _text(text if text is not None else choice.get("text", ""))
                    reason = choice.get("finish_reason")
                    row["finish_reason"] = None if reason is None else str(reason)
                    tokens = (data.get("usage") or {}).get("completion_tokens")
                    row["output_tokens"] = tokens if isinstance(tokens, int) else None
            except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            out.append(row)
    return out


def _text(content: Any) -> str:
    """An answer's text: a string as it is; a list of content parts (as some servers send
    chat content) as their text joined; anything else as its JSON-ish text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)
