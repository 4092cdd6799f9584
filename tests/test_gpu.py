"""GPU fingerprint and telemetry: the NVML source's fields as recorded on an H200 (replayed by
the fake source), telemetry windows and error counters worked out by hand, the sampling
thread (also when NVML fails mid-run), `reportgen fingerprint`, and a campaign recording
telemetry. Tests marked `gpu` need a real GPU and are skipped elsewhere."""

from __future__ import annotations

import json
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from reportgen.observe import gpu, telemetry
from reportgen.observe.gpu import FakeSource
from tests.conftest import ROOT, Ran, reportgen_main
from tests.test_driver import run_campaign

H200 = ROOT / "tests" / "fixtures" / "gpu" / "h200-capture.json"
# NVML cannot see a GPU without the driver's device nodes: where they are missing, the
# answer must be "no GPU, and why"; where they are there, a working NVML source.
DEVICE_NODES = Path("/dev/nvidiactl").exists()


def capture() -> dict[str, Any]:
    return dict(json.loads(H200.read_text()))


def test_h200_capture_has_every_fingerprint_field() -> None:
    info = FakeSource(H200).info()
    assert info["available"] and info["count"] == 1 and info["driver"] == "580.159.04"
    assert info["cuda_driver_version"] == "13.0"
    d = info["devices"][0]
    assert d["name"] == "NVIDIA H200" and d["compute_capability"] == "9.0"
    assert d["uuid"].startswith("GPU-") and d["serial"] and d["vbios"] and d["board_part_number"]
    assert d["memory_total_bytes"] == 150_754_820_096
    assert d["ecc_mode"] == {"current": 1, "pending": 1}
    assert d["mig_mode"] == {"current": 0, "pending": 0}
    assert d["power_limit_w"] == d["power_default_limit_w"] == d["power_enforced_limit_w"] == 700
    assert d["clocks_mhz"]["max_sm"] == 1980 and d["clocks_mhz"]["applications_mem"] == 3201
    assert d["pcie"] == {"generation": 5, "max_generation": 5, "width": 16, "max_width": 16}
    assert d["nvlink"] == {"error": "Not Supported"}  # one PCIe GPU: NVML says why
    assert d["cpu_affinity"] == "0-15" and d["processes"] == []
    assert info["topology"] == []  # pairs of GPUs: none with one
    counters = FakeSource(H200).counters()[0]
    assert counters["ecc_errors"]["uncorrected_volatile"] == 0
    assert counters["remapped_rows"]["pending"] == 0
    assert counters["retired_pages"]["single_bit"] == {"error": "Not Supported"}


def test_telemetry_windows_of_the_h200_capture_show_idle_then_power_capped() -> None:
    cap = capture()
    rows = [row for sample in cap["samples"] for row in sample]
    spans = {}
    for ph in cap["phases"]:
        first = cap["samples"][ph["first"]][0]["t"]
        last = cap["samples"][ph["first"] + ph["count"] - 1][0]["t"]
        spans[ph["phase"]] = telemetry.window(rows, first, last)[0]
    idle, busy = spans["idle"], spans["busy"]
    assert idle["clock_events"] == {"gpu_idle": 1.0} and idle["slowdown_share"] == 0
    assert idle["sm_clock_mhz"]["max"] == 345 and idle["sm_clock_cv_busy"] is None
    assert busy["util_gpu_pct"]["max"] == 100 and busy["power_w"]["max"] > 650
    assert busy["clock_events"]["sw_power_cap"] > 0.2  # 8k bf16 matmuls hit the 700 W cap
    assert busy["slowdown_share"] == busy["clock_events"]["sw_power_cap"]
    assert 0 < busy["sm_clock_cv_busy"] < 0.3 and 19 <= busy["hz"] <= 21


def test_window_by_hand() -> None:
    def row(t: float, clock: int, events: int, gpu: int = 0) -> dict[str, Any]:
        return {
            "t": t,
            "gpu": gpu,
            "sm_clock_mhz": clock,
            "power_w": 100.0 + t,
            "clock_events": events,
            "temp_c": 40,
        }

    rows = [
        row(0.0, 1000, 0x1),
        row(1.0, 1800, 0x0),
        row(2.0, 1600, 0x4),
        row(3.0, 2000, 0x0),
        row(9.0, 500, 0x40),
        row(1.0, 900, 0, gpu=1),
    ]
    w0, w1 = telemetry.window(rows, 0.0, 3.0)
    assert w0["samples"] == 4 and w0["hz"] == 1.0
    assert w0["sm_clock_mhz"] == {"mean": 1600.0, "min": 1000.0, "max": 2000.0}
    assert w0["power_w"]["mean"] == 101.5
    # busy clocks 1800, 1600, 2000: mean 1800, sd 200
    assert w0["sm_clock_cv_busy"] == pytest.approx(200 / 1800)
    assert w0["clock_events"] == {"gpu_idle": 0.25, "sw_power_cap": 0.25}
    assert w0["slowdown_share"] == 0.25
    assert w1["gpu"] == 1 and w1["samples"] == 1 and w1["hz"] is None


