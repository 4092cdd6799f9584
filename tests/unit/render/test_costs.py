"""The cost of a million tokens: the host's price per hour, whole or per GPU-hour times the
GPUs (the campaign's expected count, else the GPUs the run saw), and what it cannot price."""

from __future__ import annotations

import lzma
import shutil
from pathlib import Path

from reportgen import results
from reportgen.analysis import costs as found
from reportgen.analysis.findings import attach
from reportgen.render import costs
from tests.conftest import ROOT, reportgen_main

H100 = ROOT / "docs" / "examples" / "vllm-h100"  # one H100 seen


def test_a_price_per_gpu_hour_counts_the_gpus_it_names_or_saw() -> None:
    run = results.load(H100)
    # (its price, given at render, is 2.99 an hour)
    assert found.hourly(run)[0] == 2.99 and costs.table(attach(run)).currency == "USD"
    run.campaign["host"] = {}
    # no price: no cost, but the energy its telemetry gave and the roofline its model's shape
    # gave (render --energy, --model-config) each have a column
    assert found.hourly(run) == (None, "")
    rows = costs.cost_rows(found.costs(run))
    assert rows and not any(r["priced"] for r in rows)
    assert all(r["energy"] and r["roofline"] for r in rows)
    # decode at C=1 on the H100: 160.6 tok/s of the 238 its 3.35 TB/s allow (README)
    first = rows[0]
    assert (first["id"], first["level"], first["decode_pct"]) == ("baseline", "1", "67%")
    # without energy or a shape (a run kept before them), and no price: no table
    for e in run.experiments:
        e.model_files = None
        for lv in e.all_levels():
            lv.summary.output_tok_per_j = None
        for a in e.by_level:
            a.output_tok_per_j.mean = None
    assert costs.cost_rows(found.costs(run)) == []
    run.campaign["host"] = {"price": {"per_gpu_hour": 3.5, "source": "a list price"}}
    per_hour, said = found.hourly(run)
    assert per_hour == 3.5 and said.endswith("x 1 GPUs (the GPUs it saw)")
    run.campaign["host"]["expect"] = {"gpu_count": 8}
    assert found.hourly(run)[0] == 28.0
    rows = costs.cost_rows(found.costs(run))
    assert rows and all(r["priced"] for r in rows)
    (base,) = [e for e in run.experiments if e.id == "baseline"]
    agg = next(a for a in base.by_level if run.decides(a.point))
    first = next(r for r in rows if r["id"] == "baseline")
    out = agg.stat("output_tok_s").mean
    assert out and first["out_cost"] == f"{28 / 3600 / out * 1e6:.4g}"


def test_a_price_per_gpu_hour_with_no_gpu_counted_is_not_a_cost() -> None:
    run = results.load(H100)
    run.campaign["host"] = {"price": {"per_gpu_hour": 3.5, "source": "a list price"}}
    run.environment["gpus"] = {"available": False, "reason": "no NVML"}
    per_hour, said = found.hourly(run)
    assert per_hour is None and "no GPU was counted: set host.expect.gpu_count" in said
    rows = costs.cost_rows(found.costs(run))  # kept, to say why there is no cost
    assert rows and not any(r["priced"] for r in rows)


def test_page_one_says_what_the_configuration_to_run_costs_a_token() -> None:
    from reportgen.render import brief

    run = results.load(H100)  # nothing adopted: the baseline is what to run
    run.campaign["host"] = {}  # (its price, given at render, put back below)
    said = brief.cost_line(attach(run))
    assert said == (
        "What baseline costs: 0.38, 4.48 and 11.8 output tokens per joule at C=1, C=16 and C=64."
    )
    run.campaign["host"] = {"price": {"per_hour": 3.5, "source": "a list price"}}
    priced = brief.cost_line(attach(run))
    out = next(a for a in run.baseline.by_level if a.point.label == "C=1")  # type: ignore[union-attr]
    per_m = f"{3.5 / 3600 / out.stat('output_tok_s').mean * 1e6:.4g}"
    assert f"; {per_m}, " in priced
    assert "USD per million output tokens at C=1, C=16 and C=64" in priced
    assert priced.endswith("(at 3.5 USD an hour (a list price)).")


def test_a_run_recorded_without_a_price_is_given_one_at_render(tmp_path: Path) -> None:
    """`render --price 2.99 --price-source TEXT`: the cost of a million tokens per level for
    a run whose campaign named no price, the source quoted, and the report still verifies."""
    run_dir = shutil.copytree(H100, tmp_path / "run")
    run = results.load(run_dir)
    run.campaign["host"] = {}  # as recorded: no price
    results.save(run_dir, run, [])
    assert not any(r["priced"] for r in costs.table(attach(results.load(run_dir))).rows)
    res = reportgen_main("render", run_dir, "--no-pdf", "--price", "2.99")
    assert res.returncode == 2 and "needs both a price an hour and --price-source" in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    res = reportgen_main(
        "render", run_dir, "--no-pdf", "--price", "2.99", "--price-source", "a list price, 2026"
    )
    assert res.returncode == 0, res.stderr
    assert "price: 2.99 USD an hour (a list price, 2026)" in res.stdout
    run = attach(results.load(run_dir))  # (the findings, as render gives them)
    table = costs.table(run)
    base = next(r for r in table.rows if r["id"] == "baseline" and r["label"] == "C=64")
    # 7,846 output tok/s at C=64: 28.2 M an hour, so a million cost 2.99 / 28.2 = 0.106
    assert base["priced"] and abs(float(base["out_cost"]) - 0.106) < 0.001, base
    page = lzma.decompress((run_dir / "report.html.xz").read_bytes()).decode()
    assert "per M output tok" in page and "2.99 USD an hour (a list price, 2026)" in page
    assert reportgen_main("verify", run_dir).returncode == 0
