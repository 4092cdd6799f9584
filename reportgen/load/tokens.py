"""A model's tokenizer, loaded from a local folder, for exact prompt lengths and token counts.

Loaded with ``transformers`` when it is installed (any tokenizer a model ships), else with
``tokenizers`` from the folder's ``tokenizer.json``. Nothing is downloaded: a tokenizer that
is not on disk is an error that says so.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Protocol

from reportgen.errors import LoadError


class Tokenizer(Protocol):
    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: list[int]) -> str: ...
    @property
    def vocab_size(self) -> int: ...


class _HF:
    """transformers' tokenizer, without special tokens (we count what the text costs)."""

    def __init__(self, tok: Any) -> None:
        self._tok = tok

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=True))

    @property
    def vocab_size(self) -> int:
        return int(self._tok.vocab_size)


class _Fast:
    """The ``tokenizers`` library on a tokenizer.json file."""

    def __init__(self, tok: Any) -> None:
        self._tok = tok

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=True))

    @property
    def vocab_size(self) -> int:
        return int(self._tok.get_vocab_size(with_added_tokens=False))


def load(path: str) -> Tokenizer:
    folder = Path(path).expanduser()
    if not folder.exists():
        raise LoadError(
            f"workload.tokenizer = {path!r}: no such folder; give the local folder of the "
            "model's tokenizer (nothing is downloaded)"
        )
    try:
        from transformers import AutoTokenizer
    except ImportError:
        pass  # the tokenizers library alone reads tokenizer.json
    else:
        try:
            return _HF(AutoTokenizer.from_pretrained(str(folder), local_files_only=True))
        except (OSError, ValueError) as exc:
            raise LoadError(f"workload.tokenizer = {path!r}: cannot load: {exc}") from None
    file = folder / "tokenizer.json" if folder.is_dir() else folder
    try:
        from tokenizers import Tokenizer as FastTokenizer
    except ImportError:
        raise LoadError(
            f"workload.tokenizer = {path!r}: install transformers or tokenizers to use it"
        ) from None
    try:
        return _Fast(FastTokenizer.from_file(str(file)))
    except Exception as exc:  # the Rust extension raises its own exception type
        raise LoadError(f"workload.tokenizer = {path!r}: cannot load {file}: {exc}") from None


def exact_prompt(tok: Tokenizer, tokens: int, rng: random.Random, prefix: str = "") -> str:
    """Text that the tokenizer encodes to exactly ``tokens`` tokens (prefix included).

    Random token ids are decoded and re-encoded (decoding can merge or split tokens), then
    trimmed or padded until the count is exact; a few rounds always suffice in practice.
    """
    vocab = max(2, tok.vocab_size)
    ids = tok.encode(prefix) if prefix else []
    ids += [rng.randrange(vocab) for _ in range(max(0, tokens - len(ids)))]
    text = tok.decode(ids[:tokens])
    for _ in range(20):
        n = len(tok.encode(text))
        if n == tokens:
            return text
        if n > tokens:
            text = tok.decode(tok.encode(text)[:tokens])
        else:
            text += tok.decode([rng.randrange(vocab) for _ in range(tokens - n)])
    return text  # closest found; the server's prompt_tokens records the truth
