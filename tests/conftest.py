"""Shared fixtures and helpers: free ports, simulator servers owned by the test, orphan
checks, the client ceiling measured once for the whole session, and `reportgen` run in this
process (:func:`reportgen_main`)."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import reportgen
from reportgen import sim as simulator
from reportgen import tls
from reportgen.observe import host as observe_host
from reportgen.observe.fingerprint import NO_TORCH_PROBE_ENV
from reportgen.run.server import free_port

__all__ = ["free_port"]

ROOT = Path(__file__).resolve().parent.parent
START_DEADLINE_S = 15.0  # generous: a cold interpreter importing aiohttp on a busy CI box

assert Path(reportgen.__file__).resolve().parent.parent == ROOT, (
    f"the tests import {reportgen.__file__}, not this checkout's reportgen: run pytest from {ROOT}"
)

# Every Python the tests start (runs, simulators, load workers, wherever their working folder
# is) imports this checkout's reportgen, not whichever one the virtual environment names.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
)
# ... and leaves the torch stack out of its fingerprint: a probe imports torch in a process of
# its own (1.5 s of CPU), once for every run made as a process and every far side; the tests
# of the probe itself unset it.
os.environ[NO_TORCH_PROBE_ENV] = "1"
# The host's canary once a second, not four times, in the runs made in this process (2% of a
# core each): none of the tests of a campaign reads its numbers; test_host.py sets its own.
observe_host.HZ = 1.0


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass
class Sim:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def stop_sim(proc: subprocess.Popen[bytes]) -> int:
    """SIGTERM the process group, SIGKILL if it lingers; returns the exit code."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
    assert not group_alive(proc.pid), "something in the simulator's process group survived"
    return proc.returncode


def start_sim_process(tmp_path: Path, *flags: str, wait_ready: bool = True) -> Sim:
    """Start `reportgen.sim` on a free port in its own process group; wait for /health."""
    port = free_port()
    log = tmp_path / f"sim-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*simulator.command(port), *flags],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    sim = Sim(proc, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + START_DEADLINE_S
    while True:
        if proc.poll() is not None:
            pytest.fail(f"sim exited with {proc.returncode}:\n{sim.log_text()}")
        if time.monotonic() > deadline:
            stop_sim(proc)
            pytest.fail(f"sim not healthy after {START_DEADLINE_S} s:\n{sim.log_text()}")
        try:
            status = httpx.get(sim.url + "/health", timeout=1.0, verify=tls.context()).status_code
            if status == 200 or not wait_ready:
                return sim
        except httpx.TransportError:
            pass  # not listening yet
        time.sleep(0.05)


@pytest.fixture
def start_sim(tmp_path: Path) -> Iterator[Callable[..., Sim]]:
    """Start simulators with the given flags; all are stopped (by group) after the test."""
    started: list[Sim] = []

    def start(*flags: str, wait_ready: bool = True) -> Sim:
        started.append(start_sim_process(tmp_path, *flags, wait_ready=wait_ready))
        return started[-1]

    yield start
    for sim in started:
        stop_sim(sim.proc)


@pytest.fixture(scope="session")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    """A simulator with TTFT 20 ms and inter-token latency 2 ms, one for the session: for
    tests that only send it requests (its counters are all they could change)."""
    s = start_sim_process(tmp_path_factory.mktemp("sim"), "--ttft-ms", "20", "--itl-ms", "2")
    yield s
    stop_sim(s.proc)


