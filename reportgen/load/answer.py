"""What an answer says, into its ``RequestRecord``: a streamed body's SSE events (chunk times
and sizes, text, usage, an error inside the stream), a whole answer, an HTTP error's message.

Shared by both ways a request goes out (``client``: aiohttp; ``wire``'s sink), so a response
means the same whichever transport read it.
"""

from __future__ import annotations

from typing import Any

import orjson

from reportgen.load.records import RequestRecord
from reportgen.load.sse import SSEDecoder

ERROR_TEXT = 300  # characters of an error message kept


class Events:
    """A streamed body's SSE events into ``rec``: chunk times and sizes, text, usage, and
    the failure, if any. ``feed`` returns False once the request has failed."""

    __slots__ = ("rec", "parts", "keep", "kept", "done", "finished", "decoder")

    def __init__(self, rec: RequestRecord, parts: list[str], keep: int) -> None:
        self.rec, self.parts, self.keep = rec, parts, keep
        self.kept = 0
        self.done = False  # [DONE] seen
        self.finished = False  # a choice's finish_reason seen
        self.decoder = SSEDecoder()

    def feed(self, chunk: bytes, now: float) -> bool:
        return self._events(self.decoder.feed(chunk), now, False)

    def close(self, now: float, cut: str = "") -> None:
        """The body ended (``cut``: how, when the connection broke). A body that ended
        cleanly after the answer's finish_reason is complete without [DONE]: transformers
        serve sends none."""
        if self._events(self.decoder.close(), now, True) and not (
            self.done or (self.finished and not cut)
        ):
            fail(self.rec, "stream ended without [DONE]" + (f": {cut}" if cut else ""))

    def _events(self, events: list[bytes], now: float, eof: bool) -> bool:
        rec = self.rec
        loads = orjson.loads
        for data in events:
            if data == b"[DONE]":
                self.done = True
                continue
            try:
                obj = loads(data)
            except orjson.JSONDecodeError:
                if eof:  # the last event of a stream cut short, itself cut: not usable
                    break
                fail(rec, f"invalid JSON in stream: {data[:100]!r}")
                return False
            if type(obj) is not dict:
                fail(rec, f"invalid JSON in stream: not an object: {data[:100]!r}")
                return False
            choices = obj.get("choices")
            if choices:
                choice = choices[0]
                if choice.get("finish_reason"):
                    self.finished = True
                delta = choice.get("delta")
                if delta is not None:
                    piece = delta.get("content") or ""
                    # reasoning models: vLLM and SGLang name the field one way or the other
                    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                    if reasoning:
                        piece = reasoning + piece
                else:
                    piece = choice.get("text") or ""
                if piece:
                    if rec.first_token is None:
                        rec.first_token = now
                    rec.chunk_times.append(now)
                    rec.chunk_chars.append(len(piece))
                    if self.kept < self.keep:
                        self.parts.append(piece)
                        self.kept += len(piece)
            elif "error" in obj or obj.get("object") == "error":
                msg = error_message(obj) or data[:200].decode(errors="replace")
                fail(rec, f"error in stream: {msg}")
                return False
            usage = obj.get("usage")
            if usage:
                take_usage(rec, usage)
        return True


def whole_answer(rec: RequestRecord, parts: list[str], raw: bytes, now: float) -> None:
    """A non-streamed 200 answer (arrived at ``now``) into ``rec``."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        fail(rec, f"invalid JSON response: {raw[:100]!r}")
        return
    if not isinstance(obj, dict):
        fail(rec, f"invalid JSON response: not an object: {raw[:100]!r}")
        return
    if "error" in obj:
        fail(rec, f"error in response: {error_message(obj)}")
        return
    choices = obj.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    msg = choice.get("message")
    if isinstance(msg, dict):
        reasoning = msg.get("reasoning_content") or msg.get("reasoning") or ""
        text = str(reasoning) + str(msg.get("content") or "")
    else:
        text = str(choice.get("text") or "")
    if text:  # a whole answer: no first token was seen apart from the rest (no TTFT)
        rec.chunk_times.append(now)
        rec.chunk_chars.append(len(text))
        parts.append(text)
    take_usage(rec, obj.get("usage"))


def fail(rec: RequestRecord, message: str) -> None:
    rec.status = "error"
    rec.error = message[:ERROR_TEXT]


def take_usage(rec: RequestRecord, usage: Any) -> None:
    if isinstance(usage, dict):
        prompt = usage.get("prompt_tokens")
        if isinstance(prompt, int):
            rec.input_tokens = prompt
        completion = usage.get("completion_tokens")
        if isinstance(completion, int):
            rec.output_tokens = completion
            rec.output_tokens_source = "usage"


def error_message(obj: Any) -> str:
    """The message of an OpenAI-style error (``{"error": {"message": ...}}``), or of the
    ``{"object": "error", "message": ...}`` and FastAPI ``{"detail": ...}`` shapes."""
    if not isinstance(obj, dict):
        return ""
    err = obj.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err)
    if err:
        return str(err)
    return str(obj.get("message") or obj.get("detail") or "")


def http_error(status: int, raw: bytes) -> str:
    try:
        msg = error_message(orjson.loads(raw))
    except orjson.JSONDecodeError:
        msg = ""
    return f"HTTP {status}: {msg or raw[:200].decode('utf-8', errors='replace').strip()}"
