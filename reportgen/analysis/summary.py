"""Per-level summaries from per-request records.

Definitions (times from the client's host, in milliseconds unless the name says otherwise; a
request starts when its bytes go to the kernel, a chunk arrives when the kernel received it;
see ``reportgen.load.wire``):

- ``ttft_ms``: request start (when it was sent) to the arrival of the first chunk with
  non-empty content or reasoning.
- ``itl_ms``: gap between consecutive output-carrying chunks, pooled over all requests (per
  chunk).
- ``itl_token_ms``: each chunk gap divided by the tokens that chunk carried, counted once per
  token (per token; equals ``itl_ms`` when every chunk carries one token).
- ``tpot_ms``: (end-to-end - TTFT) / (output tokens - 1), per request with 2+ tokens.
- ``e2e_ms``: request start to the end of its response.
- ``output_tok_s``: output tokens of successful requests / the level's wall-clock duration.
- ``total_tok_s``: (input + output tokens) of successful requests / duration.
- ``req_s``: successful requests / duration.
- ``goodput_req_s``: successful requests that met every SLO the campaign sets / duration.
- ``output_tok_per_j``: output tokens of successful requests / the energy of every GPU NVML
  sees over the level's measured window (NVML's energy counter, else the sampled power
  integrated), the whole window (a trimmed level's ramp and drain too); ``power_w`` is that
  energy over the window's length. None without GPU telemetry.
- ``achieved_concurrency``: sum of request durations / level duration (time-weighted mean of
  requests in flight).
- ``schedule_kept``: an open loop's scheduled send times' span over its actual sends' span (1.0
  when the client sent every request when it was due; the rate the server was offered is the
  level's rate times this). The requests per second above count completions, so a level of a
  fixed number of requests includes its drain and reads under the offered rate even when the
  server kept up: this, not ``req_s``, says whether the load was offered.
- ``window_concurrency``: for a trimmed level, the same inside the window the throughputs
  count, each request's time in flight clipped to it (the clients' ramp and drain left out).

Output tokens are the server's ``usage.completion_tokens`` where it reports them, else the local
tokenizer's count of the output text, else the number of output-carrying chunks; each request
records which. When a chunk carries several tokens, they are attributed to it in proportion to
its characters. Trimmed (``workload.trim``, on by default for duration levels), the throughputs
count only the steady state: from the moment the most requests were in flight to the last moment
they still were, so ramp-up and drain are left out; output tokens count when their chunk arrived
inside that window, input tokens when their request started inside it, requests when they ended
inside it, and the window's length is the duration.

Percentiles use linear interpolation between order statistics (numpy's default).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from reportgen.analysis import checks_stalls
from reportgen.campaign import resolve_trim
from reportgen.load.records import RequestRecord
from reportgen.metrics import LATENCIES, PERCENTILES, THROUGHPUTS, quantile
from reportgen.results.levels import Aggregate, ClientLoad, Dist, Level, Stat, Summary, by_point
from reportgen.results.model import Point


def _dist(values: Sequence[float] | np.ndarray) -> Dist:
    """A latency's statistics over a level's requests: the mean and every percentile of the
    grid (``metrics.PERCENTILES``, numpy's linear interpolation)."""
    if len(values) == 0:
        return Dist()
    arr = np.asarray(values, dtype=float)
    got = np.percentile(arr, [quantile(p) for p in PERCENTILES])
    stats = {p: float(v) for p, v in zip(PERCENTILES, got, strict=True)}
    return Dist(mean=float(arr.mean()), **stats)


def _known(value: float | None) -> bool:
    """A time that was measured: not None (live) and not NaN (read back from a table)."""
    return value is not None and value == value


def chunk_tokens(record: RequestRecord) -> np.ndarray:
    """Tokens attributed to each output chunk: the request's output tokens split in proportion
    to each chunk's characters (evenly when characters are unknown)."""
    n = len(record.chunk_times)
    if n == 0:
        return np.zeros(0)
    total = float(record.output_tokens or n)
    chars = record.chunk_chars
    if chars is not None and len(chars) == n:
        weights = np.asarray(chars, dtype=float)
        if weights.sum() > 0:
            return np.asarray(total * weights / weights.sum())
    return np.full(n, total / n)


def trims(workload: Mapping[str, Any]) -> bool:
    """Whether a saved workload (a campaign ``Workload`` as dumped in the results) trims its
    throughputs: ``campaign.resolve_trim``, the rule the run used."""
    duration = workload.get("duration_s")
    return resolve_trim(workload.get("trim"), None if duration is None else float(duration))


def compared_value(s: Summary, metric: str, stat: str = "p50") -> float | None:
    """A level run's metric as verdicts compare it, on a log scale: as measured, except a
    goodput of none (no request met the SLO) is taken as half a request in the level's
    time, the usual continuity correction for a count of zero, so a configuration whose
    goodput collapses is compared (and found worse) rather than left out."""
    v = s.value(metric, stat)
    if metric == "goodput_req_s" and v == 0 and s.duration_s > 0:
        window = (s.window_s[1] - s.window_s[0]) if s.window_s else s.duration_s
        return 0.5 / (window if window > 0 else s.duration_s)
    return v


def applied_slo(workload: Mapping[str, Any]) -> dict[str, Any]:
    """The SLOs a level is judged by (a saved or dumped ``Workload``): its own, less those on
    TTFT and TPOT where responses are not streamed (no first token is seen apart from the
    rest, so neither is measured)."""
    slo = dict(workload.get("slo") or {})
    if workload.get("stream") is False:
        slo["ttft_ms"] = slo["tpot_ms"] = None
    return slo


def schedule_kept(records: Sequence[RequestRecord]) -> float | None:
    """An open loop's scheduled send times' span over its actual sends' span (None for a
    closed loop: no request scheduled; or fewer than two requests, or an infinite rate, where
    every request is due at once)."""
    if len(records) < 2 or any(r.scheduled is None for r in records):
        return None
    due = [float(r.scheduled) for r in records if r.scheduled is not None]
    sent = [float(r.start) for r in records]
    want, took = max(due) - min(due), max(sent) - min(sent)
    if want <= 0 or took <= 0:
        return None
    return want / took


def steady_window(records: Sequence[RequestRecord]) -> tuple[float, float] | None:
    """From the first moment the most requests were in flight to the last moment they were.

    None when that window is degenerate (e.g. a single request)."""
    events = sorted(
        [(float(r.start), 1) for r in records] + [(float(r.end), -1) for r in records],
        key=lambda e: (e[0], e[1]),  # at a tie, an end frees its slot before a start takes it
    )
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    level = 0
    start = end = None
    for t, step in events:
        before = level
        level += step
        if level == peak and start is None:
            start = t
        if before == peak and level < peak:
            end = t
    if start is None or end is None or end <= start:
        return None
    return start, end


def _meets(r: RequestRecord, slo: Mapping[str, float | None]) -> bool:
    first = r.first_token
    ttft = (first - r.start) * 1e3 if first is not None and _known(first) else None
    e2e = (r.end - r.start) * 1e3
    ttft_slo, e2e_slo, tpot_slo = slo.get("ttft_ms"), slo.get("e2e_ms"), slo.get("tpot_ms")
    if ttft_slo is not None and (ttft is None or ttft > ttft_slo):
        return False
    if e2e_slo is not None and e2e > e2e_slo:
        return False
    if tpot_slo is not None and ttft is not None and r.output_tokens > 1:
        tpot = (e2e - ttft) / (r.output_tokens - 1)
        if tpot > tpot_slo:
            return False
    return True


def latency_samples(ok: Iterable[RequestRecord]) -> dict[str, np.ndarray]:
    """Every latency sample of a level's successful requests, in ms, by metric: TTFT and E2E
    one a request, TPOT one a request of two or more tokens, ITL one a gap between chunks
    (``itl_token_ms``: per token, a chunk of k tokens k gaps of a k-th of its own)."""
    ttft: list[float] = []
    itl: list[np.ndarray] = []
    itl_tok: list[np.ndarray] = []
    tpot: list[float] = []
    e2e: list[float] = []
    for r in ok:
        e2e_s = r.end - r.start
        e2e.append(e2e_s * 1e3)
        first = r.first_token
        if first is not None and _known(first):
            ttft_s = first - r.start
            ttft.append(ttft_s * 1e3)
            if r.output_tokens > 1:
                tpot.append((e2e_s - ttft_s) / (r.output_tokens - 1) * 1e3)
        gaps = np.diff(np.asarray(r.chunk_times, dtype=float)) * 1e3
        if gaps.size:
            itl.append(gaps)
            per_chunk = chunk_tokens(r)[1:]
            counts = np.maximum(1, np.rint(per_chunk)).astype(int)
            itl_tok.append(np.repeat(gaps / np.maximum(per_chunk, 1e-9), counts))
    return {
        "ttft_ms": np.asarray(ttft, dtype=float),
        "tpot_ms": np.asarray(tpot, dtype=float),
        "itl_ms": np.concatenate(itl) if itl else np.asarray([], dtype=float),
        "itl_token_ms": np.concatenate(itl_tok) if itl_tok else np.asarray([], dtype=float),
        "e2e_ms": np.asarray(e2e, dtype=float),
    }


def summarize(
    records: Iterable[RequestRecord],
    duration_s: float,
    *,
    slo: Mapping[str, float | None] | None = None,
    trim: bool = False,
    client: ClientLoad | None = None,
) -> Summary:
    """Summary of one level run from its request records (``client``: the client's own load,
    measured beside them)."""
    recs = list(records)
    ok = [r for r in recs if r.status == "ok"]
    samples = latency_samples(ok)
    out_tokens = in_tokens = chunks = 0
    busy_s = sum(max(0.0, r.end - r.start) for r in recs)
    short = silent = 0  # silent: tokens counted by the engine, but no text streamed
    for r in ok:
        out_tokens += int(r.output_tokens)
        in_tokens += int(r.input_tokens or 0)
        chunks += len(r.chunk_times)
        if r.requested_output_tokens and r.output_tokens < r.requested_output_tokens:
            short += 1
        if r.output_tokens and len(r.chunk_times) == 0:
            silent += 1
    errors: dict[str, int] = {}
    for r in recs:
        if r.status != "ok":
            key = str(r.error or "error").split(":")[0][:60]
            errors[key] = errors.get(key, 0) + 1
    good = (
        [r for r in ok if _meets(r, slo)]
        if slo and any(v is not None for v in slo.values())
        else None
    )

    # Throughput: over the whole level, or over its steady state when asked to trim.
    window = steady_window(recs) if trim else None
    if window is not None:
        lo, hi = window
        span = hi - lo
        w_out = sum(
            float(
                chunk_tokens(r)[
                    (np.asarray(r.chunk_times) >= lo) & (np.asarray(r.chunk_times) <= hi)
                ].sum()
            )
            for r in ok
        )
        w_in = sum(int(r.input_tokens or 0) for r in ok if lo <= r.start <= hi)
        w_req = sum(1 for r in ok if lo <= r.end <= hi)
        w_good = sum(1 for r in good if lo <= r.end <= hi) if good is not None else None
        inside = sum(max(0.0, min(r.end, hi) - max(r.start, lo)) for r in recs)
        window_concurrency = inside / span if span > 0 else None
    else:
        window_concurrency = None
        span = duration_s
        w_out, w_in, w_req = float(out_tokens), in_tokens, len(ok)
        w_good = len(good) if good is not None else None
    dur = span if span > 0 else float("nan")
    return Summary(
        requests=len(recs),
        ok=len(ok),
        errors=len(recs) - len(ok),
        error_kinds=errors,
        short_outputs=short,
        silent_outputs=silent,
        duration_s=duration_s,
        window_s=[window[0], window[1]] if window else None,
        input_tokens=in_tokens,
        output_tokens=out_tokens,
        chunks=chunks,
        output_tokens_source=sorted({str(r.output_tokens_source) for r in ok}),
        output_tok_s=w_out / dur,
        total_tok_s=(w_in + w_out) / dur,
        req_s=w_req / dur,
        goodput_req_s=None if w_good is None else w_good / dur,
        slo_attainment=None if good is None or not recs else len(good) / len(recs),
        chunk_s=chunks / duration_s if duration_s > 0 else float("nan"),
        achieved_concurrency=busy_s / duration_s if duration_s > 0 else float("nan"),
        window_concurrency=window_concurrency,
        schedule_kept=schedule_kept(recs),
        stall_s=checks_stalls.longest_stall(ok),
        ttft_ms=_dist(samples["ttft_ms"]),
        itl_ms=_dist(samples["itl_ms"]),
        itl_token_ms=_dist(samples["itl_token_ms"]),
        tpot_ms=_dist(samples["tpot_ms"]),
        e2e_ms=_dist(samples["e2e_ms"]),
        client=client,
    )


def energy_rates(level: Level) -> tuple[float | None, float | None]:
    """A level run's GPUs' mean power over its window (W: their energy over it, summed, over
    its span) and its output tokens per joule (the level's output tokens over that energy:
    both over the whole window, a trimmed level's ramp and drain included); None where a GPU
    has no energy for the window (no telemetry, or too little of the window sampled)."""
    w, gpus = level.window, level.telemetry or []
    joules = [g.energy_j for g in gpus if g.energy_j is not None]
    if w is None or not w.t0_monotonic or not joules or len(joules) < len(gpus):
        return None, None
    span = w.end - w.t0_monotonic
    if span <= 0:
        return None, None
    energy = sum(joules)
    per_j = level.summary.output_tokens / energy if energy > 0 else None
    return energy / span, per_j


AGGREGATED = [(m, None) for m in THROUGHPUTS] + [(m, s) for m in LATENCIES for s in PERCENTILES]


def aggregate(point: Point | int, runs: Sequence[Summary]) -> Aggregate:
    """Across repetitions of one level: the mean and spread of each headline number.

    Each repetition's summary is one observation (the unit of replication); ``sd`` is the
    sample standard deviation (None below two).
    """
    stats: dict[str, Stat] = {}
    for metric, stat in AGGREGATED:
        vals = [r.value(metric, stat or "p50") for r in runs]
        nums = np.asarray([v for v in vals if v is not None and np.isfinite(v)], dtype=float)
        name = metric if stat is None else f"{metric}_{stat}"
        if nums.size == 0:
            stats[name] = Stat(mean=None, sd=None, n=0)
        else:
            sd = float(nums.std(ddof=1)) if nums.size > 1 else None
            stats[name] = Stat(mean=float(nums.mean()), sd=sd, n=int(nums.size))
    loads = [r.client.load for r in runs if r.client is not None]
    known = [float(x) for x in loads if x is not None]
    where = Point.of(point)
    return Aggregate(
        concurrency=where.concurrency,
        rate=where.rate,
        repetitions=len(runs),
        **stats,
        errors=int(sum(r.errors for r in runs)),
        requests=int(sum(r.requests for r in runs)),
        short_outputs=int(sum(r.short_outputs for r in runs)),
        silent_outputs=int(sum(r.silent_outputs for r in runs)),
        client_load_max=max(known) if known else None,
        client_limited=int(sum(bool(r.client and r.client.limited) for r in runs)),
    )


def by_level(levels: Sequence[Level]) -> list[Aggregate]:
    """Each level's aggregate across its repetitions (``aggregate`` of the level runs'
    summaries), in the order the levels first ran."""
    return [aggregate(p, [lv.summary for lv in runs]) for p, runs in by_point(levels).items()]
