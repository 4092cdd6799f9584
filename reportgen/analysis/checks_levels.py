"""The assumption checks of an experiment's measured levels (``checks`` lists them all).

From the levels' summaries, their aggregates across repetitions, their GPU telemetry windows
and engine counters, and the request records: ``request_errors``, ``output_lengths``,
``repetition_spread``, ``client_headroom``, ``percentile_samples`` and ``steady_state``, with
``telemetry``, ``gpu_throttling`` and ``clock_stability`` from ``checks_telemetry``; those
that read the engine's counters are in ``checks_engine``.

Imports ``analysis.summary``, ``analysis.checks_telemetry`` and the results model; nothing of
the other checks.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import numpy as np

from reportgen.analysis.checks_telemetry import host_speed, telemetry_checks
from reportgen.analysis.summary import steady_window
from reportgen.campaign.workload import Workload
from reportgen.load.records import RequestRecord
from reportgen.metrics import PERCENTILES, quantile
from reportgen.results.findings import METHOD
from reportgen.results.levels import Aggregate, Level, by_point
from reportgen.results.model import Experiment, Point, point_of, sorted_points
from reportgen.results.verdicts import Check, CheckStatus

Status = CheckStatus

CV_BOUND = 0.05
STEADY_BOUND = 0.10  # early vs late median TPOT
# Samples a percentile needs to have one above it, 1 / (1 - p): with fewer, the p-th
# percentile (linear interpolation) lies between the largest values, about the maximum.
# the fewest requests a level run needs for each percentile of the grid above its median to
# lie between two of them: 1 / (1 - q), so p90 needs 10, p95 20 and p99 100
PERCENTILE_SAMPLES = {
    p: math.ceil(round(1 / (1 - quantile(p) / 100), 6)) for p in PERCENTILES if quantile(p) > 50
}


def _share(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def measurement_checks(
    entry: Experiment, cv_bound: float = CV_BOUND, others: Sequence[Experiment] = ()
) -> list[Check]:
    """The checks of the measured levels' numbers (none when no level was measured);
    ``others``: the run's experiments measured before it, whose spread of repetitions its
    own is set against."""
    if not entry.levels:
        return []
    earlier = [e for e in others if e.id != entry.id]
    spreads = [w[0] for e in earlier if (w := worst_cv(e.by_level))]
    typical = statistics.median(spreads) if spreads else None
    return [
        _request_errors(entry.levels),
        _output_lengths(entry.levels),
        _repetition_spread(entry.by_level, cv_bound, typical),
        _client_headroom(entry.by_level),
        percentile_samples(entry.levels, [e.levels for e in earlier]),
        achieved_load(entry),
        warmed_up(entry),
        engine_events(entry.levels),
        *telemetry_checks(entry),
        *host_speed(entry, earlier),
    ]


# a level whose achieved load is below this share of its nominal one
ACHIEVED_SHARE = METHOD.achieved_share


def achieved_load(entry: Experiment) -> Check:
    """Each level ran at the load it is named by: a closed loop's mean requests in flight at
    least ACHIEVED_SHARE x C, an open loop's requests sent at least that share of the offered
    rate (``under_load`` says it per level)."""
    title = "Levels ran at their nominal load"
    wl = entry.ran_workload
    short = [(lv, under) for lv in entry.levels if (under := under_load(lv, wl))]
    judged = sum(under_load(lv, wl, judged=True) is not None for lv in entry.levels)
    if not judged:
        return Check(id="achieved_load", title=title, status="skip", evidence="no level to judge")
    if not short:
        return Check(
            id="achieved_load",
            title=title,
            status="pass",
            evidence=f"{judged} level run(s) at {ACHIEVED_SHARE:.0%} or more of their "
            "concurrency or offered rate",
        )
    where = "; ".join(
        f"{lv.point.label} repetition {lv.repetition + 1}: {u}" for lv, u in short[:4]
    )
    return Check(
        id="achieved_load",
        title=title,
        status="warn",
        evidence=f"{len(short)} of {judged} level run(s) below {ACHIEVED_SHARE:.0%}: {where}",
        hint="longer levels (duration_s, or more requests_per_level: each client then sends "
        "many), so ramp-up and drain weigh less; an open loop whose client fell behind its "
        "schedule was held back by its concurrency cap or its own CPU: raise the cap, or give "
        "the client more cores (workload.workers)",
    )


def under_load(level: Level, workload: Workload | None, judged: bool = False) -> str | None:
    """How far a level run fell short of its nominal load ("12.1 of 16 in flight", "8.20 of
    10 req/s sent"), or None where it did not; ``judged``: "" for a level that could be
    judged and was not short, None for one that cannot be (no duration, an infinite rate).

    An open loop is judged by what its client sent: the offered rate times the schedule it
    kept (``Summary.schedule_kept``). Its requests per second count completions, which a
    level of a fixed number of requests spreads over its drain too (256 requests at 32 req/s
    with answers of 2 s: 26 req/s while every request went on time); a run recorded before
    the schedule was kept is judged by them, as then."""
    s = level.summary
    rate = level.rate
    if rate is None and workload is not None and not isinstance(workload.request_rate, list):
        rate = workload.request_rate  # one rate for every level (a list's are each level's own)
    if rate is None:
        achieved, nominal = s.in_flight, float(level.concurrency)
        said = "{:.1f} of {:g} in flight"
    elif s.schedule_kept is not None:
        achieved, nominal = float(rate) * s.schedule_kept, float(rate)
        said = "{:.2f} of {:g} req/s sent"
    else:
        achieved, nominal = s.req_s, float(rate)
        said = "{:.2f} of {:g} req/s offered"
    if (
        achieved is None
        or not math.isfinite(achieved)
        or not math.isfinite(nominal)
        or nominal <= 0
    ):
        return None
    if achieved >= ACHIEVED_SHARE * nominal:
        return "" if judged else None
    return said.format(achieved, nominal)


def warmed_up(entry: Experiment) -> Check:
    """Every level's own warm-up ended steady (``workload.warmup``), not at its time cap."""
    title = "Each level warmed up until steady"
    settled = [x for s in entry.sessions for x in s.settled]
    if not settled:
        return Check(
            id="warmed_up",
            title=title,
            status="skip",
            evidence="no level warm-up (workload.warmup.steady = false)",
        )
    longest = max(x.duration_s for x in settled)
    unsteady = [x for x in settled if x.reason not in ("steady", "one pass")]
    if not unsteady:
        return Check(
            id="warmed_up",
            title=title,
            status="pass",
            evidence=f"{len(settled)} level warm-up(s) steady, the longest {longest:.1f} s",
        )
    where = "; ".join(
        f"{x.point.label}: {x.reason}, {x.duration_s:.0f} s"
        + (f", last windows {x.spread:.1%} apart" if x.spread is not None else "")
        for x in unsteady[:4]
    )
    return Check(
        id="warmed_up",
        title=title,
        status="warn",
        evidence=f"{len(unsteady)} of {len(settled)} level warm-up(s) never steady: {where}",
        hint="raise workload.warmup.max_s, or widen workload.warmup.tolerance where the "
        "server is steady but noisy",
    )


def engine_events(levels: Sequence[Level]) -> Check:
    """No engine event (a kernel compiled at run time, a recompilation, a graph capture, a
    preemption, a slump of the server's output with its load held) inside a measurement
    window; one that held one was measured again."""
    title = "No engine event inside a measurement window"
    again = [lv for lv in levels if lv.remeasured]
    left = [lv for lv in levels if lv.events]
    redone = (
        f"; {len(again)} measured again after one ("
        + ", ".join(sorted({e.kind for lv in again for e in lv.remeasured}))
        + ")"
        if again
        else ""
    )
    if not left:
        return Check(
            id="engine_events",
            title=title,
            status="pass",
            evidence=f"{len(levels)} level run(s) free of engine events{redone}",
        )
    first = left[0]
    event = first.events[0]
    at = f", {event.at_s:.1f} s in" if event.at_s is not None else ""
    return Check(
        id="engine_events",
        title=title,
        status="warn",
        evidence=f"{len(left)} level run(s) still held one after measuring again: "
        f"{first.point.label} repetition {first.repetition + 1}{at}: {event.line[:160]}" + redone,
        hint="a host with nothing else on its CPUs, and more repetitions: the server slowed "
        "with its load held and no engine event to say why"
        if event.kind == "slump"
        else "a longer workload.warmup (max_s), or, for a preemption, a load the KV cache "
        "holds: the engine was not in its steady state while measured",
    )


def _request_errors(levels: Sequence[Level]) -> Check:
    requests = sum(lv.summary.requests for lv in levels)
    errors = sum(lv.summary.errors for lv in levels)
    share = _share(errors, requests)
    status: Status = "pass" if share <= 0.01 else "warn" if share <= 0.05 else "fail"
    return Check(
        id="request_errors",
        title="Requests succeeded",
        status=status,
        evidence=f"{errors} of {requests} requests failed ({share:.1%})" + _where_errors(levels),
        hint="" if status == "pass" else "read the error kinds per level and the server log",
    )


def _where_errors(levels: Sequence[Level]) -> str:
    """The failed requests by kind, and where they came from: when one level run holds them
    all (a server that died there: requests broken off mid-stream, then refused at once), that
    run, and how the runs before it did, so a fast stream of refusals is not read as the
    configuration's error rate."""
    kinds: dict[str, int] = {}
    for lv in levels:
        for kind, n in (lv.summary.error_kinds or {}).items():
            kinds[kind] = kinds.get(kind, 0) + int(n)
    if not kinds:
        return ""
    said = ": " + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda x: -x[1]))
    failing = [lv for lv in levels if lv.summary.errors]
    if len(failing) == 1 and len(levels) > 1:
        (bad,) = failing
        before = [lv for lv in levels if lv is not bad]
        said += (
            f", all at {bad.point.label} repetition {bad.repetition + 1}; the other level runs: "
            f"0 of {sum(lv.summary.requests for lv in before)} failed"
        )
    return said


