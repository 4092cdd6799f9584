"""``reportgen diff A B``: what changed between two runs of a campaign, and did it matter.

Pure analysis of two loaded runs (``results.load``, a ``Run`` each): no I/O here, so every
rule can be tested on runs built or edited in memory. Rendering (HTML, PDF, Markdown, the
terminal table) is in ``render.diffpage`` and the CLI.

- **Comparability gate**: differences that make the numbers incomparable (the GPUs' model or
  count, the model checkpoint, the workload definition) go to a banner; every other
  difference in the environment (packages, driver, host, the engine's version, server
  arguments as written and as the engine resolved them, environment variables, the campaign
  file) is listed as "what else changed". A difference shared by several experiments is
  listed once, with the experiments it concerns. Values are compared leaf by leaf
  (``analysis.differences``).
- **Numbers**: experiments are matched by id. For each matched experiment that ran on both
  sides, every headline metric at every common level is compared B / A with the campaign's
  statistics (``analysis.decide.compare_sides``: each repetition's summary is one
  observation; the interval from both runs' noise model, each run's own spread within a server
  and between its starts (per level) pooled, never the difference between the runs; the
  margin for equivalence): improved, regressed, equivalent or inconclusive.
- **Decisions**: verdicts that changed (adopted in A, rejected in B), experiments that failed
  only in B (new failures) or only in A, checks that fail only in B (newly failed) or only in
  A (newly passing); experiments present on one side only.
- **CI gate** (``regressions``): the comparisons where a regression beyond a threshold is
  certain, that is the whole 95% interval lies beyond it (throughputs at most 1 - t of A,
  latencies at least 1 + t).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from reportgen import metrics
from reportgen.analysis import decide, noise, welch
from reportgen.campaign.levels import rate_out as _rate_out
from reportgen.observe import evidence
from reportgen.results.differences import differences
from reportgen.results.levels import Level
from reportgen.results.model import Experiment, Point, Run
from reportgen.results.verdicts import Comparison

# Verdicts of B against A, from the comparison's better/worse.
VERDICT = {
    "better": "improved",
    "worse": "regressed",
    "equivalent": "equivalent",
    "inconclusive": "inconclusive",
}
# What is compared at every level both runs ran: the headline metrics, and the output tokens
# per joule where both sides measured their GPUs' energy (a level without it compares none)
COMPARED = (*metrics.HEADLINE, ("output_tok_per_j", True))
HIGHER_IS_BETTER = dict(COMPARED)
# Compared metrics as they are named in by_level (latencies compared at their p50).
LEVEL_KEY = {m: metrics.key(m) for m, _ in COMPARED}

# Fields that change from one run to the next without saying anything about the setup.
VOLATILE = {
    "memory_used_bytes",  # GPU memory in use when the fingerprint was taken
    "processes",  # processes on the GPUs then
    "cpu_mhz_now",
    # which physical units (the GPU units are compared once, as a list of UUIDs)
    "uuid",
    "serial",
    "pci_bus_id",
    "board_part_number",
}


@dataclass(frozen=True)
class Change:
    """One difference: its area ("GPUs", "packages"...), what it is, A's and B's values
    (formatted; "–" when absent), and the experiments it concerns (empty: the whole run)."""

    area: str
    key: str
    a: str
    b: str
    experiments: tuple[str, ...] = ()

    def said(self) -> str:
        """ "workload.output_tokens: 24 -> 99 (prefill-chunk)": the area left out where the
        key already names it."""
        what = self.key if self.key.startswith(f"{self.area}.") else f"{self.area} {self.key}"
        where = f" ({', '.join(self.experiments)})" if self.experiments else ""
        return f"{what}: {self.a} -> {self.b}{where}"


@dataclass(frozen=True)
class MetricChange:
    experiment: str
    metric: str  # a headline metric (latencies at their p50)
    concurrency: int
    a: float | None  # mean across A's repetitions
    b: float | None
    ratio: float | None  # B / A (geometric means of the repetitions)
    ci_low: float | None
    ci_high: float | None
    n_a: int
    n_b: int
    verdict: str  # improved | regressed | equivalent | inconclusive
    higher_is_better: bool
    rate: float | None = None  # a rate level's rate (``Point``)

    @property
    def point(self) -> Point:
        return Point(self.concurrency, self.rate)

    @property
    def level(self) -> str:
        """Where it was measured: ``C=8``, ``R=2/s``."""
        return self.point.label

    def regression_beyond(self, threshold: float) -> bool:
        """Certainly worse than A by more than ``threshold`` (0.05 = 5%)."""
        if self.ci_low is None or self.ci_high is None:
            return False
        if self.higher_is_better:
            return self.ci_high < 1 - threshold
        return self.ci_low > 1 + threshold


@dataclass
class ExperimentDiff:
    id: str
    status: tuple[str, str]  # ok | failed | interrupted ... in A and in B
    verdict: tuple[str, str]  # the campaign's decision in A and in B
    metrics: list[MetricChange] = field(default_factory=list)
    newly_failed: list[str] = field(default_factory=list)  # check titles failing only in B
    newly_passing: list[str] = field(default_factory=list)  # failing only in A
    reason: tuple[str, str] = ("", "")  # why it failed, in A and in B

    @property
    def flipped(self) -> bool:
        return self.verdict[0] != self.verdict[1]

    @property
    def new_failure(self) -> bool:
        return self.status[0] == "ok" and self.status[1] != "ok"

    @property
    def recovered(self) -> bool:
        return self.status[0] != "ok" and self.status[1] == "ok"


@dataclass(frozen=True)
class Side:
    run_id: str
    campaign: str
    status: str
    finished_at: str
    path: str


@dataclass
class RunDiff:
    a: Side
    b: Side
    margin: float
    incomparable: list[Change]
    changed: list[Change]
    experiments: list[ExperimentDiff]
    only_a: list[str]
    only_b: list[str]

    @property
    def comparable(self) -> bool:
        return not self.incomparable

    def regressions(
        self, threshold: float, metrics: Iterable[str] | None = None
    ) -> list[MetricChange]:
        """Comparisons where B is certainly worse than A by more than ``threshold``."""
        wanted = set(metrics) if metrics else None
        return [
            m
            for e in self.experiments
            for m in e.metrics
            if (wanted is None or m.metric in wanted) and m.regression_beyond(threshold)
        ]

    def counts(self) -> dict[str, int]:
        """How many comparisons came out each way."""
        out = {v: 0 for v in VERDICT.values()}
        for e in self.experiments:
            for m in e.metrics:
                out[m.verdict] += 1
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "a": asdict(self.a),
            "b": asdict(self.b),
            "margin": self.margin,
            "comparable": self.comparable,
            "incomparable": [asdict(c) for c in self.incomparable],
            "changed": [asdict(c) for c in self.changed],
            "experiments": [
                {
                    **asdict(e),
                    # a rate level at an infinite rate: "inf", as results.json writes it
                    "metrics": [{**asdict(m), "rate": _rate_out(m.rate)} for m in e.metrics],
                    "flipped": e.flipped,
                    "new_failure": e.new_failure,
                    "recovered": e.recovered,
                }
                for e in self.experiments
            ],
            "only_a": self.only_a,
            "only_b": self.only_b,
            "counts": self.counts(),
        }


def compare(
    a: Run,
    b: Run,
    *,
    margin: float | None = None,
    paths: tuple[str, str] = ("", ""),
) -> RunDiff:
    """Everything that differs between run A (before) and run B (after). ``margin``: B's
    campaign margin when not given, else A's, else the campaign file's default."""
    if margin is None:
        margin = b.margin if "margin" in b.info else a.margin
    exps_a = {e.id: e for e in a.experiments}
    exps_b = {e.id: e for e in b.experiments}
    common = [i for i in exps_a if i in exps_b]
    gate: list[Change] = []
    other: list[Change] = []
    _environment(a, b, gate, other)
    _campaigns(a, b, gate, other)
    per_exp_gate: list[Change] = []
    per_exp_other: list[Change] = []
    for exp_id in common:
        _experiment_setup(exp_id, exps_a[exp_id], exps_b[exp_id], per_exp_gate, per_exp_other)
    # a campaign-wide difference is said once: not again for every experiment it reaches
    said = {(c.area, c.key, c.a, c.b) for c in gate}
    gate += [
        c for c in _grouped(per_exp_gate, common)
        if c.experiments or (c.area, c.key, c.a, c.b) not in said
    ]  # fmt: skip
    other += _grouped(per_exp_other, common)
    noise_of = _Noise(a, b)
    return RunDiff(
        a=_side(a, paths[0]),
        b=_side(b, paths[1]),
        margin=margin,
        incomparable=gate,
        changed=other,
        experiments=[_experiment(i, exps_a[i], exps_b[i], margin, noise_of) for i in common],
        only_a=[i for i in exps_a if i not in exps_b],
        only_b=[i for i in exps_b if i not in exps_a],
    )


def _side(run: Run, path: str) -> Side:
    info = run.info
    return Side(
        run_id=run.run_id,
        campaign=str(info.get("title") or info.get("name") or ""),
        status=run.status,
        finished_at=run.finished_at or "",
        path=path,
    )


# -- the environment ---------------------------------------------------------------------------


def fmt_value(value: Any) -> str:
    """A value as one line of text: strings as they are, the rest as compact JSON."""
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return json.dumps(value, sort_keys=True, separators=(", ", ": "), default=str)


def _differences(
    area: str, a: Any, b: Any, prefix: str = "", experiments: tuple[str, ...] = ()
) -> list[Change]:
    """Every leaf where ``a`` and ``b`` differ, volatile fields aside, as a Change."""
    return [
        Change(area, key, fmt_value(va), fmt_value(vb), experiments)
        for key, va, vb in differences(a, b, prefix, skip=VOLATILE)
    ]


def _environment(a: Run, b: Run, gate: list[Change], other: list[Change]) -> None:
    env_a, env_b = a.fingerprint, b.fingerprint
    gpus_a, gpus_b = env_a.gpus, env_b.gpus
    if gpus_a.summary() != gpus_b.summary():
        gate.append(Change("GPUs", "GPU model and count", gpus_a.summary(), gpus_b.summary()))
    for key, va, vb in (
        ("driver", gpus_a.driver, gpus_b.driver),
        ("cuda_driver_version", gpus_a.cuda_driver_version, gpus_b.cuda_driver_version),
        ("nvml_version", gpus_a.nvml_version, gpus_b.nvml_version),
    ):
        if va != vb:
            other.append(Change("driver", key, fmt_value(va), fmt_value(vb)))
    if len(gpus_a.devices) == len(gpus_b.devices):  # per GPU: power limits, clocks, ECC, MIG
        devices_a = [d.fields() for d in gpus_a.devices]
        devices_b = [d.fields() for d in gpus_b.devices]
        other += _differences("GPU settings", devices_a, devices_b, "gpu")
        units_a = [d.uuid for d in gpus_a.devices]
        units_b = [d.uuid for d in gpus_b.devices]
        if units_a != units_b:  # the same model, other physical GPUs (or another host)
            other.append(
                Change("GPU settings", "GPU units (UUID)", fmt_value(units_a), fmt_value(units_b))
            )
    other += _differences("host", env_a.host.fields(), env_b.host.fields())
    soft_a, soft_b = env_a.software, env_b.software
    other += _differences("packages", soft_a.packages, soft_b.packages)
    for key in ("installed_packages_count", "installed_packages_sha256"):
        va, vb = getattr(soft_a, key), getattr(soft_b, key)
        if va != vb:
            other.append(Change("packages", key, fmt_value(va), fmt_value(vb)))
    other += _differences("reportgen", soft_a.reportgen.fields(), soft_b.reportgen.fields())
    other += _differences("torch stack", soft_a.torch_stack, soft_b.torch_stack)
    other += _differences("environment variables", soft_a.env, soft_b.env)
    other += _differences("engine", a.engine, b.engine)


def _campaigns(a: Run, b: Run, gate: list[Change], other: list[Change]) -> None:
    sha_a, sha_b = a.campaign_file.sha256, b.campaign_file.sha256
    if sha_a != sha_b:
        other.append(
            Change("campaign", "campaign file (sha256)", (sha_a or "–")[:16], (sha_b or "–")[:16])
        )
    gate += _differences("workload", a.default_workload, b.default_workload, "workload")
    other += _differences("campaign", a.info, b.info, "campaign") + _differences(
        "campaign", a.campaign.get("host"), b.campaign.get("host"), "host"
    )


def model_identity(exp: Experiment) -> dict[str, Any]:
    """What identifies the model checkpoint: the server's model argument and, for a local
    folder, the sha256 of its configuration files and quantization block."""
    args = exp.args
    model = next((args[k] for k in evidence.MODEL_ARGS if isinstance(args.get(k), str)), None)
    files = exp.model_files or {}
    return {
        "model": model,
        "files": files.get("files"),
        "quantization": files.get("quantization_config_sha256"),
    }


def _experiment_setup(
    exp_id: str, a: Experiment, b: Experiment, gate: list[Change], other: list[Change]
) -> None:
    """One matched experiment's setup: model and workload gate; flags, the engine's
    resolved arguments, environment variables, command and engine info do not."""
    one = (exp_id,)
    gate += _differences("model", model_identity(a), model_identity(b), "", one)
    gate += _differences("workload", a.workload, b.workload, "workload", one)
    other += _differences("server arguments", a.args, b.args, "", one)
    resolved_a = evidence.server_args(a.log_evidence.found if a.log_evidence else {})
    resolved_b = evidence.server_args(b.log_evidence.found if b.log_evidence else {})
    other += _differences("resolved server arguments", resolved_a, resolved_b, "", one)
    other += _differences("environment variables", a.env, b.env, "", one)
    if a.args == b.args and a.command != b.command:
        other.append(
            Change("server command", "command", fmt_value(a.command), fmt_value(b.command), one)
        )
    other += _differences("engine", a.engine_info, b.engine_info, "", one)


def _grouped(changes: Sequence[Change], common: Sequence[str]) -> list[Change]:
    """The same difference in several experiments, listed once with their ids (none when it
    concerns every matched experiment)."""
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for c in changes:
        groups.setdefault((c.area, c.key, c.a, c.b), []).extend(c.experiments)
    out = []
    for (area, key, a, b), ids in groups.items():
        every = len(common) > 1 and sorted(set(ids)) == sorted(common)
        out.append(Change(area, key, a, b, () if every else tuple(dict.fromkeys(ids))))
    return out


# -- the numbers and the decisions --------------------------------------------------------------


class _Noise:
    """The two runs' noise model per metric: each run's own spreads (within a server, between
    its starts of one configuration) pooled, never the difference between the runs."""

    def __init__(self, a: Run, b: Run) -> None:
        self.runs = (a, b)
        self.cache: dict[str, noise.Noise] = {}

    def __call__(self, metric: str) -> noise.Noise:
        if metric not in self.cache:
            both = [
                dataclasses.replace(r, config=f"{side}:{r.config}", session=(side, *r.session[1:]))
                for side, run in zip("AB", self.runs, strict=True)
                for r in noise.level_runs(run.experiments, metric)
            ]
            self.cache[metric] = noise.estimate(both, metric)
        return self.cache[metric]


def _headline(a: Experiment, b: Experiment, margin: float, noise_of: _Noise) -> list[Comparison]:
    """Every compared metric (p50 for latencies) B / A at every level both ran, with the two
    runs' noise model."""
    out: list[Comparison] = []
    for metric, higher in COMPARED:
        out += decide.compare_sides(
            noise.own_runs(a.levels, f"A:{a.id}", "experiment", metric),
            noise.own_runs(b.levels, f"B:{b.id}", "experiment", metric),
            noise_of(metric),
            margin=margin,
            higher_is_better=higher,
            metric=metric,
        )
    return out


