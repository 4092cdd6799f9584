"""What the load generator sends (``RequestSpec``) and keeps (``RequestRecord``, ``LevelRun``).

Times are seconds relative to the level's start ``t0``, a ``time.perf_counter()`` reading.
On Linux that clock is CLOCK_MONOTONIC, one clock for every process on the host, so records
made in worker processes share the parent's time axis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(slots=True)
class RequestRecord:
    """One request as the client saw it. Times in seconds from the level's start ``t0``."""

    index: int  # position in the level; prompt = prompts[index % len(prompts)]
    start: float  # when it was sent (latencies are measured from here)
    end: float = 0.0  # when its response ended (or it failed)
    first_token: float | None = None  # first chunk with non-empty content or reasoning
    chunk_times: list[float] = field(default_factory=list)  # every chunk that carried output
    input_tokens: int | None = None  # server's prompt_tokens
    output_tokens: int = 0
    output_tokens_source: str = "chunks"  # "usage" when the server reported it
    requested_output_tokens: int = 0
    status: str = "ok"  # ok | error
    http_status: int | None = None
    error: str | None = None
    output_text: str = ""  # the first RequestSpec.keep_text_chars characters
    chunk_chars: list[int] = field(default_factory=list)  # output characters, per chunk_times
    scheduled: float | None = None  # open loop: the intended send time (<= start)
    turn: int = 0  # multi-turn: its turn in its conversation (index // turns), from 0
    concurrency: int = 0  # the level it belongs to (set once the level has run)
    rate: float | None = None  # ... and its rate, where rates are the levels (``Point``)
    repetition: int = 0


RECORD_FIELDS = tuple(f.name for f in fields(RequestRecord))


@dataclass
class LevelRun:
    """One level: every request's record, sorted by index, and the client's own cost."""

    concurrency: int
    started_at_unix: float  # wall-clock time of t0
    duration_s: float  # from t0 until the last request ended
    records: list[RequestRecord]
    workers: int = 1  # event loops (processes when > 1) that sent the requests
    client_cpu_s: float = 0.0  # CPU (user + system) of the client's loop thread and workers
    t0_monotonic: float = 0.0  # t0 as a time.perf_counter() reading, to align other clocks
    # How late the client's event loop(s) ran a task due to run (ms: p50, p99, max): a bound
    # on the client's own error in chunk times. Empty when the level was too short to sample.
    loop_lag_ms: dict[str, float] = field(default_factory=dict)
    preopen_s: float = 0.0  # the longest any event loop spent opening connections before t0
    # Why the level was cut short (its server died): records are those finished by then.
    aborted: str | None = None
    # Closed loop: seconds between consecutive clients' first requests (0: all at t0).
    stagger_s: float = 0.0


@dataclass(frozen=True)
class RequestSpec:
    api: str  # chat | completions
    model: str | None
    output_tokens: int
    extras: dict[str, Any] = field(default_factory=dict)
    stream: bool = True
    keep_text_chars: int = 2000  # output text kept per request, for sanity checks
    # Sent with every request (an API key's Authorization header); never recorded.
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    # Cheap GETs that open the level's connections before t0, tried in order until one
    # answers below 400 (``client.preopen``); the engine's adapter says which are cheap.
    preopen_paths: tuple[str, ...] = ("/v1/models", "/health")

    def body(
        self,
        prompt: str,
        output_tokens: int | None = None,
        history: Sequence[tuple[str, str]] = (),
    ) -> tuple[str, dict[str, Any]]:
        """The request's path and JSON body; ``output_tokens``: this request's own (a
        workload whose output lengths vary), else the spec's; ``history``: a conversation's
        earlier turns, (role, text), sent before ``prompt`` (as messages, or for the
        completions API as one text)."""
        wanted = output_tokens or self.output_tokens
        body: dict[str, Any] = {
            "max_tokens": wanted,
            "temperature": 0.0,
            "stream": self.stream,
            **self.extras,
        }
        if "min_tokens" in body:  # the engine's way to ask for exactly that many
            body["min_tokens"] = wanted
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        if self.model:
            body["model"] = self.model
        if self.api == "chat":
            body["messages"] = [{"role": r, "content": t} for r, t in history] + [
                {"role": "user", "content": prompt}
            ]
        else:
            body["prompt"] = "".join(f"{t}\n" for _, t in history) + prompt
        return api_path(self.api), body


def api_path(api: str) -> str:
    """The OpenAI-compatible path an API's requests go to."""
    return "/v1/chat/completions" if api == "chat" else "/v1/completions"
