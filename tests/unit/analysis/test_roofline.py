"""The roofline: a model's size counted from its config, and the bounds a GPU puts on decode and
prefill, checked by hand against published shapes and figures."""

from __future__ import annotations

import pytest

from reportgen.analysis import roofline
from tests.builders import DENSE8B


def test_a_dense_model_is_counted_as_its_builder_counted_it() -> None:
    m = roofline.model(DENSE8B)
    assert isinstance(m, roofline.Model)
    # build_model printed 7,046,696,960 parameters, 266,240 of them RMSNorm weights
    assert m.params == 7_046_696_960 - 266_240
    # what a prompt token multiplies: every weight but the input embedding (a lookup) and the
    # output head (logits for a prompt's last token only)
    assert m.active == m.params - 2 * 8192 * 4096
    # K and V, 32 layers, 8 heads of 128, 2 bytes: 128 KiB a token of context
    assert m.kv_bytes == 2 * 32 * 8 * 128 * 2 == 131_072


def test_the_8b_shaped_model_at_c1_on_an_h200_is_bound_near_340_tok_s() -> None:
    m = roofline.model(DENSE8B)
    assert isinstance(m, roofline.Model)
    h200 = roofline.gpu("NVIDIA H200")
    assert h200 is not None and h200.bandwidth_gb_s == 4800
    # a step at batch 1 reads 7.01 G weights (14.03 GB) and 256 tokens of KV (0.03 GB)
    b = roofline.bound(m, h200, roofline.parallel({}), batch=1, context=256, prompt=128)
    assert b.step_bytes == pytest.approx(14.059e9, rel=1e-3)
    assert b.decode_tok_s == pytest.approx(4.8e12 / 14.059e9, rel=1e-3)  # 341 tok/s
    # the H200 runs of campaigns/vllm-h200.toml measured 209-217 output tok/s at C=1
    assert roofline.percent(209.0, b.decode_tok_s) == pytest.approx(61.2, abs=0.1)
    # prefill: 2 FLOPs a weight and a token, plus attention: about 70 k tokens/s of compute
    assert b.prefill_tok_s == pytest.approx(989.5e12 / (2 * m.active + 2 * 32 * 4096 * 128), 1e-9)
    assert b.prefill_tok_s is not None and 70_000 < b.prefill_tok_s < 72_000


def test_the_bound_grows_with_the_batch_until_the_kv_cache_dominates() -> None:
    m = roofline.model(DENSE8B)
    assert isinstance(m, roofline.Model)
    h100 = roofline.gpu("NVIDIA H100 80GB HBM3")
    assert h100 is not None and h100.name == "H100 SXM"
    bounds = [
        roofline.bound(m, h100, roofline.parallel({}), b, 256, 128).decode_tok_s
        for b in (1, 16, 64)
    ]
    assert bounds[0] < bounds[1] < bounds[2] < 64 * bounds[0]
    # a cap on running requests caps the batch the bound is taken at
    capped = roofline.bound(m, h100, roofline.parallel({"max-num-seqs": 48}), 64, 256, 128)
    assert capped.batch == 48 and capped.decode_tok_s < bounds[2]
    # tensor parallelism pools the GPUs' bandwidth (however the flag is spelt)
    tp2 = roofline.parallel({"tensor_parallel_size": 2})
    assert isinstance(tp2, roofline.Parallel)
    assert roofline.bound(m, h100, tp2, 1, 256, 128).decode_tok_s == pytest.approx(2 * bounds[0])
    # data parallelism adds replicas, but one request keeps only one of them busy
    dp2 = roofline.parallel({"data-parallel-size": 2})
    assert isinstance(dp2, roofline.Parallel)
    assert roofline.bound(m, h100, dp2, 1, 256, 128).decode_tok_s == pytest.approx(bounds[0])
    at64 = roofline.bound(m, h100, dp2, 64, 256, 128)
    assert at64.batch == 32 and at64.decode_tok_s > bounds[2]
    # pipeline stages take a token in turn, and SGLang's DP attention: not modelled, said
    assert "pipeline" in str(roofline.parallel({"pipeline-parallel-size": 2}))
    assert "dp-attention" in str(roofline.parallel({"enable-dp-attention": True}))


def test_a_mixture_of_experts_reads_only_the_experts_its_batch_chooses() -> None:
    moe = {
        **DENSE8B,
        "num_experts": 32,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 384,
        "hidden_size": 1024,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "head_dim": 64,
        "num_hidden_layers": 12,
        "intermediate_size": 2048,
    }
    m = roofline.model(moe)
    assert isinstance(m, roofline.Model)
    assert m.active < m.params and m.experts == 32 and m.moe_layers == 12
    h200 = roofline.gpu("NVIDIA H200")
    assert h200 is not None
    one = roofline.bound(m, h200, roofline.parallel({}), 1, 256, 128)
    many = roofline.bound(m, h200, roofline.parallel({}), 64, 256, 128)
    # one token reads 4 experts a layer; 64 read nearly all 32
    assert one.step_bytes < many.step_bytes
    assert many.step_bytes - 64 * 256 * m.kv_bytes == pytest.approx(
        m.dense_bytes + 12 * 32 * (1 - (1 - 4 / 32) ** 64) * m.expert_bytes
    )


