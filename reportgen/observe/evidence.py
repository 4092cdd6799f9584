"""The engine's own evidence: its info endpoints, its Prometheus counters around each level,
what its log says, and fingerprints of the model's configuration files.

Everything here is best-effort and never raises: an endpoint that does not answer or a
file that cannot be read is recorded as ``{"error": why}``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from reportgen import tls
from reportgen.redact import redact_text, redact_tree

TIMEOUT_S = 5.0
MAX_TEXT = 20_000  # characters kept of a non-JSON answer or a log match
MAX_SERIES = 400  # metric series kept per scrape
MODEL_ARGS = ("model-path", "model", "model_path", "model-name-or-path")
CONFIG_FILES = (
    "config.json",
    "hf_quant_config.json",
    "quantize_config.json",
    "quantization_config.json",
    "generation_config.json",
    "tokenizer_config.json",
)


def fetch_info(
    base_url: str, paths: Sequence[str], headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """GET each path; JSON answers as data, others as (truncated) text, failures as errors."""
    out: dict[str, Any] = {}
    with httpx.Client(
        base_url=base_url, timeout=TIMEOUT_S, headers=headers, verify=tls.context()
    ) as client:
        for path in paths:
            try:
                resp = client.get(path)
            except httpx.HTTPError as exc:
                out[path] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            if resp.status_code != 200:
                out[path] = {"error": f"HTTP {resp.status_code}"}
                continue
            try:  # (SGLang's /server_info carries its api_key among its arguments)
                out[path] = redact_tree(resp.json())
            except ValueError:
                out[path] = redact_text(resp.text[:MAX_TEXT])
    return out


def scrape(base_url: str, path: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """One Prometheus scrape: ``{"series": {name{labels}: [type, value]}}`` (histogram
    buckets and created-timestamps left out), or ``{"error": why}``."""
    try:
        resp = httpx.get(
            base_url.rstrip("/") + path, timeout=TIMEOUT_S, headers=headers, verify=tls.context()
        )
    except httpx.HTTPError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    if resp.status_code != 200:
        return {"error": f"HTTP {resp.status_code}"}
    return parse_metrics(resp.text)


def parse_metrics(text: str) -> dict[str, Any]:
    """Prometheus text as ``scrape`` records it: ``{"series": {name{labels}: [type, value]}}``,
    or ``{"error": why}``."""
    series: dict[str, list[Any]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name.endswith(("_bucket", "_created")) or len(series) >= MAX_SERIES:
                    continue
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                key = f"{s.name}{{{labels}}}" if labels else s.name
                series[key] = [family.type, float(s.value)]
    except ValueError as exc:
        return {"error": f"not Prometheus text: {exc}"}
    return {"series": series}


def deltas(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """What a level did to the engine's metrics: counters (and histogram/summary sums and
    counts) as after - before, gauges as their value after. ``{"error": ...}`` when either
    scrape failed."""
    if "error" in before or "error" in after:
        return {"error": str(before.get("error") or after.get("error"))}
    b, a = before.get("series") or {}, after.get("series") or {}
    counters, gauges = {}, {}
    for key, (kind, value) in a.items():
        if kind == "gauge":
            gauges[key] = value
            continue
        # A series absent before was created since, from zero (SGLang 0.5.17 creates its
        # token counters at the first request, and a label set such as cache_source="device"
        # at the first cache hit).
        change = value - (b[key][1] if key in b else 0.0)
        if change:
            counters[key] = change
    return {"counters": counters, "gauges": gauges}


# How a line of a rank after 0 of a server across nodes starts in its log (``run.nodes``).
OTHER_RANK = "[rank "


def log_evidence(text: str, patterns: Mapping[str, str]) -> dict[str, Any]:
    """For each named pattern (a regular expression), the first matching line (or None) of
    the server that serves (rank 0's, where it spans nodes); plus how many lines are warnings
    and errors, with the first few of each."""
    lines = text.splitlines()
    found: dict[str, str | None] = {}
    for name, pattern in patterns.items():
        rx = re.compile(pattern)
        found[name] = next(
            (ln.strip()[:MAX_TEXT] for ln in lines
             if rx.search(ln) and not ln.startswith(OTHER_RANK)),
            None,
        )  # fmt: skip
    warnings = [ln.strip() for ln in lines if re.search(r"\bWARN(ING)?\b", ln)]
    errors = [ln.strip() for ln in lines if re.search(r"\b(ERROR|CRITICAL|Traceback)\b", ln)]
    return {
        "found": found,
        "warnings": len(warnings),
        "warning_lines": [w[:300] for w in warnings[:5]],
        "errors": len(errors),
        "error_lines": [e[:300] for e in errors[:5]],
    }


def log_values(text: str, pattern: str | None) -> dict[str, Any] | None:
    """Statistics of a number the log repeats (the first group of ``pattern``): count, mean,
    min, max, first and last; None when the pattern is unset or never matches."""
    if not pattern:
        return None
    rx = re.compile(pattern)
    values = []
    for line in text.splitlines():
        m = rx.search(line)
        if m:
            try:
                values.append(float(m.group(1)))
            except (IndexError, ValueError):
                continue
    if not values:
        return None
    return {
        "count": len(values),
        "mean": sum(values) / len(values),
        "min": min(values),
        "max": max(values),
        "first": values[0],
        "last": values[-1],
    }


def server_args(found: Mapping[str, str | None]) -> dict[str, Any] | None:
    """The engine's resolved arguments from its log line: SGLang's
    ``server_args=ServerArgs(key=value, ...)`` or vLLM's ``non-default args: {...}``. Values
    are Python literals where they parse, else their text. None when no such line."""
    line = found.get("server_args") or found.get("non_default_args")
    if not line:
        return None
    if "ServerArgs(" in line:
        body = line[line.index("ServerArgs(") + len("ServerArgs(") :]
        body = body[: body.rindex(")")] if ")" in body else body
        return _keyword_args(body)
    if "non-default args:" in line:
        text = line.split("non-default args:", 1)[1].strip()
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return {"text": text[:MAX_TEXT]}
        return dict(value) if isinstance(value, dict) else {"text": text[:MAX_TEXT]}
    return None


def engine_config(
    text: str, lines: Sequence[str], values: Sequence[tuple[str, str]]
) -> dict[str, Any] | None:
    """The engine's resolved configuration from its log (an ``Engine``'s ``config_lines`` and
    ``config_values``), flattened: a nested mapping or ``Config(...)`` value's keys joined
    with dots (``compilation_config.max_cudagraph_capture_size``). Only the first start's
    lines count (a log of several starts prints them again). None when the log says none."""
    out: dict[str, Any] = {}
    log = text.splitlines()
    for pattern in lines:
        rx = re.compile(pattern)
        m = next((m for ln in log if (m := rx.search(ln)) and not ln.startswith(OTHER_RANK)), None)
        if m:
            _flatten(_keyword_args(m.group(1)), "", out)
    for key, pattern in values:
        rx = re.compile(pattern)
        m = next((m for ln in log if (m := rx.search(ln))), None)
        if m:
            raw = m.group(1).replace(",", "")
            try:
                out[key] = ast.literal_eval(raw)
            except (ValueError, SyntaxError):
                out[key] = m.group(1)
    return out or None


ENUM_REPR = re.compile(r"<([A-Za-z_][\w.]*): [^<>]*>")  # <CUDAGraphMode.FULL: 2> -> its name
CONFIG_REPR = re.compile(r"^[A-Za-z_]\w*\((.*)\)$", re.S)  # KernelConfig(a=1, b=2)


def _flatten(parsed: Mapping[str, Any], prefix: str, out: dict[str, Any]) -> None:
    for key, value in parsed.items():
        name = f"{prefix}{key}"
        if isinstance(value, str) and (m := CONFIG_REPR.match(value)):
            value = _keyword_args(m.group(1)) or value
        if isinstance(value, Mapping):
            _flatten(value, f"{name}.", out)
        else:
            out[name] = value


def _keyword_args(body: str) -> dict[str, Any]:
    """``a=1, b='x', c=[1, 2]`` -> {"a": 1, "b": "x", "c": [1, 2]}: split at top-level commas
    (outside brackets and quotes), then each value as a literal where it is one."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(body):
        if quote:
            if ch == quote and body[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    out: dict[str, Any] = {}
    for part in parts:
        key, sep, raw = part.strip().partition("=")
        if not sep or not key.isidentifier():
            continue
        raw = raw.strip()
        try:
            out[key] = ast.literal_eval(ENUM_REPR.sub(r"'\1'", raw))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            out[key] = raw
    return out


def model_files(args: Mapping[str, Any], base: Path) -> dict[str, Any]:
    """sha256 of the model's configuration files, when the server's model argument is a local
    folder (a relative path from the working directory, else from ``base``); the
    quantization block of config.json separately."""
    model = next((args[k] for k in MODEL_ARGS if isinstance(args.get(k), str)), None)
    if model is None:
        return {"error": "no model argument in the server's flags"}
    folder = Path(model)  # relative: to where the server runs (here), else the campaign file
    if not folder.is_absolute() and not folder.is_dir():
        folder = base / model
    if not folder.is_dir():
        return {"model": model, "error": "not a local folder (a hub id?): nothing to hash"}
    out: dict[str, Any] = {"model": model, "files": {}}
    raw: dict[str, bytes] = {}
    for name in CONFIG_FILES:
        path = folder / name
        if path.is_file():
            raw[name] = path.read_bytes()
            out["files"][name] = hashlib.sha256(raw[name]).hexdigest()
    if "config.json" in raw:
        try:
            data = json.loads(raw["config.json"])
        except ValueError:
            data = None
        found = data if isinstance(data, dict) else {}
        quant = found.get("quantization_config")
        if found:
            out["shape"] = model_shape(found)
        if isinstance(quant, dict):
            canonical = json.dumps(quant, sort_keys=True).encode()
            out["quantization_config_sha256"] = hashlib.sha256(canonical).hexdigest()
            out["quantization"] = quant.get("quant_method") or quant.get("quant_algo")
    return out


# expert settings the roofline counts; any other (``moe_*``, ``*expert*``) makes it refuse
COUNTED_EXPERT_KEYS = (
    "num_experts",
    "num_local_experts",
    "n_routed_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "n_shared_experts",
    "shared_expert_intermediate_size",
)
# config.json's keys that say how large a model is and how it attends (``analysis.roofline``
# counts its weights and KV cache from them)
SHAPE_KEYS = (
    "architectures",
    "model_type",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "tie_word_embeddings",
    "torch_dtype",
    "dtype",
    *COUNTED_EXPERT_KEYS,
    "first_k_dense_replace",
    "decoder_sparse_step",
    "mlp_only_layers",
    "layer_types",
    "full_attention_interval",
    "kv_lora_rank",
    "use_sliding_window",
    "interleave_moe_layer_step",
    "attention_chunk_size",
)


def model_shape(config: Mapping[str, Any]) -> dict[str, Any]:
    """What of a model's config.json says its size (a multimodal model's ``text_config`` read
    from there), with its quantization's method and bits."""
    text = config.get("text_config")
    src = {**config, **text} if isinstance(text, Mapping) else config
    out = {k: src[k] for k in SHAPE_KEYS if k in src}
    uncounted = sorted(
        str(k)
        for k, v in src.items()
        if ("expert" in str(k) or str(k).startswith("moe_"))
        and k not in COUNTED_EXPERT_KEYS
        and v not in (None, False, 0, [], "")
    )
    uncounted += [k for k in ("interleave_moe_layer_step", "attention_chunk_size") if src.get(k)]
    if uncounted:
        out["uncounted"] = uncounted
    quant = config.get("quantization_config")
    if isinstance(quant, Mapping):
        out["quantization"] = {
            k: quant[k] for k in ("quant_method", "quant_algo", "bits", "group_size") if k in quant
        }
    return out
