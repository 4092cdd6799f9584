"""Assumption checks: what must hold for an experiment's numbers to mean what they seem to.

Each check reads what a run already recorded (level summaries, request records, telemetry
windows, error counters, the engine's counters and log, the golden prompts' answers) and gives
``pass``, ``warn``, ``fail`` or ``skip`` with its evidence (the numbers it looked at) and a
hint (what to do). A failure of ``request_errors``, ``output_lengths``, ``gpu_errors``,
``host_matches``, ``server_stable`` or ``outputs_sane`` makes the
experiment's verdict "failed", whatever its numbers say.

- ``request_errors``: failed requests, at most 1% (pass), 5% (warn), more (fail).
- ``output_lengths``: requests that returned fewer tokens than asked: none (pass), up to 5%
  (warn), more (fail: the engine did not do the work that was measured).
- ``repetition_spread``: coefficient of variation of output tok/s across repetitions at each
  level, at most ``cv_bound`` (warn beyond: the ratio intervals will be wide); after the
  run's first experiment, warn only where it is also beyond twice the median of the earlier
  experiments' (a spread of the whole run is said once: the intervals count it).
- ``client_headroom``: no level ran above 80% of the client's measured ceiling (warn).
- ``percentile_samples``: every level run had successful requests enough for the TTFT and
  end-to-end percentiles it shows (one value per request): a p-th percentile of n values has
  one above it only when n is at least 1 / (1 - p), so p99 needs 100 requests and p90 10; with
  fewer it lies between the largest values, about the maximum (warn, naming the levels; once
  a run: an experiment short at levels where an earlier one already was passes, saying so).
- ``gpu_throttling``: share of telemetry samples with a slowdown reason (power or thermal
  caps, hardware slowdown) during measured windows: none (pass), otherwise warn with the
  reasons.
- ``clock_stability``: SM clock coefficient of variation while busy at most 5% (warn beyond).
- ``host_speed``: the host's CPU ran each window at the speed it ran the same level of the
  run's earlier experiments on the same machine (else the level's other windows): a fixed
  piece of Python work, timed 4 times a second by a process beside the run, took within 10%
  of their median (warn beyond; windows under 12 samples, or alone at their level, are not
  judged; runs recorded before the samples were taken have no such check).
- ``gpu_errors``: no new ECC, remapped-row, PCIe-replay or XID errors (fail otherwise).
- ``gpus_free_at_start``: no other process on the GPUs when the run began (warn).
- ``cuda_graphs``: the engine's log says CUDA graph capture finished (engines that print it).
- ``telemetry``: GPU telemetry was recorded for every window (warn when unavailable).
- ``host_matches``: the host matched the campaign's ``host.expect`` (a run on a host that does
  not is refused before it starts; this records that it was checked, and against what).
- ``steady_state``: within each level run's steady part, requests that started in its first
  half decode as fast as those of its second half (median time per output token within 10%,
  or the difference not significant by a Mann-Whitney test at 5%); otherwise the server was
  still warming up, or drifting, while it was measured (warn).
- ``request_stalls``: no request's longest gap mid-stream, or delay from its last chunk to
  the end of its response, is over ten times its level run's median (and 100 ms); otherwise
  each is named with its time, the host over that repetition and the level's throughput with
  and without it (warn; ``checks_stalls``), and decisions leave that run out where its
  measurement has another.
- ``token_agreement``: the output tokens the engine counted (its Prometheus counter, per
  level) agree with the client's count within 2% (warn beyond: throughput in tokens is off).
- ``spec_agreement``: with speculative decoding, the server log's own mean acceptance length
  within 20% of the one its counters give over the levels (warn beyond).
- ``prefix_cache``: the share of prompt tokens the engine served from its prefix cache during
  levels is in the campaign's expected range (``workload.prefix_cache_hit_rate``; default at
  most 10% unless the prompt is fixed): a high rate makes prefill look cheaper than it is.
- ``server_stable``: the server did not exit, crash or restart during the levels (its
  counters never went back and its start time never changed); fail otherwise.
- ``outputs_sane``: every golden prompt (``[[probe]]``) got an answer that matches its
  ``expect`` and does not look degenerate (``analysis.text``); fail otherwise.
- ``outputs_varied``: the measured requests' answers are not mostly a short string repeated
  (a quarter or more of them compressing over 2.4 times: ``analysis.text``); warn otherwise,
  random weights or not (then expected, and said so).
- ``baseline_agreement``: the golden prompts' answers agree with the baseline's, word for
  word (greedy decoding of the same model should; warn where they drift).
- ``campaign_N``: the campaign's own checks (a log line that must or must not appear, a bound
  on a metric); a failure invalidates the verdict only when the check says ``invalidates``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from reportgen.analysis import noise
from reportgen.analysis.checks_engine import (
    DEFAULT_PREFIX_HIT,
    TOKEN_BOUND,
    prefix_cache,
    server_cpu,
    spec_agreement,
    token_agreement,
)
from reportgen.analysis.checks_levels import (
    CV_BOUND,
    PERCENTILE_SAMPLES,
    STEADY_BOUND,
    measurement_checks,
    steady_state,
)
from reportgen.analysis.checks_server import (
    GPU_MEMORY_BUSY,
    answers_varied,
    campaign_checks,
    cuda_graphs,
    gpu_state_checks,
    host_check,
    probe_checks,
    server_stable,
)
from reportgen.analysis.checks_stalls import request_stalls
from reportgen.analysis.checks_telemetry import CLOCK_CV_BOUND
from reportgen.load.records import RequestRecord
from reportgen.observe.environment import Environment, Node
from reportgen.results.model import Experiment
from reportgen.results.verdicts import Check

__all__ = [
    "CLOCK_CV_BOUND",
    "CV_BOUND",
    "DEFAULT_PREFIX_HIT",
    "GPU_MEMORY_BUSY",
    "INVALIDATING",
    "PERCENTILE_SAMPLES",
    "STEADY_BOUND",
    "TOKEN_BOUND",
    "invalidated",
    "prefix_cache",
    "probe_checks",
    "run_checks",
    "server_stable",
    "steady_state",
    "token_agreement",
]

# Checks added since the committed examples were rendered: the methods' glossary lists them
# only for a run that took them, so that a report of an older run renders again as it was.
SINCE = frozenset({"outputs_varied"})

INVALIDATING = (
    "node_matches",
    "request_errors",
    "output_lengths",
    "gpu_errors",
    "host_matches",
    "server_stable",
    "outputs_sane",
)


def run_checks(
    entry: Experiment,
    environment: Environment | None = None,
    *,
    log_patterns: Sequence[str] = (),
    cv_bound: float = CV_BOUND,
    host_expect: Mapping[str, Any] | None = None,
    rows: Sequence[RequestRecord] | None = None,
    counters: Mapping[str, str] | None = None,
    prefix_expect: tuple[float, float] | None = DEFAULT_PREFIX_HIT,
    baseline: Experiment | None = None,
    random_weights: bool = False,
    graphs_off: str | None = None,
    known: Sequence[Experiment] = (),
    metric: str = "output_tok_s",
) -> list[Check]:
    """Every check for one experiment (see the module docstring). ``log_patterns``: the
    engine's pattern names, so a check of a line the engine never prints is skipped;
    ``rows``: the experiment's request records; ``counters``: the engine's Prometheus counter
    names by role (``engines.Engine.counters``); ``prefix_expect``: the expected range of the
    prefix-cache hit rate (None: no expectation); ``baseline``: the baseline experiment, for
    comparing golden answers (None for the baseline itself); ``random_weights``: the model's
    text is meaningless by construction, so golden answers are not judged; ``known``: the
    run's experiments up to this one, whose starts ``starts_agree`` compares its own with, on
    the objective's ``metric``."""
    out = measurement_checks(entry, cv_bound, known)
    if entry.levels:
        out.append(steady_state(rows or []))
        out.append(request_stalls(entry, rows or []))
        out.append(token_agreement(entry.levels, counters or {}))
        out.append(prefix_cache(entry.levels, counters or {}, prefix_expect))
        out += spec_agreement(
            entry.levels,
            counters or {},
            entry.log_evidence.spec_accept_length if entry.log_evidence else None,
        )
    out.append(server_stable(entry))
    out += starts_agree(entry, known, metric)
    parent = next((e for e in known if e.id == entry.parent), None)
    out += server_cpu(entry, parent, noise.same_config(parent, entry), counters or {})
    out += probe_checks(entry, baseline, random_weights=random_weights)
    out += answers_varied(rows or [], random_weights)
    out += gpu_state_checks(entry, environment)
    out.append(host_check(environment, host_expect))
    out += campaign_checks(entry)
    out += cuda_graphs(entry, log_patterns, graphs_off)
    out += node_check(entry, environment)
    return out