def _output_lengths(levels: Sequence[Level]) -> Check:
    requests = sum(lv.summary.requests for lv in levels)
    short = sum(lv.summary.short_outputs for lv in levels)
    silent = sum(lv.summary.silent_outputs for lv in levels)
    share = _share(short, requests)
    status: Status = "pass" if short == 0 else "warn" if share <= 0.05 else "fail"
    found = f"{short} of {requests} requests returned fewer tokens than asked ({share:.1%})"
    todo = "" if status == "pass" else "the engine stopped early: check that it honours "
    todo += "" if status == "pass" else "ignore_eos / min_tokens"
    if silent:
        status = "warn" if status == "pass" else status
        found += (
            f"; {silent} streamed no text although the engine counted their tokens: their "
            "time to first token and inter-token latencies are unknown, and left out"
        )
        todo += ("; " if todo else "") + (
            "read one such answer: text in a field the client does not read, or tokens "
            "that decode to nothing (special tokens)"
        )
    return Check(
        id="output_lengths",
        title="Outputs as long as requested",
        status=status,
        evidence=found,
        hint=todo,
    )


# An experiment's repetitions spread more than this many times the run's typical spread
# (the median of the earlier experiments' largest) is out of line with the rest
OUT_OF_LINE = 2.0


def worst_cv(by_level: Sequence[Aggregate]) -> tuple[float, Point] | None:
    """The largest coefficient of variation of output tok/s over repetitions, and its level."""
    worst: tuple[float, Point] | None = None
    for agg in by_level:
        tok = agg.stat("output_tok_s")
        if tok.mean and tok.sd is not None and tok.n > 1:
            cv = tok.sd / tok.mean
            if worst is None or cv > worst[0]:
                worst = (cv, agg.point)
    return worst


