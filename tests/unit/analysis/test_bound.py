"""What bounded each level, read from recorded runs: the SGLang H200 run whose C=64 lost 22%
on one start (its tokenizer near a full core, the GPU waiting), the H100 runs bound by the
GPU, and a level whose host samples name the busiest processes."""

from __future__ import annotations

import json
import lzma

from reportgen.analysis import bound
from reportgen.results.levels import HostWindow
from reportgen.results.model import Experiment, Point, Run
from tests.conftest import ROOT


def _run(path: str) -> Run:
    return Run.model_validate(json.loads(lzma.open(ROOT / path).read()))


def test_sglang_h200_c64_was_bound_by_its_tokenizer_not_the_gpu() -> None:
    run = _run("tests/fixtures/runs/sglang-h200-steady/results.json.xz")
    base = run.experiment("baseline")
    assert base is not None
    got = {b.point: b for b in bound.bounds(base)}
    assert got[Point(1)].by == bound.GPU
    c64 = got[Point(64)]
    assert c64.by == bound.SERVER_CPU
    assert c64.process == "tokenizer"
    assert c64.gpu_busy is not None and c64.gpu_busy < bound.GPU_BUSY
    assert "tokenizer" in c64.said and "GPU busy" in c64.said
    # a verdict there says its result holds for this host's CPU
    child = run.experiment("max-running-requests-48")
    words = bound.host_specific_said(child, base, [Point(1), Point(64)])
    assert "Not bound by the GPU at C=64" in words and "C=1" not in words.split("(")[0]


def test_h100_runs_were_bound_by_the_gpu_at_every_level() -> None:
    run = _run("docs/examples/sglang-h100/results.json.xz")
    for e in run.experiments:
        assert {b.by for b in bound.bounds(e)} == {bound.GPU}, e.id
        assert bound.host_specific_said(e, run.baseline, [Point(1), Point(64)]) == ""


def test_the_busiest_sampled_process_names_the_limit() -> None:
    """Host samples that name an API server at 0.95 cores while the GPU ran 70% of the window:
    the server's CPU; the client's own process (reportgen's group) is never the server."""
    run = _run("docs/examples/sglang-h100/results.json.xz")
    base = run.baseline
    assert base is not None
    e = Experiment.model_validate(base.model_dump())
    for lv in e.levels:
        lv.host = HostWindow(
            samples=40,
            processes=[
                {"name": "python", "pid": 1, "group": 1, "cores": 1.4, "client": True},
                {"name": "VLLM::APIServer", "pid": 2, "group": 2, "cores": 0.95, "client": False},
            ],
        )
        for g in lv.telemetry or []:
            g.util_gpu_pct.mean = 70.0
    got = bound.bounds(e)
    assert {b.by for b in got} == {bound.SERVER_CPU}
    assert {b.process for b in got} == {"VLLM::APIServer"}