def node_check(entry: Experiment, environment: Environment | None) -> list[Check]:
    """An experiment run on a node of its own (``host.executor``): that node against the
    one the run fingerprinted (GPUs, driver, the serving packages: ``reportgen diff``'s
    comparability gate), since its numbers are compared with those of other nodes. None for
    an experiment run where the run was (nothing to tell apart)."""
    recorded = entry.ran_on.fingerprint if entry.ran_on is not None else None
    if not recorded or environment is None:
        return []
    node = Node.model_validate(recorded)
    where = (entry.ran_on.name if entry.ran_on is not None else None) or "its node"
    found = node.mismatches(environment.node)
    return [
        Check(
            id="node_matches",
            title="Ran on a node like the run's (GPUs, driver, engine versions)",
            status="fail" if found else "pass",
            evidence=(
                f"{where}: " + "; ".join(found)
                if found
                else f"{where}: {node.gpus}, driver {node.driver}, the same "
                "packages as the node the run was fingerprinted on"
            ),
            hint='exclude such nodes (host.slurm.options = ["--exclude=..."], or a '
            "--constraint), then --resume"
            if found
            else "",
        )
    ]


STARTS_P = 0.05  # starts_agree: warn where the F test's p is below


def starts_agree(entry: Experiment, known: Sequence[Experiment], metric: str) -> list[Check]:
    """``starts_agree``: where ``entry``'s configuration ran on two or more server starts, at
    each level the spread of its starts' means against the other configurations' pooled so far
    (on the objective's ``metric``; a one-sided F test at ``STARTS_P``). Its verdicts take the
    spread between starts from that pool, so a configuration whose starts spread more than the
    others' is judged by too small a spread (warn, with both spreads and the level). None where
    it ran on one start at every level, or no other configuration ran on two. (Not in the
    module's list, which every report prints as its glossary: a report rendered before it was
    added must render again byte for byte.)"""
    found: list[str] = []
    warned: list[str] = []
    for x in _start_spreads(entry, known, metric):
        said = _spread_said(x, dof=True)
        found.append(said)
        if x.p < STARTS_P:
            warned.append(said)
    if not found:
        return []
    return [
        Check(
            id="starts_agree",
            title="Server starts agree with the other configurations'",
            status="warn" if warned else "pass",
            evidence="; ".join(warned or found),
            hint="its verdicts take the spread between starts from every configuration "
            "together, so they are surer than its own starts allow (an identical "
            "configuration whose starts spread three times the others' is adopted or rejected "
            "in 9-14% of simulated campaigns, benchmarks/verdicts.py --noisy-config): run it "
            "on more starts (campaign.starts) before acting on its verdict"
            if warned
            else "",
        )
    ]


