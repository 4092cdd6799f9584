"""Record a GPU capture for the tests' fake GPU source, on a host with NVIDIA GPUs.

    PYTHONPATH=. python3 scripts/record_gpu_fixture.py OUT.json [--idle 2 --busy 4 --hz 20]

Writes what ``reportgen.observe.sources.FakeSource`` replays: NVML's view of every GPU
(``info``), the error counters before and after, and telemetry at ``--hz``: ``--idle``
seconds at rest, then ``--busy`` seconds while torch (when installed) multiplies bf16
matrices on GPU 0, then ``--idle`` seconds cooling down. Also the host's fingerprint and what
a sample costs. Needs only the standard library, nvidia-ml-py and (for the busy phase) torch.

With ``--energy`` each sample row also holds NVML's total-energy counter of its GPU
(``energy_mj``: millijoules since the driver loaded, ``nvmlDeviceGetTotalEnergyConsumption``),
read right after the row's power, so a capture shows how often the counter moves and how it
agrees with the integral of the sampled power.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reportgen.observe import gpu, nvml  # noqa: E402


def busy_gpu(stop: threading.Event, ready: threading.Event, note: dict[str, object]) -> None:
    try:
        import torch
    except ImportError:
        note["busy"] = "torch not installed: no busy phase"
        ready.set()
        return
    if not torch.cuda.is_available():
        note["busy"] = "torch sees no GPU"
        ready.set()
        return
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    a @ b  # CUDA context, cuBLAS handles: seconds, before the measured phase
    torch.cuda.synchronize()
    ready.set()
    n = 0
    began = time.perf_counter()
    while not stop.is_set():
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
        n += 20
    seconds = time.perf_counter() - began
    note["busy"] = (
        f"torch {torch.__version__}: {n} bf16 8192^3 matmuls in {seconds:.1f} s "
        f"({n * 2 * 8192**3 / seconds / 1e12:.0f} TFLOP/s)"
    )


class WithEnergy:
    """An NVML source whose samples also hold each GPU's total-energy counter."""

    def __init__(self, source: nvml.NvmlSource) -> None:
        self.source = source

    def __getattr__(self, name: str) -> object:
        return getattr(self.source, name)

    def sample(self) -> list[dict[str, object]]:
        rows = self.source.sample()
        for row, handle in zip(rows, self.source.handles, strict=True):
            try:
                row["energy_mj"] = self.source.nv.nvmlDeviceGetTotalEnergyConsumption(handle)
            except Exception as exc:  # not supported on this GPU or driver
                row["energy_mj"] = {"error": f"{type(exc).__name__}: {exc}"}
        return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--idle", type=float, default=2.0)
    parser.add_argument("--busy", type=float, default=4.0)
    parser.add_argument("--hz", type=float, default=20.0)
    parser.add_argument("--energy", action="store_true", help="record energy_mj per row")
    args = parser.parse_args()
    try:
        source = nvml.NvmlSource()
    except gpu.GpuUnavailable as exc:
        print(f"record_gpu_fixture: no GPU to record: {exc}", file=sys.stderr)
        return 1
    if args.energy:
        source = WithEnergy(source)
    capture: dict[str, object] = {
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hz": args.hz,
        "info": source.info(),
        "counters_before": source.counters(),
    }
    with_host = {}
    try:
        from reportgen.observe import fingerprint

        with_host = fingerprint.host()
    except Exception as exc:  # the fixture is about the GPU; the host is a bonus
        with_host = {"error": f"{type(exc).__name__}: {exc}"}
    capture["host"] = with_host
    samples, costs, phases = [], [], []
    note: dict[str, object] = {}
    for phase, seconds in (("idle", args.idle), ("busy", args.busy), ("cooling", args.idle)):
        stop, ready = threading.Event(), threading.Event()
        worker = None
        if phase == "busy":
            worker = threading.Thread(target=busy_gpu, args=(stop, ready, note))
            worker.start()
            ready.wait(120)
        got, cost = gpu.sample_for(source, seconds, args.hz)
        stop.set()
        if worker is not None:
            worker.join()
        phases.append({"phase": phase, "first": len(samples), "count": len(got)})
        samples += got
        costs += cost
    t0 = samples[0][0]["t"]
    for rows in samples:
        for row in rows:
            row["t"] = round(row["t"] - t0, 6)
    capture["samples"] = samples
    capture["phases"] = phases
    capture["notes"] = note
    capture["sample_cost_ms"] = {
        "mean": round(1e3 * sum(costs) / len(costs), 4),
        "max": round(1e3 * max(costs), 4),
        "gpus": len(samples[0]),
    }
    capture["counters_after"] = source.counters()
    source.close()
    Path(args.out).write_text(json.dumps(capture, indent=1, default=str) + "\n")
    print(json.dumps({k: capture[k] for k in ("phases", "notes", "sample_cost_ms")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
