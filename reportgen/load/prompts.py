"""Prompts for the load: synthetic ones of a target length, datasets, or one fixed text.

Synthetic prompts are reproducible (seeded) and distinct per request, so a prefix cache cannot
make a level look faster than it is; shared-prefix ones begin with one of a few seeded
prefixes, the case a prefix cache exists for. With a local tokenizer their length is exact; without
one, words stand in for tokens and the runner corrects the words-per-token ratio from the
server's reported ``prompt_tokens`` after warm-up.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reportgen.errors import LoadError
from reportgen.load.tokens import Tokenizer, exact_prompt

_SYLLABLES = [c + v for c in "kmtnrsvpdghlbf" for v in "aeiou"]  # pronounceable filler


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


def synthetic_exact(count: int, tokens: int, seed: int, tok: Tokenizer) -> list[str]:
    """``count`` distinct prompts of exactly ``tokens`` tokens each by ``tok``."""
    rng = random.Random(seed)
    return [exact_prompt(tok, tokens, rng, prefix=f"request {i} ") for i in range(count)]


def _prefixes(groups: int, make: Callable[[random.Random, int], str], seed: int) -> list[str]:
    """One prefix per group, from its own seed: the same at every level and in every
    experiment of a campaign (so an engine's cache sees them again), whatever the pool."""
    return [make(random.Random(f"prefix {seed} {g}"), g) for g in range(groups)]


def shared_prefix(
    count: int, words: int, prefix_words: int, groups: int, seed: int, prefix_seed: int
) -> list[str]:
    """``count`` prompts of ``words`` words whose first ``prefix_words`` are one of ``groups``
    shared prefixes (drawn per request, seeded) and whose rest is the request's own."""
    prefix_words = max(1, min(prefix_words, words - 1))

    def make(rng: random.Random, g: int) -> str:
        return " ".join([f"group {g}"] + [_word(rng) for _ in range(max(0, prefix_words - 2))])

    heads = _prefixes(groups, make, prefix_seed)
    own = synthetic(count, max(1, words - prefix_words), seed)
    rng = random.Random(seed)
    return [f"{heads[rng.randrange(groups)]} {tail}" for tail in own]


def shared_prefix_exact(
    count: int,
    tokens: int,
    prefix_tokens: int,
    groups: int,
    seed: int,
    prefix_seed: int,
    tok: Tokenizer,
) -> list[str]:
    """``shared_prefix`` with lengths exact by ``tok``: each group's prefix is exactly
    ``prefix_tokens`` tokens, the whole prompt exactly ``tokens``."""
    heads = _prefixes(
        groups,
        lambda rng, g: exact_prompt(tok, prefix_tokens, rng, prefix=f"group {g} "),
        prefix_seed,
    )
    rng = random.Random(seed)
    return [
        exact_prompt(tok, tokens, rng, prefix=f"{heads[rng.randrange(groups)]} request {i} ")
        for i in range(count)
    ]


def load_dataset(source: str, path: Path, field: str = "prompt") -> list[str]:
    """Prompts from a ShareGPT-format JSON file (first human turn) or a JSONL file."""
    where = f"workload.prompts.path = {str(path)!r}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LoadError(
            f"{where}: file not found; paths are relative to the campaign file"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LoadError(f"{where}: cannot read: {exc}") from None
    prompts: list[str] = []
    if source == "sharegpt":
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LoadError(f"{where}: not valid JSON ({exc})") from None
        # ShareGPT's own form ("conversations": [{"from": "human", "value": ...}]) and the
        # chat form many of its copies use ("messages": [{"role": "user", "content": ...}])
        for item in items if isinstance(items, list) else []:
            turns = (
                item.get("conversations") or item.get("conversation") or item.get("messages")
                if isinstance(item, dict)
                else None
            )
            for turn in turns if isinstance(turns, list) else []:
                if not isinstance(turn, dict):
                    continue
                if (turn.get("from") or turn.get("role")) in ("human", "user"):
                    value = turn.get("value", turn.get("content"))
                    if isinstance(value, str) and value.strip():
                        prompts.append(value)
                    break
    else:
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj: Any = json.loads(line)
            except json.JSONDecodeError:
                raise LoadError(f"{where}: line {n} is not valid JSON") from None
            value = obj.get(field) if isinstance(obj, dict) else None
            if not isinstance(value, str):
                raise LoadError(
                    f"{where}: line {n} has no string {field!r}; set workload.prompts.field"
                )
            prompts.append(value)
    if not prompts:
        expected = (
            'items with "conversations" ({"from": "human", "value": ...}) or "messages" '
            '({"role": "user", "content": ...})'
            if source == "sharegpt"
            else f"one JSON object per line with a string {field!r}"
        )
        raise LoadError(f"{where}: no prompts found (expected {expected})")
    return prompts


def sample(prompts: list[str], count: int, seed: int) -> list[str]:
    """``count`` prompts drawn from a dataset, shuffled reproducibly (cycling if it is small)."""
    order = list(range(len(prompts)))
    random.Random(seed).shuffle(order)
    return [prompts[order[i % len(order)]] for i in range(count)]
