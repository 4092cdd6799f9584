"""A tiny local Hugging Face tokenizer, so the peers never reach for the Hub.

GuideLLM, AIPerf and SGLang's bench client all insist on a tokenizer (to count prompt tokens
and, for some, to count output tokens). The machines here cannot reach the Hub, so we write a
word-level tokenizer (one token per word or punctuation run) as a plain `tokenizer.json`,
which `transformers.AutoTokenizer.from_pretrained(<dir>)` loads as a fast tokenizer.

Unknown words become [UNK]: the servers' output words are then still counted one per word,
which is what the benchmark wants (every streamed chunk carries one word).
"""

from __future__ import annotations

import json
from pathlib import Path

SPECIALS = ["[UNK]", "<s>", "</s>", "<pad>"]
# The benchmark's prompts use these words only, so they tokenize without [UNK].
_TEXT = """
the a of to and in is it that for on with as at by from this be are was or an load benchmark
request token stream server client chunk latency time first next measure every each one two
three four five six seven eight nine ten please write story about fast slow quiet river
mountain city night light short long answer
"""
WORDS = _TEXT.split()


def vocabulary() -> list[str]:
    punctuation = ["-", ".", ",", ":", "?", "!"]
    return SPECIALS + WORDS + punctuation + ["req"]  # a request id "req-000123" is 3 tokens


def write(directory: Path) -> Path:
    """Write tokenizer.json and tokenizer_config.json into `directory`; return it."""
    directory.mkdir(parents=True, exist_ok=True)
    vocab = {word: i for i, word in enumerate(dict.fromkeys(vocabulary()))}
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": vocab[t],
                "content": t,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for t in SPECIALS
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 1_000_000,
        "unk_token": "[UNK]",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "pad_token": "<pad>",
        # Some clients render chat prompts through the template: keep it a plain join.
        "chat_template": "{% for m in messages %}{{ m['content'] }}\n{% endfor %}",
    }
    (directory / "tokenizer.json").write_text(json.dumps(tokenizer))
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    (directory / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return directory
