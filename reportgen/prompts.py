"""Prompts for synthetic load: reproducible, distinct, of a target length in words.

Each request gets its own prompt (seeded), so a prefix cache cannot make a level look faster
than it is. Word count approximates token count; the server's reported ``prompt_tokens`` is
what the results record.
"""

from __future__ import annotations

import random

_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ta",
    "ne",
    "ri",
    "so",
    "vu",
    "pe",
    "da",
    "gi",
    "ho",
    "lu",
    "ma",
    "se",
    "ti",
    "ko",
    "ra",
    "ne",
    "bu",
    "fa",
    "di",
    "mo",
    "na",
    "pi",
    "re",
    "sa",
    "tu",
    "ve",
    "wo",
    "ya",
    "ze",
]


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3)))


def synthetic(count: int, words: int, seed: int) -> list[str]:
    """``count`` prompts of exactly ``words`` whitespace-separated words each."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        body = " ".join(_word(rng) for _ in range(max(0, words - 2)))
        # A numbered lead-in keeps prompts distinct even for tiny word counts.
        out.append(f"request {i} {body}".strip() if words >= 2 else f"r{i}")
    return out
