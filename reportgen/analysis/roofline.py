"""How close a level ran to what its GPUs can physically do: a roofline per level.

Decode reads, at every step, the weights the batch touches and each running request's KV
cache, once; at a batch of B requests whose context averages T tokens a step moves
``W + B * T * kv`` bytes, so no server can generate more than ``B * bandwidth / (W + B * T *
kv)`` tokens a second (its GPUs' memory bandwidth together, the weights split between them).
Prefill multiplies every prompt token by every active weight: about ``2 * N_active`` floating
point operations a token, plus attention over the tokens before it, so no server prefills more
than ``peak / that`` tokens a second. A level's output tok/s is shown against the first and
its input tok/s against the second.

The model's shape is read from its ``config.json`` when the run starts
(``observe.evidence.model_shape``, kept in the experiment's ``model_files`` as ``shape``);
the GPU's figures come from ``GPUS``, each with its public source. Where either is unknown, or
the model is of a kind this does not model (attention of several kinds, a quantization it does
not know), it says so rather than guess. A mixture of experts reads, at a batch of B, the
experts B tokens choose: uniform routing is assumed (``E * (1 - (1 - k/E) ** B)`` experts a
layer), which a real router with favourites beats; the bound is then a little low for it,
the percentage a little high.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Gpu:
    name: str
    match: tuple[str, ...]  # substrings of the name NVML gives (case-insensitive)
    bandwidth_gb_s: float  # peak memory bandwidth, GB/s (10^9 bytes)
    bf16_tflops: float | None  # dense BF16 tensor throughput, TFLOP/s; None: not published
    source: str


# Each figure as its maker publishes it; dense tensor throughput is half the figure "with
# sparsity" that the product pages print. The most specific name first.
GPUS: tuple[Gpu, ...] = (
    Gpu(
        "H200 NVL",
        ("h200 nvl",),
        4800,
        835.5,
        "NVIDIA H200 product page (nvidia.com/en-us/data-center/h200): H200 NVL 4.8 TB/s, "
        "BF16 Tensor Core 1,671 TFLOPS with sparsity",
    ),
    Gpu(
        "H200",
        ("h200",),
        4800,
        989.5,
        "NVIDIA H200 product page (nvidia.com/en-us/data-center/h200): H200 SXM 4.8 TB/s, "
        "BF16 Tensor Core 1,979 TFLOPS with sparsity",
    ),
    Gpu(
        "H100 NVL",
        ("h100 nvl",),
        3900,
        835.5,
        "NVIDIA H100 product page (nvidia.com/en-us/data-center/h100): H100 NVL 3.9 TB/s, "
        "BF16 Tensor Core 1,671 TFLOPS with sparsity",
    ),
    Gpu(
        "H100 PCIe",
        ("h100 pcie",),
        2000,
        756.5,
        "NVIDIA H100 datasheet (nvidia.com/en-us/data-center/h100): H100 PCIe 2 TB/s, "
        "BF16 Tensor Core 1,513 TFLOPS with sparsity",
    ),
    Gpu(
        "H100 SXM",
        ("h100 80gb hbm3", "h100 sxm"),
        3350,
        989.5,
        "NVIDIA H100 product page (nvidia.com/en-us/data-center/h100): H100 SXM 3.35 TB/s, "
        "BF16 Tensor Core 1,979 TFLOPS with sparsity",
    ),
    Gpu(
        "A100 80GB SXM",
        ("a100-sxm4-80gb", "a100 80gb sxm"),
        2039,
        312.0,
        "NVIDIA A100 product page (nvidia.com/en-us/data-center/a100): A100 80GB SXM "
        "2,039 GB/s, BF16 Tensor Core 312 TFLOPS (624 with sparsity)",
    ),
    Gpu(
        "L40S",
        ("l40s",),
        864,
        362.05,
        "NVIDIA L40S product page (nvidia.com/en-us/data-center/l40s): 864 GB/s, "
        "BF16 Tensor Core 362.05 TFLOPS (733 with sparsity)",
    ),
    Gpu(
        "RTX PRO 6000 Blackwell",
        ("rtx pro 6000",),
        1792,
        None,
        "NVIDIA RTX PRO 6000 Blackwell product page (nvidia.com/en-us/products/workstations/"
        "professional-desktop-gpus/rtx-pro-6000): 96 GB GDDR7, 1,792 GB/s; no dense BF16 "
        "tensor figure is published there",
    ),
)

DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "float32": 4.0, "float8_e4m3fn": 1.0}
TP_ARGS = ("tensor-parallel-size", "tp-size", "tp")
PP_ARGS = ("pipeline-parallel-size", "pp-size", "pp")
DP_ARGS = ("data-parallel-size", "dp-size", "dp")
BATCH_CAPS = ("max-num-seqs", "max-running-requests")


def gpu(name: str | None) -> Gpu | None:
    """The known GPU whose name NVML gives, or None (the GH200's Hopper has other memory)."""
    low = (name or "").lower()
    if "gh200" in low:
        return None
    return next((g for g in GPUS if any(m in low for m in g.match)), None)


@dataclass(frozen=True)
class Model:
    """A model's size as the roofline counts it."""

    params: float  # every weight
    active: float  # the weights one token multiplies (a mixture of experts: k of E)
    dense_bytes: float  # the weights every decode step reads whatever the batch (not experts)
    expert_bytes: float  # one expert's weights in one layer
    moe_layers: int
    experts: int
    top_k: int
    kv_bytes: float  # KV cache bytes per token of context
    layers: int
    attn_width: int  # heads * head size (attention's FLOPs per token of context)
    weight_bytes: float  # bytes per weight


def model(
    shape: Mapping[str, Any],
    kv_dtype_bytes: float | None = None,
    args: Mapping[str, Any] | None = None,
) -> Model | str:
    """The model's size from its shape (and the server's flags ``args``: a quantization or
    dtype they set), or why it cannot be counted."""
    why = _unmodelled(shape)
    if why:
        return why
    h = int(shape["hidden_size"])
    layers = int(shape["num_hidden_layers"])
    heads = int(shape["num_attention_heads"])
    kv_heads = int(shape.get("num_key_value_heads") or heads)
    hd = int(shape.get("head_dim") or h // heads)
    vocab = int(shape["vocab_size"])
    inter = int(shape.get("intermediate_size") or 0)
    experts = int(
        shape.get("num_experts")
        or shape.get("num_local_experts")
        or shape.get("n_routed_experts")
        or 0
    )
    top_k = int(shape.get("num_experts_per_tok") or 0) if experts else 0
    moe_inter = int(shape.get("moe_intermediate_size") or inter)
    wbytes = _weight_bytes(shape, _flags(args or {}))
    if isinstance(wbytes, str):
        return wbytes
    # a quantized model keeps its embedding and output head at 16 bits
    head_bytes = 2.0 if wbytes < 2.0 else wbytes
    attn = h * heads * hd * 2 + h * kv_heads * hd * 2  # q and o, k and v
    dense_mlp = 3 * h * inter
    first_dense = int(shape.get("first_k_dense_replace") or 0) if experts else layers
    moe_layers = layers - first_dense if experts else 0
    expert = 3 * h * moe_inter
    shared = 0
    if experts:
        shared = 3 * h * int(shape.get("shared_expert_intermediate_size") or 0)
        shared += 3 * h * moe_inter * int(shape.get("n_shared_experts") or 0)
    per_dense_layer = attn + dense_mlp
    per_moe_layer_fixed = attn + shared + h * experts  # the router too
    embed = vocab * h
    head = 0 if shape.get("tie_word_embeddings") else vocab * h
    fixed = first_dense * per_dense_layer + moe_layers * per_moe_layer_fixed
    params = fixed + moe_layers * experts * expert + embed + head
    # what a prompt token multiplies (logits are computed for a prompt's last token only:
    # the output head is left out of prefill's operations)
    active = fixed + moe_layers * top_k * expert
    # the KV cache in the model's dtype unless the server's flags say otherwise
    kv = kv_dtype_bytes if kv_dtype_bytes is not None else min(_dtype_bytes(shape) or 2.0, 2.0)
    return Model(
        params=float(params),
        active=float(active),
        # every step reads the output head too (the input embedding's B rows: negligible)
        dense_bytes=fixed * wbytes + vocab * h * head_bytes,
        expert_bytes=expert * wbytes,
        moe_layers=moe_layers,
        experts=experts,
        top_k=top_k,
        kv_bytes=2.0 * layers * kv_heads * hd * kv,
        layers=layers,
        attn_width=heads * hd,
        weight_bytes=wbytes,
    )


def _unmodelled(shape: Mapping[str, Any]) -> str | None:
    missing = [
        k
        for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
        if not isinstance(shape.get(k), int)
    ]
    if missing:
        return f"config.json lacks {', '.join(missing)}"
    kinds = set(shape.get("layer_types") or [])
    if kinds - {"full_attention"} or shape.get("full_attention_interval"):
        return "the model mixes kinds of attention (layer_types), which this does not model"
    if shape.get("kv_lora_rank"):
        return "the model compresses its KV cache (multi-head latent attention), not modelled"
    if shape.get("use_sliding_window"):
        return "the model attends over a sliding window, not modelled"
    if isinstance(shape.get("mlp_only_layers"), list) and shape["mlp_only_layers"]:
        return "the model has dense layers among its experts (mlp_only_layers), not modelled"
    if int(shape.get("decoder_sparse_step") or 1) != 1:
        return "the model has experts in every n-th layer only (decoder_sparse_step), not modelled"
    if shape.get("uncounted"):
        keys = ", ".join(shape["uncounted"])
        return f"the model's config has expert settings this does not count ({keys})"
    return None


def _dtype_bytes(shape: Mapping[str, Any]) -> float | None:
    dtype = shape.get("torch_dtype") or shape.get("dtype")
    return DTYPE_BYTES.get(str(dtype)) if dtype else None


def _flags(args: Mapping[str, Any]) -> dict[str, Any]:
    """The server's flags with their names in one spelling (``tensor_parallel_size`` as
    ``tensor-parallel-size``)."""
    return {str(k).replace("_", "-"): v for k, v in args.items()}


def _weight_bytes(shape: Mapping[str, Any], flags: Mapping[str, Any]) -> float | str:
    served = str(flags.get("quantization") or "").lower()
    if served and served not in ("none", "null"):
        if served.startswith("fp8"):
            return 1.0  # the engine quantizes the checkpoint's weights as it loads them
        if not isinstance(shape.get("quantization"), Mapping):
            return f"the server quantizes the weights ({served}), which this does not count"
    quant = shape.get("quantization")
    if isinstance(quant, Mapping):
        method = str(quant.get("quant_method") or "").lower()
        algo = str(quant.get("quant_algo") or "").lower()
        if method == "fp8" or algo == "fp8":
            return 1.0
        if "nvfp4" in (method, algo):
            return 0.5 + 1 / 16  # 4 bits and one 8-bit scale per 16 weights
        bits, group = quant.get("bits"), quant.get("group_size")
        if method in ("gptq", "awq") and isinstance(bits, int) and isinstance(group, int):
            return bits / 8 + 2 / max(group, 1)  # a 16-bit scale a group (zeros left out)
        return f"its quantization ({method or algo or 'unnamed'}) is not one this counts"
    dtype = str(flags.get("dtype") or "auto").lower()
    if dtype in ("half", "float16", "bfloat16", "fp16", "bf16"):
        return 2.0
    if dtype in ("float", "float32", "fp32"):
        return 4.0
    found = _dtype_bytes(shape)
    if found is None:
        return "config.json names no dtype this counts (torch_dtype)"
    return min(found, 2.0)  # "auto": vLLM and SGLang serve a float32 checkpoint at 16 bits


@dataclass(frozen=True)
class Parallel:
    shards: int  # GPUs one replica's weights are split over (tensor parallel)
    replicas: int  # data parallel
    batch_cap: int | None  # the engine's most running requests, where set


def parallel(args: Mapping[str, Any]) -> Parallel | str:
    """How the server spreads the model over its GPUs, from its flags, or why this does not
    model it."""
    flags = _flags(args)

    def first(keys: tuple[str, ...]) -> int:
        for k in keys:
            v = flags.get(k)
            if isinstance(v, (int, str)) and str(v).isdigit() and int(v) > 0:
                return int(v)
        return 1

    if first(PP_ARGS) > 1:
        return "pipeline parallelism (its stages take a token in turn), not modelled"
    if flags.get("enable-dp-attention"):
        return "data-parallel attention (SGLang's --enable-dp-attention), not modelled"
    cap = next(
        (int(flags[k]) for k in BATCH_CAPS if str(flags.get(k, "")).isdigit()),
        None,
    )
    return Parallel(first(TP_ARGS), first(DP_ARGS), cap)


def kv_dtype(args: Mapping[str, Any]) -> float | None:
    """The KV cache's bytes per value where the server's flags set it (fp8: 1)."""
    v = str(_flags(args).get("kv-cache-dtype") or "")
    return 1.0 if v.startswith("fp8") else None


@dataclass(frozen=True)
class Bound:
    decode_tok_s: float  # the most output tok/s the memory bandwidth allows at this batch
    prefill_tok_s: float | None  # the most input tok/s the tensor cores allow
    batch: float
    context: float
    step_bytes: float


def bound(m: Model, g: Gpu, par: Parallel, batch: float, context: float, prompt: float) -> Bound:
    """The bandwidth bound on decode at ``batch`` requests of ``context`` tokens each, and the
    compute bound on prefilling prompts of ``prompt`` tokens, for one server of ``par``."""
    # the replicas the load keeps busy (one request busies one), and each one's batch
    busy = max(1, min(par.replicas, math.ceil(batch)))
    b = max(1.0, batch / busy)
    if par.batch_cap is not None:
        b = min(b, float(par.batch_cap))
    touched = m.experts * (1 - (1 - m.top_k / m.experts) ** b) if m.experts else 0.0
    step = m.dense_bytes + m.moe_layers * touched * m.expert_bytes + b * context * m.kv_bytes
    bw = g.bandwidth_gb_s * 1e9 * par.shards
    decode = busy * b * bw / step
    prefill = None
    if g.bf16_tflops is not None:
        # 2 FLOPs a weight, and attention over half the prompt on average (QK and AV); the
        # BF16 peak whatever the weights' format (an FP8 model's is twice it)
        flops = 2 * m.active + 2 * 2 * m.layers * m.attn_width * prompt / 2
        prefill = busy * g.bf16_tflops * 1e12 * par.shards / flops
    return Bound(decode, prefill, b, context, step)


def percent(measured: float | None, limit: float | None) -> float | None:
    if measured is None or limit is None or not math.isfinite(measured) or limit <= 0:
        return None
    return 100.0 * measured / limit
