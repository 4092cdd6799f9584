"""Tests for reportgen.sim: real server processes on loopback, real HTTP, no mocks."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from reportgen import sim as simulator
from tests.conftest import START_DEADLINE_S, Sim, free_port, start_sim_process, stop_sim


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    """Shared server with fixed, load-independent latency: TTFT 100 ms, ITL 10 ms."""
    s = start_sim_process(
        tmp_path_factory.mktemp("sim"),
        "--ttft-ms",
        "100",
        "--itl-ms",
        "10",
        "--ttft-growth",
        "0",
        "--itl-growth",
        "0",
        "--seed",
        "7",
    )
    yield s
    stop_sim(s.proc)


def _events(resp: httpx.Response) -> Iterator[tuple[float, Any]]:
    """(arrival time, parsed payload or "[DONE]") for each SSE event of a streaming response."""
    for line in resp.iter_lines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            yield time.perf_counter(), data if data == "[DONE]" else json.loads(data)


def _stream(url: str, body: dict[str, Any]) -> tuple[float, list[tuple[float, Any]]]:
    """The request's send time and each event with its arrival; the client is made before
    the clock starts (building one is no part of the server's pace)."""
    with httpx.Client(timeout=10) as client:
        t0 = time.perf_counter()
        with client.stream("POST", url, json={**body, "stream": True}) as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            return t0, list(_events(resp))


def test_health_is_503_while_loading(start_sim: Callable[..., Sim]) -> None:
    t0 = time.monotonic()
    s = start_sim("--startup-s", "1", wait_ready=False)
    resp = httpx.get(s.url + "/health")
    assert resp.status_code == 503
    assert httpx.post(s.url + "/v1/completions", json={"prompt": "x"}).status_code == 503
    while (resp := httpx.get(s.url + "/health")).status_code != 200:
        assert time.monotonic() - t0 < START_DEADLINE_S, s.log_text()
        time.sleep(0.05)
    assert resp.json() == {"status": "ok"}
    assert time.monotonic() - t0 >= 0.9
    log = s.log_text()
    assert "sim: server_args=" in log and "startup_s=1.0" in log
    assert f"sim: ready on {s.url}" in log


def test_across_two_nodes_rank_0_waits_for_rank_1_and_ends_when_it_leaves(
    start_sim: Callable[..., Sim],
) -> None:
    """--nnodes 2 (SGLang's multi-node flags): rank 0 is not ready until rank 1 has joined
    its --dist-init-addr; rank 1 serves no HTTP; rank 1 leaving ends rank 0 with an error
    line, as a lost NCCL peer ends a real engine."""
    addr = f"127.0.0.1:{free_port()}"
    head = start_sim("--nnodes", "2", "--dist-init-addr", addr, wait_ready=False)
    time.sleep(0.5)
    assert httpx.get(head.url + "/health").status_code == 503  # rank 1 not there yet
    port = free_port()
    worker = subprocess.Popen(
        [*simulator.command(port), "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", addr],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        while httpx.get(head.url + "/health").status_code != 200:
            assert time.monotonic() < deadline, head.log_text()
            time.sleep(0.05)
        assert "sim: node rank 1 joined from 127.0.0.1 (2 of 2)" in head.log_text()
        assert " across 2 nodes" in head.log_text()
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/health")  # no HTTP on the ranks after 0
    finally:
        worker.kill()
        worker.wait()
    assert head.proc.wait(timeout=10) == 1
    assert "sim: error: node rank 1 left; the server cannot generate without it" in (
        head.log_text()
    )
    assert "--node-rank must be 0 to 1 (--nnodes 2), got 2" in subprocess.run(
        [sys.executable, "-m", "reportgen.sim", "--nnodes", "2", "--node-rank", "2",
         "--dist-init-addr", addr], capture_output=True, text=True, timeout=30,
    ).stdout  # fmt: skip


def test_models(sim: Sim) -> None:
    body = httpx.get(sim.url + "/v1/models").json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["sim-model"]


def test_stream_chat_with_usage(sim: Sim) -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "one two three four"}]},
    ]
    _, events = _stream(
        sim.url + "/v1/chat/completions",
        {"messages": messages, "max_tokens": 5, "stream_options": {"include_usage": True}},
    )
    chunks = [e for _, e in events]
    assert chunks[-1] == "[DONE]"
    role, content, usage = chunks[0], chunks[1:-2], chunks[-2]
    assert role["object"] == "chat.completion.chunk"
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert len(content) == 5
    assert all(c["choices"][0]["delta"]["content"].startswith(" ") for c in content)
    assert [c["choices"][0]["finish_reason"] for c in content] == [None] * 4 + ["length"]
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 6, "completion_tokens": 5, "total_tokens": 11}
    assert len({c["id"] for c in chunks[:-1]}) == 1


