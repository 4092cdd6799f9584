"""Is reportgen's load generator ever the bottleneck? Measure it against its peers.

    python benchmarks/loadgen.py            # full run, about 10 minutes on 2 cores
    python benchmarks/loadgen.py --quick    # fewer levels and requests, about 2-3 minutes
    python benchmarks/loadgen.py --clients reportgen --workloads-only   # ~2.5 minutes

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

The workloads comparison (full runs, `--workloads`, or `--workloads-only`) runs reportgen
alone against the paced server at C=64 with random prompts, shared-prefix prompts (8 groups,
the first 3/4 of each prompt shared) and 4-turn conversations (each turn re-sending the
earlier turns and their answers), the same number of requests each, repeated and interleaved:
is a request of the new workloads any dearer for the client than a random one?
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

from reportgen.load import prompts as rg_prompts  # noqa: E402

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


# The workloads comparison (reportgen alone, paced server, TTFT 50 ms / ITL 10 ms, 64 tokens).
# requests: a multiple of C x turns, so every client of the multi-turn run holds whole
# conversations to the end (with fewer, some clients would have none: a lower concurrency).
WORKLOADS = {
    "concurrency": 64,
    "chunks": 64,
    "requests": 1024,  # 64 clients x 4 turns x 4 conversations; ~11 s a run
    "words": 256,  # every prompt (and every turn's new user message)
    "prefix_words": 192,  # shared-prefix: the first 3/4 of each prompt is one of `groups`
    "groups": 8,
    "turns": 4,  # multi-turn
    "think_s": 0.0,
    "reps": 3,  # each rep runs the three, in an order rotated by one per rep
    "seed": 1,
}
WORKLOAD_KINDS = ("random", "shared-prefix", "multi-turn")


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
        self.workloads: dict[str, Any] | None = None
        if args.workloads or args.workloads_only or not args.quick:
            self.workloads = dict(WORKLOADS)
            for key in ("requests", "reps", "words"):
                value = getattr(args, f"workload_{key}")
                if value is not None:
                    self.workloads[key] = value
            per_round = self.workloads["concurrency"] * self.workloads["turns"]
            self.workloads["requests"] = -(-self.workloads["requests"] // per_round) * per_round
            self.workloads["prefix_words"] = self.workloads["words"] * 3 // 4
            self.plan["workloads"] = self.workloads
        self.t_start = time.monotonic()
        self.work = Path(tempfile.mkdtemp(prefix="lgbench-"))
        self.tokenizer = tokenizer.write(self.work / "tokenizer")
        self.run_no = 0
        self.results: dict[str, Any] = {
            "schema": SCHEMA,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "quick": args.quick,
            "workloads_only": args.workloads_only,
            "pinned": {k: sorted(v) for k, v in procs.CPUS.items()},
            "host": host_info(),
            "plan": self.plan,
            "installs": {},
            "servers": {},
            "runs": [],
            "notes": [],
        }
        self.clients = [CLIENTS[n] for n in args.clients.split(",")]

    def paced_server(self, rundir: Path) -> Any:
        """A fresh paced server (TTFT 50 ms, ITL 10 ms) for one run: the lean one, or
        `reportgen sim` with --paced-server sim."""
        if self.args.paced_server == "sim":
            return servers.start_sim(rundir, "sim-paced", ttft_ms=50, itl_ms=10)
        return servers.start_paced(rundir, ttft_ms=50, itl_ms=10)

    def say(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.t_start:6.1f}s] {msg}", flush=True)

    def save(self) -> None:
        """latest.json, and a copy named by start time and kind (so runs can be compared)."""
        RESULTS.mkdir(parents=True, exist_ok=True)
        kind = "quick" if self.args.quick else "full"
        if self.args.workloads_only:
            kind = "workloads"
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
            server = self.paced_server(rundir)
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
        if self.args.workloads_only:
            self.run_workloads()
            return
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
        if self.workloads is not None:
            if "reportgen" not in [c.name for c in clients]:
                self.results["notes"].append("workloads comparison skipped: reportgen not run")
            elif self.over_budget():
                self.results["notes"].append("time budget hit: skipped the workloads comparison")
            else:
                self.run_workloads()

    # -- the workloads comparison (reportgen alone) ---------------------------------------------

    def workload_prompts(self, kind: str) -> tuple[list[str], int]:
        """Prompts and turns of one workload: random (`prompts.synthetic`), shared-prefix
        (`prompts.shared_prefix`) or multi-turn (the random prompts, one per turn)."""
        w = self.workloads
        assert w is not None
        n, words, seed = w["requests"], w["words"], w["seed"]
        if kind == "shared-prefix":
            return rg_prompts.shared_prefix(n, words, w["prefix_words"], w["groups"], seed, 0), 1
        return rg_prompts.synthetic(n, words, seed), (w["turns"] if kind == "multi-turn" else 1)

    def run_workloads(self) -> None:
        """Each rep runs random, shared-prefix and multi-turn (rotated order), each against a
        fresh paced server, reportgen in a process of its own (see run_workload)."""
        w = self.workloads
        assert w is not None
        prompts = {k: self.workload_prompts(k) for k in WORKLOAD_KINDS}
        for rep in range(w["reps"]):
            order = WORKLOAD_KINDS[rep % 3 :] + WORKLOAD_KINDS[: rep % 3]
            for kind in order:
                if self.over_budget() and not self.args.workloads_only:
                    self.results["notes"].append(f"time budget hit: skipped {kind} rep {rep}")
                    continue
                texts, turns = prompts[kind]
                self.results["runs"].append(self.run_workload(kind, rep, texts, turns))
                self.save()

    def run_workload(self, kind: str, rep: int, prompts: list[str], turns: int) -> dict[str, Any]:
        w = self.workloads
        assert w is not None
        client = CLIENTS["reportgen"]
        c, n = w["concurrency"], w["requests"]
        self.run_no += 1
        run_id = f"r{self.run_no:03d}"
        rundir = self.work / "runs" / f"{run_id}-workloads-{kind}-rep{rep}"
        rundir.mkdir(parents=True)
        server = self.paced_server(rundir)
        job = Job(
            run_id=run_id,
            client=client.name,
            workload="workloads",
            url=server.url,
            concurrency=c,
            requests=n,
            output_tokens=w["chunks"],
            prompts=prompts,
            workdir=rundir,
            tokenizer=self.tokenizer,
            turns=turns,
            think_s=w["think_s"] if turns > 1 else 0.0,
            measure_sent=True,
        )
        row: dict[str, Any] = {
            "run_id": run_id,
            "client": client.name,
            "workload": "workloads",
            "prompts": kind,
            "rep": rep,
            "concurrency": c,
            "requests": n,
            "turns": turns,
            "think_s": job.think_s,
            "chunks_per_request": w["chunks"],
            "server": server.kind,
        }
        self.say(f"workloads C={c}: reportgen {kind}, rep {rep + 1}/{w['reps']} ({n} requests) ...")
        try:
            cmd = client.command(job)
            row["command"] = cmd
            t_proc0 = time.time()
            fin = procs.run_measured(
                cmd,
                rundir / "client.log",
                60 + n / 10,
                env={**os.environ, **client.env()},
                also_sample=[server.proc.pid],
            )
            row.update(
                returncode=fin.returncode,
                wall_s=round(fin.wall_s, 2),
                cpu_total_s=round(fin.cpu_total_s, 2),
            )
            server.stop()
            if fin.returncode != 0:
                tail = (rundir / "client.log").read_text(errors="replace")[-1500:]
                raise RuntimeError(f"exit code {fin.returncode}: ...{tail}")
            parsed = client.parse(job)
            out = json.loads((rundir / "reportgen.json").read_text())
            window = parsed.window
            assert window is not None
            cpu_w = fin.sampler.between(*window)
            srv_cpu = fin.sampler.between(window[0], window[1], 1)
            span = window[1] - window[0]
            ok = [r for r in out["records"] if r["status"] == "ok"]
            body = [r["body_bytes"] for r in ok]
            chars = [r["prompt_chars"] for r in ok]
            by_turn: dict[str, Any] = {}
            for t in sorted({r["turn"] for r in ok}):
                these = [r["body_bytes"] for r in ok if r["turn"] == t]
                by_turn[str(t)] = {"requests": len(these), "body_bytes_mean": _mean(these)}
            sent = [
                r
                for r in servers.read_sends(server.sends_log or rundir / "none")
                if r["t_recv"] >= t_proc0 and not r["prompt"].startswith("warmup")
            ]
            own = out.get("client_cpu_s")
            done = max(parsed.completed, 1)
            ttfts = [p.ttft_s for p in parsed.requests if p.ttft_s is not None]
            row.update(
                completed=parsed.completed,
                failed=parsed.failed,
                req_s=parsed.req_s,
                chunks_s=parsed.out_tok_s,
                duration_s=parsed.duration_s,
                window_s=span,
                cpu_window_s=cpu_w,
                cores=None if cpu_w is None else cpu_w / span,
                server_cores=None if srv_cpu is None else srv_cpu / span,
                cpu_ms_per_request=None if cpu_w is None else 1000 * cpu_w / done,
                own_client_cpu_s=own,
                own_cpu_ms_per_request=None if own is None else 1000 * own / done,
                body_bytes={"mean": _mean(body), "max": max(body, default=None), "sum": sum(body)},
                prompt_chars={"mean": _mean(chars), "max": max(chars, default=None)},
                sent_exact=all(r.get("sent_exact", True) for r in ok),
                by_turn=by_turn,
                client_ttft=accuracy.summary_ms(ttfts),
                server_truth=accuracy.server_truth(sent),
                server_seen=len(sent),
                loop_lag_ms=out.get("loop_lag_ms"),
                workers=out.get("workers"),
                notes=parsed.notes,
            )
            row["ok"] = parsed.completed == n and parsed.failed == 0
            if not row["ok"]:
                row["error"] = f"{parsed.completed}/{n} completed, {parsed.failed} failed"
        except Exception as exc:
            row["ok"] = False
            row["error"] = f"{type(exc).__name__}: {exc}"[-1500:]
            row.setdefault("traceback", traceback.format_exc()[-2000:])
        finally:
            server.stop()
        line = tables.one_line(row)
        if row.get("ok") and row.get("cpu_ms_per_request") is not None:
            line += f"; {row['cpu_ms_per_request']:.2f} ms CPU/request"
            line += f", body {row['body_bytes']['mean']:,.0f} B/request"
        self.say(line)
        return row


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


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
    parser.add_argument(
        "--workloads",
        action="store_true",
        help="add the workloads comparison (reportgen alone: random, shared-prefix and "
        "multi-turn at C=64 on the paced server) to a --quick run (full runs include it)",
    )
    parser.add_argument(
        "--workloads-only",
        action="store_true",
        help="run only the workloads comparison (no zero-work or paced tables, no peers)",
    )
    parser.add_argument(
        "--workload-reps",
        type=int,
        metavar="N",
        help=f"repetitions of the workloads comparison (default {WORKLOADS['reps']})",
    )
    parser.add_argument(
        "--workload-requests",
        type=int,
        metavar="N",
        help=f"requests per workload run (default {WORKLOADS['requests']}; rounded up to a "
        "multiple of C x turns)",
    )
    parser.add_argument(
        "--workload-words",
        type=int,
        metavar="N",
        help=f"words per prompt (default {WORKLOADS['words']}; shared-prefix shares 3/4)",
    )
    args = parser.parse_args(argv)
    if args.workloads_only and "reportgen" not in args.clients.split(","):
        parser.error("--workloads-only measures reportgen: include it in --clients")
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