@pytest.mark.parametrize(
    ("shape", "said"),
    [
        ({**DENSE8B, "layer_types": ["linear_attention", "full_attention"]}, "kinds of attention"),
        ({**DENSE8B, "kv_lora_rank": 512}, "latent attention"),
        ({**DENSE8B, "quantization": {"quant_method": "bitsandbytes"}}, "bitsandbytes"),
        ({k: v for k, v in DENSE8B.items() if k != "torch_dtype"}, "no dtype"),
        ({k: v for k, v in DENSE8B.items() if k != "hidden_size"}, "lacks hidden_size"),
    ],
)
def test_what_it_cannot_count_it_says_rather_than_guess(shape: dict, said: str) -> None:
    got = roofline.model(shape)
    assert isinstance(got, str) and said in got


def test_what_the_server_serves_counts_over_what_the_checkpoint_holds() -> None:
    # the engine quantizes to FP8 as it loads; a float32 checkpoint is served at 16 bits
    fp8 = roofline.model(DENSE8B, None, {"quantization": "fp8"})
    f32 = roofline.model({**DENSE8B, "torch_dtype": "float32"})
    assert isinstance(fp8, roofline.Model) and isinstance(f32, roofline.Model)
    assert fp8.weight_bytes == 1.0 and f32.weight_bytes == 2.0 and f32.kv_bytes == 131_072
    # the embedding and output head stay at 16 bits beside quantized layers
    assert fp8.dense_bytes == pytest.approx((fp8.params - 2 * 8192 * 4096) + 8192 * 4096 * 2)
    half = roofline.model({**DENSE8B, "torch_dtype": "float32"}, None, {"dtype": "float32"})
    assert isinstance(half, roofline.Model) and half.weight_bytes == 4.0
    odd = roofline.model(DENSE8B, None, {"quantization": "bitsandbytes"})
    assert isinstance(odd, str) and "bitsandbytes" in odd


def test_expert_settings_it_does_not_count_are_refused() -> None:
    from reportgen.observe.evidence import model_shape

    # ERNIE-4.5's experts (moe_num_experts, moe_k), Llama 4's interleaved experts
    ernie = model_shape({**DENSE8B, "moe_num_experts": 64, "moe_k": 6})
    llama4 = model_shape({**DENSE8B, "num_local_experts": 128, "interleave_moe_layer_step": 2})
    for shape, key in ((ernie, "moe_num_experts"), (llama4, "interleave_moe_layer_step")):
        got = roofline.model(shape)
        assert isinstance(got, str) and key in got
    # a Qwen3-MoE config (scripts/build_model.py --preset small) is counted
    qwen = model_shape(
        {**DENSE8B, "num_experts": 32, "num_experts_per_tok": 4, "moe_intermediate_size": 384,
         "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True}
    )  # fmt: skip
    assert "uncounted" not in qwen and isinstance(roofline.model(qwen), roofline.Model)


def test_quantized_weights_count_their_bytes() -> None:
    fp8 = roofline.model({**DENSE8B, "quantization": {"quant_method": "fp8"}})
    nvfp4 = roofline.model({**DENSE8B, "quantization": {"quant_algo": "NVFP4"}})
    assert isinstance(fp8, roofline.Model) and isinstance(nvfp4, roofline.Model)
    assert fp8.weight_bytes == 1.0 and nvfp4.weight_bytes == 0.5625
    # the KV cache stays in the model's dtype unless the server's flags say fp8
    assert fp8.kv_bytes == 131_072
    kv8 = roofline.model(DENSE8B, roofline.kv_dtype({"kv-cache-dtype": "fp8_e4m3"}))
    assert isinstance(kv8, roofline.Model) and kv8.kv_bytes == 65_536


def test_gpus_are_matched_by_the_name_nvml_gives_and_unknown_ones_are_none() -> None:
    assert roofline.gpu("NVIDIA H200 NVL").name == "H200 NVL"  # type: ignore[union-attr]
    assert roofline.gpu("NVIDIA H100 PCIe").name == "H100 PCIe"  # type: ignore[union-attr]
    pro = roofline.gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition")
    assert pro is not None and pro.bf16_tflops is None  # no dense figure published
    assert roofline.gpu("NVIDIA GeForce RTX 4090") is None
    assert roofline.gpu("NVIDIA GH200 480GB") is None  # not the H200's memory
    assert roofline.gpu(None) is None
    for g in roofline.GPUS:
        assert "nvidia.com" in g.source
