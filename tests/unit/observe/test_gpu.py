"""GPU fingerprint and telemetry: the NVML source's fields as recorded on an H200 (replayed by
the fake source), telemetry windows and error counters worked out by hand, the sampling
thread (also when NVML fails mid-run), `reportgen fingerprint`, and a campaign recording
telemetry. Tests marked `gpu` need a real GPU and are skipped elsewhere."""

from __future__ import annotations

import html
import json
import re
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from reportgen.observe import fingerprint, gpu, nvml, sources, telemetry
from reportgen.observe.sources import FakeSource
from tests.builders import run_small
from tests.conftest import ROOT, Ran, reportgen_main

H200 = ROOT / "tests" / "fixtures" / "gpu" / "h200-capture.json.xz"
# NVML cannot see a GPU without the driver's device nodes: where they are missing, the
# answer must be "no GPU, and why"; where they are there, a working NVML source.
DEVICE_NODES = Path("/dev/nvidiactl").exists()


def capture() -> dict[str, Any]:
    return sources.read_capture(H200)


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
    # no energy counter here: the power (100 W + t) integrated over 0-3 s, 300 + 4.5 J
    assert w0["energy_from"] == "power integrated" and w0["energy_j"] == pytest.approx(304.5)
    assert w1["energy_j"] is None and w1["energy_from"] is None  # one sample: no span


def test_energy_comes_from_the_counter_where_the_gpu_has_one() -> None:
    """NVML's energy counter (mJ since the driver loaded) read at a window's first and last
    samples, scaled from their span to the window's: 2.5 kJ over the 2.5 s between the
    samples at 0.25 and 2.75 s of a 0-3 s window reads 3 kJ (1 kW), whatever the power
    samples said."""
    rows = [
        {"t": 0.25 + k * 0.625, "gpu": 0, "power_w": 10.0, "energy_mj": 5_000_000 + k * 625_000}
        for k in range(5)
    ]
    (w,) = telemetry.window(rows, 0.0, 3.0)
    assert w["energy_from"] == "counter" and w["energy_j"] == pytest.approx(3000.0)
    # a counter that went back (a driver reload) is not read as energy: the power is
    rows[-1]["energy_mj"] = 10
    (w,) = telemetry.window(rows, 0.0, 3.0)
    assert w["energy_from"] == "power integrated" and w["energy_j"] == pytest.approx(30.0)
    # samples over a third of the window (NVML stopped answering): not scaled up to all of it
    (w,) = telemetry.window(rows[:2], 0.0, 3.0)
    assert w["energy_j"] is None and w["energy_from"] is None


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
    monkeypatch.setenv(sources.CAPTURE_ENV, str(H200))
    source, why = sources.open_source()
    assert why is None and isinstance(source, FakeSource)
    monkeypatch.setenv(sources.CAPTURE_ENV, str(tmp_path / "missing.json"))
    source, why = sources.open_source()
    assert source is None and why is not None and "missing.json" in why
    monkeypatch.delenv(sources.CAPTURE_ENV)
    source, why = sources.open_source()
    if not DEVICE_NODES:
        assert source is None
    if source is None:  # this host has no GPU (CI): the reason names NVML or its package
        assert why is not None and ("NVML" in why or "nvidia-ml-py" in why), why
    else:  # a GPU host: NVML itself, answering
        try:
            assert why is None and isinstance(source, nvml.NvmlSource)
            assert source.info()["count"] >= 1
        finally:
            source.close()


