"""What a metrics scrape costs the run's process: ``httpx.get`` against a simulator's
/metrics as reportgen made it before (each call builds its own TLS context, loading the CA
bundle, even for http://) and as it makes it now (``verify=reportgen.tls.context()``, one
context per process), CPU seconds per call side by side. A run scrapes twice per level run
and polls readiness and asks probes the same way.

    .venv/bin/python benchmarks/http_client_speed.py [--calls 50]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

import httpx

from reportgen import tls
from reportgen.run.server import free_port


def _cpu_per_call(url: str, calls: int, **kw: object) -> float:
    t0 = time.process_time()
    for _ in range(calls):
        httpx.get(url, timeout=5, **kw).raise_for_status()  # type: ignore[arg-type]
    return (time.process_time() - t0) / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=50, help="scrapes timed each way")
    args = ap.parse_args()
    port = free_port()
    sim = subprocess.Popen(
        [sys.executable, "-m", "reportgen.sim", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url, timeout=1, verify=tls.context())
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        before = _cpu_per_call(url, args.calls)
        now = _cpu_per_call(url, args.calls, verify=tls.context())
    finally:
        os.killpg(sim.pid, signal.SIGTERM)
        sim.wait(timeout=10)
    print(f"{'scrape':<28}{'own TLS context':>16}{'shared':>10}{'ratio':>8}")
    print(f"{'CPU per call':<28}{before * 1e3:>13.1f} ms{now * 1e3:>7.1f} ms{before / now:>7.1f}x")


if __name__ == "__main__":
    main()
