"""The history's statistics on series built in memory: a change located where it was
planted, no change where none was, a GPU swap breaking the series instead of making a change,
suspects named, runs ordered by version, and the gate's three answers."""

from __future__ import annotations

import math
import random

from reportgen.history import changes, series
from reportgen.history.record import LevelValues, RunRecord


def record(i: int, values: tuple[float, ...], *, gpus: str = "1 x H100", engine: str = "0.24.0",
           label: str | None = None) -> RunRecord:  # fmt: skip
    return RunRecord(
        run_id=f"run{i}", campaign="nightly", title="nightly", started_at=f"2026-12-{i + 1:02d}",
        finished_at=None, status="complete", results_sha256=str(i), path="",
        objective={"metric": "output_tok_s", "concurrency": [8]}, engine="vllm",
        engine_version=engine, label=label,
        gate={"GPUs": gpus}, setup={"packages.vllm": engine, "driver": "580"},
        levels=[LevelValues("baseline", "output_tok_s", 8, None, values),
                LevelValues("baseline", "output_tok_s", 1, None, values)],
        experiments=["baseline"],
    )  # fmt: skip


def noisy(rng: random.Random, mean: float, reps: int = 3, between: float = 0.02,
          within: float = 0.01) -> tuple[float, ...]:  # fmt: skip
    run = mean * math.exp(rng.gauss(0, between))
    return tuple(run * math.exp(rng.gauss(0, within)) for _ in range(reps))


def test_a_slowdown_is_located_at_its_run_with_the_version_that_changed_there() -> None:
    rng = random.Random(7)
    runs = [record(i, noisy(rng, 1000 if i < 6 else 850), engine="0.23.0" if i < 6 else "0.24.0")
            for i in range(10)]  # fmt: skip
    (s,) = series.build(runs)  # only C=8: the objective's level
    assert s.point.concurrency == 8 and not s.breaks
    (cp,) = s.changes
    assert cp.at == 6
    assert cp.change.ci_low < 0.85 < cp.change.ci_high and cp.change.ci_high < 0.95
    assert [f.said() for f in cp.suspects] == ["packages.vllm: 0.23.0 -> 0.24.0"]
    # every level when asked
    assert len(series.build(runs, objective_only=False)) == 2


def test_a_steady_series_has_no_change_point() -> None:
    rng = random.Random(3)
    false = 0
    for _ in range(60):
        runs = [record(i, noisy(rng, 1000)) for i in range(10)]
        (s,) = series.build(runs)
        false += bool(s.changes)
    assert false <= 8  # 5% expected: 3 of 60; more than 8 is under 0.5% likely


def test_another_gpu_breaks_the_series_and_makes_no_change_point() -> None:
    rng = random.Random(5)
    runs = [record(i, noisy(rng, 1000 if i < 4 else 1400), gpus="1 x H100" if i < 4 else
                   "1 x H200") for i in range(8)]  # fmt: skip
    (s,) = series.build(runs)
    assert [b.at for b in s.breaks] == [4]
    assert s.breaks[0].fields[0].said() == "GPUs: 1 x H100 -> 1 x H200"
    assert s.changes == []
    assert s.stretches() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # the newest is judged within its own stretch only
    (v,) = series.check([s], 7, 0.05)
    assert v.gate.n_before == 3 and v.gate.answer != "regressed"


def test_runs_are_ordered_by_version_when_asked() -> None:
    runs = [record(0, (1.0,), engine="0.10.0"), record(1, (1.0,), engine="0.9.2"),
            record(2, (1.0,), engine="0.9.10", label=None)]  # fmt: skip
    assert [r.engine_version for r in series.order(runs, "version")] == [
        "0.9.2",
        "0.9.10",
        "0.10.0",
    ]
    runs[0].label = "0.8"
    assert series.order(runs, "version")[0].run_id == "run0"


def test_the_gate_regressed_not_regressed_and_cannot_tell() -> None:
    def obs(*means: float, reps: int = 3, spread: float = 0.005) -> list[changes.Obs]:
        return [changes.Obs(i, tuple(m * (1 + spread * (j - 1)) for j in range(reps)))
                for i, m in enumerate(means)]  # fmt: skip

    steady = obs(1000, 1004, 998, 1001, 997, 1002)
    assert changes.check(steady, changes.find(steady), 0.05, True).answer == "not regressed"
    slow = obs(1000, 1004, 998, 1001, 997, 900)
    found = changes.find(slow)
    gate = changes.check(slow, found, 0.05, True)
    assert gate.answer == "regressed" and gate.ratio is not None and 0.89 < gate.ratio < 0.91
    # a latency: higher is worse
    assert changes.check(slow, found, 0.05, False).answer == "not regressed"
    # 3.5% slower, repetitions 2% apart: more repetitions of the newest would tell
    close = obs(1000, 1001, 999, 1000, 1002, 998, 1000, 1001, 965, spread=0.02)
    gate = changes.check(close, [], 0.05, True)
    assert gate.answer == "cannot tell" and gate.more is not None and 2 < gate.more < 20, gate
    assert f"{gate.more} more repetition(s) of the newest run would tell" in gate.why
    # two runs alone: the earlier run's own uncertainty stays whatever the newest does
    gate = changes.check(obs(1000, 965, spread=0.02), [], 0.05, True)
    assert gate.answer == "cannot tell" and gate.more is None and "run the campaign" in gate.why
    # the first run of a stretch has nothing to be judged against
    assert changes.check(obs(1000), [], 0.05, True).why == "no earlier comparable run"