def test_counter_deltas_name_what_got_worse() -> None:
    before = FakeSource(H200).counters()
    after = json.loads(json.dumps(before))
    assert telemetry.counter_deltas(before, after) == []
    after[0]["ecc_errors"]["uncorrected_volatile"] = 2
    after[0]["remapped_rows"]["pending"] = 1
    after[0]["pcie_replays"] = 5
    after[0]["xid_events"] = [{"xid": 79, "t": 0}, {"xid": 48, "t": 0, "gpu": 1}]
    assert telemetry.counter_deltas(before, after) == [
        "GPU 0: 2 new uncorrected volatile ECC error(s)",
        "GPU 0: a row remapping is pending (reset the GPU)",
        "GPU 0: 5 new PCIe replay(s)",
        "GPU 0: XID event(s) 79",
    ]


@pytest.mark.timing
def test_sampling_thread_keeps_its_rate_and_survives_a_failing_source() -> None:
    tele = telemetry.Telemetry(FakeSource(H200), hz=50).start()
    time.sleep(0.5)
    rows = tele.stop()
    assert 18 <= len(rows) <= 30 and tele.error is None
    assert set(rows[0]) == {"t", "gpu", *gpu.TELEMETRY_FIELDS}
    assert rows == sorted(rows, key=lambda r: r["t"])
    broken = FakeSource(H200)
    broken.fail_after = 3
    tele = telemetry.Telemetry(broken, hz=100).start()
    time.sleep(0.2)
    rows = tele.stop()
    assert len(rows) == 3
    assert tele.error == "telemetry stopped after 3 rows: the GPU source stopped answering"


def test_open_source_replays_a_capture_or_says_why_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(gpu.CAPTURE_ENV, str(H200))
    source, why = gpu.open_source()
    assert why is None and isinstance(source, FakeSource)
    monkeypatch.setenv(gpu.CAPTURE_ENV, str(tmp_path / "missing.json"))
    source, why = gpu.open_source()
    assert source is None and why is not None and "missing.json" in why
    monkeypatch.delenv(gpu.CAPTURE_ENV)
    source, why = gpu.open_source()
    if not DEVICE_NODES:
        assert source is None
    if source is None:  # this host has no GPU (CI): the reason names NVML or its package
        assert why is not None and ("NVML" in why or "nvidia-ml-py" in why), why
    else:  # a GPU host: NVML itself, answering
        try:
            assert why is None and isinstance(source, gpu.NvmlSource)
            assert source.info()["count"] >= 1
        finally:
            source.close()


def fingerprint_cli(*args: str, capture_file: Path | None = H200) -> Ran:
    env = {gpu.CAPTURE_ENV: None if capture_file is None else str(capture_file)}
    return reportgen_main("fingerprint", *args, env=env)


