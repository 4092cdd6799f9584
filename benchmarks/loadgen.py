"""Is reportgen's load generator ever the bottleneck? Measure it against its peers.

    python benchmarks/loadgen.py            # full run, about 10 minutes on 2 cores
    python benchmarks/loadgen.py --quick    # fewer levels and requests, about 2-3 minutes

In one go, on 127.0.0.1 only, it starts
  (a) a zero-work streaming server (nginx sending a prebuilt body of 256 one-token chunks), so
      the client is the bottleneck: requests/s, chunks/s and the client's CPU tell its ceiling;
  (b) a paced server (lgbench/paced_server.py, TTFT 50 ms, ITL 10 ms, 64 tokens) that takes
      each request's arrival time from the kernel and records when it really sent each chunk:
      the client's TTFT and inter-token-latency error against that;
and drives both with reportgen and, side by side, GuideLLM, AIPerf, SGLang's and vLLM's bench
clients (installed once into benchmarks/.peers-venv/<tool>/, git-ignored). Every client runs
in a process group of its own; its CPU (user+sys of its process tree) is measured for the
whole process and for its measured window. Prints one table per server and writes every
number to benchmarks/results/latest.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from lgbench import accuracy, env, procs, servers, tables, tokenizer  # noqa: E402
from lgbench.clients import CLIENTS, Job  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
FILLER = "please write a short story about the quiet river at night and the city light"
SCHEMA = 1


def plan(quick: bool) -> dict[str, Any]:
    """Levels and request counts: requests = min(max(per_c * C, floor), cap)."""
    if quick:
        return {
            "zero": {"levels": [256], "chunks": 256, "per_c": 2, "floor": 100, "cap": 4096},
            "paced": {"levels": [64], "chunks": 64, "per_c": 2, "floor": 0, "cap": 4096},
            "budget_s": 300,
        }
    # The cap keeps C=1024 to 3 rounds: the slowest peers need ~50 s for 3072 requests.
    return {
        "zero": {
            "levels": [1, 64, 256, 1024],
            "chunks": 256,
            "per_c": 4,
            "floor": 200,
            "cap": 3072,
        },
        "paced": {"levels": [64, 256], "chunks": 64, "per_c": 3, "floor": 0, "cap": 3072},
        "budget_s": 900,
    }


def host_info() -> dict[str, Any]:
    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "clock": "time.time() (CLOCK_REALTIME) for all wall-clock comparisons",
    }


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.plan = plan(args.quick)
        for workload in ("zero", "paced"):
            levels = getattr(args, f"{workload}_levels")
            if levels is not None:
                self.plan[workload]["levels"] = [int(c) for c in levels.split(",") if c]
        self.t_start = time.monotonic()
        self.work = Path(tempfile.mkdtemp(prefix="lgbench-"))
        self.tokenizer = tokenizer.write(self.work / "tokenizer")
        self.run_no = 0
        self.results: dict[str, Any] = {
            "schema": SCHEMA,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "quick": args.quick,
            "pinned": {k: sorted(v) for k, v in procs.CPUS.items()},
            "host": host_info(),
            "plan": self.plan,
            "installs": {},
            "servers": {},
            "runs": [],
            "notes": [],
        }
        self.clients = [CLIENTS[n] for n in args.clients.split(",")]

    def say(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.t_start:6.1f}s] {msg}", flush=True)

    def save(self) -> None:
        """latest.json, and a copy named by start time and kind (so runs can be compared)."""
        RESULTS.mkdir(parents=True, exist_ok=True)
        kind = "quick" if self.args.quick else "full"
        stamp = self.results["started_at"].replace(":", "")[:17]
        for name in ("latest.json", f"{stamp}-{kind}.json"):
            tmp = RESULTS / (name + ".tmp")
            tmp.write_text(json.dumps(self.results, indent=1))
            tmp.replace(RESULTS / name)

    # -- set-up ------------------------------------------------------------------------------

    def install_peers(self) -> None:
        log = self.work / "pip.log"
        for client in self.clients:
            if client.venv is None:
                continue
            rec = env.status(client.venv)
            if rec is None and not self.args.no_install:
                rec = env.ensure(client.venv, log, self.say)
            if rec is None:
                rec = {"ok": False, "error": "not installed (--no-install)"}
            self.results["installs"][client.name] = rec
            if rec.get("ok"):
                size = rec.get("size_bytes", 0) / 2**30
                self.say(
                    f"{client.name} {rec.get('version')}: ready ({size:.1f} GiB, "
                    f"installed in {rec.get('install_s')} s)"
                )
            else:
                self.say(f"{client.name}: NOT WORKING: {rec.get('error', '')[:300]}")

    def usable(self) -> list[Any]:
        out = []
        for c in self.clients:
            rec = self.results["installs"].get(c.name)
            if c.venv is None or (rec and rec.get("ok")):
                out.append(c)
        return out

    # -- one client at one level ---------------------------------------------------------------

    def run_one(self, client: Any, workload: str, c: int, server: Any) -> dict[str, Any]:
        cfg = self.plan[workload]
        self.run_no += 1
        run_id = f"r{self.run_no:03d}"
        n = min(max(cfg["per_c"] * c, cfg["floor"]), cfg["cap"])
        rundir = self.work / "runs" / f"{run_id}-{workload}-{client.name}-c{c}"
        rundir.mkdir(parents=True)
        prompts = [f"{run_id}-{i:06d} {FILLER}" for i in range(n)]
        own_server = server is None  # paced: a fresh simulator per run, its log flushed at stop
        if own_server:
            if self.args.paced_server == "sim":
                server = servers.start_sim(rundir, "sim-paced", ttft_ms=50, itl_ms=10)
            else:
                server = servers.start_paced(rundir, ttft_ms=50, itl_ms=10)
        job = Job(
            run_id=run_id,
            client=client.name,
            workload=workload,
            url=server.url,
            concurrency=c,
            requests=n,
            output_tokens=cfg["chunks"],
            prompts=prompts,
            workdir=rundir,
            tokenizer=self.tokenizer,
        )
        row: dict[str, Any] = {
            "run_id": run_id,
            "client": client.name,
            "workload": workload,
            "concurrency": c,
            "requests": n,
            "chunks_per_request": cfg["chunks"],
            "server": server.kind,
        }
        self.say(f"{workload} C={c}: {client.name} ({n} requests) ...")
        try:
            cmd = client.command(job)
            row["command"] = cmd
            timeout = 60 + n / 10 + (30 if client.venv else 0)
            t_proc0 = time.time()
            fin = procs.run_measured(
                cmd,
                rundir / "client.log",
                timeout,
                env={**os.environ, **client.env()},
                also_sample=[server.proc.pid],  # is the server keeping up?
            )
            t_proc1 = time.time()
            row.update(
                returncode=fin.returncode,
                wall_s=round(fin.wall_s, 2),
                cpu_total_s=round(fin.cpu_total_s, 2),
                leftover_processes=fin.leftovers,
            )
            if own_server:
                server.stop()
            if fin.returncode != 0:
                tail = (rundir / "client.log").read_text(errors="replace")[-1500:]
                raise RuntimeError(f"exit code {fin.returncode}: ...{tail}")
            parsed = client.parse(job)
            spans = server.requests_between(t_proc0, t_proc1 + 1)
            srv_window = (min(s for s, _ in spans), max(e for _, e in spans)) if spans else None
            # The measured window: the tool's own wall-clock one; for tools that export none
            # (SGLang, vLLM), from the first request the server saw, for the tool's duration.
            # Not the server's last response: a zero-work server has written the last
            # responses into socket buffers long before a slow client has read them.
            window = parsed.window
            if window is None and srv_window is not None:
                window = (srv_window[0], srv_window[0] + parsed.duration_s)
            cpu_w = fin.sampler.between(*window) if window else None
            row.update(
                completed=parsed.completed,
                failed=parsed.failed,
                req_s=parsed.req_s,
                chunks_s=parsed.out_tok_s,
                duration_s=parsed.duration_s,
                window_from="client" if parsed.window else "server first request + duration",
                window_s=(window[1] - window[0]) if window else None,
                server_seen=len(spans),
                # requests / (first received .. last written) on the server: a cross-check of
                # the count; the rate runs high when responses sit in socket buffers.
                server_req_s=len(spans) / (srv_window[1] - srv_window[0]) if srv_window else None,
                cpu_window_s=cpu_w,
                notes=parsed.notes,
            )
            if cpu_w and window:
                row["cores"] = cpu_w / (window[1] - window[0])
                row["req_per_core_s"] = parsed.req_s / row["cores"]
            srv_cpu = fin.sampler.between(window[0], window[1], 1) if window else None
            if srv_cpu is not None and window:
                row["server_cores"] = srv_cpu / (window[1] - window[0])
            if workload == "paced" and server.sends_log is not None:
                full = {p.split(" ", 1)[0]: p for p in prompts}
                sent = servers.read_sends(server.sends_log)
                ours = [r for r in sent if r["prompt"].split(" ", 1)[0] in full]
                row["server_extra_requests"] = len(sent) - len(ours)  # a client's own probes
                sent = ours
                truth = row["server_truth"] = accuracy.server_truth(sent)
                ttft50, itl50 = truth["ttft"]["p50_ms"], truth["itl"]["p50_ms"]
                if ttft50 is not None and (ttft50 > 1.2 * 50 or itl50 < 0.8 * 10):
                    row["warnings"] = [
                        f"the paced server fell behind its schedule (its own TTFT p50 "
                        f"{ttft50:.0f} ms, ITL p50 {itl50:.1f} ms for 50 and 10): the host is "
                        "saturated; errors are still against the times it really sent"
                    ]
                row["accuracy"] = accuracy.errors(
                    parsed.requests, sent, text_of=lambda pid: _sim_text(full[pid], cfg["chunks"])
                )
                row["matching"] = client.matching
            if fin.leftovers:
                row["notes"].append(
                    f"{fin.leftovers} process(es) of its group outlived it; stopped by group"
                )
            row["ok"] = parsed.completed == n and parsed.failed == 0
            if not row["ok"]:
                row["error"] = f"{parsed.completed}/{n} completed, {parsed.failed} failed"
        except Exception as exc:  # a peer failing is a result, not the end of the benchmark
            row["ok"] = False
            row["error"] = f"{type(exc).__name__}: {exc}"[-1500:]
            row.setdefault("traceback", traceback.format_exc()[-2000:])
        finally:
            if own_server:
                server.stop()
        self.say(tables.one_line(row))
        return row

    # -- the benchmark ---------------------------------------------------------------------------

    def over_budget(self) -> bool:
        return time.monotonic() - self.t_start > float(self.plan["budget_s"])

    def run(self) -> None:
        self.install_peers()
        clients = self.usable()
        self.say("zero-work server ...")
        zero = servers.start_zero_work(self.work, self.plan["zero"]["chunks"])
        self.results["servers"]["zero"] = {"kind": zero.kind, "description": zero.description}
        if zero.kind != "nginx":
            self.results["notes"].append(
                "nginx not found: zero-work server is `reportgen sim --ttft-ms 0 --itl-ms 0`"
            )
        self.say(f"zero-work server: {zero.description} at {zero.url}")
        try:
            for c in self.plan["zero"]["levels"]:
                for client in clients:
                    if self.over_budget():
                        self.results["notes"].append(f"time budget hit: skipped zero C={c}")
                        break
                    self.results["runs"].append(self.run_one(client, "zero", c, zero))
                    self.save()
        finally:
            zero.stop()
        lean = self.args.paced_server == "lean"
        self.results["servers"]["paced"] = {
            "kind": "paced" if lean else "sim-paced",
            "description": (
                "paced_server.py: one epoll loop, request arrival from the kernel (SO_TIMESTAMPNS)"
                if lean
                else "reportgen sim (this checkout), no growth, no jitter"
            )
            + ", TTFT 50 ms, ITL 10 ms, 64 tokens, send times recorded; a fresh one per run",
        }
        for c in self.plan["paced"]["levels"]:
            for client in clients:
                if self.over_budget():
                    self.results["notes"].append(f"time budget hit: skipped paced C={c}")
                    break
                self.results["runs"].append(self.run_one(client, "paced", c, None))
                self.save()


def _sim_text(prompt: str, n: int) -> str:
    """The paced server's output for `prompt` (both paced servers generate reportgen sim's
    text at its default seed)."""
    from reportgen import sim

    return "".join(sim.generated_tokens(0, prompt, n))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer levels and requests")
    parser.add_argument(
        "--clients",
        default=",".join(CLIENTS),
        help="comma-separated subset of: " + ", ".join(CLIENTS) + " (default: all)",
    )
    parser.add_argument(
        "--no-install", action="store_true", help="skip peers that are not installed yet"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary work folder")
    parser.add_argument(
        "--zero-levels", metavar="C,C", help="override the zero-work concurrency levels"
    )
    parser.add_argument(
        "--paced-levels", metavar="C,C", help="override the paced concurrency levels"
    )
    parser.add_argument(
        "--paced-server",
        choices=("lean", "sim"),
        default="lean",
        help="the paced server: lean (paced_server.py, default) or sim (reportgen sim, whose "
        "aiohttp stack takes more of the host's CPU)",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="run servers on the last core and clients on the others (taskset), so the paced "
        "server's own delays do not come from sharing cores with the client",
    )
    args = parser.parse_args(argv)
    if args.pin:
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) < 2:
            parser.error("--pin needs at least 2 cores")
        procs.CPUS.update(server={cores[-1]}, client=set(cores[:-1]))
    unknown = set(args.clients.split(",")) - set(CLIENTS)
    if unknown:
        parser.error(f"unknown client(s): {', '.join(sorted(unknown))}")

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with it ignored
    bench = Bench(args)
    bench.say(f"work folder {bench.work}; results -> {RESULTS / 'latest.json'}")
    code = 0
    try:
        bench.run()
    except KeyboardInterrupt:
        bench.results["notes"].append("interrupted: partial results")
        bench.say("interrupted; stopping every process group we started ...")
        code = 130
    finally:
        procs.stop_all()
        bench.results["elapsed_s"] = round(time.monotonic() - bench.t_start, 1)
        bench.save()
        if not args.keep:
            shutil.rmtree(bench.work, ignore_errors=True)
    print()
    print(tables.render(bench.results))
    return code


if __name__ == "__main__":
    raise SystemExit(main())