def _session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder shared by every worker of this session (pytest-xdist's too)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An XDG cache folder holding a client ceiling measured once for the session
    (calibration is cached per host): every run of the tests uses it, in this process
    (XDG_CACHE_HOME, see reportgen_main) or as a subprocess. With pytest-xdist the workers
    share it: the first to need it measures, the others wait for that."""
    folder = _session_root(tmp_path_factory) / "xdg-cache"
    folder.mkdir(exist_ok=True)
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not list((folder / "reportgen").glob("calibration-*.json")):
            res = subprocess.run(
                [sys.executable, "-m", "reportgen", "calibrate", "--json"],
                capture_output=True,
                text=True,
                cwd=ROOT,
                timeout=120,
                env={**clean_env(folder), NO_TORCH_PROBE_ENV: "1"},
            )
            assert res.returncode == 0, res.stderr
            result = json.loads(res.stdout)
            assert result["chunks_per_cpu_s"] > 1000 and result["requests"] == 400
    assert list((folder / "reportgen").glob("calibration-*.json"))
    return folder


def clean_env(cache: Path | None = None, **extra: str) -> dict[str, str]:
    """A minimal environment for a `reportgen` subprocess: PATH, this checkout's reportgen,
    the session's cache (calibration) when given, and ``extra``."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ["PYTHONPATH"]}
    if cache is not None:
        env["XDG_CACHE_HOME"] = str(cache)
    return {**env, **extra}


@dataclass
class Ran:
    """What a `reportgen` command did: its exit code and what it printed."""

    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def environment(env: Mapping[str, str | None]) -> Iterator[None]:
    """Set (None: remove) these environment variables for the block, then put them back."""
    saved = {k: os.environ.get(k) for k in env}
    try:
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def reportgen_main(
    *args: str | Path,
    cache: Path | None = None,
    env: Mapping[str, str | None] | None = None,
    cwd: Path = ROOT,
) -> Ran:
    """`reportgen ARGS` run in this process through ``cli.main``, as a subprocess would run
    it but without a new interpreter's imports (seconds each): its stdout and stderr
    captured, its exit code returned (argparse's SystemExit too). The environment (``env``,
    and XDG_CACHE_HOME = ``cache``), the working folder and the SIGINT, SIGTERM and SIGHUP
    handlers that a run installs are put back afterwards. For everything but signals, rlimits
    and this process's own group: those tests start `python -m reportgen` themselves."""
    from reportgen import cli

    out, err = io.StringIO(), io.StringIO()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    here = os.getcwd()
    changes: dict[str, str | None] = dict(env or {})
    if cache is not None:
        changes["XDG_CACHE_HOME"] = str(cache)
    try:
        os.chdir(cwd)
        with (
            environment(changes),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                code: Any = cli.main([str(a) for a in args])
            except SystemExit as exc:  # argparse: --help, bad arguments
                code = exc.code
                if isinstance(code, str):
                    err.write(code + "\n")
                    code = 1
    finally:
        os.chdir(here)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return Ran(0 if code is None else int(code), out.getvalue(), err.getvalue())


# The files whose tests take longest (a whole campaign or more), longest first, by the sum of
# their tests' durations in a full run of the suite on two cores (`--durations=0`,
# 2026-12-06: test_resume.py 146 s down to test_evidence.py 10 s; in that order the suite took
# 288 s where the order before took 308 s). pytest-xdist hands files to
# its workers in the order collected (run with --no-loadscope-reorder: by default it puts the
# files with the most tests first): these start at once, the short ones fill in around them.
LONG_FIRST = (
    "test_resume.py",
    "test_ssh.py",
    "test_demo_e2e.py",
    "test_slurm.py",
    "test_adaptive.py",
    "test_compile_cache.py",
    "test_workloads.py",
    "test_transformers_serve.py",
    "test_bench.py",
    "test_render.py",
    "test_rates.py",
    "test_diff.py",
    "test_decisions_e2e.py",
    "test_resume_elsewhere.py",
    "test_slurm_nodes.py",
    "test_unjudged.py",
    "test_verify.py",
    "test_history.py",
    "test_driver.py",
    "test_cli.py",
    "test_packaging.py",
    "test_slump.py",
    "test_loadgen.py",
    "test_faults.py",
    "test_meaningful.py",
    "test_gpu.py",
    "test_energy.py",
    "test_cli_fuzz.py",
    "test_steady.py",
    "test_costs.py",
    "test_evidence.py",
)


def run_campaign(
    tmp_path: Path,
    text: str,
    cache: Path,
    env: Mapping[str, str | None] | None = None,
    code: int = 0,
) -> tuple[dict[str, Any], Path]:
    """`reportgen run` of a campaign file's ``text`` (its "PORT" a free port) in this process,
    quiet and without a PDF, into ``tmp_path``/out (no GPU capture unless ``env`` names one),
    exiting ``code``: the run's results and its directory."""
    from reportgen.observe.sources import CAPTURE_ENV

    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "c.toml"
    path.write_text(text.replace("PORT", str(free_port())))
    res = reportgen_main(
        "run", path, "--output", tmp_path / "out", "--quiet", "--no-pdf",
        cache=cache, env={CAPTURE_ENV: None, **(env or {})},
    )  # fmt: skip
    assert res.returncode == code, res.stdout + res.stderr
    run_dir = next(p for p in (tmp_path / "out").glob("*/*") if p.is_dir())
    return json.loads((run_dir / "results.json").read_text()), run_dir


def plain_copy(run_dir: Path, dest: Path, *, pdf: bool = False) -> Path:
    """A copy of a committed run directory with its results and page unpacked (the examples
    keep them compressed, ``scripts/compact_run.py``), for tests that read or edit them as
    files; without the PDF unless asked."""
    from reportgen.results import RunDir

    ignore = None if pdf else shutil.ignore_patterns("*.pdf")
    copy = RunDir(Path(shutil.copytree(run_dir, dest, ignore=ignore)))
    for name in ("results.json", "report.html"):
        kept = copy.stored(name)
        if kept.is_file() and kept.name != name:
            (copy.path / name).write_bytes(copy.read_bytes(name))
            kept.unlink()
    return copy.path


def port_open(port: int) -> bool:
    """Whether something listens on 127.0.0.1:``port`` (a server gone: not ``port_is_free``,
    which any client connection whose own port has that number makes False)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def two_experiments(path: Path, name: str, host: str, port: int, amount: str) -> Path:
    """A campaign of the simulator run elsewhere (``host``: the [host] table's lines): a
    baseline whose levels last ``amount`` ("duration_s = 8" or "requests_per_level = 12"),
    and a child with half the time between tokens."""
    path.write_text(
        f"""
[campaign]
name = "{name}"
title = "Run elsewhere"

[host]
{host}

[server]
engine = "sim"
args = {{ port = {port}, ttft-ms = 10, itl-ms = 4 }}

[workload]
concurrency = [2]
{amount}
input_tokens = 16
output_tokens = 8
repetitions = 2
warmup_requests = 1
warmup = {FAST_WARMUP}

[[experiment]]
id = "baseline"
why = "The simulator as it starts."

[[experiment]]
id = "faster"
why = "Half the time between tokens."
args = {{ itl-ms = 2 }}
workload = {{ requests_per_level = 12 }}
"""
    )
    return path


# REPORTGEN_TEST_CPU_LOG=FILE: one JSON line per test (its id, xdist worker, start time, wall
# seconds, CPU seconds of the worker and of the processes it waited for: simulators, engines,
# SSH and Slurm), to see what the suite's time goes to; a module's shared fixtures count
# toward its first test.
CPU_LOG = os.environ.get("REPORTGEN_TEST_CPU_LOG")


def _cpu_seconds() -> tuple[float, float]:
    mine = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime, waited.ru_utime + waited.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if not CPU_LOG:
        yield
        return
    (mine, waited), t0, began = _cpu_seconds(), time.monotonic(), time.time()
    yield
    (mine_after, waited_after), wall = _cpu_seconds(), time.monotonic() - t0
    line = {"id": item.nodeid, "worker": os.environ.get("PYTEST_XDIST_WORKER", ""),
            "began": round(began, 3), "wall_s": round(wall, 3),
            "cpu_s": round(mine_after - mine, 3),
            "children_cpu_s": round(waited_after - waited, 3)}  # fmt: skip
    with open(CPU_LOG, "a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # xdist's workers append to one file
        f.write(json.dumps(line) + "\n")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files stay whole


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/ from the current output instead of comparing with it",
    )


SLURM_LOCAL = ROOT / "scripts" / "slurm_local.sh"


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """SLURM_CONF of a cluster of this test module's own, stopped after it."""
    if shutil.which("slurmctld") is None or shutil.which("munged") is None:
        pytest.skip("no Slurm here (scripts/bootstrap.sh --test installs slurm-wlm and munge)")
    if os.geteuid() != 0:
        pytest.skip("the one-machine Slurm cluster runs as root (SlurmUser=root)")
    d = tmp_path_factory.mktemp("slurm")
    got = subprocess.run(
        ["bash", str(SLURM_LOCAL), "start", str(d)], capture_output=True, text=True, timeout=180
    )
    if got.returncode != 0:
        subprocess.run(["bash", str(SLURM_LOCAL), "stop", str(d)], timeout=60)
        pytest.fail(f"the Slurm cluster did not start: {got.stderr}")
    try:
        yield {"SLURM_CONF": str(d / "slurm.conf")}
    finally:
        subprocess.run(["bash", str(SLURM_LOCAL), "stop", str(d)], timeout=60)


def slurm_campaign(tmp_path: Path, port: int, *, seconds: float = 0) -> Path:
    """``two_experiments`` as Slurm job steps in the one-machine cluster's partition."""
    amount = f"duration_s = {seconds}" if seconds else "requests_per_level = 12"
    slurm = (
        f'executor = "slurm"\nslurm = {{ partition = "debug", time = "10", '
        f'python = "{sys.executable}", workdir = "{tmp_path / "node"}" }}'
    )
    return two_experiments(tmp_path / "cluster.toml", "cluster", slurm, port, amount)


# A level's warm-up in two windows (3) of 0.05 s (0.25 s at least) that agree within 10% (5%):
# the simulator is steady from its first request, so its levels settle in about 0.4 s instead
# of 1.5 s. For tests of how a campaign runs; tests of the warm-up keep the default.
FAST_WARMUP = "{ max_s = 10, window_s = 0.05, tolerance = 0.1, windows = 2 }"


def _demo_edited(*edits: tuple[str, str]) -> str:
    """campaigns/demo.toml with each (old, new) replaced; an ``old`` it lacks is an error."""
    text = (ROOT / "campaigns" / "demo.toml").read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return text


def _lighter(port: int) -> tuple[tuple[str, str], ...]:
    """``lighter_demo``'s edits of campaigns/demo.toml."""
    return (
        ("port = 18427", f"port = {port}"),
        ("concurrency = [1, 4, 16]", "concurrency = [1, 4]"),
        ("requests_per_level = 16", "requests_per_level = 12"),
        ("repetitions = 3", "repetitions = 2"),
        ("warmup = { max_s = 10, window_s = 0.1 }", f"warmup = {FAST_WARMUP}"),
        ("margin = 0.05", "margin = 0.05\nstarts = 1"),
    )


def lighter_demo(port: int, without: Sequence[str] = ()) -> str:
    """campaigns/demo.toml at ``port``, its levels C=1 and 4 (the objective's) of 12 requests,
    two repetitions and one server start an experiment (the baseline's two): the same
    experiments and outcomes in less than half the time (38 s against 84 s, alone on two
    cores), for tests of how a campaign runs (over SSH, as Slurm jobs) rather than of what the
    demo measures. ``without``: the ids of experiments left out."""
    blocks = _demo_edited(*_lighter(port)).split("\n[[experiment]]\n")
    kept = [b for b in blocks[1:] if b.split("\n", 1)[0].split('"')[1] not in without]
    assert len(kept) == len(blocks) - 1 - len(without), without
    return "\n[[experiment]]\n".join(blocks[:1] + kept)


def small_demo(tmp_path: Path, port: int) -> Path:
    """``lighter_demo`` with answers of 8 tokens and 2 warm-up requests, written to
    ``tmp_path``/demo.toml."""
    text = _demo_edited(
        *_lighter(port),
        ("output_tokens = 24", "output_tokens = 8"),
        ("warmup_requests = 8", "warmup_requests = 2"),
        ("#:schema ./campaign.schema.json\n", ""),
    )
    path = tmp_path / "demo.toml"
    path.write_text(text)
    return path


def demo_outcomes(stdout: str) -> Path:
    """The run directory of a ``reportgen run campaigns/demo.toml --json`` that gave the
    demo's outcomes: the failures as designed, fast-decode-kernel measured about 1.23x the
    baseline and adopted, the two small effects judged.

    A verdict may come out "inconclusive" instead where the run's own noise says so: on a
    loaded two-core host, one server start of a configuration can run several percent slower
    than another (other tests busy meanwhile), and with two or three starts that spread
    widens every interval. So the effect's size is checked on its measured ratios, and a
    verdict, where one is reached, must be the right one (``tests/e2e/test_demo_e2e.py`` holds
    the demo run alone to its exact outcomes)."""
    got = json.loads(stdout)
    said = {e["id"]: e["outcome"] for e in got["experiments"]}
    assert said["baseline"] == "baseline", said
    assert said["fast-but-broken"] == said["typo-in-flag"] == "failed", said
    assert said["fast-decode-kernel"] in ("adopted", "inconclusive"), said
    # (where run: ``lighter_demo(without=...)`` may leave them out)
    bigger = said.get("bigger-batches", "rejected")
    assert bigger in ("rejected", "equivalent", "inconclusive"), said
    assert said.get("prefill-chunk", "equivalent") in ("equivalent", "inconclusive"), said
    run_dir = Path(got["run_dir"])
    results = json.loads((run_dir / "results.json").read_text())
    (fast,) = (e["decision"]["vs_baseline"] for e in results["experiments"]
               if e["id"] == "fast-decode-kernel")  # fmt: skip
    ratios = [c["ratio"] for c in fast if c["metric"] == "output_tok_s"]
    # --itl-ms 4 -> 3: about 1.23x; a start slowed by the busy host (C=4 is the more CPU-bound
    # level: one start measured 18% slower in CI, a ratio of 1.10 there) moves one level's
    # ratio, not both, and never below the baseline's
    assert len(ratios) == 2 and all(1.0 < r < 1.35 for r in ratios), fast
    assert any(1.12 < r < 1.35 for r in ratios), fast
    return run_dir


# Charts already drawn in this process, by their data: a report rendered again (``verify``
# after ``run``, an example rendered by several tests) draws none twice (the verify tests: 112
# of their 188 charts). A chart is a pure function of its data (``charts``: the same bytes
# from one drawing to the next); the tests of that draw afresh (``fresh_charts``).
@pytest.fixture(autouse=True, scope="session")
def _charts_drawn_once() -> Iterator[Callable[..., Any]]:
    """Yields the real ``charts.draw``."""
    import hashlib
    import pickle

    from reportgen.render import charts

    drawn: dict[bytes, Any] = {}
    real = charts.draw

    def draw(chart: charts.Chart, pdf: bool = False) -> Any:
        chart = chart.loaded()  # the data, not the files it is read from, is the key
        key = hashlib.sha256(pickle.dumps((chart, pdf), protocol=5)).digest()
        if key not in drawn:
            if len(drawn) >= 256:
                del drawn[next(iter(drawn))]
            drawn[key] = real(chart, pdf)
        return drawn[key]

    charts.draw = draw
    yield real
    charts.draw = real


@pytest.fixture
def fresh_charts(monkeypatch: pytest.MonkeyPatch, _charts_drawn_once: Callable[..., Any]) -> None:
    """Every chart drawn again (``_charts_drawn_once`` off): for tests that two drawings agree."""
    from reportgen.render import charts

    monkeypatch.setattr(charts, "draw", _charts_drawn_once)
