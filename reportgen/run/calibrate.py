"""The client's ceiling on this host: how much streaming the load generator can process.

Measured against the simulator with zero delays (so the server does no waiting), as output
chunks and requests per CPU-second of the client. A run records the ceiling and flags each
level whose chunk rate came above 80% of it (scaled by the client's worker processes) as
client-limited: its numbers may describe the client rather than the server.

The result is cached per host, reportgen version and client revision in ~/.cache/reportgen/.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from reportgen import __version__, engines, sim
from reportgen.errors import ServerError
from reportgen.load import loadgen, prompts
from reportgen.results import atomic_write_bytes
from reportgen.run.server import ServerProcess, free_port

CHUNKS_PER_REQUEST = 256
# Bumped when the load generator's cost per request changes, so a cached ceiling measured
# with an older hot path is measured again (2: kernel-timed plain connections).
CLIENT_REVISION = 2


def cache_path() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    name = f"calibration-{socket.gethostname()}-{__version__}-r{CLIENT_REVISION}.json"
    return base / "reportgen" / name


def load_cached() -> dict[str, Any] | None:
    try:
        data = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("chunks_per_cpu_s") else None


def measure(
    concurrency: int = 64, requests: int = 400, log_dir: Path | None = None
) -> dict[str, Any]:
    """Drive a zero-delay simulator and measure the client's cost per chunk and per request."""
    port = free_port()
    log = (log_dir or Path(os.environ.get("TMPDIR", "/tmp"))) / f"reportgen-calibrate-{port}.log"
    argv = sim.command(port, ttft_ms=0, itl_ms=0, ttft_growth=0, itl_growth=0)
    srv = ServerProcess(
        argv,
        env={},
        log_path=log,
        host="127.0.0.1",
        port=port,
        engine=engines.get("sim"),
        stop_timeout_s=5,
    )
    srv.start()
    try:
        srv.wait_ready(30, "chat")
        spec = loadgen.RequestSpec(api="chat", model=None, output_tokens=CHUNKS_PER_REQUEST)
        pool = prompts.synthetic(requests, 16, seed=0)
        lv = loadgen.run_load(srv.base_url, spec, pool, concurrency, requests=requests, workers=1)
    finally:
        srv.stop()
        log.unlink(missing_ok=True)
    ok = [r for r in lv.records if r.status == "ok"]
    if not ok:
        raise ServerError("calibration failed: no request to the simulator succeeded")
    chunks = sum(len(r.chunk_times) for r in ok)
    cpu_s = max(lv.client_cpu_s, 1e-9)
    return {
        "measured_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "reportgen_version": __version__,
        # which installation measured it: the cache is shared by every checkout of a version
        "measured_by": installation(),
        "host": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "concurrency": concurrency,
        "requests": len(ok),
        "chunks": chunks,
        "duration_s": lv.duration_s,
        "client_cpu_s": cpu_s,
        "chunks_per_cpu_s": chunks / cpu_s,
        "requests_per_cpu_s": len(ok) / cpu_s,
        "chunk_s": chunks / lv.duration_s,
    }


def installation() -> str:
    """This reportgen's folder and the Python running it."""
    return f"{Path(__file__).resolve().parents[1]} ({sys.executable})"


def calibrate(refresh: bool = False) -> dict[str, Any]:
    """The cached ceiling for this host, measured now if missing (or if asked to); a cached
    one says so (``"cached": true``, not stored)."""
    if not refresh and (cached := load_cached()) is not None:
        return {**cached, "cached": True}
    result = measure()
    # A read-only home only costs a re-measurement next time.
    with contextlib.suppress(OSError):
        atomic_write_bytes(cache_path(), json.dumps(result, indent=1).encode())
    return result
