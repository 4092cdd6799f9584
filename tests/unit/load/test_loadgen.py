"""The load generator on loopback: against the simulator, and against small hand-made servers
that misbehave the ways real ones do (split events, keep-alives, errors inside a 200 stream,
streams cut short, garbage, rate limits, dropped connections)."""

from __future__ import annotations

import asyncio
import gc
import json
import multiprocessing
import statistics
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from reportgen.analysis.summary import summarize
from reportgen.errors import LoadError
from reportgen.load import client
from reportgen.load.loadgen import (
    LevelRun,
    RequestRecord,
    RequestSpec,
    arrival_times,
    run_load,
)
from reportgen.load.prompts import synthetic
from reportgen.load.sizing import auto_workers, preopen_connections
from reportgen.load.worker import no_full_collections
from tests.conftest import Sim, free_port

CHAT = RequestSpec(api="chat", model=None, output_tokens=10)


TRANSPORTS = ("wire", "aiohttp")
# For tests where the way out makes no difference: pure functions, and levels whose requests
# all go out from worker processes (which always use the default, "wire").
one_transport = pytest.mark.transports("wire")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test runs on both ways out unless marked ``one_transport``: kernel-timed plain
    connections (the default for http://) and aiohttp (https://)."""
    named = metafunc.definition.iter_markers("parametrize")
    if any("transport" in str(m.args[0]) for m in named):
        return  # the test lists its own combinations
    mark = metafunc.definition.get_closest_marker("transports")
    metafunc.parametrize("transport", mark.args if mark else TRANSPORTS, indirect=True)


def loop_turn(lv: LevelRun) -> float:
    """How late this level's event loop could act, in seconds: its worst measured lag, and
    50 ms more for one turn of a loop that is on time."""
    return lv.loop_lag_ms["max"] / 1e3 + 0.05


@pytest.fixture(autouse=True)
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The way out this test's own requests take (worker processes always use the default)."""
    monkeypatch.setattr(client, "TRANSPORT", request.param)
    return str(request.param)


# -- against the simulator -------------------------------------------------------------------


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_closed_loop_level_records_every_chunk(sim: Sim, api: str) -> None:
    spec = RequestSpec(api=api, model=None, output_tokens=10)
    prompts = synthetic(8, 12, seed=1)
    done: list[int] = []
    lv = run_load(sim.url, spec, prompts, 4, requests=8, on_request=lambda r: done.append(r.index))
    assert sorted(done) == list(range(8))
    assert [r.index for r in lv.records] == list(range(8))
    assert lv.workers == 1 and lv.client_cpu_s > 0
    lag = lv.loop_lag_ms
    assert 0 <= lag["p50"] <= lag["p99"] <= lag["max"] < lv.duration_s * 1e3
    for r in lv.records:
        assert r.status == "ok", r.error
        assert r.output_tokens == 10 and r.output_tokens_source == "usage"
        assert r.input_tokens == 12  # the simulator counts words
        assert len(r.chunk_times) == len(r.chunk_chars) == 10  # one token per chunk
        assert sum(r.chunk_chars) == len(r.output_text) and all(c > 0 for c in r.chunk_chars)
        assert r.first_token == r.chunk_times[0]
        assert r.start < r.first_token <= r.chunk_times[-1] <= r.end
        assert r.chunk_times == sorted(r.chunk_times)
        assert r.scheduled is None
        # --ttft-ms 20 --itl-ms 2 (growth with 4 active): TTFT 20-40 ms, chunks >= 2 ms apart
        assert 0.015 < r.first_token - r.start < 0.5  # a busy machine only adds to it
    s = summarize(lv.records, lv.duration_s)
    assert s.ok == 8 and s.errors == 0
    assert s.output_tokens == 80
    assert s.output_tok_s == pytest.approx(80 / lv.duration_s)
    assert 1.5 < s.achieved_concurrency <= 4.01
    assert 15 < s.ttft_ms.p50 < 500
    # 2 ms between tokens as the server paces them. Chunks that arrive while the client is
    # busy share one kernel timestamp, and a first chunk read late makes the rest a burst, so
    # on a loaded machine the gaps can average under 2 ms (1.31 ms seen in CI): the pace is
    # checked where a busy client cannot shorten it, each request's whole time, never under
    # the server's 20 ms to the first token and 9 x 2 ms after it.
    assert all(r.end - r.start > 0.038 - 1e-3 for r in lv.records)
    assert 0 <= s.itl_ms.p50 < 20 and 0 < s.itl_ms.mean < 20
    assert 0 < s.tpot_ms.p50 < 20


def test_prompts_by_index_and_text_kept(sim: Sim) -> None:
    spec = RequestSpec(api="completions", model=None, output_tokens=4, keep_text_chars=5)
    prompts = synthetic(3, 6, seed=2)
    lv = run_load(sim.url, spec, prompts, 2, requests=6)
    # The simulator's text is a function of the prompt, so equal prompts give equal text.
    assert lv.records[0].output_text == lv.records[3].output_text
    assert lv.records[1].output_text == lv.records[4].output_text
    assert lv.records[0].output_text != lv.records[1].output_text
    assert all(len(r.output_text) == 5 for r in lv.records)
    assert all(sum(r.chunk_chars) > 5 for r in lv.records)  # counted in full, kept in part


def test_non_streaming_and_duration_mode(sim: Sim) -> None:
    spec = RequestSpec(api="chat", model="sim-model", output_tokens=5, stream=False)
    lv = run_load(sim.url, spec, synthetic(50, 5, 2), 2, duration_s=0.5)
    assert lv.records and all(r.status == "ok" for r in lv.records)
    assert all(r.output_tokens == 5 and r.output_tokens_source == "usage" for r in lv.records)
    # a whole answer has no first token apart from the rest: no TTFT (not one equal to E2E)
    assert all(r.first_token is None and r.chunk_times[0] <= r.end for r in lv.records)
    summary = summarize(lv.records, lv.duration_s)
    assert summary.ttft_ms.p50 is None and summary.e2e_ms.p50 is not None
    # Requests stop being issued once the duration has passed; in-flight ones finish. (start
    # is when the bytes went out: with aiohttp that can be one loop turn after the issue)
    assert max(r.start for r in lv.records) < 0.5 + loop_turn(lv)
    # ... and the level ends with the last of them, not later
    longest = max(r.end - r.start for r in lv.records)
    assert max(r.end for r in lv.records) <= lv.duration_s
    assert 0.5 <= lv.duration_s < 0.5 + loop_turn(lv) + longest + 0.05


def test_server_errors_are_recorded_per_request(sim: Sim) -> None:
    spec = RequestSpec(api="chat", model=None, output_tokens=0)  # the simulator rejects 0
    lv = run_load(sim.url, spec, ["hello"], 1, requests=2)
    assert [r.status for r in lv.records] == ["error", "error"]
    assert lv.records[0].http_status == 400
    assert (lv.records[0].error or "").startswith("HTTP 400: max_tokens must be")
    s = summarize(lv.records, lv.duration_s)
    assert s.errors == 2 and s.output_tok_s == 0
    assert s.error_kinds == {"HTTP 400": 2}


def test_connection_refused_is_an_error_not_a_crash() -> None:
    lv = run_load(f"http://127.0.0.1:{free_port()}", CHAT, ["x"], 2, requests=3)
    assert [r.index for r in lv.records] == [0, 1, 2]
    assert all(r.status == "error" for r in lv.records)
    assert (lv.records[0].error or "").startswith("connect error:")
    assert lv.records[0].http_status is None and lv.records[0].chunk_times == []


def _first_starts(lv: LevelRun, clients: int) -> list[float]:
    """When each client sent its first request: the first ``clients`` indices, taken in the
    order the clients started (each request's ``start`` is seconds after t0)."""
    return [r.start for r in lv.records[:clients]]


@pytest.mark.parametrize(
    ("transport", "workers"),
    [("wire", 1), ("aiohttp", 1), ("wire", 2)],  # workers always use the default
    indirect=["transport"],
)
def test_closed_loop_clients_start_staggered(start_sim: Any, transport: str, workers: int) -> None:
    # Requests take ~100 ms; four clients 20 ms apart all send their first before the first
    # one ends, so indices 0-3 are the four clients' first requests, in order.
    sim = start_sim("--ttft-ms", "50", "--itl-ms", "10", "--ttft-growth", "0", "--itl-growth", "0")
    spec = RequestSpec(api="chat", model=None, output_tokens=6)
    lv = run_load(sim.url, spec, ["p"], 4, requests=8, stagger_s=0.02, workers=workers)
    assert lv.stagger_s == 0.02 and lv.workers == workers
    assert all(r.status == "ok" for r in lv.records), [r.error for r in lv.records]
    first = _first_starts(lv, 4)
    for k, t in enumerate(first):
        assert k * 0.02 <= t < k * 0.02 + loop_turn(lv), (k, first)  # never before its turn
    # spread over three steps (60 ms), not all at t0: the last client's turn came after them
    # (a bound lateness cannot break: on a busy host the first client can start 37 ms late)
    assert first[-1] >= 3 * 0.02, first
    # ... and then each client goes on as a closed loop: 8 requests, at most 4 in flight
    s = summarize(lv.records, lv.duration_s)
    assert s.requests == 8 and s.achieved_concurrency <= 4


@pytest.mark.parametrize("workers", [1, 2])
def test_a_drained_level_ends_when_its_requests_in_flight_do(start_sim: Any, workers: int) -> None:
    # ~100 ms requests, a 30 s level drained once 1 s of it has passed: no client sends again, the
    # requests in flight finish (none abandoned), and the level ends about a request later
    sim = start_sim("--ttft-ms", "50", "--itl-ms", "10", "--ttft-growth", "0", "--itl-growth", "0")
    spec = RequestSpec(api="chat", model=None, output_tokens=6)
    first_asked: list[float] = []  # asked once the level began (worker processes start first)

    def drained() -> bool:
        first_asked[:] = first_asked or [time.monotonic()]
        return time.monotonic() - first_asked[0] > 1.0

    lv = run_load(sim.url, spec, ["p"], 4, duration_s=30.0, workers=workers, drain_when=drained)
    assert lv.aborted is None
    assert 1.0 < lv.duration_s < 3.0, lv.duration_s
    assert all(r.status == "ok" for r in lv.records), [r.error for r in lv.records]
    assert len(lv.records) >= 4 * 8  # four clients went on until the drain
    last_start = max(r.start for r in lv.records)
    assert lv.duration_s - last_start < 0.5  # the last request sent was the last to end


def test_without_a_stagger_every_client_starts_at_t0(sim: Sim) -> None:
    lv = run_load(sim.url, CHAT, ["p"], 4, requests=4)
    assert lv.stagger_s == 0.0
    assert max(_first_starts(lv, 4)) < loop_turn(lv)
    # an open loop's arrival times say when requests go: a stagger has no say there
    lv = run_load(sim.url, CHAT, ["p"], 0, requests=4, rate=100.0, arrival="constant",
                  stagger_s=1.0)  # fmt: skip
    # (a stagger of 1 s over its requests would send the last about 0.75 s in; unstaggered,
    # the last goes at 0.03 s plus however late this host's event loop turns: kept well below)
    assert lv.stagger_s == 0.0 and max(r.start for r in lv.records) < 0.5
    with pytest.raises(ValueError, match="stagger_s"):
        run_load(sim.url, CHAT, ["p"], 2, requests=2, stagger_s=-1.0)


# -- open loop -------------------------------------------------------------------------------


@one_transport
def test_poisson_arrivals_are_seeded_and_have_the_asked_rate() -> None:
    a = arrival_times(50.0, "poisson", seed=7, requests=4000)
    assert a == arrival_times(50.0, "poisson", seed=7, requests=4000)
    assert a != arrival_times(50.0, "poisson", seed=8, requests=4000)
    assert a[0] == 0.0 and a == sorted(a) and len(a) == 4000
    gaps = [y - x for x, y in zip(a, a[1:], strict=False)]
    assert (len(a) - 1) / a[-1] == pytest.approx(50.0, rel=0.05)
    # exponential gaps: standard deviation equals the mean
    assert statistics.stdev(gaps) == pytest.approx(statistics.mean(gaps), rel=0.1)
    within = arrival_times(50.0, "poisson", seed=7, duration_s=2.0)
    assert within == [t for t in a if t < 2.0]


@one_transport
def test_burstiness_keeps_the_rate_and_changes_the_clumping() -> None:
    """vLLM's --burstiness: gamma gaps of shape B and the rate's mean; their squared
    coefficient of variation is 1/B (1: Poisson's exponential gaps)."""
    for b in (0.25, 4.0):
        a = arrival_times(50.0, "poisson", seed=7, requests=8000, burstiness=b)
        gaps = [y - x for x, y in zip(a, a[1:], strict=False)]
        assert (len(a) - 1) / a[-1] == pytest.approx(50.0, rel=0.06)
        cv2 = (statistics.stdev(gaps) / statistics.mean(gaps)) ** 2
        assert cv2 == pytest.approx(1 / b, rel=0.15), b
    assert arrival_times(50.0, seed=7, requests=50, burstiness=1.0) == arrival_times(
        50.0, seed=7, requests=50
    )  # 1: the Poisson draws as before


@one_transport
def test_constant_arrivals() -> None:
    assert arrival_times(4.0, "constant", requests=4) == [0.0, 0.25, 0.5, 0.75]
    assert arrival_times(4.0, "constant", duration_s=1.0) == [0.0, 0.25, 0.5, 0.75]
    with pytest.raises(ValueError, match="arrival"):
        arrival_times(4.0, "uniform", requests=4)
    with pytest.raises(ValueError, match="rate"):
        arrival_times(0.0, requests=4)


def test_open_loop_sends_on_schedule_whatever_is_in_flight(start_sim: Any) -> None:
    # Each request takes ~100 ms; arrivals every 20 ms, so ~5 are in flight at once.
    sim = start_sim("--ttft-ms", "50", "--itl-ms", "10", "--ttft-growth", "0", "--itl-growth", "0")
    spec = RequestSpec(api="chat", model=None, output_tokens=6)
    lv = run_load(sim.url, spec, ["p"], 0, requests=20, rate=50.0, arrival="constant")
    assert [r.index for r in lv.records] == list(range(20))
    for r in lv.records:
        assert r.status == "ok", r.error
        assert r.scheduled == pytest.approx(r.index * 0.02)
        assert r.start >= (r.scheduled or 0)
    # sent on time, not after a completion: requests went out while the three due before
    # them were still in flight (about 40 ms to spare), all but a few on a loaded host (its
    # first requests once went out 65 ms late, opening their connections), late by a small
    # part of what a request takes
    overlapped = [r.start < lv.records[r.index - 3].end for r in lv.records[3:]]
    assert sum(overlapped) >= 0.8 * len(overlapped), overlapped
    late = statistics.median(r.start - (r.scheduled or 0) for r in lv.records)
    assert late < 0.2 * statistics.median(r.end - r.start for r in lv.records)
    s = summarize(lv.records, lv.duration_s)
    assert s.achieved_concurrency > 2.5


def test_open_loop_cap_delays_sending_and_records_it(start_sim: Any) -> None:
    sim = start_sim("--ttft-ms", "30", "--itl-ms", "5", "--ttft-growth", "0")
    spec = RequestSpec(api="chat", model=None, output_tokens=3)
    lv = run_load(sim.url, spec, ["p"], 1, requests=6, rate=1000.0, arrival="constant", seed=3)
    starts = [r.start for r in lv.records]
    assert starts == sorted(starts)
    for a, b in zip(lv.records, lv.records[1:], strict=False):
        assert b.start >= a.end  # the cap of one: never two in flight
    assert all(r.scheduled is not None and r.scheduled <= r.start for r in lv.records)
    assert lv.records[-1].start - (lv.records[-1].scheduled or 0) > 0.1  # it waited its turn


# -- worker processes ------------------------------------------------------------------------


def _shape(lv: LevelRun, n: int) -> None:
    assert [r.index for r in lv.records] == list(range(n))
    for r in lv.records:
        assert r.status == "ok", r.error
        assert all(r.start <= t <= r.end for t in r.chunk_times)
        assert len(r.chunk_times) == len(r.chunk_chars) == r.output_tokens


def test_two_workers_give_the_same_records_as_one(sim: Sim) -> None:
    prompts = synthetic(5, 8, seed=3)
    one = run_load(sim.url, CHAT, prompts, 6, requests=30, workers=1)
    seen: list[RequestRecord] = []
    two = run_load(sim.url, CHAT, prompts, 6, requests=30, workers=2, on_request=seen.append)
    assert (one.workers, two.workers) == (1, 2)
    _shape(one, 30)
    _shape(two, 30)
    assert len(seen) == 30
    assert [r.output_text for r in one.records] == [r.output_text for r in two.records]
    assert two.client_cpu_s > 0 and two.duration_s > 0 and two.loop_lag_ms["max"] >= 0
    assert 0 < two.records[0].start < 0.5  # both workers share the parent's t0
    assert not multiprocessing.active_children()


@one_transport
def test_two_workers_open_loop_and_duration(sim: Sim) -> None:
    lv = run_load(sim.url, CHAT, ["p q"], 0, duration_s=0.4, rate=40.0, seed=1, workers=2)
    expected = arrival_times(40.0, "poisson", seed=1, duration_s=0.4)
    assert [r.scheduled for r in lv.records] == expected  # the same schedule, split in two
    _shape(lv, len(expected))
    assert all(0 <= r.start - (r.scheduled or 0) < loop_turn(lv) for r in lv.records)
    closed = run_load(sim.url, CHAT, ["p q"], 4, duration_s=0.3, workers=2)
    _shape(closed, len(closed.records))
    # issued before the duration ended; sent (start) at most a loop turn later
    assert max(r.start for r in closed.records) < 0.3 + loop_turn(closed)
    assert not multiprocessing.active_children()


@one_transport
def test_interrupt_in_the_parent_stops_every_worker(start_sim: Any) -> None:
    sim = start_sim("--ttft-ms", "5", "--itl-ms", "20")

    def interrupt(_: Any) -> None:
        raise KeyboardInterrupt

    t = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_load(sim.url, CHAT, ["x"], 4, duration_s=30, workers=2, on_request=interrupt)
    assert time.monotonic() - t < 15
    assert not multiprocessing.active_children()


def test_a_broken_worker_is_a_load_error(sim: Sim) -> None:
    spec = RequestSpec(api="chat", model=None, output_tokens=2, extras={"x": object()})
    with pytest.raises(TypeError):  # a bad spec is the caller's bug, in this thread ...
        run_load(sim.url, spec, ["x"], 2, requests=2, workers=1)
    with pytest.raises(LoadError, match="TypeError"):  # ... and reported from a worker
        run_load(sim.url, spec, ["x"], 2, requests=2, workers=2)
    assert not multiprocessing.active_children()


@one_transport
def test_no_full_garbage_collections_during_a_level() -> None:
    before = gc.get_threshold()
    with no_full_collections():
        full = gc.get_stats()[2]["collections"]
        keep = [[float(i)] * 4 for i in range(300_000)]  # would trigger a few by default
        assert gc.get_stats()[2]["collections"] == full and keep
    assert gc.get_threshold() == before


@one_transport
def test_auto_workers_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert auto_workers(1) == auto_workers(64) == auto_workers(160) == 1
    assert (auto_workers(161), auto_workers(320), auto_workers(512), auto_workers(1024)) == (
        2,
        2,
        4,
        7,
    )
    assert auto_workers(100_000) == 8
    assert auto_workers(0, rate=10.0, output_tokens=256) == 1  # 2,560 chunks/s
    assert auto_workers(0, rate=100.0, output_tokens=1024) == 8  # 102,400 chunks/s
    assert auto_workers(64, rate=100.0, output_tokens=1024) == 1  # the cap limits it
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert auto_workers(1024) == 2


# -- against hand-made servers ---------------------------------------------------------------

Step = bytes | float  # bytes to write, or a pause in seconds
OK_SSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
OK_CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)
# what ``raw_server`` answers, closing each connection after it: it says so, or the client
# may reuse a connection the preopen GET left in its pool just as the server shuts it (a
# busy host read that race as "connection reset")
OK_CHUNKED_CLOSE = OK_CHUNKED[:-2] + b"Connection: close\r\n\r\n"


