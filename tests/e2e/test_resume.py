"""SIGTERM in the middle of a campaign, then `reportgen run --resume`: nothing finished is lost
or run again, a changed campaign file is refused, and no server is left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reportgen.observe.fingerprint import NO_TORCH_PROBE_ENV
from reportgen.results import RunDir
from reportgen.run.server import REAPER_GRACE_S, port_is_free
from tests.conftest import ROOT, Ran, free_port, port_open, reportgen_main, small_demo

# SGLang 0.5.17 on the 0.5 B MoE, measured before the steady-state protocol, resumed twice
SGLANG_MOE_RUN = ROOT / "tests" / "fixtures" / "runs" / "sglang-h200-moe"
pytestmark = pytest.mark.slow


ADDED = """
[[experiment]]
id = "added-at-the-end"
based_on = "baseline"
why = "Added to the file while the run was stopped."
args = { itl-ms = 3.5 }
"""


def reportgen(*args: str, cache: Path) -> Ran:
    """`reportgen run ARGS --quiet --no-pdf`, to its end, in this process (no signal sent)."""
    return reportgen_main("run", *args, "--quiet", "--no-pdf", cache=cache)


def reportgen_alone(
    *args: str,
    cache: Path,
    launcher: tuple[str, ...] = ("-m", "reportgen"),
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`reportgen run ARGS --quiet --no-pdf` (or ``launcher``'s program with those), to its
    end, as a process of its own: for rlimits and signals."""
    return subprocess.run(
        [sys.executable, *launcher, "run", *args, "--quiet", "--no-pdf"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "XDG_CACHE_HOME": str(cache), NO_TORCH_PROBE_ENV: "1"},
        preexec_fn=preexec_fn,
    )


def start_run(campaign: Path, out: Path, cache: Path, **popen: Any) -> subprocess.Popen[Any]:
    """`reportgen run CAMPAIGN --output OUT --quiet --no-pdf` started as a process of its
    own (for signals), its streams and the rest as ``popen`` says."""
    return subprocess.Popen(
        [sys.executable, "-m", "reportgen", "run", str(campaign), "--output", str(out)]
        + ["--quiet", "--no-pdf"],
        cwd=ROOT,
        env={**os.environ, "XDG_CACHE_HOME": str(cache), NO_TORCH_PROBE_ENV: "1"},
        **popen,
    )


def wait_for(proc: subprocess.Popen[Any], when: Callable[[], bool]) -> None:
    """Until ``when()`` holds (at most 120 s), the run ``proc`` still going."""
    deadline = time.monotonic() + 120
    while not when():
        assert time.monotonic() < deadline, "the moment to interrupt never came"
        assert proc.poll() is None, "the run ended before the moment to interrupt"
        time.sleep(0.05)