def test_stream_completions(sim: Sim) -> None:
    _, events = _stream(
        sim.url + "/v1/completions", {"prompt": ["a b c", "ignored"], "max_tokens": 4}
    )
    chunks = [e for _, e in events]
    assert chunks[-1] == "[DONE]"
    assert len(chunks) == 5  # no usage chunk without stream_options.include_usage
    assert all(c["object"] == "text_completion" for c in chunks[:-1])
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert all(len(c["choices"][0]["text"].split()) == 1 for c in chunks[:-1])


def test_non_streaming(sim: Sim) -> None:
    comp = httpx.post(sim.url + "/v1/completions", json={"prompt": "hi there", "max_tokens": 3})
    assert comp.status_code == 200
    body = comp.json()
    assert body["object"] == "text_completion"
    assert len(body["choices"][0]["text"].split()) == 3
    assert body["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}

    chat = httpx.post(
        sim.url + "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi there"}], "max_completion_tokens": 7},
    )
    body = chat.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert len(body["choices"][0]["message"]["content"].split()) == 7
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 7
    # max_tokens defaults to 16
    body = httpx.post(sim.url + "/v1/completions", json={"prompt": "x"}).json()
    assert body["usage"]["completion_tokens"] == 16


def test_timing_follows_flags(sim: Sim) -> None:
    t0, events = _stream(sim.url + "/v1/completions", {"prompt": "time me", "max_tokens": 11})
    ttft_ms = (events[0][0] - t0) * 1000
    total_ms = (events[-1][0] - t0) * 1000
    # ttft + (n - 1) * itl = 100 + 10 * 10 = 200 ms. The server's sleeps make the lower bounds
    # hold on any machine; a busy one only adds, so the upper bounds leave room for stalls of
    # a few hundred ms and still catch a pace ten times too slow (1.1 s).
    assert 90 <= ttft_ms <= 500
    assert 180 <= total_ms <= 900

    # non-streaming waits just as long (the client made first: building one, its TLS context
    # included, took 0.25 s once on a busy machine, and is not the server's pace)
    with httpx.Client() as client:
        t0 = time.perf_counter()
        client.post(sim.url + "/v1/completions", json={"prompt": "time me", "max_tokens": 11})
        took = time.perf_counter() - t0
    assert 0.18 <= took <= 0.45, took


