"""The report's cost and efficiency table: per experiment and objective level, what a million
output (and input) tokens cost at the campaign's price (``host.price``), the output tokens per
joule its GPUs' energy gives, and how close the level ran to its GPUs' bounds
(``analysis.roofline``: decode against memory bandwidth, prefill against tensor throughput);
empty (no section) where a run has none of them."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean
from typing import Any

from reportgen.analysis import roofline, verdict
from reportgen.render.fmt import NONE, fmt_ci, fmt_num, fmt_ratio, fmt_rests_on
from reportgen.results.as_run import host_as_run
from reportgen.results.levels import Level
from reportgen.results.model import Experiment, Run
from reportgen.results.verdicts import Comparison


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
    per_hour, basis = hourly(run)
    roofs = roof_models(run)
    price = host_as_run(run.campaign.get("host")).price
    return Table(
        per_hour, basis, cost_rows(run, per_hour, roofs), roof_basis(run, roofs),
        price.currency if price is not None else "",
    )  # fmt: skip


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


def cost_rows(
    run: Run, per_hour: float | None, roofs: dict[str, Roof | str] | None = None
) -> list[dict[str, Any]]:
    """Per experiment that measured something and each level that decides: output tok/s, the
    cost of a million output tokens and of a million input tokens at ``per_hour`` (``hourly``),
    output tokens per joule, and decode's and prefill's share of their bounds (``roofs``:
    ``roof_models``, made here where not given); empty where the run has neither a price nor
    any energy nor a bound."""
    rows = []
    roofs = roof_models(run) if roofs is None else roofs
    for e in run.experiments:
        roof = roofs.get(e.id)
        vs = {c.point: c for c in verdict.energy_vs_parent(run, e)}
        for agg in sorted(e.by_level, key=lambda a: a.point.order):
            if not run.decides(agg.point):
                continue
            out = agg.stat("output_tok_s").mean
            total = agg.stat("total_tok_s").mean
            per_j = agg.stat("output_tok_per_j").mean
            inputs = None if total is None else total - (out or 0)
            decode = prefill = None
            if isinstance(roof, tuple):
                levels = [lv for lv in e.levels if lv.point == agg.point and not lv.aborted]
                b = level_bound(roof, levels)
                if b is not None:
                    decode = roofline.percent(out, b.decode_tok_s)
                    prefill = roofline.percent(inputs, b.prefill_tok_s)
            rows.append(
                {
                    "id": e.id,
                    "level": str(agg.point),
                    "label": agg.point.label,
                    "out_tok_s": fmt_num(out),
                    "out_cost": _per_million(per_hour, out),
                    "in_cost": _per_million(per_hour, inputs),
                    "per_j": fmt_num(per_j) if per_j is not None else NONE,
                    "per_j_vs": _versus(vs.get(agg.point)),
                    "decode_pct": _pct(decode),
                    "prefill_pct": _pct(prefill),
                    "priced": per_hour is not None,
                    "energy": per_j is not None,
                    "roofline": decode is not None,
                }
            )
    priced = bool(host_as_run(run.campaign.get("host")).price)
    if not any(r["priced"] or r["energy"] or r["roofline"] for r in rows) and not priced:
        return []  # (a price that could not be applied keeps the table, to say why)
    return rows


Roof = tuple[roofline.Model, roofline.Gpu, roofline.Parallel]


def roof_models(run: Run) -> dict[str, Roof | str]:
    """Per experiment, its model's size, its GPU's figures and its parallelism, or why its
    levels get no bound. The GPUs are the run's as reportgen saw them (a server elsewhere:
    none), the model's shape as its config.json said when the experiment ran."""
    names = sorted({str(d.name) for d in run.fingerprint.gpus.devices if d.name})
    return {e.id: _roof(e, names) for e in run.experiments}


def _roof(e: Experiment, names: list[str]) -> Roof | str:
    if e.base_url:
        return (
            "a server reportgen did not start: its model's config.json was not read (and its "
            "GPUs may not be this host's)"
        )
    if len(names) != 1:
        return "no GPU seen" if not names else f"GPUs of several kinds ({', '.join(names)})"
    gpu = roofline.gpu(names[0])
    if gpu is None:
        return f"{names[0]} is not among the GPUs whose figures reportgen knows"
    shape = (e.model_files or {}).get("shape")
    if not isinstance(shape, dict):
        why = (e.model_files or {}).get("error") or "its config.json was not read (an older run)"
        return f"the model's shape is unknown: {why}"
    model = roofline.model(shape, roofline.kv_dtype(e.args), e.args)
    if isinstance(model, str):
        return model
    par = roofline.parallel(e.args)
    if isinstance(par, str):
        return par
    return model, gpu, par


def level_bound(roof: Roof, levels: list[Level]) -> roofline.Bound | None:
    """The bounds at one level, from its runs: the requests in flight where the throughputs
    were counted (the batch), and each request's mean prompt and answer (its context halfway
    through its answer)."""
    ok = sum(lv.summary.ok for lv in levels)
    batch = [
        c
        for lv in levels
        if (c := lv.summary.window_concurrency or lv.summary.achieved_concurrency) is not None
    ]
    if not ok or not batch:
        return None
    prompt = sum(lv.summary.input_tokens for lv in levels) / ok
    answer = sum(lv.summary.output_tokens for lv in levels) / ok
    model, gpu, par = roof
    return roofline.bound(model, gpu, par, fmean(batch), prompt + answer / 2, prompt)


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


def roof_basis(run: Run, roofs: dict[str, Roof | str] | None = None) -> list[str]:
    """What the bounds were taken from, once per model and GPU, for the table's caption; and
    why experiments that measured got none, once per reason (``roofs``: ``roof_models``,
    made here where not given)."""
    roofs = roof_models(run) if roofs is None else roofs
    said: dict[str, list[str]] = {}
    for e in run.experiments:
        roof = roofs[e.id]
        if not e.by_level:
            continue
        if isinstance(roof, str):
            said.setdefault(f"none for \0: {roof}", []).append(e.id)
            continue
        m, g, par = roof
        sharded = f", {par.shards} GPUs a server" if par.shards > 1 else ""
        size = f"{m.params / 1e9:.2f} B parameters"
        if m.experts:
            size += f" ({m.active / 1e9:.2f} B active, {m.top_k} of {m.experts} experts)"
        tflops = f", {g.bf16_tflops:g} TFLOP/s BF16 dense" if g.bf16_tflops else ""
        text = (
            f"{size} of {m.weight_bytes:g} bytes, {m.kv_bytes / 1024:g} KiB of KV cache a token; "
            f"{g.name}: {g.bandwidth_gb_s:,.0f} GB/s{tflops}{sharded} ({g.source})"
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


def _per_million(per_hour: float | None, tok_s: float | None) -> str:
    """The cost of a million tokens at ``tok_s`` on a host costing ``per_hour``."""
    if per_hour is None or not tok_s or tok_s <= 0:
        return NONE
    return f"{per_hour / 3600 / tok_s * 1e6:.4g}"
