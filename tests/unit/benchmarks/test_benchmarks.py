"""benchmarks/verdicts.py simulates campaigns as the runner runs them: the numbers in the
README are only as good as that likeness."""

from __future__ import annotations

import sys

import numpy as np

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import verdicts  # noqa: E402


def test_the_simulated_parent_grows_only_beside_adaptive_rounds() -> None:
    """At a fixed count the child is compared with the parent's own repetitions; in adaptive
    rounds the parent grows beside the child, one repetition each round (the runner's
    ``Control.grown``), never beside the first round's second start."""
    truth = verdicts.Truth(noise=0.05, starts=0.03)
    rng = np.random.default_rng(1)
    for ratio, levels, _, _ in verdicts.simulate("pooled", truth, 3, rng, (1.0, 1.25)):
        assert [(c.n_parent, c.n_child) for c in levels] == [(3, 3)] * 3, ratio
    grew = False
    for _ in range(5):
        for _, levels, _, _ in verdicts.simulate("adaptive", truth, 2, rng, (1.0,)):
            for c in levels:
                assert c.n_parent == c.n_child  # two each, then one more each a round
                grew |= c.n_child > 2
    assert grew  # some level was open after the first round, and the parent grew with it


def test_the_render_benchmarks_telemetry_has_every_column_a_run_saves() -> None:
    """benchmarks/render_speed.py writes GPU telemetry as a run saves it: it stopped with a
    ValueError once runs saved NVML's energy counter too."""
    import render_speed

    from reportgen import results

    rows = render_speed.telemetry_rows(
        np.random.default_rng(0), 2, 100.0, 101.0, 104.0, [(101.5, 102.5, 4)], 4
    )
    assert rows and all(tuple(r) == results.TELEMETRY_COLUMNS for r in rows)
    assert {r["gpu"] for r in rows} == {0, 1}
    energy = [r["energy_mj"] for r in rows if r["gpu"] == 0]
    assert energy == sorted(energy) and energy[-1] > energy[0]  # a counter, growing


def test_the_simulated_campaign_runs_in_the_runners_order_with_every_interval() -> None:
    """benchmarks/campaigns.py: a campaign of four changes under the defaults measures the
    baseline again after every two (and at the end), then runs the best again; every
    objective level and every TTFT p99 of its experiments gets an interval; one earlier
    campaign on the host gives the next its measured spread between starts."""
    import campaigns

    host = campaigns.Host(0.01, 0.01, 0.005, 0.0, 0.02, 60.0, 12.0)
    rng = np.random.default_rng(0)
    out = campaigns.campaign(campaigns.DESIGNS["new-2"], host, 4, rng)
    assert out.run is not None
    roles = [(e.id, e.role) for e in out.run.experiments if e.role != "experiment"]
    assert roles[:2] == [("baseline-again-1", "anchor"), ("baseline-end", "bracket")]
    assert out.intervals == 4 * 3 and out.tail_intervals >= 4 * 3
    assert out.gpu_s > 0 and out.run.start_prior is None
    again = campaigns.campaign(campaigns.DESIGNS["new-2-h1"], host, 4, rng)
    assert again.run is not None and again.run.start_prior is not None
    assert [lv.concurrency for lv in again.run.start_prior.levels] == [1, 16, 64]
