"""The simulator's text: the prompt of a request body, and the words it "generates" (seeded
by the prompt, so the same request always gets the same answer, as with greedy decoding)."""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Iterator
from typing import Any

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


class BadRequest(ValueError):
    """Client error, answered as an OpenAI-style 400."""


def _completion_prompt(body: dict[str, Any]) -> str:
    prompt = body.get("prompt", "")
    if isinstance(prompt, list) and prompt and not all(isinstance(t, int) for t in prompt):
        prompt = prompt[0]  # a batch of prompts: only the first is served
    if isinstance(prompt, list):  # token ids: one "word" per id
        prompt = " ".join(str(t) for t in prompt)
    if not isinstance(prompt, str):
        raise BadRequest("prompt must be a string or a list of strings")
    return prompt


def _chat_prompt(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list")
    texts: list[str] = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [
                str(p.get("text", ""))
                for p in content
                if isinstance(p, dict) and p.get("type") == "text"
            ]
        elif content is not None:
            raise BadRequest("message content must be a string or a list of parts")
    return "\n".join(texts)


def generated_tokens(seed: int, prompt: str, n: int) -> list[str]:
    """Deterministic pseudo-words: same seed and prompt give the same tokens (greedy-like)."""
    return list(itertools.islice(token_stream(seed, prompt), n))


def token_stream(seed: int, prompt: str) -> Iterator[str]:
    """``generated_tokens`` one at a time, for servers that make each as it is sent."""
    digest = hashlib.sha256(prompt.encode()).hexdigest()
    rng = random.Random(f"{seed}:{digest}")  # str seeds are stable across runs
    choice, randint = rng.choice, rng.randint
    while True:
        yield " " + "".join(choice(_CONSONANTS) + choice(_VOWELS) for _ in range(randint(1, 3)))


def request_prompt(body: dict[str, Any], chat: bool) -> str:
    """The prompt text of a completions or chat request body (ValueError when malformed)."""
    return _chat_prompt(body) if chat else _completion_prompt(body)