def _experiment(
    exp_id: str, a: Experiment, b: Experiment, margin: float, noise_of: _Noise
) -> ExperimentDiff:
    out = ExperimentDiff(
        id=exp_id,
        status=(a.status, b.status),
        verdict=(_verdict(a), _verdict(b)),
        reason=(a.reason or "", b.reason or ""),
    )
    failing_a, failing_b = _failing(a), _failing(b)
    out.newly_failed = sorted(failing_b - failing_a)
    out.newly_passing = sorted(failing_a - failing_b)
    if a.levels and b.levels:
        for c in _headline(a, b, margin, noise_of):
            key = LEVEL_KEY[c.metric]
            if _same_runs(a.levels, b.levels, c.metric, c.point):
                # the same measurements on both sides (a run compared with itself, or its
                # copy): nothing differs, whatever the noise between repetitions
                c = c.model_copy(
                    update={"ratio": 1.0, "ci_low": 1.0, "ci_high": 1.0, "verdict": "equivalent"}
                )
            agg_a, agg_b = a.aggregate(c.point), b.aggregate(c.point)
            out.metrics.append(
                MetricChange(
                    experiment=exp_id,
                    metric=c.metric,
                    concurrency=c.concurrency,
                    rate=c.rate,
                    a=agg_a.mean(key) if agg_a else None,
                    b=agg_b.mean(key) if agg_b else None,
                    ratio=c.ratio,
                    ci_low=c.ci_low,
                    ci_high=c.ci_high,
                    n_a=c.n_parent,
                    n_b=c.n_child,
                    verdict=VERDICT[c.verdict],
                    higher_is_better=HIGHER_IS_BETTER[c.metric],
                )
            )
    return out


def _verdict(exp: Experiment) -> str:
    """The campaign's decision on it, else its status (it did not get as far)."""
    return (exp.decision.verdict if exp.decision else None) or exp.status


def _failing(exp: Experiment) -> set[str]:
    return {c.title or c.id for c in exp.checks if c.status == "fail"}


def _same_runs(a: Sequence[Level], b: Sequence[Level], metric: str, level: Point) -> bool:
    runs_a = welch.values_by_level(a, metric).get(level)
    return bool(runs_a) and runs_a == welch.values_by_level(b, metric).get(level)


def parse_threshold(text: str) -> float:
    """'5%' or '0.05' -> 0.05. ValueError, its message saying what to write, when it is
    neither, not above 0, or a bare number of 1 or more ('5': 5% or 500%? as a fraction it
    would gate nothing a user meant). Above 100% is allowed written as a percentage: a latency
    can more than double (a throughput then never counts)."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise ValueError("not a percentage above 0; give one such as 5% (or 0.05)")
    if not raw.endswith("%") and value >= 1:
        raise ValueError(
            f"a bare {raw} could be {raw}% or {value:.0%}; write {raw}% (or {value / 100:g})"
        )
    return value
