#!/usr/bin/env python3
"""Build a small Qwen3-MoE model with random weights and a locally trained tokenizer.

For running a real engine (``transformers serve``) with no access to a model hub: the tests
run one on the CPU, and ``campaigns/h200.toml`` runs one on a GPU. Its text is meaningless by
construction (random weights), and its end-of-sequence id lies outside the vocabulary, so
every answer runs to ``max_tokens``.

    python scripts/build_model.py --preset tiny  --out output/models/tiny-moe
    python scripts/build_model.py --preset small --out output/models/small-moe
    python scripts/build_model.py --preset small --eos in-vocab --out output/models/small-moe-eos
    python scripts/build_model.py --preset dense8b --eos in-vocab --config-only \
        --out output/models/dense8b          # for --load-format dummy: no weights at all

``--eos in-vocab`` makes the tokenizer's own ``<|endoftext|>`` the end-of-sequence id instead,
for engines that index their vocabulary with it: vLLM 0.26.0 with an out-of-vocabulary id and a
request with ``min_tokens`` crashes its engine core (``CUDA error: device-side assert
triggered``); SGLang 0.5.17 needs it too. Answers still run to ``max_tokens``: the special
tokens' output rows are all zeros, so a greedy pick never lands on it, and reportgen asks those
engines for ``ignore_eos``.

``--preset dense8b`` is shaped like Llama-3.1-8B (32 layers, hidden 4096, 32 heads, 8 KV heads,
MLP 14336; 16 GB in bfloat16), so a GPU, not the server's CPU, sets its pace. With
``--config-only`` only its config and tokenizer are written: vLLM and SGLang draw its weights at
load with ``--load-format dummy``, and no checkpoint is needed.

Needs transformers and tokenizers (and torch, unless ``--config-only``). The same preset and seed give the same weights and
the same tokenizer (trained on this project's own README and sources).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# tiny: seconds on a CPU (CI); small: a 0.5 B-parameter MoE, the H200 example; medium: the
# multi-GPU campaign's.
PRESETS: dict[str, dict[str, int]] = {
    "tiny": dict(
        vocab=1024,
        hidden=64,
        layers=2,
        heads=4,
        kv_heads=2,
        head_dim=16,
        experts=4,
        top_k=2,
        moe_inter=64,
        inter=128,
    ),  # fmt: skip
    "small": dict(
        vocab=8192,
        hidden=1024,
        layers=12,
        heads=16,
        kv_heads=4,
        head_dim=64,
        experts=32,
        top_k=4,
        moe_inter=384,
        inter=2048,
    ),  # fmt: skip
    # 3.9 B parameters (1.2 B active): large enough that tensor parallelism shows
    # (campaigns/vllm-tp.toml), 7.8 GB in bfloat16
    # Llama-3.1-8B's shape (dense: no experts) with this tokenizer's vocabulary; 7.5 B
    # parameters, for --load-format dummy (--config-only)
    "dense8b": dict(
        vocab=8192,
        hidden=4096,
        layers=32,
        heads=32,
        kv_heads=8,
        head_dim=128,
        experts=0,
        top_k=0,
        moe_inter=0,
        inter=14336,
    ),  # fmt: skip
    "medium": dict(
        vocab=8192,
        hidden=2048,
        layers=24,
        heads=16,
        kv_heads=4,
        head_dim=128,
        experts=32,
        top_k=8,
        moe_inter=768,
        inter=4096,
    ),  # fmt: skip
}

# Qwen's chat format: transformers serve finds the answer after "<|im_start|>assistant\n"
# (its response parser for Qwen models); with another format it echoes the prompt.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def corpus() -> list[str]:
    """The project's own text, in a fixed order."""
    files = [ROOT / "README.md", *sorted((ROOT / "reportgen").rglob("*.py"))]
    return [f.read_text(encoding="utf-8") for f in files if f.is_file()]


def _silent(tokenizer: Any, token_id: int) -> bool:
    text = tokenizer.decode([token_id])
    return not text or "\ufffd" in text


