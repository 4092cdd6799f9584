"""How far each client's timing is from the paced server's truth (pure functions).

The paced server logs, per request, when it received it (t_recv) and when each output chunk
had been written to the socket (sends[k]), all on time.time() (CLOCK_REALTIME). Errors are
computed per request after matching the client's record to the server's:

- TTFT error   = client TTFT - (sends[0] - t_recv)             (one per request)
- ITL error    = client gap before chunk k - (sends[k] - sends[k-1]), k >= 1  (one per chunk)
                 clients that export only a per-request mean ITL (GuideLLM) are compared
                 on that mean: client mean ITL - (sends[-1] - sends[0]) / (n - 1)
- request lag  = t_recv - client's wall-clock request start: sending the request, plus the
                 server's own time to accept and parse it (the two cannot be told apart here)
- arrival lag  = client's wall-clock arrival of chunk k - sends[k] (needs the client's
                 wall-clock request start: reportgen, AIPerf, GuideLLM; first chunk only for
                 GuideLLM)

TTFT and ITL errors use only the client's own durations, so they need no shared clock and
compare every client the same way. Positive = the client saw it later than it happened.
Matching keys: see clients.py (`Client.matching`); unmatched records are counted, not used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from lgbench.clients import PerRequest


def quantile(xs: list[float], q: float) -> float | None:
    """Linear-interpolated quantile (numpy's default), None for no data."""
    if not xs:
        return None
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary_ms(xs: list[float]) -> dict[str, float | int | None]:
    p50, p99 = quantile(xs, 0.5), quantile(xs, 0.99)
    return {
        "n": len(xs),
        "p50_ms": None if p50 is None else p50 * 1000,
        "p99_ms": None if p99 is None else p99 * 1000,
        "max_ms": max(xs) * 1000 if xs else None,
    }


def server_truth(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The server's own TTFT and gaps (its scheduling jitter, not the client's)."""
    ttft, gaps = [], []
    for r in records:
        s = r["sends"]
        if s:
            ttft.append(s[0] - r["t_recv"])
            gaps += [b - a for a, b in zip(s, s[1:], strict=False)]
    return {"ttft": summary_ms(ttft), "itl": summary_ms(gaps)}


def errors(
    client: list[PerRequest],
    server: list[dict[str, Any]],
    text_of: Callable[[str], str] | None = None,
) -> dict[str, Any]:
    """Match client records to server records and summarise the errors (ms).

    `text_of(prompt_id)`: the text the paced server generates for that prompt, for clients
    that export only the generated text.
    """
    by_prompt = {r["prompt"].split(" ", 1)[0]: r for r in server}
    by_id = {r["request_id"]: r for r in server}
    by_text: dict[str, dict[str, Any]] = {}
    if text_of is not None and any(c.key_kind == "text" for c in client):
        by_text = {text_of(key): r for key, r in by_prompt.items()}
    ttft_err, itl_err, mean_itl_err, lag_first, lag_all = [], [], [], [], []
    req_lag = []
    matched = unmatched = chunk_mismatch = 0
    for c in client:
        table = {"prompt": by_prompt, "response_id": by_id, "text": by_text}[c.key_kind]
        r = table.get(c.key)
        if r is None or not r["sends"] or c.ttft_s is None:
            unmatched += 1
            continue
        matched += 1
        sends = r["sends"]
        ttft_err.append(c.ttft_s - (sends[0] - r["t_recv"]))
        if c.start_wall is not None:
            lag_first.append(c.start_wall + c.ttft_s - sends[0])
            req_lag.append(r["t_recv"] - c.start_wall)
        if c.itls_s is not None:
            if len(c.itls_s) != len(sends) - 1:
                chunk_mismatch += 1
                continue
            arrival = c.ttft_s
            for k, gap in enumerate(c.itls_s, start=1):
                itl_err.append(gap - (sends[k] - sends[k - 1]))
                arrival += gap
                if c.start_wall is not None:
                    lag_all.append(c.start_wall + arrival - sends[k])
        elif c.mean_itl_s is not None and len(sends) > 1:
            truth = (sends[-1] - sends[0]) / (len(sends) - 1)
            mean_itl_err.append(c.mean_itl_s - truth)
    return {
        "matched": matched,
        "unmatched": unmatched,
        "chunk_count_mismatch": chunk_mismatch,
        "ttft_error": summary_ms(ttft_err),
        "itl_error": summary_ms(itl_err) if itl_err else None,
        "itl_error_per_request_mean": summary_ms(mean_itl_err) if mean_itl_err else None,
        "request_lag": summary_ms(req_lag) if req_lag else None,
        "arrival_lag_first_chunk": summary_ms(lag_first) if lag_first else None,
        "arrival_lag_all_chunks": summary_ms(lag_all) if lag_all else None,
    }