def _repetition_spread(
    by_level: Sequence[Aggregate], cv_bound: float, typical: float | None = None
) -> Check:
    """Warn where the repetitions spread beyond ``cv_bound`` and, after the run's first
    experiment, beyond ``OUT_OF_LINE`` times the ``typical`` spread of the earlier ones: a
    run-wide spread is said once (its intervals count it through the noise model), an
    experiment noisier than the rest on its own."""
    title = "Repetitions agree"
    worst = worst_cv(by_level)
    if worst is None:
        return Check(
            id="repetition_spread",
            title=title,
            status="skip",
            evidence="fewer than two repetitions per level",
            hint="set workload.repetitions to 3 or more",
        )
    said = (
        f"largest coefficient of variation of output tok/s: {worst[0]:.1%} at "
        f"{worst[1].label} (bound {cv_bound:.0%})"
    )
    ok = worst[0] <= cv_bound
    if not ok and typical is not None and worst[0] <= OUT_OF_LINE * typical:
        ok = True
        said += (
            f"; as in the run's earlier experiments (median {typical:.1%}): a spread of the "
            "whole run, which the intervals count, warned of once"
        )
    elif not ok and typical:
        said += f"; x{worst[0] / typical:.1f} the run's earlier experiments' (median {typical:.1%})"
    return Check(
        id="repetition_spread",
        title=title,
        status="pass" if ok else "warn",
        evidence=said,
        hint="" if ok else "more repetitions, or find what varies (clocks, other load)",
    )


def _client_headroom(by_level: Sequence[Aggregate]) -> Check:
    limited = sum(agg.client_limited for agg in by_level)
    return Check(
        id="client_headroom",
        title="Client not saturated",
        status="pass" if limited == 0 else "warn",
        evidence=f"{limited} level run(s) above 80% of the client's measured ceiling",
        hint="" if limited == 0 else "more workload.workers, or a bigger client host",
    )


def _counts(levels: Sequence[Level]) -> dict[Point, list[int]]:
    """Successful requests of each level run, by level (runs with none left out: they have
    no percentiles at all, and ``request_errors`` says why)."""
    ok = by_point(lv for lv in levels if lv.summary.ok > 0)
    return {p: [lv.summary.ok for lv in runs] for p, runs in ok.items()}


def _range(counts: Sequence[int]) -> str:
    low, high = min(counts), max(counts)
    return f"{low}" if low == high else f"{low}-{high}"


