"""Does telemetry slow the load generator? The same level with and without the samplers.

    python benchmarks/telemetry_overhead.py            # 5 interleaved rounds, ~1 minute
    python benchmarks/telemetry_overhead.py --rounds 9 --gpus 8

One level (closed loop, C=64, 640 requests x 64 tokens) against the lean paced server
(`lgbench/paced_server.py`, TTFT 20 ms, ITL 5 ms: 12,800 chunks/s), run in this process as a
campaign runs it, in rounds that interleave: no telemetry; telemetry at 20 Hz (what a run
uses); telemetry at 100 Hz (a stress test); 20 Hz plus the host's CPU sampler
(`reportgen.observe.host`, a process of its own at 4 Hz: what a run uses now). Where no GPU
is visible the sampler replays the H200 capture in tests/fixtures/gpu (FakeSource; `--gpus
N` replays it as N GPUs); on a GPU host it reads NVML. Prints, per setting, the median over
rounds of req/s, output tok/s and the client's CPU per request, each as a ratio to "no
telemetry", and the host sampler's own CPU as a share of one core.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from lgbench import procs  # noqa: E402

from reportgen.load.loadgen import RequestSpec, run_load  # noqa: E402
from reportgen.observe import host, sources  # noqa: E402
from reportgen.observe.telemetry import Telemetry  # noqa: E402
from reportgen.run.server import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "tests" / "fixtures" / "gpu" / "h200-capture.json.xz"


def source(gpus: int) -> tuple[Any, str]:
    real, why = sources.open_source()
    if real is not None:
        return real, "NVML"
    cap = sources.read_capture(CAPTURE)
    if gpus > 1:  # the same GPU, N times
        cap["samples"] = [[{**r, "gpu": g} for g in range(gpus) for r in s] for s in cap["samples"]]
    return sources.FakeSource(cap), f"H200 capture replayed as {gpus} GPU(s) ({why})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs the fake source replays")
    args = parser.parse_args()
    port = free_port()
    work = Path("/tmp") / f"telemetry-overhead-{port}"
    work.mkdir(exist_ok=True)
    server = procs.start(
        [sys.executable, str(ROOT / "benchmarks" / "lgbench" / "paced_server.py"),
         "--port", str(port), "--ttft-ms", "20", "--itl-ms", "5"],
        work / "server.log", cwd=ROOT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    spec = RequestSpec(api="chat", model="sim-model", output_tokens=64)
    prompts = [f"p{i} a short prompt for the paced server" for i in range(640)]
    settings: list[tuple[str, float | None, bool]] = [
        ("none", None, False),
        ("20 Hz", 20.0, False),
        ("100 Hz", 100.0, False),
        ("20 Hz + host", 20.0, True),
    ]
    got: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in settings}
    src, what = source(args.gpus)
    try:
        time.sleep(1.0)
        run_load(url, spec, prompts, 64, requests=128, workers=1)  # warm both sides
        for r in range(args.rounds):
            order = settings if r % 2 == 0 else list(reversed(settings))
            for name, hz, on_host in order:
                tele = Telemetry(src, hz).start() if hz else None
                children = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = host.HostSampler().start() if on_host else None
                lv = run_load(url, spec, prompts, 64, requests=640, workers=1)
                rows = tele.stop() if tele else []
                if cpu is not None:
                    cpu.stop()  # waited for: its CPU is in RUSAGE_CHILDREN from here
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                sampler_s = (after.ru_utime + after.ru_stime) - (
                    children.ru_utime + children.ru_stime
                )
                ok = [x for x in lv.records if x.status == "ok"]
                got[name].append(
                    {
                        "req_s": len(ok) / lv.duration_s,
                        "tok_s": sum(x.output_tokens for x in ok) / lv.duration_s,
                        "cpu_ms_per_req": 1e3 * lv.client_cpu_s / max(len(ok), 1),
                        "samples_s": len(rows) / max(args.gpus, 1) / lv.duration_s,
                        "host_cpu": sampler_s / lv.duration_s,
                    }
                )
    finally:
        procs.stop_group(server)
        src.close()
    print(f"Telemetry source: {what}; {args.rounds} interleaved rounds; C=64, 640 requests x 64 "
          "tokens against the paced server (TTFT 20 ms, ITL 5 ms).\n")  # fmt: skip
    print("| telemetry | req/s | output tok/s | client CPU ms / request | samples / s | "
          "req/s vs none | CPU vs none | host sampler's CPU |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    base = {k: statistics.median(x[k] for x in got["none"]) for k in got["none"][0]}
    for name, _, _ in settings:
        med = {k: statistics.median(x[k] for x in got[name]) for k in got[name][0]}
        print(
            f"| {name} | {med['req_s']:.1f} | {med['tok_s']:,.0f} | {med['cpu_ms_per_req']:.3f} | "
            f"{med['samples_s']:.1f} | {med['req_s'] / base['req_s']:.3f} | "
            f"{med['cpu_ms_per_req'] / base['cpu_ms_per_req']:.3f} | {med['host_cpu']:.1%} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
