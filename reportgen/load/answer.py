"""What an answer says, into its ``RequestRecord``: a streamed body's SSE events (chunk times
and sizes, text, usage, an error inside the stream), a whole answer, an HTTP error's message.

Shared by both ways a request goes out (``client``: aiohttp; ``wire``'s sink), so a response
means the same whichever transport read it.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class Whole:
    """A non-streamed answer's body, read: its first choice's text (a chat message's content,
    or a completion's text), the reasoning a chat message carried beside it, why it ended,
    and the usage; or, where the body is not an answer, ``error``."""

    content: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    usage: Any = None
    error: str | None = None

    @property
    def completion_tokens(self) -> int | None:
        tokens = self.usage.get("completion_tokens") if isinstance(self.usage, dict) else None
        return tokens if isinstance(tokens, int) else None


def read_whole(raw: bytes) -> Whole:
    """A non-streamed 200 answer's body (chat or completions), the one reading of it: the
    load's requests and the golden prompts both take it from here."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return Whole(error=f"invalid JSON response: {raw[:100]!r}")
    if not isinstance(obj, dict):
        return Whole(error=f"invalid JSON response: not an object: {raw[:100]!r}")
    if "error" in obj:
        return Whole(error=f"error in response: {error_message(obj)}")
    choices = obj.get("choices") or [{}]
    choice = choices[0] if isinstance(choices, list) and isinstance(choices[0], dict) else {}
    msg = choice.get("message")
    reason = choice.get("finish_reason")
    finish = None if reason is None else str(reason)
    if isinstance(msg, dict):
        reasoning = msg.get("reasoning_content") or msg.get("reasoning") or ""
        return Whole(content_text(msg.get("content")), str(reasoning), finish, obj.get("usage"))
    return Whole(str(choice.get("text") or ""), "", finish, obj.get("usage"))


def content_text(content: Any) -> str:
    """A chat message's content as text: a string as it is; a list of content parts (as
    some servers send it) as their text joined; anything else as its text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)


def whole_answer(rec: RequestRecord, parts: list[str], raw: bytes, now: float) -> None:
    """A non-streamed 200 answer (arrived at ``now``) into ``rec``."""
    got = read_whole(raw)
    if got.error is not None:
        fail(rec, got.error)
        return
    text = got.reasoning + got.content
    if text:  # a whole answer: no first token was seen apart from the rest (no TTFT)
        rec.chunk_times.append(now)
        rec.chunk_chars.append(len(text))
        parts.append(text)
    take_usage(rec, got.usage)


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
