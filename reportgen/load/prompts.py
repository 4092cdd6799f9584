"""Prompts for the load: synthetic ones of a target length, datasets, or one fixed text.

Synthetic prompts are reproducible (seeded) and distinct per request, so a prefix cache cannot
make a level look faster than it is; shared-prefix ones begin with one of a few seeded
prefixes, the case a prefix cache exists for. With a local tokenizer their length is exact; without
one, words stand in for tokens and the runner corrects the words-per-token ratio from the
server's reported ``prompt_tokens`` after warm-up.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from reportgen.errors import LoadError
from reportgen.load.tokens import Tokenizer, exact_prompt

_SYLLABLES = [c + v for c in "kmtnrsvpdghlbf" for v in "aeiou"]  # pronounceable filler


def _words(rng: random.Random, n: int) -> list[str]:
    """``n`` pronounceable filler words of one to three syllables."""
    sizes = rng.choices((1, 2, 3), k=max(0, n))
    syllables = rng.choices(_SYLLABLES, k=sum(sizes))
    out, at = [], 0
    for size in sizes:
        out.append("".join(syllables[at : at + size]))
        at += size
    return out


Sizes = int | Sequence[int]  # one length for every prompt, or each prompt's own


def _size(sizes: Sizes, i: int) -> int:
    return sizes if isinstance(sizes, int) else sizes[i % len(sizes)]


class Pool(Sequence[str]):
    """``count`` prompts, prompt ``i`` made when it is first asked for, from a seed of its
    own, and kept: a level in duration mode draws from a pool of thousands and sends what its
    time allows, and only that is made. The same prompt ``i`` wherever it is made (a load's
    worker processes get the pool, not its prompts)."""

    def __init__(self, count: int, seed: int) -> None:
        self.size, self.seed = count, seed
        self._made: dict[int, str] = {}

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self.size))]
        if not -self.size <= i < self.size:
            raise IndexError(i)
        i %= self.size
        text = self._made.get(i)
        if text is None:
            text = self._made[i] = self._make(i, random.Random(f"prompt {self.seed} {i}"))
        return text

    def _make(self, i: int, rng: random.Random) -> str:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_made": {}}  # each process makes what it sends


class _Words(Pool):
    def __init__(self, count: int, words: Sizes, seed: int) -> None:
        super().__init__(count, seed)
        self.words = words

    def _make(self, i: int, rng: random.Random) -> str:
        n = _size(self.words, i)
        # A numbered lead-in keeps prompts distinct even for tiny word counts.
        return " ".join([f"request {i}", *_words(rng, n - 2)]) if n >= 2 else f"r{i}"


class _Exact(Pool):
    def __init__(self, count: int, tokens: Sizes, seed: int, tok: Tokenizer) -> None:
        super().__init__(count, seed)
        self.tokens, self.tok = tokens, tok

    def _make(self, i: int, rng: random.Random) -> str:
        return exact_prompt(self.tok, _size(self.tokens, i), rng, prefix=f"request {i} ")


def synthetic(count: int, words: Sizes, seed: int) -> Pool:
    """``count`` prompts of exactly ``words`` whitespace-separated words each (or prompt
    ``i`` of ``words[i]``)."""
    return _Words(count, words, seed)


def synthetic_exact(count: int, tokens: Sizes, seed: int, tok: Tokenizer) -> Pool:
    """``count`` distinct prompts of exactly ``tokens`` tokens each by ``tok`` (or prompt
    ``i`` of ``tokens[i]``)."""
    return _Exact(count, tokens, seed, tok)


def _prefixes(groups: int, make: Callable[[random.Random, int], str], seed: int) -> list[str]:
    """One prefix per group, from its own seed: the same at every level and in every
    experiment of a campaign (so an engine's cache sees them again), whatever the pool."""
    return [make(random.Random(f"prefix {seed} {g}"), g) for g in range(groups)]


class _SharedWords(_Words):
    def __init__(self, count: int, words: Sizes, heads: list[str], seed: int) -> None:
        super().__init__(count, words, seed)
        self.heads = heads

    def _make(self, i: int, rng: random.Random) -> str:
        head = self.heads[rng.randrange(len(self.heads))]
        return f"{head} {super()._make(i, rng)}"


class _SharedExact(_Exact):
    def __init__(
        self, count: int, tokens: Sizes, heads: list[str], seed: int, tok: Tokenizer
    ) -> None:
        super().__init__(count, tokens, seed, tok)
        self.heads = heads

    def _make(self, i: int, rng: random.Random) -> str:
        head = self.heads[rng.randrange(len(self.heads))]
        return exact_prompt(self.tok, _size(self.tokens, i), rng, prefix=f"{head} request {i} ")


def shared_prefix(
    count: int, words: Sizes, prefix_words: int, groups: int, seed: int, prefix_seed: int
) -> Pool:
    """``count`` prompts of ``words`` words whose first ``prefix_words`` are one of ``groups``
    shared prefixes (drawn per request, seeded) and whose rest is the request's own."""
    shortest = words if isinstance(words, int) else min(words)
    prefix_words = max(1, min(prefix_words, shortest - 1))

    def make(rng: random.Random, g: int) -> str:
        return " ".join([f"group {g}", *_words(rng, prefix_words - 2)])

    rest = (
        max(1, words - prefix_words)
        if isinstance(words, int)
        else [max(1, w - prefix_words) for w in words]
    )
    return _SharedWords(count, rest, _prefixes(groups, make, prefix_seed), seed)


def shared_prefix_exact(
    count: int,
    tokens: Sizes,
    prefix_tokens: int,
    groups: int,
    seed: int,
    prefix_seed: int,
    tok: Tokenizer,
) -> Pool:
    """``shared_prefix`` with lengths exact by ``tok``: each group's prefix is exactly
    ``prefix_tokens`` tokens, the whole prompt exactly ``tokens``."""
    heads = _prefixes(
        groups,
        lambda rng, g: exact_prompt(tok, prefix_tokens, rng, prefix=f"group {g} "),
        prefix_seed,
    )
    return _SharedExact(count, tokens, heads, seed, tok)


def load_dataset(source: str, path: Path, field: str = "prompt") -> list[str]:
    """Prompts from a ShareGPT-format JSON file (first human turn) or a JSONL file."""
    return [prompt for prompt, _ in load_pairs(source, path, field)]


def read(path: Path) -> tuple[str, str]:
    """A prompt file's text, and how errors name it ("workload.prompts.path = '...'");
    LoadError when it cannot be read."""
    where = f"workload.prompts.path = {str(path)!r}"
    try:
        return where, path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LoadError(
            f"{where}: file not found; paths are relative to the campaign file"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LoadError(f"{where}: cannot read: {exc}") from None


def jsonl(where: str, text: str) -> Iterator[tuple[int, Any]]:
    """Each non-blank line of a JSON Lines text, parsed, with its line number; LoadError
    naming the line that is not JSON."""
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except json.JSONDecodeError:
            raise LoadError(f"{where}: line {n} is not valid JSON") from None


def load_pairs(
    source: str, path: Path, field: str = "prompt", skipped: list[int] | None = None
) -> list[tuple[str, str | None]]:
    """Each prompt of a dataset with the answer it was given there: ShareGPT's first human
    turn and the assistant's turn after it (None where it has none); JSONL has no answers.
    ``skipped`` gets the number of ShareGPT items with no user turn to send."""
    where, text = read(path)
    items_seen = 0
    prompts: list[tuple[str, str | None]] = []
    if source == "sharegpt":
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LoadError(f"{where}: not valid JSON ({exc})") from None
        # ShareGPT's own form ("conversations": [{"from": "human", "value": ...}]) and the
        # chat form many of its copies use ("messages": [{"role": "user", "content": ...}])
        for item in items if isinstance(items, list) else []:
            items_seen += 1
            turns = (
                item.get("conversations") or item.get("conversation") or item.get("messages")
                if isinstance(item, dict)
                else None
            )
            turns = [t for t in turns if isinstance(t, dict)] if isinstance(turns, list) else []
            for k, turn in enumerate(turns):
                if (turn.get("from") or turn.get("role")) in ("human", "user"):
                    value = _text(turn.get("value", turn.get("content")))
                    if value.strip():
                        prompts.append((value, _answer(turns[k + 1 :])))
                    break
        if skipped is not None:
            skipped.append(items_seen - len(prompts))
    else:
        for n, obj in jsonl(where, text):
            found = obj.get(field) if isinstance(obj, dict) else None
            if not isinstance(found, str):
                raise LoadError(
                    f"{where}: line {n} has no string {field!r}; set workload.prompts.field"
                )
            prompts.append((found, None))
    if not prompts:
        expected = (
            'items with "conversations" ({"from": "human", "value": ...}) or "messages" '
            '({"role": "user", "content": ...})'
            if source == "sharegpt"
            else f"one JSON object per line with a string {field!r}"
        )
        raise LoadError(f"{where}: no prompts found (expected {expected})")
    return prompts


def _text(value: Any) -> str:
    """A turn's text: a string, or the text parts of OpenAI's content list
    ([{"type": "text", "text": ...}, ...]); "" for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p.get("text") for p in value if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(t for t in parts if isinstance(t, str))
    return ""


def _answer(after: list[dict[str, Any]]) -> str | None:
    """The assistant's turn right after a prompt ("gpt" or "assistant"), if it is one."""
    if not after or (after[0].get("from") or after[0].get("role")) not in ("gpt", "assistant"):
        return None
    return _text(after[0].get("value", after[0].get("content"))) or None


def sample(prompts: list[Any], count: int, seed: int) -> list[Any]:
    """``count`` items drawn from a dataset, shuffled reproducibly (cycling if it is small)."""
    order = list(range(len(prompts)))
    random.Random(seed).shuffle(order)
    return [prompts[order[i % len(order)]] for i in range(count)]


def lengths(count: int, length: int, ratio: float, seed: int | str) -> list[int]:
    """``count`` lengths drawn uniformly (seeded) from [length x (1 - ratio), length x
    (1 + ratio)], whole numbers of at least 1 (vLLM's --random-range-ratio); all ``length``
    when ``ratio`` is 0."""
    if ratio <= 0:
        return [length] * count
    low, high = max(1, math.floor(length * (1 - ratio))), max(1, math.ceil(length * (1 + ratio)))
    rng = random.Random(f"lengths {seed}")
    return [rng.randint(low, high) for _ in range(count)]
