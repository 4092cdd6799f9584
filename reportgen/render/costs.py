"""The report's cost and efficiency table: per experiment and objective level, what a million
output (and input) tokens cost at the campaign's price (``host.price``), and the output tokens
per joule its GPUs' energy gives; empty (no section) where a run has neither."""

from __future__ import annotations

from typing import Any

from reportgen.render.fmt import NONE, fmt_num
from reportgen.results.as_run import host_as_run
from reportgen.results.model import Run


def hourly(run: Run) -> tuple[float | None, str]:
    """What the serving host cost an hour (``host.price``), and the words for where that came
    from (None where a price per GPU-hour met no count of GPUs; ("", None) with no price)."""
    host = host_as_run(run.campaign.get("host"))
    price = host.price
    if price is None:
        return None, ""
    if price.per_hour is not None:
        return price.per_hour, f"{price.per_hour:g} {price.currency} an hour ({price.source})"
    assert price.per_gpu_hour is not None
    # the GPUs reportgen saw are the server's only where it started the server itself
    elsewhere = any(e.base_url for e in run.experiments)
    seen = 0 if elsewhere else len(run.fingerprint.gpus.devices)
    expected = host.expect.gpu_count
    gpus, whose = (expected, "host.expect.gpu_count") if expected else (seen, "the GPUs it saw")
    rate = f"{price.per_gpu_hour:g} {price.currency} per GPU-hour ({price.source})"
    if not gpus:
        why = "a server reportgen did not start" if elsewhere else "no GPU was counted"
        return None, f"{rate}, but {why}: set host.expect.gpu_count"
    return price.per_gpu_hour * gpus, f"{rate} x {gpus} GPUs ({whose})"


def cost_rows(run: Run, per_hour: float | None) -> list[dict[str, Any]]:
    """Per experiment that measured something and each level that decides: output tok/s, the
    cost of a million output tokens and of a million input tokens at ``per_hour`` (``hourly``),
    and output tokens per joule; empty where the run has neither a price nor any energy."""
    rows = []
    for e in run.experiments:
        for agg in sorted(e.by_level, key=lambda a: a.point.order):
            if not run.decides(agg.point):
                continue
            out = agg.stat("output_tok_s").mean
            total = agg.stat("total_tok_s").mean
            per_j = agg.stat("output_tok_per_j").mean
            inputs = None if total is None else total - (out or 0)
            rows.append(
                {
                    "id": e.id,
                    "level": str(agg.point),
                    "out_tok_s": fmt_num(out),
                    "out_cost": _per_million(per_hour, out),
                    "in_cost": _per_million(per_hour, inputs),
                    "per_j": fmt_num(per_j) if per_j is not None else NONE,
                    "priced": per_hour is not None,
                    "energy": per_j is not None,
                }
            )
    priced = bool(host_as_run(run.campaign.get("host")).price)
    if not any(r["priced"] or r["energy"] for r in rows) and not priced:
        return []  # (a price that could not be applied keeps the table, to say why)
    return rows


def _per_million(per_hour: float | None, tok_s: float | None) -> str:
    """The cost of a million tokens at ``tok_s`` on a host costing ``per_hour``."""
    if per_hour is None or not tok_s or tok_s <= 0:
        return NONE
    return f"{per_hour / 3600 / tok_s * 1e6:.4g}"