def event(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def delta(content: str | None = None, **fields: Any) -> bytes:
    d = ({"content": content} if content is not None else {}) | fields
    return event({"choices": [{"index": 0, "delta": d, "finish_reason": None}]})


def usage(completion: int, prompt: int = 7) -> bytes:
    return event(
        {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}
    )


DONE = b"data: [DONE]\n\n"


def chunked(*pieces: Step) -> list[Step]:
    """A 200 SSE response in chunked transfer encoding: one HTTP chunk per bytes piece."""
    steps: list[Step] = [OK_CHUNKED_CLOSE]
    steps += [p if isinstance(p, float) else b"%x\r\n%s\r\n" % (len(p), p) for p in pieces]
    return [*steps, b"0\r\n\r\n"]


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextmanager
def serve_in_thread(handle: Handler) -> Iterator[str]:
    """Run an asyncio TCP server on 127.0.0.1 in a thread of its own; yield its URL. On exit
    the server is closed and its connections' tasks cancelled."""
    loop = asyncio.new_event_loop()
    port = free_port()
    server = loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", port))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:

        async def shut() -> None:
            server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shut(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


@contextmanager
def raw_server(
    steps: Sequence[Step], hold: bool = False, sent: list[tuple[float, float]] | None = None
) -> Iterator[str]:
    """An HTTP/1.1 server on 127.0.0.1 that answers every request with ``steps`` (then closes
    the connection, or keeps it open doing nothing if ``hold``), in a thread of its own.
    Each write is logged in ``sent``: (perf_counter just before it, just after it)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.decode().split("\r\n"):
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":")[1])
            await reader.readexactly(length)
            for step in steps:
                if isinstance(step, bytes):
                    before = time.perf_counter()
                    writer.write(step)
                    await writer.drain()
                    if sent is not None:
                        sent.append((before, time.perf_counter()))
                else:
                    await asyncio.sleep(step)
            if hold:
                await asyncio.sleep(3600)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    with serve_in_thread(handle) as url:
        yield url


def one(steps: Sequence[Step], spec: RequestSpec = CHAT, **kw: Any) -> Any:
    with raw_server(steps, hold=kw.pop("hold", False)) as url:
        lv = run_load(url, spec, ["hi"], 1, requests=1, **kw)
    return lv.records[0]


def test_events_split_byte_by_byte() -> None:
    body = delta("", role="assistant") + delta("Hel") + delta("lo") + usage(2) + DONE
    steps: list[Step] = [OK_SSE]
    for b in body:
        steps += [bytes([b]), 0.0005]
    r = one(steps)
    assert r.status == "ok", r.error
    assert (r.output_text, r.chunk_chars, r.output_tokens, r.input_tokens) == (
        "Hello",
        [3, 2],
        2,
        7,
    )
    assert r.output_tokens_source == "usage"
    assert r.chunk_times[0] < r.chunk_times[1]


def test_several_events_in_one_write_share_their_arrival_time() -> None:
    r = one(chunked(delta("a") + delta("b") + delta("c"), 0.05, delta("d") + usage(4) + DONE))
    assert r.status == "ok", r.error
    t = r.chunk_times
    assert len(t) == 4 and t[0] == t[1] == t[2] and t[3] - t[2] > 0.04


@one_transport  # aiohttp's chunks are timed when the event loop reads them
def test_chunk_times_are_arrival_times_even_when_the_client_is_busy() -> None:
    """Both chunks arrive while the client's event loop is blocked for 0.3 s. The kernel
    timed them, so their times still say when they came (50 ms apart, right after the
    request: when the server wrote them); aiohttp can only say when the loop got to read
    them."""
    sent: list[tuple[float, float]] = []
    with raw_server(chunked(delta("a"), 0.05, delta("b") + DONE), sent=sent) as url:

        async def go() -> tuple[RequestRecord, float]:
            async with client.new_session(url, 1, 10.0) as session:
                t0 = time.perf_counter()
                path = client.endpoint(CHAT)
                task = asyncio.ensure_future(client.send(session, path, CHAT, "hi", 0, t0, 10))
                await asyncio.sleep(0.02)  # connected and sent
                time.sleep(0.3)  # the loop is busy elsewhere
                return await task, t0

        r, t0 = asyncio.run(go())
    assert r.status == "ok", r.error
    assert r.chunk_times[1] - r.chunk_times[0] >= 0.045  # the server paused 50 ms
    # each chunk's time is when the server wrote it (its writes: the head, "a", "b" + [DONE],
    # the last chunk), within 5 ms, however late the client's loop read it
    for t, (before, after) in zip(r.chunk_times, sent[1:3], strict=True):
        assert before - 0.005 <= t0 + t <= after + 0.005, (t0 + t, before, after)
    assert r.end - r.start > 0.25  # the request did end when the loop was free again


def test_comments_keepalives_and_crlf() -> None:
    body = b": ping\r\n\r\n" + delta("x").replace(b"\n", b"\r\n") + b":\n\n" + DONE
    r = one([OK_SSE, body])
    assert r.status == "ok", r.error
    assert r.output_text == "x" and r.output_tokens == 1


def test_no_usage_counts_chunks_and_several_tokens_per_chunk() -> None:
    r = one([OK_SSE, delta("one two") + delta("three") + DONE])
    assert r.status == "ok", r.error
    assert (r.output_tokens, r.output_tokens_source, r.input_tokens) == (2, "chunks", None)
    r = one([OK_SSE, delta("one two") + delta("three") + usage(3) + DONE])
    assert (r.output_tokens, r.output_tokens_source, len(r.chunk_times)) == (3, "usage", 2)


def test_reasoning_counts_as_output_and_empty_role_chunks_do_not() -> None:
    steps: list[Step] = [OK_SSE, delta("", role="assistant"), 0.03]
    steps += [delta(None, reasoning_content="think"), 0.03, delta("answer"), DONE]
    r = one(steps)
    assert r.status == "ok", r.error
    assert r.chunk_chars == [5, 6] and r.output_text == "thinkanswer"
    assert r.first_token == r.chunk_times[0] and r.first_token - r.start > 0.025


def test_completions_text_chunks() -> None:
    spec = RequestSpec(api="completions", model="m", output_tokens=2)
    text = event({"choices": [{"index": 0, "text": "ab"}]})
    r = one(chunked(text + text + DONE), spec=spec)
    assert r.status == "ok" and r.output_text == "abab" and r.output_tokens == 2


def test_error_object_inside_a_200_stream() -> None:
    err = event({"error": {"message": "out of memory", "type": "server_error", "code": 500}})
    r = one(chunked(delta("a"), err, DONE))
    assert (r.status, r.http_status) == ("error", 200)
    assert r.error == "error in stream: out of memory"
    assert r.chunk_chars == [1]  # what came before is kept
    r = one(chunked(event({"object": "error", "message": "bad", "code": 400})))
    assert r.error == "error in stream: bad"


def test_stream_cut_short_keeps_the_chunks_received() -> None:
    r = one([OK_SSE, delta("a") + delta("b") + b'data: {"choi'])  # then the server closes
    assert r.status == "error" and r.error == "stream ended without [DONE]"
    assert r.chunk_chars == [1, 1] and r.output_tokens == 2


def test_stream_that_finished_needs_no_done_marker(transport: str) -> None:
    """transformers serve ends its streams after the finish_reason chunk, with no [DONE]."""
    last = event({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                  "usage": {"prompt_tokens": 7, "completion_tokens": 2}})  # fmt: skip
    r = one(chunked(delta("a"), delta("b"), last))
    assert r.status == "ok", r.error
    assert (r.output_tokens, r.output_tokens_source) == (2, "usage")
    r = one([*chunked(delta("a"), last)[:3], b"40\r\ndata: {"])  # finished, then cut: broken
    assert r.status == "error" and (r.error or "").startswith("stream ended without [DONE]: ")
    r = one(chunked(delta("a"), delta("b")))  # neither finish_reason nor [DONE]: cut short
    assert r.status == "error" and r.error == "stream ended without [DONE]"


def test_connection_closed_mid_chunked_stream(transport: str) -> None:
    r = one([*chunked(delta("a"))[:2], b"40\r\ndata: {"])
    assert r.status == "error"
    how = {"wire": "the server closed the connection mid-body", "aiohttp": "ClientPayloadError"}
    assert (r.error or "").startswith("stream ended without [DONE]: " + how[transport])
    assert r.chunk_chars == [1]


def test_garbage_in_a_data_line() -> None:
    r = one([OK_SSE, delta("a") + b"data: <html>oops</html>\n\n" + DONE])
    assert r.status == "error"
    assert r.error == "invalid JSON in stream: b'<html>oops</html>'"
    assert r.chunk_chars == [1]


def test_rate_limited_with_an_error_body() -> None:
    body = json.dumps({"error": {"message": "too many requests", "code": 429}}).encode()
    head = b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
    r = one([head + b"Content-Length: %d\r\n\r\n" % len(body) + body])
    assert (r.status, r.http_status, r.error) == ("error", 429, "HTTP 429: too many requests")
    text = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy"
    assert one([text]).error == "HTTP 503: busy"


def test_connection_dropped_before_any_response(transport: str) -> None:
    r = one([])  # accepts, reads the request, closes
    assert r.status == "error" and r.http_status is None
    how = {"wire": "the server closed the connection before answering", "aiohttp": "Server"}
    assert (r.error or "").startswith("connection error: " + how[transport])


def test_a_server_closing_every_connection_gets_a_new_one_per_request() -> None:
    with raw_server([OK_SSE, delta("a") + usage(1) + DONE]) as url:  # "Connection: close"
        lv = run_load(url, CHAT, ["hi"], 1, requests=3)
    assert [r.status for r in lv.records] == ["ok"] * 3, [r.error for r in lv.records]


def test_a_request_larger_than_the_socket_buffer_goes_out_whole() -> None:
    prompt = "word " * 400_000  # 2 MB of JSON: sent in several writes as the server reads
    with raw_server([OK_SSE, delta("a") + usage(1) + DONE]) as url:
        lv = run_load(url, CHAT, [prompt], 1, requests=2)
    assert [r.status for r in lv.records] == ["ok"] * 2, [r.error for r in lv.records]
    assert all(r.output_text == "a" for r in lv.records)


def test_timeout_keeps_what_arrived() -> None:
    r = one(chunked(delta("a"))[:2], hold=True, timeout_s=0.3)
    assert r.status == "error" and r.error == "timeout: no complete response within 0.3 s"
    # the clock runs from the request's send; connecting before it counts toward the timeout
    assert r.chunk_chars == [1] and 0.25 <= r.end - r.start < 1.0


def test_non_streaming_answers_and_failures() -> None:
    spec = RequestSpec(api="chat", model=None, output_tokens=3, stream=False)
    body = json.dumps(
        {
            "choices": [{"message": {"role": "assistant", "content": "hey", "reasoning": "hm"}}],
            "usage": {"prompt_tokens": 2, "completion_tokens": 3},
        }
    ).encode()
    r = one([b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body], spec=spec)
    assert (r.status, r.output_text, r.output_tokens, r.chunk_chars) == ("ok", "hmhey", 3, [5])
    r = one([b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nnot"], spec=spec)
    assert r.status == "error" and (r.error or "").startswith("invalid JSON response")


# -- connections opened before the level -----------------------------------------------------


@contextmanager
def counting_server() -> Iterator[tuple[str, list[tuple[float, int, str]]]]:
    """A keep-alive HTTP/1.1 server on 127.0.0.1 serving /v1/models and a short streamed chat
    answer, in a thread of its own. Yields its URL and its log: (perf_counter, connection
    number, "accept" or "METHOD /path"), in the order it happened."""
    log: list[tuple[float, int, str]] = []
    models = b'{"object": "list", "data": [{"id": "m", "object": "model"}]}'
    sse = delta("hi") + usage(1) + DONE

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = sum(1 for _, _, what in log if what == "accept")
        log.append((time.perf_counter(), conn, "accept"))
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode()
                method, path = head.split(" ")[:2]
                log.append((time.perf_counter(), conn, f"{method} {path}"))
                length = 0
                for line in head.split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":")[1])
                await reader.readexactly(length)
                if method == "GET":
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(models), models)
                    )
                else:
                    await asyncio.sleep(0.005)
                    writer.write(OK_CHUNKED + b"%x\r\n%s\r\n0\r\n\r\n" % (len(sse), sse))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    with serve_in_thread(handle) as url:
        yield url, log


@pytest.mark.parametrize(
    ("transport", "workers"),
    [("wire", 1), ("aiohttp", 1), ("wire", 2)],  # workers always use the default
    indirect=["transport"],
)
def test_connections_are_open_before_the_level_starts(transport: str, workers: int) -> None:
    with counting_server() as (url, log):
        lv = run_load(url, CHAT, ["hi"], 8, requests=32, workers=workers)
        events = list(log)
    _shape(lv, 32)
    assert lv.workers == workers
    accepts = [t for t, _, what in events if what == "accept"]
    gets = [(t, c) for t, c, what in events if what == "GET /v1/models"]
    posts = [(t, c) for t, c, what in events if what == "POST /v1/chat/completions"]
    assert len(accepts) == 8  # 4 per worker with 2
    assert len(gets) == 8 and {c for _, c in gets} == set(range(8))  # one on each
    assert len(posts) == 32 and {c for _, c in posts} <= set(range(8))  # reused
    first_post = min(t for t, _ in posts)
    assert max(accepts) < max(t for t, _ in gets) < first_post
    # ... all before the level's t0 (the server's clock is this process's perf_counter)
    assert max(t for t, _ in gets) < lv.t0_monotonic <= first_post
    assert lv.t0_monotonic + min(r.start for r in lv.records) <= first_post
    assert 0 < lv.preopen_s < 5


@one_transport
def test_preopen_connections_rule() -> None:
    assert preopen_connections(8, 8, 32, None) == 8  # closed loop: every client
    assert preopen_connections(4, 8, 32, None) == 4  # one of two workers
    assert preopen_connections(8, 8, 3, None) == 3  # fewer requests than clients
    assert preopen_connections(4, 8, 3, None) == 2  # ... its share of them
    assert preopen_connections(8, 8, None, None) == 8  # duration mode
    assert preopen_connections(16, 0, None, 100) == 16  # open loop: its cap
    assert preopen_connections(0, 0, None, 1000) == 64  # no cap
    assert preopen_connections(0, 0, None, 10) == 10  # ... nor more than its arrivals


@pytest.mark.parametrize("workers", [1, 2])
def test_conversations_resend_their_history_turn_by_turn(sim: Sim, workers: int) -> None:
    """turns = 3: request 3c + t is turn t of conversation c, sent after turn t - 1's answer
    with every earlier prompt and answer; the server's prompt tokens grow turn by turn (in
    this thread, and from worker processes sharing the conversations)."""
    spec = RequestSpec(api="chat", model="sim-model", output_tokens=6)
    prompts = synthetic(12, 10, 5)
    lv = run_load(sim.url, spec, prompts, 2, requests=12, turns=3, think_s=0.01, workers=workers)
    recs = sorted(lv.records, key=lambda r: r.index)
    assert [r.status for r in recs] == ["ok"] * 12
    assert [r.turn for r in recs] == [0, 1, 2] * 4
    for c in range(4):
        a, b, d = recs[3 * c : 3 * c + 3]
        assert a.end + 0.01 <= b.start + 1e-3 and b.end + 0.01 <= d.start + 1e-3
        assert a.input_tokens is not None and b.input_tokens is not None
        # each turn carries the turns before it: its prompt, the answer, its own prompt
        assert b.input_tokens > a.input_tokens + len(a.output_text.split())
        assert d.input_tokens > b.input_tokens + len(b.output_text.split())
    with pytest.raises(ValueError, match="closed loop only"):
        run_load(sim.url, spec, prompts, 2, requests=4, rate=5.0, turns=2)
