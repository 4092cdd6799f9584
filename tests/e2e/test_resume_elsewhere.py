"""A campaign resumed on other GPUs than it began on: what ran there is compared with what
was measured there."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port, port_open, reportgen_main, small_demo
from tests.e2e.test_resume import interrupted_run, second_experiment_running

pytestmark = pytest.mark.slow


def test_a_run_resumed_on_other_gpus_judges_against_the_bracket_measured_there(
    tmp_path: Path, cache: Path
) -> None:
    """Stopped while its second experiment ran on one GPU (the H200 capture), resumed on
    another H200 (the same capture, another UUID): the experiments measured after the
    resumption ran on other GPUs than the baseline, so when decided they are not judged
    ("machine"); the baseline measured again at the end (the bracket) ran on theirs, and they
    are decided again against it, which the results and the report name. (The bracket itself
    is not judged against the baseline: another machine.)"""
    from reportgen.observe.sources import CAPTURE_ENV, read_capture

    h200 = ROOT / "tests" / "fixtures" / "gpu" / "h200-capture.json.xz"
    another = tmp_path / "another-h200.json"
    text = json.dumps(read_capture(h200))
    another.write_text(text.replace("GPU-ece0a407-", "GPU-0000aaaa-"))
    port = free_port()
    campaign = small_demo(tmp_path, port)
    # (no re-measurement of the baseline mid-campaign: the bracket is what stands in here)
    text = campaign.read_text().replace("starts = 1", "starts = 1\nbracket = true\nanchors = 0")
    campaign.write_text(text)
    out = tmp_path / "out"
    os.environ[CAPTURE_ENV] = str(h200)
    try:
        interrupted_run(
            campaign, out, cache, signal.SIGTERM, lambda: second_experiment_running(out)
        )
    finally:
        del os.environ[CAPTURE_ENV]
    (run_dir,) = (out / "demo").iterdir()
    res = reportgen_main(
        "run", campaign, "--output", out, "--resume", "--quiet", "--no-pdf",
        cache=cache, env={CAPTURE_ENV: str(another)},
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    data = json.loads((run_dir / "results.json").read_text())
    (resumed,) = data["resumed"]
    assert resumed["gpu_uuids"] == ["GPU-0000aaaa-6a4f-ce4e-cc1b-da343da3e7c0"]
    exps = {e["id"]: e for e in data["experiments"]}
    assert exps["baseline-end"]["role"] == "bracket"
    fast = exps["fast-decode-kernel"]["decision"]
    assert fast["stand_in"] == "baseline-end"
    assert fast["unjudged"] == []
    end = exps["baseline-end"]["decision"]
    assert [u["kind"] for u in end["unjudged"]] == ["machine"]
    assert "(baseline-end) stands in for it" in " ".join(fast["explanation"].split())
    html = (run_dir / "report.html").read_text()
    assert "this experiment / baseline-end (baseline's configuration measured again" in html
    assert reportgen_main("verify", run_dir).returncode == 0
    assert not port_open(port)