def fingerprint_cli(*args: str, capture_file: Path | None = H200) -> Ran:
    env = {
        sources.CAPTURE_ENV: None if capture_file is None else str(capture_file),
        fingerprint.NO_TORCH_PROBE_ENV: None,  # probed, as a user's fingerprint is
    }
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
    data = run_small(tmp_path, "", cache, {sources.CAPTURE_ENV: str(H200)})
    exp = data["experiments"][0]
    assert exp["telemetry"]["error"] is None and exp["telemetry"]["rows"] > 5
    assert exp["gpu_counters"]["new_errors"] == []
    assert exp["gpu_counters"]["before"][0]["pcie_replays"] == 0
    windows = [w for level in exp["levels"] for w in level["telemetry"]]
    assert windows  # (a level shorter than the 50 ms sampling period may have no sample)
    for w in windows:
        assert w["gpu"] == 0 and w["samples"] >= 1 and w["sm_clock_mhz"]["max"] > 0
    # energy: the capture predates NVML's counter, so its power integrated, and per level run
    # the GPU's mean power and output tokens per joule, aggregated like any throughput
    powered = [lv for lv in exp["levels"] if (lv["telemetry"] or [{}])[0].get("energy_j")]
    assert powered
    assert all(lv["telemetry"][0]["energy_from"] == "power integrated" for lv in powered)
    for lv in powered:
        span = lv["window"]["duration_s"]
        power, per_j = lv["summary"]["power_w"], lv["summary"]["output_tok_per_j"]
        assert power == pytest.approx(lv["telemetry"][0]["energy_j"] / span)
        assert 50 < power < 800  # the H200's idle to its 700 W cap
        assert per_j == pytest.approx(lv["summary"]["output_tokens"] / (power * span))
    assert exp["by_level"][0]["output_tok_per_j"]["n"] >= 1
    frame = data["_telemetry"]
    assert list(frame.columns) == ["t", "gpu", *gpu.TELEMETRY_FIELDS] and len(frame) > 5
    assert data["environment"]["gpus"]["devices"][0]["name"] == "NVIDIA H200"
    page = (data["_run_dir"] / "report.html").read_text()
    caption = page.index("GPU telemetry of baseline")
    figure = page[page.rindex("<figure>", 0, caption) : caption]  # the chart its caption is of
    assert "<svg" in figure and "SM clock (MHz)" in page and "Power (W)" in page
    assert "clock events (share of samples, worst GPU)" in page
    assert "GPU 0: every field NVML gave" in page and "Not Supported" in page
    # each level run's output tokens per joule (and joules per token) beside its power
    assert '<th class="num">output tok/J (J/tok)</th>' in page
    assert re.search(r'<td class="num">[\d.,]+ \([\d.,]+\)</td></tr>', page)
    assert "Energy from the GPUs' sampled power, integrated" in page  # the template's own text


@pytest.mark.slow
def test_nvml_failing_mid_run_leaves_the_run_going(tmp_path: Path, cache: Path) -> None:
    cap = capture()
    cap["fail_after_samples"] = 2
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(cap))
    data = run_small(tmp_path, "", cache, {sources.CAPTURE_ENV: str(broken)})
    exp = data["experiments"][0]
    assert exp["status"] == "ok" and exp["decision"]
    assert exp["telemetry"]["error"].startswith("telemetry stopped after 2 rows")
    page = (data["_run_dir"] / "report.html").read_text()
    assert "Telemetry incomplete:" in page


@pytest.mark.slow
def test_without_a_gpu_the_run_says_telemetry_was_unavailable(tmp_path: Path, cache: Path) -> None:
    data = run_small(tmp_path, "", cache, {sources.CAPTURE_ENV: str(tmp_path / "none.json")})
    exp = data["experiments"][0]
    assert exp["status"] == "ok"
    assert exp["telemetry"]["error"].startswith("no GPU telemetry: ")
    assert not data["environment"]["gpus"]["available"]
    page = (data["_run_dir"] / "report.html").read_text()
    assert "No GPU telemetry: " in page and "none.json" in page


@pytest.mark.gpu
def test_nvml_on_a_real_gpu() -> None:
    try:
        source = nvml.NvmlSource()
    except gpu.GpuUnavailable as exc:
        pytest.skip(f"no GPU here: {exc}")
    try:
        info = source.info()
        assert info["count"] >= 1 and info["devices"][0]["name"]
        rows = source.sample()
        assert len(rows) == info["count"] and rows[0]["sm_clock_mhz"] > 0
        assert isinstance(rows[0]["energy_mj"], int)  # Volta and later keep the counter
        assert source.counters()[0]["gpu"] == 0
    finally:
        source.close()


def test_the_report_shows_a_real_h200_fingerprint() -> None:
    """`reportgen fingerprint --json` as it ran on the H200, rendered into the environment
    section: host, GPU, every NVML field, and the torch stack."""
    from reportgen.observe.environment import Environment
    from reportgen.render import text

    fp = json.loads((H200.parent / "h200-fingerprint.json").read_text())
    env = text.environment(Environment.of(fp))
    assert ("OS", "Ubuntu 24.04.3 LTS") in env["host"]
    assert env["devices"][0]["name"] == "NVIDIA H200" and env["devices"][0]["cc"] == "9.0"
    details = dict(env["device_details"][0]["rows"])
    assert details["pcie.max_generation"] == "5" and details["nvlink"].startswith("unavailable")
    stack = dict(env["software"])["torch stack (reportgen's Python)"]
    assert "nccl: 2.28.9" in stack and "cuda_runtime: 13.0" in stack


# -- several GPUs: the one-GPU capture replayed as four ------------------------------------------