def interrupted_run(
    campaign: Path, out: Path, cache: Path, sig: signal.Signals, when: Callable[[], bool]
) -> None:
    """`reportgen run` as from a terminal, stopped with ``sig`` once ``when()`` holds: it
    exits 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM, as shells expect)
    without a traceback."""
    proc = start_run(
        campaign,
        out,
        cache,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a shell's background job inherits SIGINT ignored: restore it, as a terminal has it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        wait_for(proc, when)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err


def second_experiment_running(out: Path) -> bool:
    for path in (out / "demo").glob("*/results.json"):
        exp = json.loads(path.read_text())["experiments"][1]
        if exp["status"] == "running" and any((path.parent / "logs").glob(f"{exp['id']}.*")):
            time.sleep(0.5)  # its server started: inside its warm-up or first level
            return True
    return False


def test_sigterm_then_resume_keeps_what_finished(tmp_path: Path, cache: Path) -> None:
    port = free_port()
    campaign = small_demo(tmp_path, port)
    out = tmp_path / "out"
    # SIGTERM, as a job scheduler or `kill` would stop it
    interrupted_run(campaign, out, cache, signal.SIGTERM, lambda: second_experiment_running(out))
    (run_dir,) = (out / "demo").iterdir()
    results = run_dir / "results.json"
    before = json.loads(results.read_text())
    assert before["status"] == "incomplete"
    assert [e["status"] for e in before["experiments"][:2]] == ["ok", "interrupted"]
    assert "INCOMPLETE" in (run_dir / "report.html").read_text().upper()
    assert not port_open(port)  # the server it had started is gone
    baseline_log = run_dir / "logs" / "baseline.server.log"
    baseline_mtime = baseline_log.stat().st_mtime_ns

    # A campaign file changed in what the finished baseline ran with: refused, saying what
    # changed; the saved run untouched.
    original = campaign.read_text()
    campaign.write_text(original.replace("requests_per_level = 12", "requests_per_level = 10"))
    res = reportgen(str(campaign), "--output", str(out), "--resume", cache=cache)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    err = " ".join(res.stderr.split())
    assert f"{campaign}: the campaign file changed since run {run_dir.name} started" in err
    assert "(workload.requests_per_level: 12 then, 10 now)" in err
    assert json.loads(results.read_text()) == before

    # Changed only in what is still to run (the interrupted experiment edited, one added at
    # the end): the run goes on where it stopped, with the file as it is now.
    grown = original.replace("itl-ms = 3", "itl-ms = 2.5") + ADDED
    campaign.write_text(grown)
    res = reportgen(str(campaign), "--output", str(out), "--resume", cache=cache)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"resuming {run_dir}: kept 1 finished experiment(s) (baseline)" in res.stdout
    assert "the campaign file changed since, only in what is still to run: fast-decode" in (
        res.stdout
    )
    after = json.loads(results.read_text())
    assert after["status"] == "complete"
    assert len(list((out / "demo").iterdir())) == 1  # no new run directory
    base_before, base_after = before["experiments"][0], after["experiments"][0]
    assert base_after == base_before  # kept as it was, not run again
    assert baseline_log.stat().st_mtime_ns == baseline_mtime
    statuses = {e["id"]: e["status"] for e in after["experiments"]}
    assert statuses["fast-decode-kernel"] == "ok" and statuses["typo-in-flag"] == "failed"
    assert statuses["added-at-the-end"] == "ok"
    assert after["experiments"][1]["args"]["itl-ms"] == 2.5  # as the file says now
    assert all(e.get("decision") for e in after["experiments"])
    (resumed,) = after["resumed"]
    assert resumed["kept"] == ["baseline"] and resumed["after"] == "incomplete"
    changed = resumed["campaign_changed"]
    assert changed["added"] == ["added-at-the-end"] and changed["removed"] == []
    assert changed["sha256_before"] == before["campaign_file"]["sha256"]
    assert after["campaign_file"]["sha256"] != changed["sha256_before"]
    assert (run_dir / "campaign.toml").read_text() == grown  # the copy anyone reruns
    html = (run_dir / "report.html").read_text()
    assert "INCOMPLETE REPORT" not in html.upper()
    assert "<dt>Resumed</dt><dd>20" in html
    assert "Resumed: 20" in (run_dir / "report.md").read_text()  # report.md says so too
    assert "(run incomplete; kept baseline; campaign file changed after them: added " in html
    assert not port_open(port)

    # Nothing left to resume.
    res = reportgen(str(campaign), "--output", str(out), "--resume", cache=cache)
    assert res.returncode == 2 and "no unfinished run under" in res.stderr
    res = reportgen(str(campaign), "--output", str(out), "--resume", str(run_dir), cache=cache)
    assert res.returncode == 2
    assert "this run is complete, there is nothing to resume" in " ".join(res.stderr.split())

    # A complete run grows: an experiment added to its file runs into the same run, alone.
    campaign.write_text(grown + ADDED.replace("added-at-the-end", "added-later"))
    res = reportgen(str(campaign), "--output", str(out), "--resume", str(run_dir), cache=cache)
    assert res.returncode == 0, res.stdout + res.stderr
    final = json.loads(results.read_text())
    assert final["status"] == "complete"
    was = [(e["id"], e["started_at"]) for e in after["experiments"]]
    assert [(e["id"], e.get("started_at")) for e in final["experiments"][:-1]] == was
    assert final["experiments"][-1]["id"] == "added-later"
    assert final["experiments"][-1]["status"] == "ok"
    last = final["resumed"][-1]
    assert last["after"] == "complete" and last["campaign_changed"]["added"] == ["added-later"]
    assert not port_open(port)


def test_a_save_that_fails_midway_keeps_what_was_saved(tmp_path: Path, cache: Path) -> None:
    """A file-size limit (as a full disk would) stops saving after a few experiments: a clear
    message, the last results.json intact, no server left."""
    import resource

    port = free_port()
    campaign = small_demo(tmp_path, port)
    out = tmp_path / "out"

    def limit() -> None:  # in the child: writes past 80 kB fail with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (80_000, 80_000))

    res = reportgen_alone(str(campaign), "--output", str(out), cache=cache, preexec_fn=limit)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    (run_dir,) = (out / "demo").iterdir()
    err = " ".join(res.stderr.split())
    assert f"error: cannot save {run_dir}/" in err and "File too large" in err
    assert "Everything saved before is intact" in err and "--resume" in err
    saved = json.loads((run_dir / "results.json").read_text())  # whole, as last written
    assert saved["status"] == "running" and saved["experiments"][0]["status"] == "ok"
    assert not list(run_dir.rglob(".*.tmp"))  # no half-written temporary left behind
    assert not port_open(port)  # (--resume from here: the test above)


def test_sigint_while_a_server_is_starting_stops_it(tmp_path: Path, cache: Path) -> None:
    """Ctrl-C in another phase: the first server is still loading (60 s of start-up)."""
    port = free_port()
    campaign = small_demo(tmp_path, port)
    text = campaign.read_text().replace("seed = 7 }", "seed = 7, startup-s = 60 }", 1)
    campaign.write_text(text)
    out = tmp_path / "out"
    # the simulator listens at once, and answers 503 while "loading"
    interrupted_run(
        campaign, out, cache, signal.SIGINT, lambda: not port_is_free("127.0.0.1", port)
    )
    (run_dir,) = (out / "demo").iterdir()
    data = json.loads((run_dir / "results.json").read_text())
    assert data["status"] == "incomplete"
    first = data["experiments"][0]
    assert first["status"] == "interrupted" and first["stop"]["group_gone"]
    assert not port_open(port)
    assert "INCOMPLETE REPORT" in (run_dir / "report.html").read_text().upper()
    # stopped in the first experiment, nothing is kept: an edit anywhere is resumed, not
    # refused for "finished experiments" there are none of
    text = text.replace(", startup-s = 60 }", " }").replace(
        "requests_per_level = 12", "requests_per_level = 10"
    )
    campaign.write_text(text)
    res = reportgen(str(campaign), "--output", str(out), "--resume", cache=cache)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"resuming {run_dir}: kept 0 finished experiment(s)" in res.stdout
    data = json.loads((run_dir / "results.json").read_text())
    assert data["status"] == "complete" and data["campaign"]["workload"]["requests_per_level"] == 10


def test_a_closed_terminal_stops_the_run_as_ctrl_c_does(tmp_path: Path, cache: Path) -> None:
    """SIGHUP (the terminal closed) exited 129 with no partial report and results.json left
    "running": now the servers are stopped, what finished is saved and the partial report
    written, though the terminal's streams are gone (their writes fail)."""
    port = free_port()
    campaign = small_demo(tmp_path, port)
    out = tmp_path / "out"
    proc = start_run(campaign, out, cache, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(proc, lambda: second_experiment_running(out))
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.2)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the terminal is gone: every later write to it fails
        proc.stderr.close()
        assert proc.wait(timeout=90) == 128 + signal.SIGHUP
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    (run_dir,) = (out / "demo").iterdir()
    data = json.loads((run_dir / "results.json").read_text())
    assert data["status"] == "incomplete"
    assert [e["status"] for e in data["experiments"][:2]] == ["ok", "interrupted"]
    assert "INCOMPLETE REPORT" in (run_dir / "report.html").read_text().upper()
    assert not port_open(port)  # its server stopped


# reportgen run, with a finaliser that receives SIGTERM after the first experiment's decision:
# Python runs the handler inside __del__, where its KeyboardInterrupt is printed and dropped.
DROPPED = """
import os, signal, sys
from reportgen import cli
from reportgen.run import runner

class Dropped:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100_000):
            pass

decide = runner.Runner._decide

def decide_then_drop(self, run, entry, rows):
    decide(self, run, entry, rows)
    if entry.id == "baseline":
        Dropped()

runner.Runner._decide = decide_then_drop
sys.exit(cli.main(sys.argv[1:]))
"""


def test_a_sigterm_dropped_by_a_finaliser_still_stops_the_run(tmp_path: Path, cache: Path) -> None:
    """The handler's exception can be lost (an object collected at the end of an experiment);
    the signal is not: the run stops at the next step's boundary, as after any SIGTERM, and
    the lost exception is not printed ("Exception ignored in ..." and its traceback)."""
    port = free_port()
    campaign = small_demo(tmp_path, port)
    out = tmp_path / "out"
    res = reportgen_alone(
        str(campaign), "--output", str(out), cache=cache, launcher=("-c", DROPPED)
    )
    assert "Exception ignored" not in res.stderr and "Traceback" not in res.stderr
    assert "interrupted: servers stopped, finished experiments saved" in res.stderr
    assert res.returncode == 143, res.stdout + res.stderr  # 128 + SIGTERM
    (run_dir,) = (out / "demo").iterdir()
    data = json.loads((run_dir / "results.json").read_text())
    assert data["status"] == "incomplete"
    statuses = [e["status"] for e in data["experiments"]]
    assert statuses[0] == "ok" and set(statuses[1:]) == {"pending"}  # nothing more started
    assert not port_open(port)


def test_settings_a_later_reportgen_added_are_no_change_of_a_saved_campaign(
    tmp_path: Path,
) -> None:
    import copy

    from reportgen import campaign, results
    from reportgen.run.resume import campaign_changes

    saved = results.load(SGLANG_MOE_RUN)
    # the campaign file as the committed run ran it (campaigns/sglang-h200.toml has moved on: the
    # 8B-shaped model's run is docs/examples/sglang-h100)
    now = campaign.load(SGLANG_MOE_RUN / "campaign.toml")
    # the committed run was resumed from the file as it is (trim = false, starts = 1)
    assert campaign_changes(saved, now) == []
    # as a reportgen saved it before campaign.starts, campaign.confirm, workload.stagger existed
    older = copy.deepcopy(saved)
    del older.campaign["campaign"]["starts"], older.campaign["campaign"]["confirm"]
    del older.campaign["workload"]["stagger"]
    assert campaign_changes(older, now) == []
    # a default that changed what a finished experiment measured is still named: the file
    # without its trim = false trims duration levels, which the run did not
    text = (SGLANG_MOE_RUN / "campaign.toml").read_text()
    untrimmed = tmp_path / "sglang-h200.toml"
    untrimmed.write_text("\n".join(ln for ln in text.splitlines() if not ln.startswith("trim =")))
    changes = campaign_changes(older, campaign.load(untrimmed))
    assert changes == ["workload.trim: false then, true now"]
    # settings added since (turns, range_ratio, a prompt source's trace fields, base_url),
    # absent from the saved run, are no change at their defaults, in [workload] and in a
    # finished experiment's own workload; set to anything else, they are
    for e in [older.campaign] + list(older.campaign["experiment"]):
        wl = e.get("workload") or {}
        for key in ("turns", "think_s", "range_ratio", "find_max"):
            wl.pop(key, None)
        for key in ("time_scale", "block_tokens", "answer_lengths"):
            (wl.get("prompts") or {}).pop(key, None)
        e.pop("base_url", None)
    older.campaign["server"].pop("base_url", None), older.campaign["server"].pop("model", None)
    assert campaign_changes(older, now) == []
    # where the servers run is no change of what they ran: a run may go on from another host
    remote = tmp_path / "remote.toml"
    remote.write_text(text + '\n[host]\nexecutor = "ssh"\nssh = { host = "gpu-box" }\n')
    assert campaign_changes(older, campaign.load(remote)) == []
    turned = tmp_path / "turns.toml"
    turned.write_text(text.replace("[workload]\n", "[workload]\nturns = 3\n", 1))
    assert campaign_changes(older, campaign.load(turned)) == ["workload.turns: absent then, 3 now"]
    # a workload table added to a finished experiment is a change, even at default values
    grown = tmp_path / "grown.toml"
    grown.write_text(
        text.replace('id = "baseline"\n', 'id = "baseline"\nworkload = { turns = 1 }\n')
    )
    assert campaign_changes(older, campaign.load(grown)) == [
        "experiment 1 (baseline).workload.turns: absent then, 1 now"
    ]


def test_a_resumption_on_other_gpus_is_said_in_the_title_block() -> None:
    from reportgen import results
    from reportgen.render import view

    run = results.load(SGLANG_MOE_RUN)
    # its last resumption really ran on another H200 than its first session
    last = run.resumed[-1].gpu_uuids
    assert (
        last
        and f"on other GPUs than the run began on ({last[0]})" in view.build(run).header.resumed
    )
    first = [str(d.get("uuid")) for d in run.environment["gpus"]["devices"]]
    for x in run.resumed:
        x.gpu_uuids = list(first)
    assert "other GPUs" not in view.build(run).header.resumed  # the same UUIDs: not said
    run.resumed[-1].gpu_uuids = ["GPU-00000000-another-machine"]
    said = view.build(run).header.resumed
    assert "on other GPUs than the run began on (GPU-00000000-another-machine)" in said


def test_sigkill_leaves_no_server_and_resume_stops_one_left_running(
    tmp_path: Path, cache: Path
) -> None:
    """SIGKILL gives reportgen no way out to stop its server: the server's watchdog
    (``run.reaper``) stops its process group within seconds. A server left running all the
    same (its watchdog gone too) is recognised by ``--resume`` from the run directory's record
    of it, and stopped by its process group, not refused as "another process"."""
    from reportgen.run import reaper

    port = free_port()
    campaign = small_demo(tmp_path, port)
    # its first two experiments: the kill comes in the second
    parts = campaign.read_text().split("[[experiment]]")
    campaign.write_text("[[experiment]]".join(parts[:3]))
    out = tmp_path / "out"
    proc = start_run(campaign, out, cache, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(proc, lambda: second_experiment_running(out))
        (run_dir,) = (out / "demo").iterdir()
        ((record_path, record),) = reaper.leftovers(RunDir(run_dir).server_records())
        assert record.port == port and record.running()
        proc.kill()  # SIGKILL: nothing of reportgen runs after this
        proc.wait()
        killed = time.monotonic()
        while reaper.group_alive(record.pgid) and time.monotonic() - killed < 15:
            time.sleep(0.05)
        gone_after = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not reaper.group_alive(record.pgid), "the server outlived reportgen"
    print(f"server gone {gone_after:.2f} s after SIGKILL")
    assert gone_after < REAPER_GRACE_S + 3, gone_after  # SIGTERM, SIGKILL after the grace
    assert json.loads((run_dir / "results.json").read_text())["status"] == "running"

    # A server its watchdog could not stop: started as reportgen starts one, then recorded.
    stray = subprocess.Popen(
        [sys.executable, "-m", "reportgen.sim", "--port", str(port), "--host", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        while port_is_free("127.0.0.1", port):
            assert stray.poll() is None
            time.sleep(0.05)
        reaper.ServerRecord(
            stray.pid, "127.0.0.1", port, [], "baseline-again.server.log",
            reaper.start_time(stray.pid) or 0,
        ).save(record_path)  # fmt: skip
        res = reportgen(str(campaign), "--output", str(out), "--resume", cache=cache)
    finally:
        if stray.poll() is None:
            os.killpg(stray.pid, signal.SIGKILL)
        stray.wait()
    assert res.returncode == 0, res.stdout + res.stderr
    assert (
        f"stopped the server the earlier run left running: process group {stray.pid} on port {port}"
    ) in res.stdout
    assert json.loads((run_dir / "results.json").read_text())["status"] == "complete"
    assert (
        reaper.leftovers(RunDir(run_dir).server_records()) == []
    )  # every record of a running server removed
    assert not port_open(port)


def test_a_second_ctrl_c_always_ends_with_how_to_render(tmp_path: Path, cache: Path) -> None:
    """Ctrl-C, then another 0.3 s later (while the server is being stopped and the results
    saved, or the report rendered): the servers are stopped, the results saved as
    incomplete, and the last line says how to render the report; no traceback."""
    port = free_port()
    campaign = small_demo(tmp_path, port)
    out = tmp_path / "out"
    proc = start_run(
        campaign, out, cache, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        wait_for(proc, lambda: second_experiment_running(out))
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    (run_dir,) = (out / "demo").iterdir()
    assert json.loads((run_dir / "results.json").read_text())["status"] == "incomplete"
    rendered = (run_dir / "report.html").exists()
    assert rendered or f"render the report with: reportgen render {run_dir}" in err, err
    assert not port_open(port)
