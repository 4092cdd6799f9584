"""The load generator: OpenAI-compatible requests at a fixed concurrency, one record each.

Closed loop: ``concurrency`` workers each send their next request as soon as the previous one
ends, until the level's request count (or duration) is reached. Every record keeps the time of
each chunk that carried output, so any latency metric can be recomputed from raw data.

Times are seconds on ``time.perf_counter`` relative to the level's start; the level also
records its wall-clock start so records can be placed on a calendar.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from reportgen.sse import SSEDecoder


@dataclass
class RequestRecord:
    """One request as the client saw it. Times in seconds from the level's start."""

    index: int
    start: float
    end: float = 0.0
    first_token: float | None = None  # first chunk with non-empty content or reasoning
    chunk_times: list[float] = field(default_factory=list)  # every chunk that carried output
    input_tokens: int | None = None  # server's prompt_tokens
    output_tokens: int = 0
    output_tokens_source: str = "chunks"  # "usage" when the server reported it
    requested_output_tokens: int = 0
    status: str = "ok"  # ok | error
    http_status: int | None = None
    error: str | None = None
    output_text: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class LevelRun:
    concurrency: int
    started_at_unix: float
    duration_s: float
    records: list[RequestRecord]


@dataclass(frozen=True)
class RequestSpec:
    api: str  # chat | completions
    model: str | None
    output_tokens: int
    extras: dict[str, Any] = field(default_factory=dict)
    stream: bool = True
    keep_text_chars: int = 2000  # output text kept per request, for sanity checks

    def body(self, prompt: str) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "max_tokens": self.output_tokens,
            "temperature": 0.0,
            "stream": self.stream,
            **self.extras,
        }
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        if self.model:
            body["model"] = self.model
        if self.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
            return "/v1/chat/completions", body
        body["prompt"] = prompt
        return "/v1/completions", body


def _chunk_text(obj: dict[str, Any]) -> str:
    choices = obj.get("choices") or []
    if not choices:
        return ""
    choice = choices[0]
    delta = choice.get("delta")
    if isinstance(delta, dict):
        return (delta.get("content") or "") + (delta.get("reasoning_content") or "")
    return choice.get("text") or ""


def _error_message(obj: Any) -> str:
    if isinstance(obj, dict) and "error" in obj:
        err = obj["error"]
        if isinstance(err, dict):
            return str(err.get("message") or err)
        return str(err)
    return ""


async def send_one(
    client: httpx.AsyncClient, spec: RequestSpec, prompt: str, index: int, t0: float
) -> RequestRecord:
    """Send one request and time it; never raises for request-level failures."""
    path, body = spec.body(prompt)
    rec = RequestRecord(
        index=index, start=time.perf_counter() - t0, requested_output_tokens=spec.output_tokens
    )
    text_parts: list[str] = []
    try:
        if spec.stream:
            await _stream(client, path, body, rec, text_parts, t0)
        else:
            resp = await client.post(path, json=body)
            rec.http_status = resp.status_code
            now = time.perf_counter() - t0
            payload = resp.json() if resp.content else {}
            if resp.status_code != 200:
                rec.status = "error"
                rec.error = f"HTTP {resp.status_code}: {_error_message(payload) or resp.text[:200]}"
            else:
                text = _chunk_text(payload) or (
                    payload.get("choices", [{}])[0].get("message", {}).get("content") or ""
                )
                text_parts.append(text)
                rec.first_token = now
                rec.chunk_times.append(now)
                _take_usage(rec, payload.get("usage"))
    except httpx.TimeoutException:
        rec.status, rec.error = "error", "timeout"
    except httpx.HTTPError as exc:
        rec.status, rec.error = "error", f"{type(exc).__name__}: {exc}"[:300]
    except ValueError as exc:  # malformed JSON
        rec.status, rec.error = "error", f"invalid JSON from server: {exc}"[:300]
    rec.end = time.perf_counter() - t0
    text = "".join(text_parts)
    rec.output_text = text[: spec.keep_text_chars]
    if rec.output_tokens_source != "usage":
        rec.output_tokens = len(rec.chunk_times)
    return rec


async def _stream(
    client: httpx.AsyncClient,
    path: str,
    body: dict[str, Any],
    rec: RequestRecord,
    text_parts: list[str],
    t0: float,
) -> None:
    decoder = SSEDecoder()
    done = False
    async with client.stream("POST", path, json=body) as resp:
        rec.http_status = resp.status_code
        if resp.status_code != 200:
            raw = (await resp.aread()).decode("utf-8", errors="replace")
            try:
                msg = _error_message(json.loads(raw))
            except ValueError:
                msg = ""
            rec.status = "error"
            rec.error = f"HTTP {resp.status_code}: {msg or raw[:200]}"
            return
        async for raw_chunk in resp.aiter_raw():
            now = time.perf_counter() - t0
            for data in decoder.feed(raw_chunk):
                if data == "[DONE]":
                    done = True
                    continue
                obj = json.loads(data)
                err = _error_message(obj)
                if err:
                    rec.status, rec.error = "error", f"error in stream: {err}"[:300]
                    return
                piece = _chunk_text(obj)
                if piece:
                    if rec.first_token is None:
                        rec.first_token = now
                    rec.chunk_times.append(now)
                    text_parts.append(piece)
                _take_usage(rec, obj.get("usage"))
    if not done:
        rec.status, rec.error = "error", "stream ended without [DONE]"


def _take_usage(rec: RequestRecord, usage: Any) -> None:
    if isinstance(usage, dict):
        if isinstance(usage.get("prompt_tokens"), int):
            rec.input_tokens = usage["prompt_tokens"]
        if isinstance(usage.get("completion_tokens"), int):
            rec.output_tokens = usage["completion_tokens"]
            rec.output_tokens_source = "usage"


async def run_level(
    base_url: str,
    spec: RequestSpec,
    prompts: list[str],
    concurrency: int,
    *,
    requests: int | None = None,
    duration_s: float | None = None,
    timeout_s: float = 600.0,
    on_request: Callable[[RequestRecord], None] | None = None,
) -> LevelRun:
    """Run one closed-loop level: ``requests`` in total, or as many as fit in ``duration_s``."""
    if (requests is None) == (duration_s is None):
        raise ValueError("give exactly one of requests or duration_s")
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 30.0))
    records: list[RequestRecord] = []
    next_index = 0
    started_unix = time.time()
    t0 = time.perf_counter()
    stop_at = t0 + duration_s if duration_s is not None else None

    def take() -> int | None:
        nonlocal next_index
        if requests is not None and next_index >= requests:
            return None
        if stop_at is not None and time.perf_counter() >= stop_at:
            return None
        i = next_index
        next_index += 1
        return i

    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=timeout) as client:

        async def worker() -> None:
            while (i := take()) is not None:
                rec = await send_one(client, spec, prompts[i % len(prompts)], i, t0)
                records.append(rec)
                if on_request is not None:
                    on_request(rec)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    duration = time.perf_counter() - t0
    records.sort(key=lambda r: r.index)
    return LevelRun(
        concurrency=concurrency, started_at_unix=started_unix, duration_s=duration, records=records
    )