def test_the_capture_replayed_as_four_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = capture()
    one, four = FakeSource(H200), FakeSource(H200, gpus=4)
    # as recorded, without replication or with as many GPUs as were recorded, saying that it
    # is a capture replayed
    said = {**recorded["info"], "replayed": "a capture recorded on a real GPU, replayed"}
    assert one.info() == said == FakeSource(H200, gpus=1).info()
    assert [r["sm_clock_mhz"] for r in one.sample()] == [recorded["samples"][0][0]["sm_clock_mhz"]]
    info = four.info()
    assert info["count"] == 4 and [d["index"] for d in info["devices"]] == [0, 1, 2, 3]
    uuid, bus = recorded["info"]["devices"][0]["uuid"], "00000000:00:06.0"
    assert [d["uuid"] for d in info["devices"]] == [uuid] + [f"{uuid}-r{k}" for k in (1, 2, 3)]
    assert [d["pci_bus_id"] for d in info["devices"]] == [bus] + [f"{bus}-r{k}" for k in (1, 2, 3)]
    assert all(d["name"] == "NVIDIA H200" for d in info["devices"])
    assert all(d["nvlink"] == {"error": "Not Supported"} for d in info["devices"])
    pairs = [t["gpus"] for t in info["topology"]]
    assert pairs == [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]
    for t in info["topology"]:  # nothing is known of how replayed GPUs connect: no NVLink
        assert "replayed" in t["common_ancestor"]["error"]
        assert all("error" in v for v in t["p2p"].values())
    # the capture's own key does the same
    assert FakeSource({**recorded, "replicate": 4}).info() == info
    for position in range(3):
        rows = four.sample()
        assert [r["gpu"] for r in rows] == [0, 1, 2, 3] and len({r["t"] for r in rows}) == 1
        for k, row in enumerate(rows):  # GPU k replays the capture from k quarters on
            ahead = (position + k * len(recorded["samples"]) // 4) % len(recorded["samples"])
            assert row["power_w"] == recorded["samples"][ahead][0]["power_w"]
    counters = four.counters()
    assert [c["gpu"] for c in counters] == [0, 1, 2, 3]
    assert counters[3]["pcie_replays"] == recorded["counters_before"][0]["pcie_replays"]
    # a campaign in another process asks for it through the environment
    monkeypatch.setenv(sources.CAPTURE_ENV, str(H200))
    monkeypatch.setenv(sources.CAPTURE_GPUS_ENV, "4")
    source, why = sources.open_source()
    assert why is None and source is not None and source.info() == info
    monkeypatch.setenv(sources.CAPTURE_GPUS_ENV, "none")
    source, why = sources.open_source()
    assert source is None and why is not None and sources.CAPTURE_GPUS_ENV in why


@pytest.fixture(scope="module")
def four_gpus(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> dict[str, Any]:
    """The small campaign, its GPU telemetry the H200 capture replayed as four GPUs."""
    env = {sources.CAPTURE_ENV: str(H200), sources.CAPTURE_GPUS_ENV: "4"}
    return run_small(tmp_path_factory.mktemp("four-gpus"), "", cache, env)


def _table(page: str, marker: str) -> list[list[str]]:
    """The body rows of the first table after ``marker`` in ``page``, as each cell's text."""
    start = page.index(marker)
    body = page[page.index("<tbody>", start) : page.index("</tbody>", start)]
    return [
        [
            html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)
        ]
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


@pytest.mark.slow
def test_a_campaign_on_four_gpus_records_and_reports_each(four_gpus: dict[str, Any]) -> None:
    data = four_gpus
    gpus = data["environment"]["gpus"]
    assert gpus["count"] == 4 and len(gpus["devices"]) == 4 and len(gpus["topology"]) == 6
    exp = data["experiments"][0]
    assert exp["telemetry"]["error"] is None
    assert [c["gpu"] for c in exp["gpu_counters"]["before"]] == [0, 1, 2, 3]
    assert exp["gpu_counters"]["new_errors"] == []
    assert sorted(set(data["_telemetry"]["gpu"])) == [0, 1, 2, 3]
    measured = [level for level in exp["levels"] if level["telemetry"]]
    assert measured  # (a level shorter than the 50 ms sampling period may have no sample)
    for level in measured:  # every sample has a row of each GPU: every window has all four
        assert [w["gpu"] for w in level["telemetry"]] == [0, 1, 2, 3]
        assert all(w["samples"] >= 1 and w["sm_clock_mhz"]["max"] > 0 for w in level["telemetry"])
    page = (data["_run_dir"] / "report.html").read_text()
    # the topology table: every pair, saying it was not measured (and no NVLink invented)
    topology = _table(page, "<h3>GPU topology</h3>")
    assert [row[0] for row in topology] == ["0 - 1", "0 - 2", "0 - 3", "1 - 2", "1 - 3", "2 - 3"]
    for row in topology:
        assert all(
            c == "unavailable (not measured: replayed from a 1-GPU capture)" for c in row[1:]
        )
    for k in (1, 2, 3):
        assert f"GPU {k}: every field NVML gave" in page and f"-r{k}</code>" in page
    # the level table pools the four GPUs; the per-GPU table has each GPU's row per level
    pooled = _table(page, '<table class="telemetry">')
    assert pooled and all(row[2] == "4" for row in pooled)
    per_gpu = _table(page, '<table class="telemetry per-gpu">')
    assert "Per GPU: each of the 4 GPUs on its own" in page
    by_run: dict[tuple[str, str], list[list[str]]] = {}
    for row in per_gpu:
        by_run.setdefault((row[0], row[1]), []).append(row)
    assert len(by_run) == len(pooled)  # one group of rows per row of the pooled table
    for rows in by_run.values():
        assert [row[2] for row in rows] == ["0", "1", "2", "3"]
        for row in rows:  # SM clock, memory clock, power, temperature, util, memory used
            assert row[3][0].isdigit() and row[4] == "3,201" and " / " in row[5]
            assert row[6] != "–" and row[7] != "–" and float(row[8]) > 0
    assert len({row[5] for row in per_gpu}) > 1  # the replayed GPUs do not move in step


@pytest.mark.slow
def test_the_gate_on_gpu_count_tells_one_gpu_from_four(
    four_gpus: dict[str, Any], tmp_path: Path, cache: Path
) -> None:
    from reportgen.observe.environment import Environment

    packages = {"software": {"packages": {"vllm": "0.11.0"}}}
    one = Environment.of({"gpus": FakeSource(H200).info(), **packages}).node
    four = Environment.of({"gpus": FakeSource(H200, gpus=4).info(), **packages}).node
    assert one.mismatches(one) == []
    assert four.mismatches(one) == [
        "GPUs 4 x NVIDIA H200 (compute capability 9.0) "
        "(the run's: 1 x NVIDIA H200 (compute capability 9.0))"
    ]
    # `reportgen diff` of the same campaign on one GPU and on four: not comparable
    single = run_small(tmp_path, "", cache, {sources.CAPTURE_ENV: str(H200)})
    page = (single["_run_dir"] / "report.html").read_text()
    assert "per-gpu" not in page and "Per GPU:" not in page  # one GPU: no per-GPU table
    res = reportgen_main(
        "diff", single["_run_dir"], four_gpus["_run_dir"], "--out", tmp_path / "diff", "--no-pdf"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    said = " ".join(res.stdout.split())
    assert (
        "NOT COMPARABLE: the runs differ in GPUs GPU model and count: 1 x NVIDIA H200 "
        "(compute capability 9.0) -> 4 x NVIDIA H200 (compute capability 9.0)"
    ) in said
    d = json.loads((tmp_path / "diff" / "diff.json").read_text())
    assert d["comparable"] is False
    assert [(c["area"], c["key"], c["a"], c["b"]) for c in d["incomparable"]] == [
        (
            "GPUs",
            "GPU model and count",
            "1 x NVIDIA H200 (compute capability 9.0)",
            "4 x NVIDIA H200 (compute capability 9.0)",
        )
    ]
    assert "NOT COMPARABLE" in (tmp_path / "diff" / "diff.html").read_text()


def test_energy_per_level_run_needs_every_gpus_energy() -> None:
    """Two GPUs using 3 kJ and 1 kJ over a 10-s window: 400 W; 20,000 output tokens in it, 5
    tokens per joule. A GPU without energy for the window (too few samples) leaves it unsaid
    rather than counting the other alone."""
    from reportgen.analysis.summary import energy_rates
    from reportgen.results.levels import Level

    def level(*joules: float | None) -> Level:
        return Level.model_validate(
            {
                "concurrency": 8,
                "window": {"t0_monotonic": 100.0, "duration_s": 10.0},
                "summary": {"output_tok_s": 2000.0, "output_tokens": 20_000},
                "telemetry": [{"gpu": g, "energy_j": j} for g, j in enumerate(joules)],
            }
        )

    assert energy_rates(level(3000.0, 1000.0)) == (400.0, 5.0)
    assert energy_rates(level(3000.0, None)) == (None, None)
    assert energy_rates(level()) == (None, None)
