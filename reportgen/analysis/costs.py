"""What a run's levels cost and how efficient they were, as numbers: per experiment and
objective level, the cost of a million output (and input) tokens at the campaign's price
(``host.price``), the output tokens per joule its GPUs' energy gives (and their comparison with
the parent's), and how close the level ran to its GPUs' bounds (``roofline``: decode against
memory bandwidth, prefill against tensor throughput). The report's table (``render.costs``)
and ``run --json`` / ``bench --json`` say the same numbers."""

from __future__ import annotations

from statistics import fmean

from reportgen.analysis import roofline, verdict
from reportgen.results.as_run import host_as_run
from reportgen.results.findings import Costs, LevelCost, RoofBasis
from reportgen.results.levels import Level
from reportgen.results.model import Experiment, Run


def per_million(per_hour: float | None, tok_s: float | None) -> float | None:
    """The cost of a million tokens at ``tok_s`` on a host costing ``per_hour``."""
    if per_hour is None or not tok_s or tok_s <= 0:
        return None
    return per_hour / 3600 / tok_s * 1e6


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


def currency(run: Run) -> str | None:
    """The price's currency ("USD"), None where the campaign gives no price."""
    price = host_as_run(run.campaign.get("host")).price
    return price.currency if price is not None else None


def level_costs(
    run: Run, per_hour: float | None, roofs: dict[str, Roof | str] | None = None
) -> list[LevelCost]:
    """Per experiment that measured something and each level that decides (``LevelCost``),
    at ``per_hour`` (``hourly``); ``roofs``: ``roof_models``, made here where not given."""
    out = []
    roofs = roof_models(run) if roofs is None else roofs
    for e in run.experiments:
        roof = roofs.get(e.id)
        vs = {c.point: c for c in verdict.energy_vs_parent(run, e)}
        for agg in sorted(e.by_level, key=lambda a: a.point.order):
            if not run.decides(agg.point):
                continue
            got = agg.stat("output_tok_s").mean
            total = agg.stat("total_tok_s").mean
            inputs = None if total is None else total - (got or 0)
            decode = prefill = None
            if isinstance(roof, tuple):
                levels = [lv for lv in e.levels if lv.point == agg.point and not lv.aborted]
                b = level_bound(roof, levels)
                if b is not None:
                    decode = roofline.percent(got, b.decode_tok_s)
                    prefill = roofline.percent(inputs, b.prefill_tok_s)
            out.append(
                LevelCost(
                    experiment=e.id,
                    concurrency=agg.point.concurrency,
                    rate=agg.point.rate,
                    output_tok_s=got,
                    input_tok_s=inputs,
                    per_mtok_output=per_million(per_hour, got),
                    per_mtok_input=per_million(per_hour, inputs),
                    tok_per_j=agg.stat("output_tok_per_j").mean,
                    tok_per_j_vs_parent=vs.get(agg.point),
                    decode_share=decode,
                    prefill_share=prefill,
                )
            )
    return out


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


def roof_basis(e: Experiment, roof: Roof | str) -> RoofBasis:
    """What ``e``'s bounds rest on (``RoofBasis``), or why it got none."""
    if isinstance(roof, str):
        return RoofBasis(experiment=e.id, reason=roof)
    m, g, par = roof
    return RoofBasis(
        experiment=e.id,
        params=m.params,
        active=m.active,
        experts=m.experts,
        top_k=m.top_k,
        weight_bytes=m.weight_bytes,
        kv_bytes=m.kv_bytes,
        gpu=g.name,
        bandwidth_gb_s=g.bandwidth_gb_s,
        bf16_tflops=g.bf16_tflops,
        gpu_source=g.source,
        shards=par.shards,
    )


def costs(run: Run) -> Costs:
    """The run's costs and efficiency (``Costs``): its price, each experiment's objective
    levels (``level_costs``) and what each experiment's bounds rest on."""
    per_hour, basis = hourly(run)
    roofs = roof_models(run)
    return Costs(
        per_hour=per_hour,
        basis=basis,
        currency=currency(run),
        levels=level_costs(run, per_hour, roofs),
        roofs=[roof_basis(e, roofs[e.id]) for e in run.experiments],
    )
