"""Where a workload's prompts come from: random, shared prefixes, a dataset, one fixed prompt,
or a trace replayed on time (``workload.prompts``)."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    model_validator,
)

from reportgen.campaign.base import _Model


class PromptSource(_Model):
    """Where request prompts come from."""

    source: Literal["random", "shared-prefix", "sharegpt", "jsonl", "fixed", "trace"] = Field(
        "random",
        description="random: synthetic prompts of input_tokens tokens, each distinct; "
        "shared-prefix: synthetic prompts of input_tokens tokens whose first prefix_tokens are "
        "one of `groups` shared prefixes (a system prompt or a document several questions "
        "share: what a prefix cache is for); sharegpt: a ShareGPT-format JSON file (first "
        "human turn); jsonl: one JSON object per line; fixed: one text; trace: a JSONL trace "
        "of timestamped requests (Mooncake's form: timestamp, input_length, output_length, "
        "hash_ids) replayed on time, each level its first requests_per_level requests or its "
        "first duration_s seconds, at most C in flight.",
    )
    path: str | None = Field(None, description="Dataset file (sharegpt, jsonl).")
    field: str = Field("prompt", description="jsonl: the key holding the prompt text.")
    text: str | None = Field(None, description="fixed: the prompt sent with every request.")
    groups: int = Field(
        8,
        ge=1,
        description="shared-prefix: how many distinct prefixes; each request draws one "
        "(seeded), the same prefixes at every level and in every experiment.",
    )
    prefix_tokens: int | None = Field(
        None,
        ge=1,
        description="shared-prefix: tokens of each group's prefix; the rest of input_tokens "
        "is the request's own text.",
    )
    time_scale: float = Field(
        0.001,
        gt=0,
        allow_inf_nan=False,
        description="trace: seconds per timestamp unit (0.001: milliseconds, as Mooncake's "
        "traces; 0.5 replays a millisecond trace twice as fast).",
    )
    block_tokens: int = Field(
        512,
        ge=1,
        description="trace: tokens per hash_ids block (Mooncake: 512); requests naming the "
        "same block share that text.",
    )
    answer_lengths: bool = Field(
        False,
        description="sharegpt: each request asks for as many output tokens as the dataset's "
        "own answer to its prompt had (what vLLM's and SGLang's benchmarks do by default), "
        "counted by workload.tokenizer, else estimated as characters / 4; output_tokens is "
        "then the cap for answers longer than it.",
    )

    @model_validator(mode="after")
    def _needs(self) -> PromptSource:
        if self.path and self.source not in ("sharegpt", "jsonl", "trace"):
            raise ValueError(
                f"prompts.path is given but prompts.source = {self.source!r} reads no file: "
                'set source = "sharegpt", "jsonl" or "trace" (or remove path)'
            )
        if self.text and self.source != "fixed":
            raise ValueError(
                f"prompts.text is given but prompts.source = {self.source!r} sends no fixed "
                'text: set source = "fixed" (or remove text)'
            )
        if self.answer_lengths and self.source != "sharegpt":
            raise ValueError(
                f"prompts.answer_lengths reads a ShareGPT file's answers, but prompts.source = "
                f'{self.source!r}: set source = "sharegpt" (or remove answer_lengths)'
            )
        if self.source in ("sharegpt", "jsonl", "trace") and not self.path:
            raise ValueError(f"prompts.source = {self.source!r} needs prompts.path")
        if self.source == "fixed" and not self.text:
            raise ValueError('prompts.source = "fixed" needs prompts.text')
        if self.source == "shared-prefix" and self.prefix_tokens is None:
            raise ValueError(
                'prompts.source = "shared-prefix" needs prompts.prefix_tokens (the length of '
                "each group's shared prefix, below input_tokens)"
            )
        return self
