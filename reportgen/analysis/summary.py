"""Per-level summaries from per-request records.

Definitions (times from the client's clock, in milliseconds unless the name says otherwise):

- ``ttft_ms``: request start to the first chunk with non-empty content or reasoning.
- ``itl_ms``: gap between consecutive output-carrying chunks, pooled over all requests.
- ``tpot_ms``: (end-to-end - TTFT) / (output tokens - 1), per request with 2+ tokens.
- ``e2e_ms``: request start to the end of its response.
- ``output_tok_s``: output tokens of successful requests / the level's wall-clock duration.
- ``total_tok_s``: (input + output tokens) of successful requests / duration.
- ``req_s``: successful requests / duration.
- ``achieved_concurrency``: sum of request durations / level duration (time-weighted).

Percentiles use linear interpolation between order statistics (numpy's default).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

PERCENTILES = (50, 90, 99)
LATENCIES = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
THROUGHPUTS = ("output_tok_s", "total_tok_s", "req_s")


def _dist(values: Sequence[float]) -> dict[str, float | None]:
    if len(values) == 0:
        return {"mean": None, **{f"p{p}": None for p in PERCENTILES}}
    arr = np.asarray(values, dtype=float)
    pct = np.percentile(arr, PERCENTILES)
    return {
        "mean": float(arr.mean()),
        **{f"p{p}": float(v) for p, v in zip(PERCENTILES, pct, strict=True)},
    }


def summarize(records: Iterable[Mapping[str, Any]], duration_s: float) -> dict[str, Any]:
    """Summary of one level run. ``records`` are request records as dicts (see loadgen)."""
    recs = list(records)
    ok = [r for r in recs if r["status"] == "ok"]
    ttft: list[float] = []
    itl: list[float] = []
    tpot: list[float] = []
    e2e: list[float] = []
    out_tokens = in_tokens = 0
    busy_s = 0.0
    short = 0
    for r in recs:
        busy_s += max(0.0, r["end"] - r["start"])
    for r in ok:
        out_tokens += int(r["output_tokens"])
        in_tokens += int(r["input_tokens"] or 0)
        e2e_s = r["end"] - r["start"]
        e2e.append(e2e_s * 1e3)
        if r["first_token"] is not None:
            ttft_s = r["first_token"] - r["start"]
            ttft.append(ttft_s * 1e3)
            if r["output_tokens"] > 1:
                tpot.append((e2e_s - ttft_s) / (r["output_tokens"] - 1) * 1e3)
        times = r["chunk_times"]
        itl.extend(float(d) * 1e3 for d in np.diff(np.asarray(times, dtype=float)))
        if r["requested_output_tokens"] and r["output_tokens"] < r["requested_output_tokens"]:
            short += 1
    dur = duration_s if duration_s > 0 else float("nan")
    errors: dict[str, int] = {}
    for r in recs:
        if r["status"] != "ok":
            key = str(r["error"] or "error").split(":")[0][:60]
            errors[key] = errors.get(key, 0) + 1
    return {
        "requests": len(recs),
        "ok": len(ok),
        "errors": len(recs) - len(ok),
        "error_kinds": errors,
        "short_outputs": short,
        "duration_s": duration_s,
        "input_tokens": in_tokens,
        "output_tokens": out_tokens,
        "output_tok_s": out_tokens / dur,
        "total_tok_s": (in_tokens + out_tokens) / dur,
        "req_s": len(ok) / dur,
        "achieved_concurrency": busy_s / dur,
        "ttft_ms": _dist(ttft),
        "itl_ms": _dist(itl),
        "tpot_ms": _dist(tpot),
        "e2e_ms": _dist(e2e),
    }


def metric_value(summary: Mapping[str, Any], metric: str, stat: str = "p50") -> float | None:
    """One number from a summary: throughputs directly, latencies at ``stat`` (p50 default)."""
    value = summary.get(metric)
    if isinstance(value, Mapping):
        value = value.get(stat)
    return None if value is None else float(value)


def aggregate(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Across repetitions of one level: the mean and spread of each headline number.

    Each repetition's summary is one observation (the unit of replication).
    """
    out: dict[str, Any] = {"repetitions": len(runs)}
    keys = [(m, None) for m in THROUGHPUTS] + [
        (m, s) for m in LATENCIES for s in ("p50", "p90", "p99")
    ]
    for metric, stat in keys:
        vals = [metric_value(r, metric, stat or "p50") for r in runs]
        nums = np.asarray([v for v in vals if v is not None and np.isfinite(v)], dtype=float)
        name = metric if stat is None else f"{metric}_{stat}"
        if nums.size == 0:
            out[name] = {"mean": None, "sd": None, "n": 0}
        else:
            sd = float(nums.std(ddof=1)) if nums.size > 1 else None
            out[name] = {"mean": float(nums.mean()), "sd": sd, "n": int(nums.size)}
    out["errors"] = int(sum(r["errors"] for r in runs))
    out["requests"] = int(sum(r["requests"] for r in runs))
    return out
