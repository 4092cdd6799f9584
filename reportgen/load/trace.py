"""A trace of timestamped requests, replayed on time (``prompts.source = "trace"``).

The file is JSON Lines in the Mooncake trace's form, one request a line::

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48]}

``timestamp`` is when the request arrived (in the file's unit: ``time_scale`` seconds each,
0.001 for Mooncake's milliseconds), ``input_length`` and ``output_length`` its tokens, and
``hash_ids`` (optional) the blocks of ``block_tokens`` tokens its prompt is made of: two
requests that name the same block share that part of their prompt, which is how a trace
says what a prefix cache could reuse. Prompts are synthetic text built from those blocks, so
the replay sends the trace's sharing, lengths and timing without its (private) text.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reportgen.errors import LoadError
from reportgen.load.prompts import _words, jsonl, read

# The names a field goes by in the traces people share (Mooncake's first)
TIME_KEYS = ("timestamp", "time", "arrival_time")
INPUT_KEYS = ("input_length", "input_tokens", "prompt_tokens")
OUTPUT_KEYS = ("output_length", "output_tokens", "max_tokens")


@dataclass(frozen=True)
class TraceRow:
    at: float  # seconds after the trace's first request
    input_tokens: int
    output_tokens: int
    blocks: tuple[int, ...] = ()


def load(path: Path, time_scale: float = 0.001) -> list[TraceRow]:
    """Every request of a trace file, in time order, times in seconds from the first."""
    where, text = read(path)
    rows: list[tuple[float, int, int, tuple[int, ...]]] = []
    for n, obj in jsonl(where, text):
        if not isinstance(obj, dict):
            raise LoadError(f"{where}: line {n} is not a JSON object")
        t = _number(obj, TIME_KEYS)
        inp, out = _number(obj, INPUT_KEYS), _number(obj, OUTPUT_KEYS)
        if t is None or inp is None or out is None:
            raise LoadError(
                f"{where}: line {n} needs a timestamp, an input_length and an output_length "
                "(numbers), as Mooncake's traces have them"
            )
        if not (math.isfinite(t) and inp >= 1 and out >= 1):
            raise LoadError(f"{where}: line {n}: lengths must be 1 or more, times finite")
        ids = obj.get("hash_ids") or []
        if not isinstance(ids, list) or not all(isinstance(h, int) for h in ids):
            raise LoadError(f"{where}: line {n}: hash_ids must be a list of whole numbers")
        rows.append((t, int(inp), int(out), tuple(ids)))
    if not rows:
        raise LoadError(f"{where}: no requests in the trace (one JSON object per line)")
    rows.sort(key=lambda r: r[0])
    first = rows[0][0]
    return [TraceRow((t - first) * time_scale, i, o, b) for t, i, o, b in rows]


def _number(obj: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    for k in keys:
        v = obj.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return float(v)
    return None


def window(rows: list[TraceRow], requests: int | None, duration_s: float | None) -> list[TraceRow]:
    """The part of a trace a level replays: its first ``requests`` requests, or those that
    arrive in its first ``duration_s`` seconds."""
    if requests is not None:
        return rows[:requests]
    return [r for r in rows if duration_s is None or r.at < duration_s]


def prompts(
    rows: list[TraceRow], block_tokens: int, words_per_token: float, seed: int
) -> list[str]:
    """A prompt for each request: its blocks' text in order (a block's text is the same
    wherever it appears), then its own words, cut or filled to its input length. Lengths in
    words (``words_per_token`` of them a token), corrected after the warm-up as for random
    prompts."""
    block_words = max(1, round(block_tokens * words_per_token))
    texts: dict[int, list[str]] = {}

    def block(h: int) -> list[str]:
        if h not in texts:
            rng = random.Random(f"block {h}")
            texts[h] = _words(rng, block_words)
        return texts[h]

    out = []
    for i, r in enumerate(rows):
        want = max(1, round(r.input_tokens * words_per_token))
        words: list[str] = []
        for h in r.blocks:
            if len(words) >= want:
                break
            words += block(h)
        if len(words) < want:  # the request's own text after its blocks
            rng = random.Random(f"own {seed} {i}")
            words += [f"request-{i}"] + _words(rng, want - len(words) - 1)
        out.append(" ".join(words[:want]))
    return out
