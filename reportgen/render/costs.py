"""The report's cost and efficiency table: per experiment and objective level, what a million
output (and input) tokens cost at the campaign's price (``host.price``), the output tokens per
joule its GPUs' energy gives, and how close the level ran to its GPUs' bounds
(``analysis.roofline``: decode against memory bandwidth, prefill against tensor throughput);
empty (no section) where a run has none of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reportgen.render.fmt import NONE, fmt_ci, fmt_num, fmt_ratio, fmt_rests_on
from reportgen.results.findings import Costs, RoofBasis
from reportgen.results.model import Run
from reportgen.results.verdicts import Comparison

__all__ = ["Table", "cost_rows", "replayed", "roof_basis", "table"]


@dataclass(frozen=True)
class Table:
    """A run's cost and efficiency table, made once for every place that shows it (the
    report's section, its first page, ``diff``)."""

    per_hour: float | None  # what the host cost an hour (``hourly``)
    basis: str  # where that price came from, or why there is none
    rows: list[dict[str, Any]]  # ``cost_rows``
    roof_basis: list[str]  # ``roof_basis``
    currency: str = ""  # the price's ("USD"), "" with none


def table(run: Run) -> Table:
    """The table from the run's findings (``Run.findings.costs``; none: an empty one)."""
    found = run.findings.costs if run.findings else Costs()
    return Table(
        found.per_hour, found.basis, cost_rows(found), roof_basis(run, found.roofs),
        found.currency or "",
    )  # fmt: skip


def cost_rows(found: Costs) -> list[dict[str, Any]]:
    """The run's level costs (``analysis.costs.level_costs``, in its findings) as the
    table's cells: output tok/s, the cost of a million output and input tokens, output tokens
    per joule (and against the parent's), and decode's and prefill's share of their bounds;
    empty where the run has neither a price nor any energy nor a bound."""
    per_hour = found.per_hour
    rows = [
        {
            "id": c.experiment,
            "level": str(c.point),
            "label": c.point.label,
            "out_tok_s": fmt_num(c.output_tok_s),
            "out_cost": _money(c.per_mtok_output),
            "in_cost": _money(c.per_mtok_input),
            "per_j": fmt_num(c.tok_per_j) if c.tok_per_j is not None else NONE,
            "per_j_vs": _versus(c.tok_per_j_vs_parent),
            "decode_pct": _pct(c.decode_share),
            "prefill_pct": _pct(c.prefill_share),
            "priced": per_hour is not None,
            "energy": c.tok_per_j is not None,
            "roofline": c.decode_share is not None,
        }
        for c in found.levels
    ]
    priced = found.currency is not None
    if not any(r["priced"] or r["energy"] or r["roofline"] for r in rows) and not priced:
        return []  # (a price that could not be applied keeps the table, to say why)
    return rows


def replayed(run: Run) -> str:
    """Where the GPUs' facts were a capture replayed rather than measured: the words that say
    the energy is simulated; empty otherwise."""
    gpus = run.fingerprint.gpus
    if not gpus.replayed:
        return ""
    return (
        f"The GPUs here are {gpus.replayed} (REPORTGEN_GPU_CAPTURE), not this host's: their "
        "power follows the capture, not this load, so the energy and tokens per joule are "
        "simulated."
    )


def roof_basis(run: Run, roofs: list[RoofBasis]) -> list[str]:
    """What the bounds were taken from, once per model and GPU, for the table's caption; and
    why experiments that measured got none, once per reason (``roofs``: the run's
    findings)."""
    measured = {e.id for e in run.experiments if e.by_level}
    said: dict[str, list[str]] = {}
    for r in roofs:
        if r.experiment not in measured:
            continue
        if r.reason is not None:
            said.setdefault(f"none for \0: {r.reason}", []).append(r.experiment)
            continue
        sharded = f", {r.shards} GPUs a server" if r.shards > 1 else ""
        size = f"{(r.params or 0) / 1e9:.2f} B parameters"
        if r.experts:
            size += f" ({(r.active or 0) / 1e9:.2f} B active, {r.top_k} of {r.experts} experts)"
        tflops = f", {r.bf16_tflops:g} TFLOP/s BF16 dense" if r.bf16_tflops else ""
        text = (
            f"{size} of {r.weight_bytes:g} bytes, {(r.kv_bytes or 0) / 1024:g} KiB of KV cache a "
            f"token; {r.gpu}: {r.bandwidth_gb_s:,.0f} GB/s{tflops}{sharded} ({r.gpu_source})"
        )
        said.setdefault(text, [])
    return [t.replace("\0", ", ".join(ids)) if ids else t for t, ids in said.items()]


def _versus(c: Comparison | None) -> str:
    """A tokens-per-joule comparison with the parent, in a cell: its ratio, interval and
    verdict; empty where none was made (the baseline, a level without energy)."""
    if c is None or c.ratio is None:
        return ""
    rests = fmt_rests_on(c)
    return f"{fmt_ratio(c.ratio)} ({fmt_ci(c.ci_low, c.ci_high)}), {c.verdict}" + (
        f" ({rests})" if rests else ""
    )


def _pct(v: float | None) -> str:
    return NONE if v is None else (f"{v:.1f}%" if v < 10 else f"{v:.0f}%")


def _money(v: float | None) -> str:
    return NONE if v is None else f"{v:.4g}"
