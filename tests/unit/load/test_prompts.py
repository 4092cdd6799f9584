"""Prompt sources and the tokenizer: exact lengths, datasets, and clear errors."""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path

import pytest

from reportgen.errors import LoadError
from reportgen.load import prompts, tokens

CORPUS = (
    "the quick brown fox jumps over the lazy dog while the server streams tokens to many "
    "clients and the engineer measures time to first token and inter token latency "
) * 20


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small byte-level BPE tokenizer trained here, saved the way models ship it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([CORPUS], trainers.BpeTrainer(vocab_size=300, show_progress=False))
    folder = tmp_path_factory.mktemp("tok")
    tok.save(str(folder / "tokenizer.json"))
    return folder


def test_exact_prompts_with_a_local_tokenizer(tokenizer_dir: Path) -> None:
    tok = tokens.load(str(tokenizer_dir))
    batch = prompts.synthetic_exact(20, 37, seed=3, tok=tok)
    assert [len(tok.encode(p)) for p in batch] == [37] * 20
    assert len(set(batch)) == 20  # distinct: no prefix-cache shortcut
    assert batch == prompts.synthetic_exact(20, 37, seed=3, tok=tok)  # reproducible


def test_exact_prompt_from_random_ids(tokenizer_dir: Path) -> None:
    tok = tokens.load(str(tokenizer_dir))
    rng = random.Random(0)
    for n in (1, 5, 64, 200):
        assert len(tok.encode(tokens.exact_prompt(tok, n, rng))) == n


def test_missing_tokenizer_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="no such folder"):
        tokens.load(str(tmp_path / "nope"))


def test_synthetic_word_prompts() -> None:
    batch = prompts.synthetic(5, 12, seed=1)
    assert all(len(p.split()) == 12 for p in batch)
    assert batch == prompts.synthetic(5, 12, seed=1) and batch != prompts.synthetic(5, 12, 2)


def test_a_prompt_is_the_same_whoever_makes_it_and_in_whatever_order() -> None:
    """A level's worker processes each get the pool and make the prompts they send: prompt
    i is the same there, whatever was made before it."""
    pool = prompts.synthetic(4096, [12, 40, 7], seed=9)
    later = pickle.loads(pickle.dumps(pool))
    assert [later[i] for i in (4095, 17, 3)] == [pool[i] for i in (4095, 17, 3)]
    assert [len(pool[i].split()) for i in (3, 4, 5)] == [12, 40, 7]
    assert pool[-1] == pool[4095] and pool[1:3] == [pool[1], pool[2]]
    with pytest.raises(IndexError):
        pool[4096]
    shared = prompts.shared_prefix(64, 30, 20, groups=2, seed=1, prefix_seed=0)
    assert pickle.loads(pickle.dumps(shared))[50] == shared[50]


def test_sharegpt_and_jsonl(tmp_path: Path) -> None:
    share = tmp_path / "share.json"
    share.write_text(
        json.dumps(
            [
                {
                    "conversations": [
                        {"from": "human", "value": "first question"},
                        {"from": "gpt", "value": "answer"},
                    ]
                },
                {
                    "conversations": [
                        {"from": "system", "value": "be brief"},
                        {"from": "human", "value": "second question"},
                    ]
                },
                {"conversations": []},
            ]
        )
    )
    assert prompts.load_dataset("sharegpt", share) == ["first question", "second question"]
    lines = tmp_path / "p.jsonl"
    lines.write_text('{"text": "a"}\n\n{"text": "b"}\n')
    assert prompts.load_dataset("jsonl", lines, field="text") == ["a", "b"]
    drawn = prompts.sample(["a", "b", "c"], 7, seed=4)
    assert len(drawn) == 7 and set(drawn) == {"a", "b", "c"}
    assert drawn == prompts.sample(["a", "b", "c"], 7, seed=4)


def test_dataset_errors_name_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="file not found; paths are relative to the campaign"):
        prompts.load_dataset("jsonl", tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"other": 1}\n')
    with pytest.raises(
        LoadError, match="line 2 has no string 'prompt'; set workload.prompts.field"
    ):
        prompts.load_dataset("jsonl", bad)
    bad.write_text("[not json")
    with pytest.raises(LoadError, match="not valid JSON"):
        prompts.load_dataset("sharegpt", bad)


def test_shared_prefix_prompts_share_a_group_prefix_and_differ_after_it() -> None:
    batch = prompts.shared_prefix(40, words=64, prefix_words=48, groups=4, seed=7, prefix_seed=0)
    assert all(len(p.split()) == 64 for p in batch)
    heads = {" ".join(p.split()[:48]) for p in batch}
    assert len(heads) == 4  # every request begins with one of the four prefixes
    assert len(set(batch)) == 40  # and is its own after it
    # The same prefixes at another level (another seed) and in another experiment.
    other = prompts.shared_prefix(40, words=64, prefix_words=48, groups=4, seed=8, prefix_seed=0)
    assert {" ".join(p.split()[:48]) for p in other} == heads
    assert other != batch


def test_shared_prefix_prompts_exact_by_the_tokenizer(tokenizer_dir: Path) -> None:
    tok = tokens.load(str(tokenizer_dir))
    batch = prompts.shared_prefix_exact(12, 40, 24, groups=3, seed=1, prefix_seed=0, tok=tok)
    assert [len(tok.encode(p)) for p in batch] == [40] * 12
    heads = {tok.encode(p)[:20] and tuple(tok.encode(p)[:20]) for p in batch}
    assert len(heads) == 3
    assert len(set(batch)) == 12
