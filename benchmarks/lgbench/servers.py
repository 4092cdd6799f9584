"""The two servers the clients are measured against, both on 127.0.0.1, each in its own
process group, started and stopped by the benchmark.

- zero-work: nginx sends one prebuilt SSE body (a role chunk, 256 one-token content chunks,
  a usage chunk, [DONE]) for every POST, so the client is the bottleneck. Falls back to
  `reportgen sim --ttft-ms 0 --itl-ms 0` when nginx is not installed (said in the output).
- paced: paced_server.py (default), one epoll loop with fixed TTFT and inter-token latency,
  taking each request's arrival time from the kernel and recording when it actually wrote each
  chunk, so client error can be told from server jitter; or `reportgen sim --record-sends`
  (`--paced-server sim`), whose aiohttp stack costs the client's host far more CPU.

Both tell when each request ran (nginx's access log, the simulator's send log), so every
client's measured window and request count can also be read from the server's side.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lgbench import procs
from reportgen import sim
from reportgen.run.server import free_port

MODEL = "sim-model"
_GENERATE = ("/v1/chat/completions", "/v1/completions")


def _wait_ready(
    url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 20.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early; log {log}:\n{log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server not ready at {url} after {timeout_s} s; log {log}")


def sse_body(chat: bool, chunks: int, prompt_tokens: int = 32) -> str:
    """The zero-work response: what a real server streams, all at once."""
    head = {
        "id": "chatcmpl-zero" if chat else "cmpl-zero",
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": 0,
        "model": MODEL,
    }
    events = []

    def event(obj: dict[str, object]) -> None:
        events.append("data: " + json.dumps(obj, separators=(",", ":")) + "\n\n")

    if chat:
        role = {"role": "assistant", "content": ""}
        event({**head, "choices": [{"index": 0, "delta": role, "finish_reason": None}]})
    for k in range(chunks):
        choice: dict[str, object] = {
            "index": 0,
            "finish_reason": "length" if k == chunks - 1 else None,
        }
        choice.update({"delta": {"content": " tok"}} if chat else {"text": " tok"})
        event({**head, "choices": [choice]})
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": chunks,
        "total_tokens": prompt_tokens + chunks,
    }
    event({**head, "choices": [], "usage": usage})
    events.append("data: [DONE]\n\n")
    return "".join(events)


_NGINX_CONF = """\
daemon off;
master_process off;           # one process: the group is the worker
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
worker_rlimit_nofile 16384;
events {{ worker_connections 8192; }}
http {{
  client_body_temp_path {root}/tmp;
  proxy_temp_path {root}/tmp;
  fastcgi_temp_path {root}/tmp;
  uwsgi_temp_path {root}/tmp;
  scgi_temp_path {root}/tmp;
  log_format lg '$msec $request_time $status $request_uri';
  access_log {root}/access.log lg;
  keepalive_requests 10000000;
  keepalive_timeout 300s;
  sendfile on;
  tcp_nodelay on;
  etag off;
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    # nginx answers 405 to a POST on a static file; error_page turns that into the file,
    # served as a GET (the request body is read and discarded).
    location = /v1/chat/completions {{
      alias {root}/chat.sse; types {{ }} default_type text/event-stream;
      error_page 405 =200 /chat.sse;
    }}
    location = /v1/completions {{
      alias {root}/completions.sse; types {{ }} default_type text/event-stream;
      error_page 405 =200 /completions.sse;
    }}
    location ~ ^/(chat|completions)\\.sse$ {{
      internal; root {root}; types {{ }} default_type text/event-stream;
      add_header Cache-Control no-cache;
    }}
    location = /health {{ default_type application/json; return 200 '{{"status":"ok"}}'; }}
    location = /v1/models {{
      default_type application/json;
      return 200 '{{"object":"list","data":[{{"id":"{model}","object":"model","created":0}}]}}';
    }}
  }}
}}
"""


@dataclass
class Server:
    kind: str  # nginx | sim-zero | sim-paced | paced
    url: str
    root: Path
    proc: subprocess.Popen[bytes]
    description: str
    sends_log: Path | None = None
    access_log: Path | None = None
    settings: dict[str, object] = field(default_factory=dict)

    def stop(self) -> None:
        procs.stop_group(self.proc)

    def requests_between(self, start: float, end: float) -> list[tuple[float, float]]:
        """(start, end) wall times of the requests the server finished in [start, end]."""
        if self.access_log is not None:
            spans = []
            for line in self.access_log.read_text().splitlines():
                msec, rtime, status, uri = line.split()
                t_end = float(msec)
                if status == "200" and uri in _GENERATE and start <= t_end <= end:
                    spans.append((t_end - float(rtime), t_end))
            return spans
        if self.sends_log is not None:
            spans = []
            for rec in read_sends(self.sends_log):
                if rec["sends"] and start <= rec["sends"][-1] <= end:
                    spans.append((rec["t_recv"], rec["sends"][-1]))
            return spans
        return []


def _warm_up(url: str, n: int = 4) -> None:
    """A few streamed requests, so the first measured ones do not pay the server's cold start
    (its first requests run code paths for the first time). Their prompts start with
    "warmup", so the benchmark leaves them out of the send log's records."""
    for i in range(n):
        body = json.dumps(
            {
                "model": MODEL,
                "messages": [{"role": "user", "content": f"warmup-{i} hello"}],
                "max_tokens": 4,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        ).encode()
        req = urllib.request.Request(
            url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()


def read_sends(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def start_zero_work(workdir: Path, chunks: int) -> Server:
    """nginx serving the prebuilt body, or the simulator at zero delay when nginx is missing."""
    root = workdir / "nginx"
    nginx = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if nginx is None:
        return start_sim(workdir, "sim-zero", ttft_ms=0, itl_ms=0, record=False)
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    (root / "chat.sse").write_text(sse_body(True, chunks))
    (root / "completions.sse").write_text(sse_body(False, chunks))
    port = free_port()
    conf = root / "nginx.conf"
    conf.write_text(_NGINX_CONF.format(root=root, port=port, model=MODEL))
    log = workdir / "nginx.out.log"
    proc = procs.start([nginx, "-p", str(root), "-c", str(conf)], log)
    url = f"http://127.0.0.1:{port}"
    _wait_ready(url + "/health", proc, log)
    version = _nginx_version(nginx)
    return Server(
        kind="nginx",
        url=url,
        root=root,
        proc=proc,
        description=f"{version}, 1 worker, static SSE body of {chunks} one-token chunks",
        access_log=root / "access.log",
        settings={"chunks": chunks, "server": version},
    )


def _nginx_version(nginx: str) -> str:
    out = subprocess.run([nginx, "-v"], capture_output=True, text=True, check=False)
    return (out.stderr or out.stdout).strip().split(":")[-1].strip() or "nginx"


def start_sim(
    workdir: Path,
    kind: str,
    ttft_ms: float,
    itl_ms: float,
    record: bool = True,
    **flags: object,
) -> Server:
    """`reportgen sim` (this checkout's), optionally recording every chunk's send time;
    ``flags``: more of its flags (``jitter=0.05``, ``seed=1``)."""
    port = free_port()
    sends = workdir / f"{kind}.sends.jsonl" if record else None
    cmd = sim.command(
        port, ttft_ms=ttft_ms, itl_ms=itl_ms, ttft_growth=0, itl_growth=0, model=MODEL, **flags
    )
    if sends is not None:
        cmd += ["--record-sends", str(sends)]
    log = workdir / f"{kind}.log"
    proc = procs.start(cmd, log, cwd=Path(__file__).resolve().parents[2])
    url = f"http://127.0.0.1:{port}"
    _wait_ready(url + "/health", proc, log)
    _warm_up(url)
    what = f"reportgen sim, TTFT {ttft_ms:g} ms, ITL {itl_ms:g} ms, no growth"
    what += "".join(f", {k} {v}" for k, v in flags.items()) if flags else ", no jitter"
    return Server(
        kind=kind,
        url=url,
        root=workdir,
        proc=proc,
        description=what + (", send times recorded" if record else ""),
        sends_log=sends,
        settings={"ttft_ms": ttft_ms, "itl_ms": itl_ms},
    )


def start_paced(workdir: Path, ttft_ms: float, itl_ms: float) -> Server:
    """The lean paced server (paced_server.py): kernel arrival times, every send recorded."""
    port = free_port()
    sends = workdir / "paced.sends.jsonl"
    script = Path(__file__).resolve().with_name("paced_server.py")
    cmd = [sys.executable, str(script), "--port", str(port), "--model", MODEL]
    cmd += ["--ttft-ms", f"{ttft_ms:g}", "--itl-ms", f"{itl_ms:g}", "--record-sends", str(sends)]
    log = workdir / "paced.log"
    proc = procs.start(cmd, log, cwd=Path(__file__).resolve().parents[2])
    url = f"http://127.0.0.1:{port}"
    _wait_ready(url + "/health", proc, log)
    _warm_up(url)
    return Server(
        kind="paced",
        url=url,
        root=workdir,
        proc=proc,
        description=f"paced_server.py (one epoll loop), TTFT {ttft_ms:g} ms, ITL {itl_ms:g} ms, "
        "request arrival from the kernel, send times recorded",
        sends_log=sends,
        settings={"ttft_ms": ttft_ms, "itl_ms": itl_ms},
    )