def _start_spreads(
    entry: Experiment, known: Sequence[Experiment], metric: str
) -> list[noise.StartSpread]:
    """``noise.start_spreads`` of ``entry``'s configuration among the experiments ``known``
    before it (on ``metric``)."""
    before = [e for e in known if e.id != entry.id]
    runs = noise.level_runs([*before, entry], metric, current=entry.id)
    return noise.start_spreads(runs, noise.config_key(entry))


def starts_apart(entry: Experiment, known: Sequence[Experiment], metric: str) -> list[str]:
    """The levels where ``entry``'s starts spread more than the other configurations' (the F
    test of ``starts_agree``), each with its evidence: where the runner starts it once more
    (``campaign.more_starts``)."""
    return [_spread_said(x) for x in _start_spreads(entry, known, metric) if x.p < STARTS_P]


def _spread_said(x: noise.StartSpread, dof: bool = False) -> str:
    """One level's starts against the pool's, in words (``dof``: with the pool's degrees of
    freedom, as the check says it)."""
    pool = f" ({x.dof_others} degree{'s' * (x.dof_others != 1)} of freedom)" if dof else ""
    return (
        f"{x.level.label}: sd {_sd(x.own)} between its {x.starts} starts' means, "
        f"{_sd(x.pooled)} between the other configurations'{pool}, F test p = {x.p:.2g}"
    )


def _sd(var: float) -> str:
    """A variance of log values as the relative spread it is (sd, in percent)."""
    return f"{math.expm1(math.sqrt(max(var, 0.0))):.1%}"


def invalidated(checks: Sequence[Check], evidence: bool = False) -> list[str]:
    """The failed checks that make an experiment's verdict "failed" (their titles, and with
    ``evidence`` what each found): the ones in ``INVALIDATING``, and the campaign's own that
    say ``invalidates``."""
    return [
        c.title + (f" ({c.evidence})" if evidence and c.evidence else "")
        for c in checks
        if c.status == "fail" and (c.id in INVALIDATING or c.invalidates)
    ]
