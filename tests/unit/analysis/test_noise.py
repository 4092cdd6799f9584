"""The run's noise model and the verdicts it gives at two or three repetitions.

Hand-made runs whose answer is known: the H200's seven-fold CUDA-graph speed-up, identical
configurations started separately, a 25% loss; and Pocock's boundary against its published
value.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from reportgen.analysis import adopt, drift, noise, online, sequential, tails, verdict
from reportgen.analysis.findings import attach
from reportgen.render import sentences
from reportgen.results.levels import Level, Summary
from reportgen.results.model import CampaignFile, EngineRecord, Experiment, Point, Run, Session
from reportgen.results.verdicts import Decision
from tests.conftest import ROOT

LEVELS = (1, 16, 64)


def _exp(exp_id: str, runs: dict[int, list[list[float]]], *, command: str = "") -> Experiment:
    """An experiment whose levels ran on the given servers: ``{C: [[server 1's values],
    [server 2's]]}``."""
    e = Experiment(
        id=exp_id,
        status="ok",
        parent=None,
        command=["serve", command or exp_id],
        workload={"repetitions": 3},
    )
    servers = max(len(v) for v in runs.values())
    e.sessions = [Session(index=i, config=exp_id, log_file="") for i in range(servers)]
    for c, per_server in runs.items():
        rep = 0
        for s, values in enumerate(per_server):
            for value in values:
                e.levels.append(
                    Level(
                        concurrency=c,
                        repetition=rep,
                        session=s,
                        summary=Summary(requests=10, ok=10, output_tok_s=value),
                    )
                )
                rep += 1
    return e


def _run(*experiments: Experiment) -> Run:
    base = experiments[0]
    base.decision = Decision(verdict="baseline", explanation="")
    for e in experiments[1:]:
        e.parent = base.id
    return Run(
        reportgen_version="test",
        run_id="test",
        started_at="",
        campaign={"campaign": {"margin": 0.03, "objective": {"metric": "output_tok_s"}}},
        campaign_file=CampaignFile(path="c.toml", sha256=""),
        engine=EngineRecord(name="sim"),
        experiments=list(experiments),
    )


def _two_starts(
    rng: np.random.Generator, scale: float, noise: float
) -> dict[int, list[list[float]]]:
    """Values at every level on two server starts of two repetitions each, ``noise`` apart."""
    return {
        c: [list(100 * c * scale * np.exp(rng.normal(0, noise, 2))) for _ in range(2)]
        for c in LEVELS
    }


def _decide(run: Run, method: str = verdict.CURRENT) -> list[Decision]:
    out = []
    for e in run.experiments[1:]:
        e.decision = verdict.decide_experiment(run, e, {}, method)
        out.append(e.decision)
    return out


def test_seven_fold_with_every_run_on_its_side_is_faster_with_an_interval_excluding_1() -> None:
    # vLLM on the H200 at C=1: its defaults (CUDA graphs) 619 and 634 output tok/s, eager mode
    # 60 and 88. Welch on two runs a side said 8.63x (95% CI 0.75-99.46). Each side now runs
    # its two repetitions on two server starts (campaign.starts = 2, the default).
    graphs = _exp("graphs", {c: [[619 * c**0.5], [634 * c**0.5]] for c in LEVELS})
    eager = _exp("eager", {c: [[60 * c**0.5], [88 * c**0.5]] for c in LEVELS})
    (d,) = _decide(_run(graphs, eager))
    assert d.method == verdict.CURRENT == "anchored" and d.verdict == "rejected"
    for c in d.vs_parent:
        assert c.verdict == "worse" and c.ci_high is not None and c.ci_high < 0.6
        assert 1 / 11 < c.ratio < 1 / 7  # geometric means: sqrt(60 x 88) / sqrt(619 x 634)
        assert c.ci_low is not None and c.ci_low > 1 / 50  # not 1/99


def test_a_side_on_one_server_start_is_decided_on_a_stated_start_spread_not_one_dof() -> None:
    # The same numbers with eager's two repetitions on one server: its one start cannot be told
    # from the change, and the one pair of graphs' starts measures the spread between starts
    # with one degree of freedom. The pooled method (before 2026-12) decided it on the within
    # part's degrees of freedom; the levels method says what would decide it.
    # The "anchored" method (now) takes the spread between starts as stated
    # (campaign.start_spread) where the run has measured it on so few starts, and calls the
    # seven-fold loss: never t with one degree of freedom.
    graphs = _exp("graphs", {c: [[619 * c**0.5], [634 * c**0.5]] for c in LEVELS})
    eager = _exp("eager", {c: [[60 * c**0.5, 88 * c**0.5]] for c in LEVELS})
    run = _run(graphs, eager)
    (now,) = _decide(run)
    assert now.verdict == "rejected" and all(c.ci_high and c.ci_high < 0.5 for c in now.vs_parent)
    (d,) = _decide(run, "levels")
    assert d.verdict == "inconclusive"
    assert all(c.limit == "one start" and c.reps_needed is None for c in d.vs_parent)
    assert "ran on one server start" in d.explanation
    assert "campaign.starts = 2" in d.explanation
    old = verdict.decide_experiment(run, eager, {}, "pooled")
    assert old.method == "pooled" and old.verdict == "rejected"


def test_a_25_percent_loss_at_three_repetitions_is_slower() -> None:
    rng = np.random.default_rng(7)

    def runs(scale: float) -> dict[int, list[list[float]]]:
        return {
            c: [list(100 * c * scale * np.exp(rng.normal(0, 0.02, k))) for k in (2, 1)]
            for c in LEVELS
        }

    base = _exp("base", runs(1.0))
    worse = _exp("worse", runs(0.75))
    (d,) = _decide(_run(base, worse))
    assert d.verdict == "rejected"
    assert all(c.verdict == "worse" for c in d.vs_parent)


def test_identical_configurations_started_separately_are_not_called_different() -> None:
    # Each server start runs 4% slower or faster than another (clocks, memory placement),
    # while its repetitions agree within 1%: judged by its repetitions alone, two starts of one
    # configuration would look different. 300 such campaigns, seeded.
    rng = np.random.default_rng(0)
    alarms = total = 0
    for _ in range(300):

        def start(k: int) -> list[list[float]]:
            speed = math.exp(rng.normal(0, 0.04))
            return [list(100 * speed * np.exp(rng.normal(0, 0.01, k)))]

        base = _exp("base", {c: start(2) + start(1) for c in LEVELS})
        same = _exp("same", {c: start(3) for c in LEVELS})
        run = _run(base, same)
        # the "anchored" method with the host's spread stated (campaign.start_spread; with
        # the default 1.5% and one degree of freedom of its own, 9% of levels here: a stated
        # spread far below the host's misleads), and the "levels" method on the starts alone
        run.campaign["campaign"]["start_spread"] = 0.04
        for method in ("anchored", "levels"):
            (d,) = _decide(run, method)
            alarms += sum(c.verdict in ("better", "worse") for c in d.vs_parent)
            total += len(d.vs_parent)
    assert alarms / total <= 0.05


def test_the_spread_between_starts_is_measured_and_named_when_it_decides_nothing() -> None:
    # (the "levels" method: the spread measured on two starts alone, as decided before)
    base = _exp("base", {c: [[100, 101], [112, 113]] for c in LEVELS})  # starts 11% apart
    child = _exp("child", {c: [[106, 107]] for c in LEVELS})
    (d,) = _decide(_run(base, child), "levels")
    assert d.noise is not None and d.noise.between_sd is not None and d.noise.between_sd > 0.05
    assert d.verdict == "inconclusive"
    assert all(c.limit == "starts" and c.reps_needed is None for c in d.vs_parent)
    assert "fresh_server" in d.explanation and "interleave" in d.explanation


def test_repetitions_to_decide_are_more_than_were_run() -> None:
    base = _exp("base", {c: [[100, 108], [104]] for c in LEVELS})
    child = _exp("child", {c: [[107, 115], [111]] for c in LEVELS})  # about 6.5% faster
    (d,) = _decide(_run(base, child))
    assert d.verdict == "inconclusive" and "repetitions a side would decide" in d.explanation
    for c in d.vs_parent:
        assert c.verdict == "inconclusive" and c.reps_needed is not None
        assert c.reps_needed > 3  # three were run


def test_an_identical_copy_counts_as_a_second_start_of_its_configuration() -> None:
    base = _exp("base", {c: [[100, 101, 99]] for c in LEVELS}, command="same")
    again = _exp("again", {c: [[104, 105, 103]] for c in LEVELS}, command="same")
    runs = noise.level_runs([base, again], "output_tok_s")
    model = noise.estimate(runs)
    assert model.between_cells == len(LEVELS) and model.between_dof == 1


def test_old_decisions_are_recomputed_the_way_they_were_taken() -> None:
    base = _exp("base", {c: [[100, 101, 99]] for c in LEVELS})
    child = _exp("child", {c: [[130, 131, 129]] for c in LEVELS})
    run = _run(base, child)
    old = verdict.decide_experiment(run, child, {}, method=None)
    assert old.method is None and all(c.method is None for c in old.vs_parent)
    assert all(c.dof is None for c in old.vs_parent)  # Welch's own, not recorded then


def test_pocock_boundary_matches_its_published_value_and_a_fixed_count_is_95() -> None:
    # Pocock (1977): two equally spaced looks at overall 5% test each at nominal 2.94%.
    assert sequential.pocock_confidence((1, 2)) == pytest.approx(1 - 0.0294, abs=0.0015)
    # five looks: nominal 1.58%
    assert sequential.pocock_confidence((1, 2, 3, 4, 5)) == pytest.approx(1 - 0.0158, abs=0.0015)
    assert sequential.confidence_for(3) == 0.95
    assert sequential.confidence_for({"min": 2, "max": 8}) > 0.98


def test_a_campaign_wide_false_alarm_rate_decides_each_experiment_at_its_share() -> None:
    """`campaign.alpha_scope = "campaign"`: each of the campaign's k compared experiments is
    decided at alpha / k (Bonferroni), recorded in its decision, said in the methods; a change
    the per-experiment rate adopts can then stay open."""
    rng = np.random.default_rng(3)

    def runs(scale: float) -> dict[int, list[list[float]]]:
        return _two_starts(rng, scale, 0.01)

    base, child = _exp("base", runs(1.0)), _exp("child", runs(1.06))
    run = _run(base, child)
    (each,) = _decide(run)
    assert each.alpha == 0.05
    assert all(c.confidence == pytest.approx(1 - 0.05 / 3) for c in each.vs_parent)
    info = run.campaign["campaign"]
    run.campaign = {
        "campaign": {**info, "alpha": 0.05, "alpha_scope": "campaign"},
        "experiment": [{"id": f"e{i}"} for i in range(9)],  # a baseline and eight changes
    }
    (whole,) = _decide(run)
    assert whole.alpha == pytest.approx(0.05 / 8)
    assert all(c.confidence == pytest.approx(1 - 0.05 / 8 / 3) for c in whole.vs_parent)
    widths = [(c.ci_high or 0) / (c.ci_low or 1) for c in each.vs_parent]
    assert all(
        (c.ci_high or 0) / (c.ci_low or 1) > w for c, w in zip(whole.vs_parent, widths, strict=True)
    )
    # `verify` takes it again at the rate it recorded, whatever the campaign says now
    run.campaign = {"campaign": info}
    again = verdict.decide_experiment(run, child, {}, alpha=whole.alpha)
    assert again.vs_parent == whole.vs_parent


def test_the_campaigns_rate_passes_on_from_a_change_that_found_something() -> None:
    """The fallback procedure over k = 4 compared experiments at 5%: 1.25% each, and an
    experiment after one adopted or rejected is decided at its own share plus that one's;
    decided in a run, the rates follow the verdicts as they come, and the report says the
    rule and what it cost in power."""
    assert online.fallback([], 0.05, 4) == [0.0125]
    rates = online.fallback(["adopted", "adopted", "inconclusive", "rejected"], 0.05, 4)
    assert rates == pytest.approx([0.0125, 0.025, 0.0375, 0.0125, 0.025])

    rng = np.random.default_rng(5)

    def runs(scale: float) -> dict[int, list[list[float]]]:
        return _two_starts(rng, scale, 0.01)

    base = _exp("base", runs(1.0))
    fast, same = _exp("fast", runs(1.3)), _exp("same", runs(1.0))
    run = _run(base, fast, same)
    info = run.campaign["campaign"]
    run.campaign = {
        "campaign": {**info, "alpha": 0.05, "alpha_scope": "campaign"},
        "experiment": [{"id": f"e{i}"} for i in range(5)],  # a baseline and four changes
    }
    first, second = _decide(run)
    assert first.verdict == "adopted" and first.alpha == pytest.approx(0.0125)
    assert second.alpha == pytest.approx(0.025)  # its share and the adopted one's
    cost = online.power_cost(run)
    assert cost is not None and cost.comparisons == 6 and 1 < cost.mde_each < cost.mde
    said = sentences._error_rate(attach(run))  # as the report states the run's findings
    assert "fallback procedure" in said and f"x{cost.mde:.3f}" in said


def test_equivalence_is_shown_by_two_one_sided_tests_and_says_the_largest_change_left() -> None:
    """A 1% change measured with 1% noise, two starts a side, margin 3%: its 98.3% interval
    reaches past the margin, so the pooled method (which wanted the whole interval inside)
    left it inconclusive; the two one-sided tests at 5% each (the 90% interval) show it
    equivalent at every level, and each comparison says how large a change is left possible."""
    rng = np.random.default_rng(1)

    def runs(scale: float) -> dict[int, list[list[float]]]:
        return _two_starts(rng, scale, 0.01)

    base, child = _exp("base", runs(1.0)), _exp("child", runs(1.01))
    run = _run(base, child)
    (d,) = _decide(run, "levels")  # (the starts alone: no stated spread between them)
    assert d.verdict == "equivalent", d.explanation
    for c in d.vs_parent:
        assert c.bound is not None and abs(c.ratio - 1) < c.bound <= 0.03
        assert c.ci_low is not None and c.ci_high is not None
        # the interval shown is the 98.3% one: wider than what decided equivalence
        assert max(1 / c.ci_low, c.ci_high) - 1 > c.bound
        assert f"no change beyond {c.bound:.1%}" in d.explanation
    old = verdict.decide_experiment(run, child, {}, "pooled")
    assert old.verdict == "inconclusive" and all(c.bound is None for c in old.vs_parent)
    # "anchored": each bound is said with the two one-sided tests' interval it rests on
    now = verdict.decide_experiment(run, child, {})
    for c in now.vs_parent:
        assert c.eq_low is not None and c.eq_high is not None and c.eq_confidence == 0.9
        assert c.eq_low < c.ratio < c.eq_high and c.bound is not None
        assert c.bound == pytest.approx(max(c.eq_high - 1, 1 / c.eq_low - 1), rel=0.05)
        said = f"interval {c.eq_low:.3f}-{c.eq_high:.3f}"
        assert f"no change beyond {c.bound:.1%}, by the two one-sided tests' 90% {said}" in (
            now.explanation
        )


def _timed(e: Experiment, start: int) -> Experiment:
    e.started_at = f"2026-12-03T10:{start:02d}:00Z"
    e.finished_at = f"2026-12-03T10:{start + 10:02d}:00Z"
    return e


@pytest.mark.parametrize(("end_speed", "withdrawn"), [(1.09, True), (1.0, False)])
def test_an_adoption_the_campaigns_drift_could_explain_is_withdrawn(
    end_speed: float, withdrawn: bool
) -> None:
    """A change measured 4% faster than its baseline, which ran ten minutes before it; the
    baseline's configuration measured again at the end (the bracket) reads 9% faster than at
    the start: half that drift fell between the two, enough to explain the gain, so the
    adoption is withdrawn, said why, and the best is the baseline again; without drift it
    stands, with what was checked recorded. `verify`'s path (decide, then check) agrees."""
    rng = np.random.default_rng(5)

    def runs(scale: float) -> dict[int, list[list[float]]]:
        return _two_starts(rng, scale, 0.005)

    base = _timed(_exp("base", runs(1.0)), 0)
    child = _timed(_exp("child", runs(1.045)), 10)
    end = _timed(_exp("base-end", runs(end_speed), command="base"), 20)
    end.role, end.parent = "bracket", "base"
    run = _run(base, child)
    run.campaign["campaign"]["start_spread"] = 0.005  # the host's, as drawn here
    run.experiments.append(end)
    child.decision = verdict.decide_experiment(run, child, {})
    run.best = drift.best_after(run, child)
    assert child.decision.verdict == "adopted" and run.best == "child"
    end.decision = verdict.decide_experiment(run, end, {})
    said = drift.drift_check(run)
    d = child.decision
    assert d.drift is not None and d.drift.share == pytest.approx(0.5)
    assert d.drift.withdrawn is withdrawn
    if withdrawn:
        assert said == ["child"] and d.verdict == "inconclusive" and run.best == "base"
        assert "Adopted when decided, then withdrawn: base-end measured" in d.explanation
        assert all(x.ci_low < 1 for x in d.drift.levels)
    else:
        assert said == [] and d.verdict == "adopted" and run.best == "child"
    assert drift.drift_check(run) == []  # taken once: nothing more withdrawn


@pytest.mark.parametrize(("end_speed", "withdrawn"), [(0.91, True), (1.0, False)])
def test_a_rejection_the_campaigns_drift_could_explain_is_withdrawn(
    end_speed: float, withdrawn: bool
) -> None:
    """The mirror image: a host that slowed down. A change measured 4% slower than its
    baseline ten minutes before it, and the bracket 9% slower than the start: half that drift
    fell between the two, enough to explain the loss, so the rejection is withdrawn and said
    why; without drift it stands (benchmarks/verdicts.py --drift: a host slowing by 0.5% an
    experiment had identical configurations rejected in 7.6% of experiments, 0.6% after)."""
    rng = np.random.default_rng(5)

    def runs(scale: float) -> dict[int, list[list[float]]]:
        return _two_starts(rng, scale, 0.005)

    base = _timed(_exp("base", runs(1.0)), 0)
    child = _timed(_exp("child", runs(1 / 1.045)), 10)
    end = _timed(_exp("base-end", runs(end_speed), command="base"), 20)
    end.role, end.parent = "bracket", "base"
    run = _run(base, child)
    run.campaign["campaign"]["start_spread"] = 0.005  # the host's, as drawn here
    run.experiments.append(end)
    child.decision = verdict.decide_experiment(run, child, {})
    assert child.decision.verdict == "rejected", child.decision.explanation
    end.decision = verdict.decide_experiment(run, end, {})
    said = drift.drift_check(run)
    d = child.decision
    assert d.drift is not None and d.drift.withdrawn is withdrawn
    if withdrawn:
        assert said == ["child"] and d.verdict == "inconclusive" and run.best == "base"
        assert "Rejected when decided, then withdrawn: base-end measured" in d.explanation
        assert "the loss no longer shows" in d.explanation
        assert all(x.ci_high > 1 for x in d.drift.levels)
    else:
        assert said == [] and d.verdict == "rejected"


def test_the_best_chosen_among_several_says_its_gain_shrunk_for_that_choice() -> None:
    """Four changes, one of them 8% faster and three doing nothing: the best's gain as
    measured is the highest of four noisy estimates; the report's summary also gives it
    shrunk towards no change by the campaign's own spread of effects (empirical Bayes), and
    says that campaign.confirm would measure it again. With a confirmation run it says
    nothing of the kind (that run is the unbiased answer)."""
    from reportgen.analysis import selection
    from reportgen.render import view

    rng = np.random.default_rng(2)

    def runs(scale: float) -> dict[int, list[list[float]]]:
        return _two_starts(rng, scale, 0.025)

    base = _exp("base", runs(1.0))
    kids = [_exp(f"x{i}", runs(r)) for i, r in enumerate((1.0, 1.01, 0.99, 1.08))]
    run = _run(base, *kids)
    run.best = "base"
    for e in kids:
        e.decision = verdict.decide_experiment(run, e, {})
        run.best = drift.best_after(run, e)
    assert run.best == "x3"
    found = selection.best_shrunk(run)
    assert found is not None
    best, shrunk = found
    assert shrunk.experiments == 4 and 0 < shrunk.score < best.score
    summary = view.build(attach(run)).summary  # the report states what analysis found
    assert run.findings is not None and run.findings.best_gain is not None
    assert run.findings.best_gain.shrunk == shrunk.score
    said = f"shrunk for that choice, x{math.exp(shrunk.score):.2f} rather than"
    assert "Chosen as the best of 4 compared experiments" in summary and said in summary
    assert "campaign.confirm = true measures it again" in summary
    again = _exp("x3-again", runs(1.08), command="x3")
    again.role, again.parent = "confirm", "x3"
    run.experiments.append(again)
    again.decision = verdict.decide_experiment(run, again, {})
    summary = view.build(attach(run)).summary
    assert "Chosen as the best" not in summary and "run again, the best configuration" in summary


def test_the_shrunk_gain_allows_for_the_baseline_every_score_shares() -> None:
    """Five changes each scored against the same baseline measurement, half of each score's
    variance the baseline's: where the others all read a few percent up, part of the best's
    gain is a baseline that read slow, and the best is shrunk further than if the scores'
    errors were independent; where the others read around no change, about as far; against
    different baseline measurements (anchors), nothing is shared."""
    from reportgen.analysis import selection

    def scores(others: list[float], against: list[str] | None = None) -> list[selection.Score]:
        alike = against or ["baseline"] * 5
        d = [*others, 0.08]
        return [selection.Score(f"x{i}", x, 0.02, 0.5, (alike[i],)) for i, x in enumerate(d)]

    def shrunk(found: list[selection.Score], independent: bool = False) -> float:
        if independent:
            found = [selection.Score(s.id, s.score, s.se) for s in found]
        got = selection.shrink(found[-1], found)
        assert got is not None
        return got.score

    up = scores([0.03, 0.04, 0.035, 0.045])
    assert 0 < shrunk(up) < shrunk(up, independent=True) - 0.005
    around = scores([0.01, -0.01, 0.0, 0.005])
    assert shrunk(around) == pytest.approx(shrunk(around, independent=True), abs=0.006)
    apart = scores([0.03, 0.04, 0.035, 0.045], [f"baseline-again-{i}" for i in range(5)])
    assert shrunk(apart) == pytest.approx(shrunk(apart, independent=True), rel=1e-9)


def test_p99_is_compared_run_by_run_with_the_start_aware_model_or_not_at_all() -> None:
    """Each run's TTFT p99 is one observation of the same model as its median (its spread
    between server starts included), not a bootstrap of the pooled requests that ignores
    the starts; and where a side has fewer than 20 requests above p99 there is no interval
    (a p99 of 40 requests is its largest value or so)."""
    from reportgen.results.levels import Dist

    rng = np.random.default_rng(4)

    def exp(exp_id: str, p99: float, requests: int) -> Experiment:
        e = _exp(exp_id, {c: [[100.0], [100.0]] for c in LEVELS})
        for lv in e.levels:
            v = p99 * math.exp(rng.normal(0, 0.02))
            lv.summary = Summary(
                requests=requests, ok=requests, output_tok_s=100.0, ttft_ms=Dist(p50=v / 3, p99=v)
            )
        return e

    for requests, decided in ((1000, True), (20, False)):
        base, slower = exp("base", 100, requests), exp("slower", 140, requests)
        (d,) = _decide(_run(base, slower))
        tails = [c for c in (d.metrics or {})["vs_parent"] if c.metric == "ttft_ms_p99"]
        assert [c.concurrency for c in tails] == list(LEVELS)
        for c in tails:
            assert c.ratio == pytest.approx(1.4, rel=0.06)
            if decided:  # 2 x 1,000 requests a side: 20 above p99
                assert c.method == "anchored" and c.dof is not None and c.verdict == "worse"
                assert c.ci_low is not None and c.ci_low > 1.05
            else:
                assert c.ci_low is None and c.verdict == "inconclusive"
                assert c.limit == "too few above"
                # two runs a side: their order tells little (1 in 3 by chance); said what would:
                # 14 runs above both parent runs (2 / C(16, 2) = 1.7%, the 98.3% CI's share)
                assert c.requests_needed == 2000 and c.runs_needed == 14
                assert "about 2,000 requests a side would give one" in adopt.said(c)


def _tail_exp(exp_id: str, p99s: dict[int, list[float]], requests: int = 40) -> Experiment:
    """An experiment with one run per server start at each level, of these TTFT p99s (ms)."""
    from reportgen.results.levels import Dist

    e = _exp(exp_id, {c: [[100.0]] * len(v) for c, v in p99s.items()})
    for lv in e.levels:
        v = p99s[lv.concurrency][lv.session]
        lv.summary = Summary(
            requests=requests, ok=requests, output_tok_s=100.0, ttft_ms=Dist(p50=v / 10, p99=v)
        )
    return e


def test_a_tail_too_thin_for_an_interval_is_decided_where_every_run_lies_beyond() -> None:
    """A 13-fold TTFT p99 regression at C=1 with 40 requests a run (too few above p99 a side
    for an interval) is called worse once five runs a side all lie above the parent's (an
    order chance gives 2 / C(10, 5) = 0.8% of the time, within the 98.3% intervals' 1.7%);
    four a side are not enough (2.9%), and say that five would; a level whose runs interleave
    stays inconclusive."""
    base = _tail_exp("base", {1: [50, 56, 61, 53, 58], 16: [80, 70, 90, 85, 77], 64: [90] * 5})
    slow = _tail_exp("slow", {1: [700, 650, 810, 720, 760], 16: [82, 95, 75, 88, 79], 64: [90] * 5})
    (d,) = _decide(_run(base, slow))
    got = {c.concurrency: c for c in (d.metrics or {})["vs_parent"] if c.metric == "ttft_ms_p99"}
    assert got[1].verdict == "worse" and got[1].limit == tails.ORDERED
    assert got[1].order_p == pytest.approx(2 / 252) and got[1].ratio == pytest.approx(13, rel=0.05)
    assert "every run's p99 lies above every run's of the parent" in adopt.said(got[1])
    assert got[16].verdict == "inconclusive" and got[16].limit == tails.TOO_FEW

    same = {16: [80, 70, 90, 85], 64: [80, 70, 90, 85]}  # three levels share the 5%
    four = _tail_exp("four", {1: [50, 56, 61, 53], **same})
    slow4 = _tail_exp("slow4", {1: [700, 650, 810, 720], **same})
    (d4,) = _decide(_run(four, slow4))
    c4 = next(c for c in (d4.metrics or {})["vs_parent"] if c.metric == "ttft_ms_p99")
    assert c4.verdict == "inconclusive" and c4.runs_needed == 5 and c4.requests_needed == 2000
    assert "or 5 runs of it all beyond the parent's" in adopt.said(c4)


def test_the_tails_order_test_holds_its_false_alarm_rate() -> None:
    """Identical configurations, five runs a side of a heavy-tailed p99 (log-normal, sd 0.6):
    called better or worse in at most alpha of levels (2 / 252 expected; 600 levels)."""
    rng = np.random.default_rng(7)
    called = 0
    for _ in range(200):
        draw = {c: list(100 * np.exp(rng.normal(0, 0.6, 5))) for c in LEVELS}
        other = {c: list(100 * np.exp(rng.normal(0, 0.6, 5))) for c in LEVELS}
        (d,) = _decide(_run(_tail_exp("a", draw), _tail_exp("b", other)))
        called += sum(
            c.verdict in ("better", "worse")
            for c in (d.metrics or {})["vs_parent"]
            if c.metric == "ttft_ms_p99"
        )
    assert called / 600 <= 0.02


def test_repetitions_per_start_follow_the_runs_measured_costs_and_spreads() -> None:
    """Two-stage sampling's optimum (Cochran 1977, 10.6): where starts differ five times more
    than repetitions on one server and a start costs about two repetitions (the committed
    SGLang campaign on the H200), one repetition per start; where a start costs ten minutes
    (a large model's load) and starts differ half as much as repetitions, many repetitions a
    start, so two starts; where starts differ no more than repetitions, two. The report's
    methods say it with the run's own numbers."""
    from reportgen import results
    from reportgen.analysis.allocation import Allocation, allocation
    from reportgen.render import view

    h200 = Allocation(93, 40, 0.007, 0.037, repetitions=3, starts=2)
    assert h200.per_start is not None and h200.per_start < 0.5
    assert h200.suggested_starts == 3 and 0.03 < h200.narrower < 0.10
    large = Allocation(600, 40, 0.02, 0.01, repetitions=3, starts=2)
    assert large.per_start == pytest.approx(math.sqrt(600 * 4 / 40))
    assert large.suggested_starts == 2 and large.narrower == 0
    assert Allocation(93, 40, 0.01, 0.0, repetitions=5, starts=5).suggested_starts == 2

    run = results.load(ROOT / "tests" / "fixtures" / "runs" / "sglang-h200-waves")
    got = allocation(run)
    assert got is not None and (got.repetitions, got.starts) == (3, 2)
    assert 60 < got.start_s < 130 and 20 < got.repetition_s < 60  # seconds on the H200
    assert view.build(run).methods.measured.find("a server start took") == -1  # no findings
    said = view.build(attach(run)).methods.measured  # the report formats what analysis found
    assert run.findings is not None and run.findings.allocation is not None
    assert run.findings.allocation.suggested_starts == got.suggested_starts == 3
    assert f"a server start took about {got.start_s:.0f} s" in said
    assert "one repetition per start makes a mean surest" in said
    assert "campaign.starts = 3 (this run: campaign.starts = 2)" in said


def test_a_stated_start_spread_far_below_the_runs_own_is_set_aside_and_said_once() -> None:
    """The baseline's two starts 11% apart, campaign.start_spread 1.5% (what results
    without it read as): the statement is set
    aside (the run's own starts measure the spread), recorded with each decision, and the
    first decision it applies to says what to do; the next does not say it again."""
    base = _exp("base", {c: [[100, 101], [112, 113]] for c in LEVELS})
    one = _exp("one", {c: [[106, 107]] for c in LEVELS})
    two = _exp("two", {c: [[105, 106]] for c in LEVELS})
    first, second = _decide(_run(base, one, two))
    for d in (first, second):
        assert d.noise is not None and d.noise.start_spread_set_aside == pytest.approx(0.015)
        assert d.noise.between_sd is not None and d.noise.between_sd > 0.05
    said = "far more than campaign.start_spread (1.5%) says"
    assert said in first.explanation and said not in second.explanation
    assert "set start_spread near what this host shows" in first.explanation
    # stated near what the host shows, it is folded in, not set aside
    run = _run(base, one, two)
    run.campaign["campaign"]["start_spread"] = 0.08
    (kept, _) = _decide(run)
    assert kept.noise is not None and kept.noise.start_spread_set_aside is None
    assert said not in kept.explanation


def test_a_spread_between_starts_measured_before_holds_the_false_alarms_a_stated_one_did_not():
    """Starts 4% apart, repetitions 1% apart: taken from the stated 1.5% (weighed as three
    starts; set aside where the run's one degree of freedom differs far more, the run's own
    spread then taken with the statement's weight), identical configurations' levels were
    called different in 14.1% of 300 seeded campaigns (6.3% when a set-aside level kept its
    one degree of freedom alone, t of one), and a 30% loss in 92% of its levels (38%); from
    what two earlier campaigns on that host measured (``measured_spread``, pooled by
    ``pooled_spread``, each level with its own degrees of freedom), 2.3% and 82%. A wrong
    statement with one start of the run's own cries wolf: state it as measured, or take it
    from the history (``run --history``)."""
    from reportgen.results.model import PriorLevel, StartPrior

    rng = np.random.default_rng(0)

    def start(k: int, scale: float = 1.0) -> list[list[float]]:
        speed = math.exp(rng.normal(0, 0.04))
        return [list(100 * scale * speed * np.exp(rng.normal(0, 0.01, k)))]

    def campaign(scale: float) -> Run:
        base = _exp("base", {c: start(2) + start(1) for c in LEVELS})
        other = _exp("other", {c: start(3, scale) for c in LEVELS})
        return _run(base, other)

    tally = {"stated": [0, 0], "history": [0, 0]}  # [identical called, 30% loss called]
    for _ in range(300):
        earlier = [campaign(1.0) for _ in range(2)]
        measured = [noise.campaign_spread(r.experiments, "output_tok_s") for r in earlier]
        pooled = noise.pooled_spread(measured)
        assert all(dof == 2 for _, dof in pooled.values())  # one a campaign, added up
        prior = StartPrior(
            metric="output_tok_s",
            source="earlier",
            levels=[
                PriorLevel(concurrency=p.concurrency, spread=s, dof=d)
                for p, (s, d) in pooled.items()
            ],
        )
        for scale, k in ((1.0, 0), (0.7, 1)):
            run = campaign(scale)
            for name in ("stated", "history"):
                run.start_prior = prior if name == "history" else None
                (d,) = _decide(run)
                wanted = ("better", "worse") if k == 0 else ("worse",)
                tally[name][k] += sum(c.verdict in wanted for c in d.vs_parent)
    levels = 300 * len(LEVELS)
    assert tally["stated"][0] / levels > 0.05  # the stated spread far below this host's
    assert tally["history"][0] / levels <= 0.05
    assert tally["history"][1] / levels >= 0.75


def test_spreads_measured_by_several_runs_weigh_by_their_degrees_of_freedom() -> None:
    p = Point(16, None)
    got = noise.pooled_spread([{p: (0.01, 2.0)}, {p: (0.03, 6.0)}])
    sd, dof = got[p]
    assert dof == 8.0
    assert math.log1p(sd) ** 2 == pytest.approx(
        (2 * math.log1p(0.01) ** 2 + 6 * math.log1p(0.03) ** 2) / 8
    )
    # measured on two starts 10% apart whose repetitions agree: about 7% (sd of two), one
    # degree of freedom; where the starts agree, the floor (never none)
    base = _exp("base", {16: [[100, 100.2], [110, 110.2]]})
    spread = noise.campaign_spread([base], "output_tok_s")
    ((sd, dof),) = spread.values()
    assert dof == 1 and sd == pytest.approx(math.expm1(math.log(1.1) / math.sqrt(2)), rel=0.02)
    same = _exp("same", {16: [[100, 100.2], [100.1, 100.3]]})
    assert noise.campaign_spread([same], "output_tok_s")[p][0] == noise.SPREAD_FLOOR


def test_a_repetition_held_by_a_stall_is_left_out_and_named() -> None:
    """One of the child's repetitions at C=16 ran 20% slow (a request stalled), its other runs
    and the baseline's within 1% at every level: left out of the comparison and of the noise
    model and named in the explanation, so the identical child is not rejected; runs that
    differ as much as their like do are never taken for stalls."""
    rng = np.random.default_rng(3)

    def runs(slow: float = 1.0) -> dict[int, list[list[float]]]:
        return {
            c: [
                list(100 * c * np.exp(rng.normal(0, 0.005, 2))),
                [100 * c * math.exp(rng.normal(0, 0.005)) * (slow if c == 16 else 1.0)],
            ]
            for c in LEVELS
        }

    # (two more identical configurations before it: a level's spread is trusted to tell a
    # stall from twelve pairs of runs on)
    base, child = _exp("base", runs()), _exp("child", runs(slow=0.8))
    (_, _, d) = _decide(_run(base, _exp("more", runs()), _exp("again", runs()), child))
    assert d.verdict != "rejected", d.explanation
    assert d.noise is not None and d.noise.stalls == [
        "child C=16 repetition 3: 20% worse than its configuration's other runs there"
    ]
    assert "Left out as held by a stall" in d.explanation
    (_, _, old) = _decide(_run(base, _exp("more", runs()), _exp("again", runs()), child), "levels")
    # (decided as before: no runs left out)
    assert old.noise is not None and old.noise.stalls is None
    # Gaussian runs, 2% apart within a configuration: no stall among 3,000 groups of three
    flagged = 0
    for _ in range(100):
        many = [
            noise.Run1(f"c{k}", Point(16, None), i, (f"c{k}", "experiment", i), rng.normal(0, 0.02))
            for k in range(30)
            for i in range(3)
        ]
        flagged += len(noise.stalls(many, True))
    assert flagged == 0


def test_a_stall_in_a_side_measured_after_the_experiment_is_left_out_too() -> None:
    """The bracket (or a re-measurement of the baseline) runs after the experiment it is
    compared with, so its runs are not among those the experiment's noise model was made
    of: a stall in one of them is still sought, left out and named. (Simulated campaigns
    with a 3% step mid-way: identical configurations adopted or rejected at the end in 1.3%
    of experiments, 6.7% of campaigns, all the last experiment against a stalled bracket;
    none after.)"""
    rng = np.random.default_rng(4)

    def runs(slow: float = 1.0) -> dict[int, list[list[float]]]:
        return {
            c: [list(100 * c * np.exp(rng.normal(0, 0.005, 2))), [100 * c * slow]] for c in LEVELS
        }

    run = _run(*(_exp(i, runs()) for i in ("base", "more", "again", "x")))
    end = _exp("base-end", runs(slow=0.8), command="base")
    compare = verdict.Comparer(run, run.experiments[-1], "anchored")
    bracket = noise.own_runs(end.levels, "base-end", "experiment", "output_tok_s")
    found = compare._with_stalls_of(bracket, "output_tok_s", "p50")
    assert {(x.session[0], x.level.concurrency, x.repetition) for x in found.stalls} == {
        ("base-end", c, 2) for c in LEVELS
    }
    assert compare.noise("output_tok_s").stalls == found.stalls  # kept for the decision's record


def test_a_run_holding_a_stalled_request_is_left_out_without_pairs() -> None:
    """A level run whose requests show a stall (``Run1.held``, from ``Summary.stall_s``) is
    left out where its measurement keeps a run without one, however few pairs the level has
    (the spread rule needs twelve): two runs of one measurement, one held 14% low, as the
    baseline's first start at C=1 on a fresh H100 on 2026-12-07 (141.7 against 165.6 tok/s)."""
    c1 = Point(1, None)
    base = [
        noise.Run1("b", c1, 0, ("baseline", "experiment", 0), math.log(141.7), held=True),
        noise.Run1("b", c1, 1, ("baseline", "experiment", 1), math.log(165.6)),
    ]
    assert noise.stalls(base, True) == []  # too few pairs to tell by the spread
    (x,) = noise.held_runs(base, True)
    assert x.request and x.key == base[0].key and x.worse == pytest.approx(1 - 141.7 / 165.6)
    # a latency that the stall did not lift is left out too (the run is the host's), said so
    lat = [replace(r, log=math.log(5.9)) for r in base]
    (y,) = noise.held_runs(lat, False)
    assert y.key == base[0].key and y.worse == pytest.approx(0.0)
    # every run of the measurement held: none is left out (nothing would be left)
    both = [replace(r, held=True) for r in base]
    assert noise.held_runs(both, True) == []


def test_a_stated_start_spread_far_above_the_runs_own_gives_way_to_what_its_starts_allow() -> None:
    """Three configurations, identical (copies of the baseline's command: each start counts
    for one configuration), on two starts each, starts 0.3% apart and repetitions 0.2%,
    against the stated 2%: the statement gives way to the largest spread the run's starts
    allow (their upper bound), so the last copy is called equivalent, said with the bound it
    rests on, and the decision records the rule. Taken as before (``gives_way`` False, what
    ``verify`` does for decisions recorded without it) the statement holds and nothing is
    decided. Starts as far apart as stated keep it."""

    def copies(start_sd: float, seed: int) -> Run:
        rng = np.random.default_rng(seed)

        def starts() -> dict[int, list[list[float]]]:
            return {
                c: [
                    list(
                        100
                        * c
                        * math.exp(rng.normal(0, start_sd))
                        * np.exp(rng.normal(0, 0.002, 2))
                    )
                    for _ in range(2)
                ]
                for c in LEVELS
            }

        exps = [_exp("base", starts())]
        exps += [_exp(f"copy{k}", starts(), command="base") for k in (1, 2)]
        run = _run(*exps)
        run.campaign["campaign"]["start_spread"] = 0.02
        return run

    run = copies(0.003, 5)
    last = run.experiments[-1]
    d = verdict.decide_experiment(run, last, {}, "anchored")
    assert d.verdict == "equivalent", d.explanation
    assert d.noise is not None and d.noise.gives_way == noise.BELOW
    assert d.noise.between_sd is not None and d.noise.between_sd < 0.01
    assert "two one-sided tests' 90% interval" in d.explanation
    assert verdict.gives_way(d)
    assert d.noise.gave_way_at == ["C=1", "C=16", "C=64"]
    assert (
        "differed far less than campaign.start_spread (2.0%) says at C=1, C=16, C=64, so the "
        "spread between starts taken there is the largest the run's starts allow (their 95% "
        "upper bound)"
    ) in d.explanation
    old = verdict.decide_experiment(run, last, {}, "anchored", gives_way=False)
    assert old.verdict == "inconclusive" and old.noise is not None
    assert old.noise.gives_way is None and not verdict.gives_way(old)
    assert old.noise.gave_way_at is None and "far less than" not in old.explanation
    assert old.noise.between_sd is not None and old.noise.between_sd > 0.012
    # starts about as far apart as stated: the statement stands (the same spread either way)
    run = copies(0.02, 2)
    last = run.experiments[-1]
    new = verdict.decide_experiment(run, last, {}, "anchored")
    old = verdict.decide_experiment(run, last, {}, "anchored", gives_way=False)
    assert new.noise is not None and old.noise is not None
    assert new.noise.between_sd == pytest.approx(old.noise.between_sd, rel=0.05)
