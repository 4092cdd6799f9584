"""What else a change changed: an experiment's resolved engine configuration (as the engine's
log printed it at start, ``observe.evidence.engine_config``) against its parent's, less what
its own flags name. vLLM sizes its CUDA graphs from ``--max-num-seqs``, SGLang its running
batch from the memory left: a flag moves settings its name does not say, and a verdict's
mechanism is often there (``--max-num-seqs 48`` also captures graphs up to 96 tokens instead
of 512, so every larger step runs without one).

``also_changed`` lists the differences; ``said`` puts them in words, the settings whose
effect is known first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reportgen.results.model import ConfigChange
from reportgen.results.records import value_text as value_text

# numbers that move a little between two starts of one configuration (the KV cache's tokens,
# the graphs' memory): a difference below this share is not a change
NUMERIC_SLACK = 0.02

# settings whose meaning a reader needs spelled out, most telling first: (key's last dotted
# part, what it is); the rest are said by their key
KNOWN = (
    ("max_cudagraph_capture_size", "CUDA graphs captured up to {after} tokens a step instead of "
     "{before} (a larger step runs without one)"),
    ("max_bs", "CUDA graphs captured up to a batch of {after} instead of {before} (a larger "
     "batch runs without one)"),
    ("cuda_graph_max_bs", "CUDA graphs captured up to a batch of {after} instead of {before} "
     "(a larger batch runs without one)"),
    ("cuda_graph_memory_gib", "graph memory {after} GiB instead of {before}"),
    ("max_num_batched_tokens", "at most {after} tokens a step instead of {before}"),
    ("chunked_prefill_size", "prefill chunks of {after} tokens instead of {before}"),
    ("max_running_requests", "at most {after} requests running instead of {before}"),
    ("async_scheduling", "asynchronous scheduling {after} (was {before})"),
    ("kv_cache_tokens", "KV cache of {after} tokens instead of {before}"),
    ("max_total_num_tokens", "KV cache of {after} tokens instead of {before}"),
)  # fmt: skip
_RANK = {key: i for i, (key, _) in enumerate(KNOWN)}


def flag_names(keys: Iterable[str]) -> set[str]:
    """The configuration names a set of flags set directly: ``--max-num-seqs`` ->
    ``max_num_seqs``, ``no-async-scheduling`` -> also ``async_scheduling``,
    ``enable-prefix-caching`` -> also ``prefix_caching``."""
    out: set[str] = set()
    for key in keys:
        name = key.lstrip("-").replace("-", "_")
        out.add(name)
        for prefix in ("no_", "enable_", "disable_"):
            if name.startswith(prefix):
                out.add(name[len(prefix) :])
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a == b)
    if isinstance(a, int | float) and isinstance(b, int | float):
        if a == b:
            return True
        scale = max(abs(a), abs(b))
        return math.isfinite(scale) and abs(a - b) <= NUMERIC_SLACK * scale
    return bool(a == b)


def also_changed(
    parent: Mapping[str, Any] | None,
    entry: Mapping[str, Any] | None,
    flags: Iterable[str],
    volatile: Sequence[str] = (),
) -> list[ConfigChange]:
    """The settings of ``entry``'s resolved configuration that differ from ``parent``'s, less
    those its changed ``flags`` name and the engine's ``volatile`` ones; the known ones
    (``KNOWN``) first. Empty where either side recorded none."""
    if not parent or not entry:
        return []
    named = flag_names(flags)
    skip = set(volatile)
    out = []
    for key in sorted(set(parent) | set(entry)):
        last = key.rsplit(".", 1)[-1]
        if last in named or key in named or last in skip or key in skip:
            continue
        if key not in parent or key not in entry:
            continue  # a line one side printed and the other not: nothing to compare
        before, after = parent[key], entry[key]
        if _same(before, after):
            continue
        out.append(ConfigChange(key=key, before=before, after=after))
    return sorted(out, key=lambda c: _RANK.get(c.key.rsplit(".", 1)[-1], len(KNOWN)))


def said(changes: Sequence[ConfigChange], most: int = 4) -> str:
    """The changes in words, the known ones as what they mean, at most ``most`` of them and
    how many more; "" where none."""
    if not changes:
        return ""
    words = dict(KNOWN)
    parts = []
    for c in changes[:most]:
        template = words.get(c.key.rsplit(".", 1)[-1])
        before, after = value_text(c.before), value_text(c.after)
        parts.append(
            template.format(before=before, after=after)
            if template
            else f"{c.key} {before} -> {after}"
        )
    more = len(changes) - most
    tail = f", and {more} more setting{'s' if more > 1 else ''}" if more > 0 else ""
    return "Also changed, as the engine's log says: " + "; ".join(parts) + tail + "."
