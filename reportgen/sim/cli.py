"""``reportgen sim`` and ``python -m reportgen.sim``: the simulator's flags, and serving until
a signal."""

from __future__ import annotations

import argparse
import asyncio
import math
import resource
import sys
from collections.abc import Callable

from reportgen import __version__

DESCRIPTION = (
    "Simulated OpenAI-compatible LLM server. Latency is set by flags: "
    "TTFT and inter-token latency grow with the number of concurrently active requests."
)
EPILOG = (
    "Endpoints: GET /health, GET /v1/models, GET /version, GET /metrics (Prometheus), "
    "POST /v1/completions, POST /v1/chat/completions "
    "(streaming and non-streaming).\n\n"
    "example:\n  reportgen sim --port 8123 --ttft-ms 50 --itl-ms 8 --itl-growth 0.02 "
    "--max-running-requests 64"
)


def _number(kind: type[float] | type[int], minimum: float) -> Callable[[str], float]:
    """argparse type: a finite number >= `minimum` (nan/inf would poison every delay)."""

    def parse(text: str) -> float:
        value = kind(text)
        if not math.isfinite(value) or value < minimum:
            raise argparse.ArgumentTypeError(f"must be a finite number >= {minimum}, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in "invalid <name> value" errors
    return parse


def _port(text: str) -> int:
    """argparse type: a TCP port, 0 to 65535 (0: the kernel picks one)."""
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port from 0 to 65535, got {text}")
    return value


_port.__name__ = "int"


def command(port: int, **flags: object) -> list[str]:
    """The command line that starts this simulator with this interpreter, flags given as
    keywords: ``command(8000, ttft_ms=0, itl_ms=0)`` -> ``[python, -m, reportgen.sim,
    --port, 8000, --ttft-ms, 0, --itl-ms, 0]``."""
    argv = [sys.executable, "-m", "reportgen.sim", "--port", str(port)]
    for name, value in flags.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    return argv


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every simulator flag to `parser` (shared by `python -m reportgen.sim` and the CLI)."""
    f, i = _number(float, 0), _number(int, 0)
    a = parser.add_argument
    a("--host", metavar="ADDR", default="127.0.0.1", help="address to bind (default: %(default)s)")
    a(
        "--port",
        metavar="PORT",
        type=_port,
        default=8000,
        help="TCP port to listen on (default: %(default)s)",
    )
    a(
        "--model",
        metavar="NAME",
        default="sim-model",
        help="served model name (default: %(default)s)",
    )
    a(
        "--strict-model",
        action="store_true",
        help="answer 404 to a generation that names another model, as vLLM does (default: "
        "any model name is served)",
    )
    a(
        "--engine-version",
        metavar="TEXT",
        default=__version__,
        help="version the simulator reports at GET /version, as engines do; two versions of an "
        "engine can be told apart in `reportgen diff` (default: reportgen's, %(default)s)",
    )
    a(
        "--ttft-ms",
        metavar="MS",
        type=f,
        default=20.0,
        help="base time to first token, milliseconds (default: %(default)s)",
    )
    a(
        "--itl-ms",
        metavar="MS",
        type=f,
        default=5.0,
        help="base inter-token latency, milliseconds per token (default: %(default)s)",
    )
    a(
        "--ttft-growth",
        metavar="FRAC",
        type=f,
        default=0.02,
        help="fractional TTFT growth per additional active request: "
        "ttft = base * (1 + growth * (active - 1)) (default: %(default)s)",
    )
    a(
        "--itl-growth",
        metavar="FRAC",
        type=f,
        default=0.01,
        help="fractional ITL growth per additional active request, same formula "
        "(default: %(default)s)",
    )
    a(
        "--jitter",
        metavar="FRAC",
        type=f,
        default=0.0,
        help="relative standard deviation of multiplicative lognormal noise on every delay, "
        "e.g. 0.1 = 10%% (default: %(default)s)",
    )
    a(
        "--seed",
        metavar="INT",
        type=int,
        default=0,
        help="seed for noise and generated text (default: %(default)s)",
    )
    a(
        "--start-spread",
        metavar="FRAC",
        type=f,
        default=0.0,
        help="relative standard deviation of a speed drawn once per start and applied to every "
        "delay: two starts of one configuration differ by it, as real servers do "
        "(default: %(default)s)",
    )
    a(
        "--drift",
        metavar="FRAC",
        type=float,
        default=0.0,
        help="each start's delays this fraction longer than the previous start's (negative: "
        "shorter), counted in --starts-file: a host that drifts over a campaign "
        "(default: %(default)s)",
    )
    a(
        "--starts-file",
        metavar="PATH",
        default=None,
        help="a file this simulator counts its starts in (created if absent), shared by every "
        "configuration of a campaign: --drift's count, and --start-spread's seed with --seed",
    )
    a(
        "--startup-s",
        metavar="S",
        type=f,
        default=0.0,
        help="simulated model-load time, seconds; /health is 503 until it has passed "
        "(default: %(default)s)",
    )
    a(
        "--tokens-per-chunk",
        metavar="N",
        type=_number(int, 1),
        default=1,
        help="tokens per streamed SSE chunk, >= 1 (default: %(default)s)",
    )
    a(
        "--max-running-requests",
        metavar="N",
        type=i,
        default=0,
        help="requests served at once; more wait in a queue before their TTFT starts; "
        "0 = unlimited (default: %(default)s)",
    )
    a(
        "--repeat-after",
        metavar="N",
        type=i,
        default=0,
        help="stand-in for a broken engine: after N output tokens, repeat the last one until "
        "max_tokens (a model stuck in a loop); 0 = off (default: %(default)s)",
    )
    a(
        "--spec-draft-tokens",
        metavar="K",
        type=i,
        default=0,
        help="stand-in for speculative decoding: K draft tokens proposed per decode step, "
        "of which --spec-accept-rate are accepted; inter-token latency scales by "
        "(1 + 0.1 K) / (1 + K x rate), and the counters and log lines an engine prints "
        "follow (default: %(default)s, off)",
    )
    a(
        "--spec-accept-rate",
        metavar="P",
        type=f,
        default=0.6,
        help="share of draft tokens accepted, 0 to 1 (default: %(default)s)",
    )
    a(
        "--cold-requests",
        metavar="N",
        type=i,
        default=0,
        help="stand-in for an engine still warming up (JIT, autotuning, lazy allocation): the "
        "first N requests after start take 3x their delays (default: %(default)s)",
    )
    a(
        "--compile-ms",
        metavar="MS",
        type=f,
        default=0.0,
        help="stand-in for kernels compiled per batch shape on first use (vLLM's Triton JIT): "
        "the first time the running requests reach a new power-of-two batch size, every "
        "stream stalls this long and the log says 'JIT compilation during inference' "
        "(default: %(default)s, off)",
    )
    a(
        "--compile-cache",
        metavar="DIR",
        default=None,
        help="with --compile-ms: keep compiled batch shapes in DIR across starts, as engines "
        "keep their compile caches on disk; a later start loads them (a twentieth of the "
        "compile time each, before it is ready) instead of compiling while serving "
        "(default: none, every start compiles)",
    )
    a(
        "--slump-after",
        metavar="N",
        type=i,
        default=0,
        help="stand-in for a server whose host side stalls (a busy CPU, a garbage collection): "
        "once N requests have been accepted since start, every delay is --slump-factor times "
        "longer for --slump-s seconds, and the log says nothing (default: %(default)s, off)",
    )
    a(
        "--stall-after",
        metavar="N",
        type=i,
        default=0,
        help="stand-in for one request held up on a busy host: the Nth request accepted since "
        "start pauses --stall-ms halfway through its stream, and keeps its response open as "
        "long again after its last token (default: %(default)s, off)",
    )
    a(
        "--stall-ms",
        metavar="MS",
        type=f,
        default=250.0,
        help="how long a --stall-after request pauses, mid-stream and before it closes "
        "(default: %(default)s)",
    )
    a(
        "--slump-s",
        metavar="S",
        type=f,
        default=3.0,
        help="how long a --slump-after stall lasts (default: %(default)s)",
    )
    a(
        "--slump-factor",
        metavar="X",
        type=f,
        default=3.0,
        help="how much slower every delay is during a --slump-after stall (default: %(default)s)",
    )
    a(
        "--api-key",
        metavar="KEY",
        default=None,
        help="require 'Authorization: Bearer KEY' on /v1/ requests, as vLLM and SGLang do "
        "with --api-key (default: none)",
    )
    a(
        "--nnodes",
        metavar="N",
        type=_number(int, 1),
        default=1,
        help="stand-in for a server spanning N nodes (SGLang's flags): rank 0 serves HTTP and "
        "is ready only once every other rank has joined its --dist-init-addr; a rank that "
        "leaves ends the server, as a lost NCCL peer does (default: %(default)s)",
    )
    a(
        "--node-rank",
        metavar="R",
        type=i,
        default=0,
        help="this process's rank, 0 to N-1; the ranks after 0 serve no HTTP (default: "
        "%(default)s)",
    )
    a(
        "--dist-init-addr",
        metavar="HOST:PORT",
        default=None,
        help="rank 0's rendezvous address, where it listens and the other ranks connect "
        "(needed with --nnodes above 1)",
    )
    a(
        "--fault",
        choices=sorted(FAULTS),
        default=None,
        help="behave like a failing server: "
        + "; ".join(f"{k}: {v}" for k, v in FAULTS.items())
        + " (default: none)",
    )
    a(
        "--fault-after",
        metavar="N",
        type=i,
        default=0,
        help="serve the first N streamed requests normally, then fault on every later one "
        "(default: %(default)s)",
    )
    a(
        "--record-sends",
        metavar="PATH",
        default=None,
        help="append one JSON line per request to PATH: request_id (also sent as the "
        "x-sim-request-id header), the prompt's first 64 characters, t_recv and sends, the "
        "wall-clock times (time.time(), seconds) at which each output chunk had been written "
        "to the transport, and sampling, the sampling fields it asked for (temperature, top_p, "
        "top_k, min_p, seed); lets a load generator's timing and requests be checked against "
        "the server's (default: off)",
    )


# Faults a real server shows, for rehearsing what a campaign does with them (--fault).
FAULTS = {
    "exit-at-start": "exit with code 1 before listening, as with a bad flag value",
    "never-ready": "listen, but /health answers 503 for ever (a load that never ends)",
    "exit": "the whole process exits (code 3) when a streamed request arrives (a crash)",
    "hang": "stream two chunks, then nothing more, holding the connection open",
    "http-400": "answer 400 with an OpenAI-style error body",
    "http-429": "answer 429 (rate limited), with Retry-After",
    "http-500": "answer 500 with an error body",
    "bad-sse": "answer 200 text/event-stream with a body that is not SSE (an HTML page)",
    "bad-json": "stream a chunk whose data line is not JSON",
    "drop": "stream two chunks, then drop the connection (reset, no end of body)",
    "error-in-stream": "stream two chunks, then an error object inside the 200 stream",
    "dead-loop": "the generation loop dies: one error line in the log, then 503 to every "
    "generation while /health still answers 200 (transformers serve's continuous batching "
    "after a crash); with --fault-after 0, on the readiness check's request",
}


SIM_GRAPH_MAX_BS = 160  # the largest decode batch the sim says it captures


def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT/SIGTERM; returns the exit code (0 on a clean signal shutdown)."""
    # every setting, defaults included, as engines dump theirs (SGLang's ServerArgs(...))
    settings = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(args).items()))
    print(f"sim: server_args=ServerArgs({settings})", flush=True)
    # and what it derives from them, on a line of its own as SGLang prints its memory's
    # settings: decode batches are "captured" up to the running cap (at most 160)
    graphs = min(args.max_running_requests or SIM_GRAPH_MAX_BS, SIM_GRAPH_MAX_BS)
    print(f"sim: resolved max_running_requests={args.max_running_requests}, "
          f"cuda_graph_max_bs={graphs}", flush=True)  # fmt: skip
    # 1024 concurrent connections need more file descriptors than a common soft limit of 1024.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    from reportgen.sim.app import serve  # (the server: only to serve, not to parse flags)

    return asyncio.run(serve(args))


def main(argv: list[str] | None = None, prog: str = "reportgen sim") -> int:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))