def build(
    out: Path, preset: str, seed: int, eos: str = "outside", config_only: bool = False
) -> dict[str, object]:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    p = PRESETS[preset]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=p["vocab"],
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        model_max_length=32768,
    )
    fast.chat_template = CHAT_TEMPLATE
    vocab = len(fast)
    # Outside the vocabulary (the default): the model can never end an answer early. In it:
    # the tokenizer's own end-of-text token, which engines that index with it need.
    eos_id = vocab if eos == "outside" else fast.eos_token_id
    if config_only or not p["experts"]:
        return _config_only(out, preset, seed, eos, eos_id, fast, p)
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    config = Qwen3MoeConfig(
        vocab_size=vocab,
        hidden_size=p["hidden"],
        intermediate_size=p["inter"],
        moe_intermediate_size=p["moe_inter"],
        num_hidden_layers=p["layers"],
        num_attention_heads=p["heads"],
        num_key_value_heads=p["kv_heads"],
        head_dim=p["head_dim"],
        num_experts=p["experts"],
        num_experts_per_tok=p["top_k"],
        max_position_embeddings=32768,
        eos_token_id=eos_id,
        bos_token_id=None,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=False,
        dtype="bfloat16",
    )
    torch.manual_seed(seed)
    model = Qwen3MoeForCausalLM(config).to(torch.bfloat16)
    # Tokens that stream no text (special tokens, lone bytes of a multi-byte character) get
    # all-zero output rows: a logit of 0 never wins a greedy pick among thousands of random
    # logits, so every answer streams text, token by token.
    silent = [i for i in range(vocab) if i in fast.all_special_ids or _silent(fast, i)]
    with torch.no_grad():
        model.lm_head.weight[silent] = 0
    model.generation_config.eos_token_id = eos_id
    model.generation_config.pad_token_id = fast.pad_token_id
    model.generation_config.do_sample = False
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    fast.save_pretrained(out)
    params = sum(t.numel() for t in model.parameters())
    about = {"preset": preset, "seed": seed, "parameters": params, "vocab": vocab,
             "silent_tokens": len(silent), **p}  # fmt: skip
    if eos != "outside":  # the default's record stays as it was
        about["eos"] = eos
        about["eos_token_id"] = eos_id
    (out / "reportgen-model.json").write_text(json.dumps(about, indent=2) + "\n")
    return about


def _config_only(
    out: Path, preset: str, seed: int, eos: str, eos_id: int, fast: Any, p: dict[str, int]
) -> dict[str, object]:
    """The model's config, generation config and tokenizer, no weights (``--load-format
    dummy``): a dense preset as Llama, a MoE one as Qwen3-MoE. A config saved without a model
    names no architecture; SGLang 0.5.17 then fails to start (vLLM guesses one from its type)."""
    from transformers import GenerationConfig, LlamaConfig, Qwen3MoeConfig

    shape = dict(
        vocab_size=len(fast),
        hidden_size=p["hidden"],
        intermediate_size=p["inter"],
        num_hidden_layers=p["layers"],
        num_attention_heads=p["heads"],
        num_key_value_heads=p["kv_heads"],
        head_dim=p["head_dim"],
        max_position_embeddings=32768,
        eos_token_id=eos_id,
        bos_token_id=None,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=False,
        dtype="bfloat16",
    )
    if p["experts"]:
        config: Any = Qwen3MoeConfig(
            **shape,
            moe_intermediate_size=p["moe_inter"],
            num_experts=p["experts"],
            num_experts_per_tok=p["top_k"],
            architectures=["Qwen3MoeForCausalLM"],
        )
    else:
        config = LlamaConfig(**shape, rope_theta=500000.0, architectures=["LlamaForCausalLM"])
    out.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(out)
    GenerationConfig(eos_token_id=eos_id, pad_token_id=fast.pad_token_id, do_sample=False).save_pretrained(out)
    fast.save_pretrained(out)
    h, L, v, f = p["hidden"], p["layers"], len(fast), p["inter"]
    kv = p["kv_heads"] * p["head_dim"]
    params = 2 * v * h + L * (h * p["heads"] * p["head_dim"] * 2 + 2 * h * kv + 3 * h * f + 2 * h) + h
    about = {"preset": preset, "seed": seed, "parameters": params, "vocab": v, "weights": "none "
             "(config only: --load-format dummy)", **p}  # fmt: skip
    if eos != "outside":
        about["eos"] = eos
        about["eos_token_id"] = eos_id
    (out / "reportgen-model.json").write_text(json.dumps(about, indent=2) + "\n")
    return about


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--out", type=Path, required=True, help="folder to write the model into")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--eos",
        choices=["outside", "in-vocab"],
        default="outside",
        help="end-of-sequence id: outside the vocabulary (default; transformers serve) or the "
        "tokenizer's own <|endoftext|> (vLLM, SGLang)",
    )
    ap.add_argument(
        "--config-only",
        action="store_true",
        help="write the config and tokenizer, no weights (engines load it with --load-format "
        "dummy); dense presets always are",
    )
    args = ap.parse_args(argv)
    try:
        about = build(args.out, args.preset, args.seed, args.eos, args.config_only)
    except ImportError as exc:
        print(f"build_model: {exc.name} is missing; pip install torch transformers tokenizers",
              file=sys.stderr)  # fmt: skip
        return 2
    print(f"build_model: {about['parameters']:,} parameters ({args.preset}) in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