def test_fingerprint_command_prints_json_and_a_table() -> None:
    res = fingerprint_cli("--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert set(data) == {"host", "software", "gpus"}
    assert data["gpus"]["devices"][0]["name"] == "NVIDIA H200"
    assert data["host"]["cpu_count"] >= 1 and data["software"]["reportgen"]["version"]
    try:  # the torch stack as the probe saw it (make test installs torch's CPU build)
        assert data["software"]["torch_stack"]["torch"] == metadata.version("torch")
        assert isinstance(data["software"]["torch_stack"]["cuda_available"], bool)
    except metadata.PackageNotFoundError:
        assert "not installed" in data["software"]["torch_stack"]["error"]
    res = fingerprint_cli()
    assert res.returncode == 0, res.stderr
    assert "NVIDIA H200" in res.stdout
    assert "devices[0].nvlink" in res.stdout and "unavailable: Not Supported" in res.stdout
    assert "Traceback" not in res.stdout + res.stderr


def test_fingerprint_without_a_gpu_says_why() -> None:
    res = fingerprint_cli("--json", capture_file=None)
    assert res.returncode == 0, res.stderr
    gpus = json.loads(res.stdout)["gpus"]
    if not DEVICE_NODES:
        assert gpus["available"] is False
    if gpus["available"]:  # a GPU host: every GPU NVML counts, each named
        assert gpus["count"] == len(gpus["devices"]) >= 1
        assert all(d["name"] for d in gpus["devices"])
    else:
        assert "NVML" in gpus["reason"] or "nvidia-ml-py" in gpus["reason"], gpus


@pytest.mark.slow
def test_a_campaign_records_telemetry_per_level(tmp_path: Path, cache: Path) -> None:
    data = run_campaign(tmp_path, "", cache, {gpu.CAPTURE_ENV: str(H200)})
    exp = data["experiments"][0]
    assert exp["telemetry"]["error"] is None and exp["telemetry"]["rows"] > 5
    assert exp["gpu_counters"]["new_errors"] == []
    assert exp["gpu_counters"]["before"][0]["pcie_replays"] == 0
    windows = [w for level in exp["levels"] for w in level["telemetry"]]
    assert windows  # (a level shorter than the 50 ms sampling period may have no sample)
    for w in windows:
        assert w["gpu"] == 0 and w["samples"] >= 1 and w["sm_clock_mhz"]["max"] > 0
    frame = data["_telemetry"]
    assert list(frame.columns) == ["t", "gpu", *gpu.TELEMETRY_FIELDS] and len(frame) > 5
    assert data["environment"]["gpus"]["devices"][0]["name"] == "NVIDIA H200"
    page = (data["_run_dir"] / "report.html").read_text()
    block = page[page.index("GPU telemetry of baseline") - 60_000 :]
    assert "<svg" in block and "SM clock (MHz)" in page and "Power (W)" in page
    assert "clock events (share of samples, worst GPU)" in page
    assert "GPU 0: every field NVML gave" in page and "Not Supported" in page


@pytest.mark.slow
def test_nvml_failing_mid_run_leaves_the_run_going(tmp_path: Path, cache: Path) -> None:
    cap = capture()
    cap["fail_after_samples"] = 2
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(cap))
    data = run_campaign(tmp_path, "", cache, {gpu.CAPTURE_ENV: str(broken)})
    exp = data["experiments"][0]
    assert exp["status"] == "ok" and exp["decision"]
    assert exp["telemetry"]["error"].startswith("telemetry stopped after 2 rows")
    page = (data["_run_dir"] / "report.html").read_text()
    assert "Telemetry incomplete:" in page


@pytest.mark.slow
def test_without_a_gpu_the_run_says_telemetry_was_unavailable(tmp_path: Path, cache: Path) -> None:
    data = run_campaign(tmp_path, "", cache, {gpu.CAPTURE_ENV: str(tmp_path / "none.json")})
    exp = data["experiments"][0]
    assert exp["status"] == "ok"
    assert exp["telemetry"]["error"].startswith("no GPU telemetry: ")
    assert not data["environment"]["gpus"]["available"]
    page = (data["_run_dir"] / "report.html").read_text()
    assert "No GPU telemetry: " in page and "none.json" in page


@pytest.mark.gpu
def test_nvml_on_a_real_gpu() -> None:
    try:
        source = gpu.NvmlSource()
    except gpu.GpuUnavailable as exc:
        pytest.skip(f"no GPU here: {exc}")
    try:
        info = source.info()
        assert info["count"] >= 1 and info["devices"][0]["name"]
        rows = source.sample()
        assert len(rows) == info["count"] and rows[0]["sm_clock_mhz"] > 0
        assert source.counters()[0]["gpu"] == 0
    finally:
        source.close()


def test_the_report_shows_a_real_h200_fingerprint() -> None:
    """`reportgen fingerprint --json` as it ran on the H200, rendered into the environment
    section: host, GPU, every NVML field, and the torch stack."""
    from reportgen.render import text

    fp = json.loads((H200.parent / "h200-fingerprint.json").read_text())
    env = text.environment(fp)
    assert ("OS", "Ubuntu 24.04.3 LTS") in env["host"]
    assert env["devices"][0]["name"] == "NVIDIA H200" and env["devices"][0]["cc"] == "9.0"
    details = dict(env["device_details"][0]["rows"])
    assert details["pcie.max_generation"] == "5" and details["nvlink"].startswith("unavailable")
    stack = dict(env["software"])["torch stack (reportgen's Python)"]
    assert "nccl: 2.28.9" in stack and "cuda_runtime: 13.0" in stack