def percentile_samples(levels: Sequence[Level], earlier: Sequence[Sequence[Level]] = ()) -> Check:
    """Whether each level run had requests enough for the TTFT and E2E percentiles the
    report shows (one value per successful request; inter-token gaps are many more).
    ``earlier``: the levels of the run's experiments measured before; where one of them was
    already short of requests at every level this one is, the workload's shortfall was
    warned of there, and is said here without a warning of its own."""
    title = "Enough requests for the percentiles shown"
    need90, need99 = PERCENTILE_SAMPLES["p90"], PERCENTILE_SAMPLES["p99"]
    rule = f"a p99 needs {need99}, a p90 {need90}"
    counts = _counts(levels)
    if not counts:
        return Check(
            id="percentile_samples",
            title=title,
            status="skip",
            evidence="no level run with a successful request",
        )
    few = {c: counts[c] for c in sorted_points(counts) if min(counts[c]) < need99}
    if not few:
        c, n = min(counts.items(), key=lambda kv: (min(kv[1]), kv[0].order))
        return Check(
            id="percentile_samples",
            title=title,
            status="pass",
            evidence=f"fewest successful requests in a level run: {min(n)} ({c.label}); {rule}",
        )
    listed = ", ".join(
        f"{c.label}: {_range(n)}" + (" (too few even for a p90)" if min(n) < need90 else "")
        for c, n in few.items()
    )
    said = f"successful requests per level run, too few for a p99 of TTFT and E2E: {listed}; {rule}"
    before = [_counts(lv) for lv in earlier]
    if any(all(c in got and min(got[c]) < need99 for c in few) for got in before):
        return Check(
            id="percentile_samples",
            title=title,
            status="pass",
            evidence=f"{said}; as in the run's earlier experiments: the workload's, warned of once",
        )
    return Check(
        id="percentile_samples",
        title=title,
        status="warn",
        evidence=said,
        hint=f"raise workload.requests_per_level (or duration_s) to {need99} or more per "
        "level run, or read those percentiles as about the largest value seen",
    )


# -- the request records and the engine's counters -----------------------------------------


def steady_state(rows: Sequence[RequestRecord]) -> Check:
    """Early against late requests of each level run's steady part (see ``checks``)."""
    from scipy import stats

    title = "Warm-up done: early and late requests of a level agree"
    runs: dict[tuple[Point, int], list[RequestRecord]] = {}
    for r in rows:
        if r.status == "ok":
            runs.setdefault((point_of(r), r.repetition), []).append(r)
    worst: tuple[float, str, float] | None = None  # (|log ratio|, where, ratio)
    judged = 0
    for (c, rep), recs in sorted(runs.items(), key=lambda kv: (kv[0][0].order, kv[0][1])):
        window = steady_window(recs)
        if window is None:
            continue
        inside = sorted(
            (r for r in recs if window[0] <= r.start and r.end <= window[1]),
            key=lambda r: r.start,
        )
        tpot_ok = [(r.start, t) for r in inside if (t := _tpot(r))]
        half = len(tpot_ok) // 2
        if half < 4:
            continue
        early = [t for _, t in tpot_ok[:half]]
        late = [t for _, t in tpot_ok[-half:]]
        judged += 1
        ratio = float(np.median(late) / np.median(early))
        p = float(stats.mannwhitneyu(early, late).pvalue)
        if abs(ratio - 1) > STEADY_BOUND and p < 0.05:
            size = abs(math.log(ratio))
            if worst is None or size > worst[0]:
                worst = (size, f"{c.label} repetition {rep + 1}", ratio)
    if not judged:
        return Check(
            id="steady_state",
            title=title,
            status="skip",
            evidence="no level run had 8 or more requests inside its steady part",
        )
    if worst is None:
        return Check(
            id="steady_state",
            title=title,
            status="pass",
            evidence=f"{judged} level run(s): median time per output token of the first and "
            f"second half of each steady part within {STEADY_BOUND:.0%} (or not significantly "
            "apart)",
        )
    _, where, ratio = worst
    return Check(
        id="steady_state",
        title=title,
        status="warn",
        evidence=f"{where}: later requests decoded at x{ratio:.2f} the time per token of "
        "earlier ones (Mann-Whitney p < 0.05)",
        hint="the server was still warming up: keep workload.warmup.steady on (the "
        "default), and raise workload.warmup.max_s or narrow workload.warmup.tolerance"
        if ratio < 1
        else "the server slowed during the level: look for throttling, memory growth or "
        "another load",
    )


def _tpot(r: RequestRecord) -> float | None:
    n = r.output_tokens
    first = r.first_token
    if n < 2 or first is None or first != first:  # None, or NaN read back from a table
        return None
    return (r.end - first) / (n - 1)