def test_same_prompt_same_text(sim: Sim) -> None:
    def text(prompt: str) -> str:
        r = httpx.post(sim.url + "/v1/completions", json={"prompt": prompt, "max_tokens": 8})
        return str(r.json()["choices"][0]["text"])

    assert text("the same prompt") == text("the same prompt")
    assert text("the same prompt") != text("another prompt")
    _, events = _stream(sim.url + "/v1/completions", {"prompt": "the same prompt", "max_tokens": 8})
    assert "".join(e["choices"][0]["text"] for _, e in events[:-1]) == text("the same prompt")


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_bad_requests_get_400(sim: Sim, path: str) -> None:
    base: dict[str, Any] = {"prompt": "x", "messages": [{"role": "user", "content": "x"}]}
    for bad in (0, -3, "ten", 2.5):
        r = httpx.post(sim.url + path, json={**base, "max_tokens": bad})
        assert r.status_code == 400
        err = r.json()["error"]
        assert err["type"] == "invalid_request_error" and err["code"] == 400 and err["message"]
    r = httpx.post(
        sim.url + path, content=b'{"prompt": ', headers={"content-type": "application/json"}
    )
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_http_paths_methods_and_a_pipelined_connection(sim: Sim) -> None:
    assert httpx.get(sim.url + "/v2/nothing").status_code == 404
    assert httpx.get(sim.url + "/v1/completions").status_code == 405
    port = int(sim.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        # two requests in one write: answered in order on the one connection, then closed
        conn.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")  # fmt: skip
        got = b"".join(iter(lambda: conn.recv(65536), b""))
    assert got.startswith(b"HTTP/1.1 200 OK\r\n") and got.count(b"HTTP/1.1 ") == 2, got
    assert b"HTTP/1.1 404 Not Found\r\n" in got and got.endswith(b'{"detail": "Not Found"}')
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:  # as curl asks
        conn.sendall(
            b"POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"
        )
        assert conn.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        assert conn.recv(65536).startswith(b"HTTP/1.1 400 Bad Request\r\n")


def _mean_itl_ms(url: str, concurrency: int, n: int) -> float:
    async def one(client: httpx.AsyncClient) -> float:
        stamps: list[float] = []
        body = {"prompt": "load", "max_tokens": n, "stream": True}
        async with client.stream("POST", url + "/v1/completions", json=body) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data: {"):
                    stamps.append(time.perf_counter())
        assert len(stamps) == n
        return (stamps[-1] - stamps[0]) / (n - 1) * 1000

    async def run() -> list[float]:
        async with httpx.AsyncClient(timeout=10) as client:
            return await asyncio.gather(*(one(client) for _ in range(concurrency)))

    itls = asyncio.run(run())
    return sum(itls) / len(itls)


def test_itl_grows_with_concurrency(start_sim: Callable[..., Sim]) -> None:
    # ITL = 10 ms * (1 + 0.2 * (active - 1)): 10 ms alone, 24 ms with 8 active
    s = start_sim("--ttft-ms", "10", "--itl-ms", "10", "--itl-growth", "0.2")
    alone, loaded = _mean_itl_ms(s.url, 1, 20), _mean_itl_ms(s.url, 8, 20)
    assert 8 <= alone <= 15
    assert loaded > 1.6 * alone


def test_queue_and_chunking(start_sim: Callable[..., Sim]) -> None:
    s = start_sim(
        "--ttft-ms",
        "50",
        "--itl-ms",
        "10",
        "--ttft-growth",
        "0",
        "--itl-growth",
        "0",
        "--max-running-requests",
        "1",
        "--tokens-per-chunk",
        "4",
    )
    _, events = _stream(s.url + "/v1/completions", {"prompt": "x", "max_tokens": 10})
    assert [len(e["choices"][0]["text"].split()) for _, e in events[:-1]] == [4, 4, 2]

    async def both() -> list[list[float]]:
        async def arrivals(client: httpx.AsyncClient) -> list[float]:
            """When each of the request's events arrived."""
            body = {"prompt": "x", "max_tokens": 9, "stream": True}
            async with client.stream("POST", s.url + "/v1/completions", json=body) as resp:
                assert resp.status_code == 200
                return [time.perf_counter() async for line in resp.aiter_lines() if line]

        async with httpx.AsyncClient(timeout=10) as client:
            return list(await asyncio.gather(arrivals(client), arrivals(client)))

    # With one slot the second request waits in the queue until the first has sent its last
    # chunk, then waits its own 50 ms for a first token: its first event arrives after the
    # other's last. Two slots would stream both at once, first tokens 50 ms before either
    # ends. Ordering, not a duration, so a busy machine cannot fail it; a stalled client that
    # reads both at once records them microseconds apart, hence the 5 ms.
    served, queued = sorted(asyncio.run(both()))
    assert len(served) == len(queued) == 4, (served, queued)  # 4, 4, 1 tokens and [DONE]
    assert queued[0] >= served[-1] - 0.005, (served, queued)


def test_zero_delay_server_is_fast(start_sim: Callable[..., Sim]) -> None:
    s = start_sim("--ttft-ms", "0", "--itl-ms", "0")
    t0 = time.perf_counter()
    _, events = _stream(s.url + "/v1/completions", {"prompt": "x", "max_tokens": 2000})
    assert len(events) == 2001
    assert time.perf_counter() - t0 < 2.0


def test_unknown_flag_fails_fast() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "reportgen.sim", "--no-such-flag"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert r.returncode != 0
    assert "unrecognized arguments: --no-such-flag" in r.stderr


def test_sigterm_exits_zero_even_mid_stream(start_sim: Callable[..., Sim]) -> None:
    s = start_sim("--itl-ms", "50")
    body = {"prompt": "x", "max_tokens": 1000, "stream": True}
    with httpx.stream("POST", s.url + "/v1/completions", json=body, timeout=10) as resp:
        next(resp.iter_lines())  # a stream is in flight
        t0 = time.monotonic()
        assert stop_sim(s.proc) == 0, s.log_text()
    assert time.monotonic() - t0 < 3.0
    assert "shutting down" in s.log_text()


def test_record_sends_logs_when_each_chunk_was_written(
    start_sim: Callable[..., Sim], tmp_path: Path
) -> None:
    log = tmp_path / "sends.jsonl"
    s = start_sim("--ttft-ms", "30", "--itl-ms", "10", "--record-sends", str(log))
    body = {
        "messages": [{"role": "user", "content": "req-7 hello"}],
        "max_tokens": 5,
        "stream": True,
    }
    t_before = time.time()
    with httpx.stream("POST", s.url + "/v1/chat/completions", json=body, timeout=10) as resp:
        request_id = resp.headers["x-sim-request-id"]
        list(resp.iter_bytes())
    stop_sim(s.proc)  # the send log is flushed when the server stops
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 1
    entry = lines[0]
    assert entry["request_id"] == request_id and entry["prompt"].startswith("req-7")
    sends = entry["sends"]
    assert len(sends) == 5  # output chunks only: not the role chunk, not usage
    assert t_before <= entry["t_recv"] < sends[0]
    assert sends[0] - entry["t_recv"] >= 0.029  # TTFT 30 ms
    # The simulator paces to absolute deadlines from the request's arrival (TTFT 30 ms, then
    # ITL 10 ms): a send may be late on a busy host, never early, so the last is at least
    # 30 + 4 x 10 ms after the arrival (the first, if late, narrows the span between them)
    assert sends == sorted(sends) and sends[-1] - entry["t_recv"] >= 0.069
    assert sends[-1] - sends[0] < 0.35


def _metric(url: str, name: str) -> float:
    text = httpx.get(url + "/metrics").text
    return float(next(ln.split()[1] for ln in text.splitlines() if ln.startswith(name + " ")))


def test_golden_prompt_echo_a_loop_and_the_prefix_cache(start_sim: Callable[..., Sim]) -> None:
    good, broken = start_sim(), start_sim("--repeat-after", "3")
    ask = {"messages": [{"role": "user", "content": "Repeat after me: Paris is in France."}],
           "max_tokens": 12}  # fmt: skip
    body = httpx.post(good.url + "/v1/chat/completions", json=ask).json()
    assert body["choices"][0]["message"]["content"] == " Paris is in France."
    assert body["choices"][0]["finish_reason"] == "stop"  # stopped on its own, like a model
    assert body["usage"]["completion_tokens"] == 4
    body = httpx.post(broken.url + "/v1/chat/completions", json=ask).json()
    assert body["choices"][0]["message"]["content"] == " Paris is" + " in" * 10
    assert body["choices"][0]["finish_reason"] == "length"
    # prefix cache: whole 16-word blocks of a prompt seen before are hits
    prompt = " ".join(f"w{i}" for i in range(40))  # two whole blocks and 8 words
    for text in (prompt, prompt, "other " + prompt):
        httpx.post(good.url + "/v1/completions", json={"prompt": text, "max_tokens": 1})
    queries = _metric(good.url, "sim:prefix_cache_queries_total")
    assert queries == 7 + 40 + 40 + 41  # the chat prompt had 7 words
    assert _metric(good.url, "sim:prefix_cache_hits_total") == 32  # the second prompt only
    assert _metric(good.url, "sim:generation_tokens_total") == 4 + 3


def test_cold_requests_are_slow(start_sim: Callable[..., Sim], tmp_path: Path) -> None:
    log = tmp_path / "sends.jsonl"
    sim = start_sim(
        "--cold-requests", "2", "--ttft-ms", "0", "--itl-ms", "20", "--record-sends", str(log)
    )
    times = []
    for _ in range(4):
        t0 = time.perf_counter()
        body = {"prompt": "x", "max_tokens": 6, "stream": True}
        with httpx.stream("POST", sim.url + "/v1/completions", json=body, timeout=10) as resp:
            list(resp.iter_bytes())
        times.append(time.perf_counter() - t0)
    stop_sim(sim.proc)  # the send log is flushed when the server stops
    sends = [json.loads(line)["sends"] for line in log.read_text().splitlines()]
    spans = [s[-1] - s[0] for s in sends]  # as the server paced them: 5 gaps each
    # 5 gaps of 20 ms: 0.1 s warm, 0.3 s for the first two, the client seeing the same
    assert min(spans[2:]) >= 0.099 and min(spans[:2]) > 2 * max(spans[2:]), spans
    assert min(times[:2]) > max(times[2:]) and min(times[:2]) >= min(spans[:2]), times


def test_each_start_draws_its_own_speed_and_drifts_from_the_last(tmp_path: Path) -> None:
    """--start-spread: a speed of mean 1 per start, the same for the same --seed and start
    count (counted in --starts-file), another for the next start; --drift multiplies the
    delays by (1 + drift) per start counted before."""
    import argparse
    import statistics

    from reportgen.sim.speed import start_speed

    def speeds(path: Path, n: int, **flags: float) -> list[float]:
        given = {"start_spread": 0.0, "drift": 0.0, **flags}
        args = argparse.Namespace(seed=3, starts_file=str(path), **given)
        return [start_speed(args) for _ in range(n)]

    spread = speeds(tmp_path / "a", 400, start_spread=0.03)
    assert speeds(tmp_path / "b", 400, start_spread=0.03) == spread  # seeded by the count
    assert len(set(spread)) == 400
    assert statistics.fmean(spread) == pytest.approx(1, abs=0.006)
    assert statistics.stdev(spread) == pytest.approx(0.03, rel=0.15)
    assert speeds(tmp_path / "c", 3, drift=-0.1) == pytest.approx([1, 0.9, 0.81])
    assert len((tmp_path / "c").read_text().split()) == 3


def test_clients_that_leave_at_once_leave_no_traceback_in_the_log(
    start_sim: Callable[..., Sim],
) -> None:
    """Streams whose clients reset the connection as soon as they have asked (a level that
    ended, a probe that timed out) are not the server's errors: a campaign's log check for
    "Traceback" once failed on them beside a loaded suite."""
    import socket
    import struct

    sim = start_sim("--ttft-ms", "50")
    host, port = sim.url.removeprefix("http://").split(":")
    body = json.dumps({"model": "sim-model", "stream": True, "max_tokens": 4,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()  # fmt: skip
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: "
            f"application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip
    for _ in range(30):
        s = socket.create_connection((host, int(port)))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
        s.sendall(head + body)
        s.close()
    with httpx.stream("POST", sim.url + "/v1/chat/completions", content=body,
                      headers={"Content-Type": "application/json"}) as r:  # fmt: skip
        assert r.status_code == 200 and "[DONE]" in r.read().decode()  # still serving
    time.sleep(0.3)
    assert "Traceback" not in sim.log_text(), sim.log_text()
