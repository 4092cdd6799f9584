"""What a report tells a reader to change after a failure: the engine's own advice, quoted,
where its error gives one (never the opposite of it), else the fix the cause calls for."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from reportgen import results
from reportgen.render import brief
from reportgen.render.evidence import failure_hint
from tests.conftest import ROOT, reportgen_main

VLLM_RUN = ROOT / "tests" / "fixtures" / "runs" / "vllm-h200-moe"

# vLLM 0.26's error when the KV cache has no room (the committed run's kv-cache-too-small)
VLLM_NO_KV = (
    "server exited with code 1 before it was ready: ValueError: No available memory for the "
    "cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine (this "
    "flag also controls CPU memory reservation on the CPU backend, despite its name). See "
    "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
)
# SGLang's (model_runner: max_total_num_tokens <= 0)
SGLANG_NO_KV = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
# PyTorch's out of memory mid-run (the committed H200 run's eager-attention)
TORCH_OOM = (
    "server reported a fatal error during C=64 repetition 1: Error in generation loop: CUDA "
    "out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity of 139.80 GiB of "
    "which 2.24 GiB is free. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
)


@pytest.mark.parametrize(
    ("reason", "log", "said"),
    [
        (
            VLLM_NO_KV,
            "",
            "the error's own advice: \u201cTry increasing `gpu_memory_utilization` when "
            "initializing the engine (this flag also controls CPU memory reservation on the "
            "CPU backend, despite its name)\u201d",
        ),
        (
            "server exited with code 1 before it was ready",
            SGLANG_NO_KV,
            "the error's own advice: \u201cPlease try to increase --mem-fraction-static\u201d",
        ),
        (
            TORCH_OOM,
            "",
            "out of GPU memory while it ran: lower the KV cache's share "
            "(gpu-memory-utilization, mem-fraction-static) or the batch limits "
            "(max-num-seqs, max-running-requests)",
        ),
        (
            "server exited with code 1 before it was ready: ValueError: the model's max seq "
            "len (32768) is larger than the maximum number of tokens that can be stored in KV "
            "cache (21440)",
            "",
            "no room left for the KV cache: give it more memory (gpu-memory-utilization, "
            "mem-fraction-static) or less to hold (max-model-len, context-length)",
        ),
        (
            "server exited with code 2 before it was ready",
            "error: unrecognized arguments: --itl-msec 2",
            "the engine rejected a flag: check it with reportgen validate",
        ),
        ("server exited with code 3 during C=1 repetition 1", "sim: fault: exit", ""),
    ],
)
def test_the_hint_quotes_the_engines_advice_or_names_the_fix(
    reason: str, log: str, said: str
) -> None:
    assert failure_hint(reason, log) == said


def test_the_report_of_a_real_vllm_run_advises_what_vllm_does(tmp_path: Path) -> None:
    """vLLM said to increase gpu_memory_utilization: the report's next steps and the
    experiment's section quote it, and nothing says to lower it."""
    run = results.load(VLLM_RUN)
    (kv,) = [s for s in brief.build(run).next_steps if s.startswith("kv-cache-too-small: ")]
    assert "Try increasing `gpu_memory_utilization`" in kv and "lower" not in kv
    copy = shutil.copytree(VLLM_RUN, tmp_path / "run")
    assert reportgen_main("render", copy, "--no-pdf").returncode == 0
    page = (copy / "report.html").read_text()
    # the error said once where it is explained (its traceback), page one's line linking there
    assert page.count("No available memory for the cache blocks") == 2
    section = re.search(r'id="(exp-\d+)">\s*<div class="event-head">\s*<span class="step">\d+'
                        r"</span>\s*<h3>kv-cache-too-small</h3>", page)  # fmt: skip
    assert section is not None
    assert f'<li><strong><a href="#{section[1]}">kv-cache-too-small</a></strong>: ' in page
    assert (
        "<strong>What to change:</strong> the error&#39;s own advice: \u201cTry increasing "
        "`gpu_memory_utilization`" in page
    )
    assert "lower the KV cache" not in page
