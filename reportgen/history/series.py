"""A campaign's runs as series: per experiment and level, the objective's metric run by run,
with where the series breaks (incomparable neighbours) and its change points, each with its
suspects (what else differed between the two runs where it fell).

Runs of another kind (GPUs, model checkpoint, workload) are never compared: each kind is its
own stretch of the series, in which change points are looked for. Runs are ordered by when
they started, or by version (``--by version``: the label given at ``history add``, else the
engine's version, compared as versions are, ``0.9 < 0.10``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from packaging.version import InvalidVersion, Version

from reportgen.campaign.base import higher_is_better
from reportgen.history import changes
from reportgen.history.record import RunRecord
from reportgen.results.model import Point

Order = Literal["time", "version"]
_OWNER = re.compile(r"^[^\[]*\[([^\]]+)\]")  # "flags[baseline].x" -> "baseline"


@dataclass(frozen=True)
class Field:
    """One fingerprint field that differs between two neighbouring runs."""

    key: str
    before: str
    after: str

    def said(self) -> str:
        return f"{self.key}: {_short(self.before)} -> {_short(self.after)}"

    @property
    def area(self) -> str:
        """``model`` of ``model[baseline].files.config.json``, ``packages`` of
        ``packages.vllm``."""
        return re.split(r"[\[.]", self.key, maxsplit=1)[0]


def _short(value: str, most: int = 80) -> str:
    """A hash as its first 12 digits; another long value (a command) cut in the middle."""
    if re.fullmatch(r"[0-9a-f]{32,}", value):
        return f"{value[:12]}…"
    return value if len(value) <= most else f"{value[:48]}…{value[-16:]}"


@dataclass(frozen=True)
class Break:
    """Runs from ``at`` on cannot be compared with the runs before: ``fields`` differ."""

    at: int
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class ChangePoint:
    change: changes.Change
    suspects: tuple[Field, ...]  # what else differs between the runs either side of it

    @property
    def at(self) -> int:
        return self.change.at


@dataclass
class Series:
    experiment: str
    point: Point
    metric: str
    higher_is_better: bool
    runs: list[int]  # indexes into the ordered runs, of the runs that measured it
    values: dict[int, tuple[float, ...]]  # by run index: its repetitions
    breaks: list[Break] = field(default_factory=list)
    changes: list[ChangePoint] = field(default_factory=list)
    # by run index: what makes its numbers comparable (its gate's fields for this experiment)
    kinds: dict[int, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.experiment} {self.point.label}"

    def stretches(self) -> list[list[int]]:
        """The run indexes that may be compared, in order: runs of one kind (the same GPUs,
        model and workload) together, wherever they fall (H200 runs between H100 runs still
        form one stretch)."""
        groups: dict[str, list[int]] = {}
        for i in self.runs:
            groups.setdefault(self.kinds.get(i, ""), []).append(i)
        return list(groups.values())


def order(records: Sequence[RunRecord], by: Order = "time") -> list[RunRecord]:
    """The runs in the order their series are read."""
    if by == "time":
        return sorted(records, key=lambda r: (r.started_at, r.run_id))
    return sorted(records, key=lambda r: (_version(r), r.started_at, r.run_id))


def version_of(record: RunRecord) -> str:
    return record.label or record.engine_version or ""


def _version(record: RunRecord) -> tuple[int, Version | str]:
    text = version_of(record)
    try:
        return (0, Version(text))
    except InvalidVersion:
        return (1, text)  # unreadable as a version: after every readable one, by its text


def _owner(key: str) -> str | None:
    m = _OWNER.match(key)
    return m.group(1) if m else None


def _fields(a: dict[str, str], b: dict[str, str], experiment: str | None) -> tuple[Field, ...]:
    """The keys of two flat fingerprints that differ, those of other experiments left out."""
    keys = sorted(set(a) | set(b))
    return tuple(
        Field(k, a.get(k, "–"), b.get(k, "–"))
        for k in keys
        if a.get(k, "–") != b.get(k, "–")
        and (experiment is None or _owner(k) in (None, experiment))
    )


def incomparable(a: RunRecord, b: RunRecord, experiment: str | None = None) -> tuple[Field, ...]:
    """What makes ``b``'s numbers incomparable with ``a``'s (for one experiment, or any)."""
    return _fields(a.gate, b.gate, experiment)


def suspects(a: RunRecord, b: RunRecord, experiment: str | None = None) -> tuple[Field, ...]:
    """What else differs between ``a`` and ``b`` that a change could come from."""
    return _fields(a.setup, b.setup, experiment)


def build(
    records: Sequence[RunRecord],
    metric: str | None = None,
    alpha: float = changes.ALPHA,
    objective_only: bool = True,
) -> list[Series]:
    """Every series of these runs (already ordered): per experiment and level, the newest
    run's objective metric (or ``metric``), at the levels its objective decides on
    (``Objective.decides``) unless ``objective_only`` is False; breaks and change points
    found."""
    if not records:
        return []
    newest = records[-1]
    goal = newest.goal  # its rules: which way the metric improves, which levels decide
    metric = metric or str(goal.metric)
    higher = goal.better() == "higher" if metric == goal.metric else higher_is_better(metric)
    experiments = newest.experiments  # the campaign as it is now: its newest run's experiments
    out = []
    for exp in experiments:
        points: dict[Point, dict[int, tuple[float, ...]]] = {}
        for i, r in enumerate(records):
            for point, reps in r.values(exp, metric).items():
                points.setdefault(point, {})[i] = reps
        for point in sorted(points, key=lambda p: p.order):
            if objective_only and not goal.decides(point):
                continue
            values = points[point]
            s = Series(exp, point, metric, higher, sorted(values), values)
            _analyse(s, records, alpha)
            out.append(s)
    return out


def kind(record: RunRecord, experiment: str) -> str:
    """What makes a run's numbers for one experiment comparable, as one string."""
    return json.dumps(
        {k: v for k, v in sorted(record.gate.items()) if _owner(k) in (None, experiment)}
    )


def _analyse(s: Series, records: Sequence[RunRecord], alpha: float) -> None:
    s.kinds = {i: kind(records[i], s.experiment) for i in s.runs}
    for before, after in zip(s.runs, s.runs[1:], strict=False):
        why = incomparable(records[before], records[after], s.experiment)
        if why:
            s.breaks.append(Break(after, why))
    for stretch in s.stretches():
        obs = [changes.Obs(i, s.values[i]) for i in stretch]
        for c in changes.find(obs, alpha):
            prev = stretch[stretch.index(c.at) - 1]  # the run of its kind before it
            s.changes.append(ChangePoint(c, suspects(records[prev], records[c.at], s.experiment)))


@dataclass(frozen=True)
class Verdict:
    series: Series
    gate: changes.Gate


def check(series: Sequence[Series], newest: int, threshold: float) -> list[Verdict]:
    """Each series the newest run (index ``newest``) measured: its gate answer."""
    out = []
    for s in series:
        if newest not in s.values:
            continue
        stretch = next(st for st in s.stretches() if newest in st)
        obs = [changes.Obs(i, s.values[i]) for i in stretch]
        found = [c.change for c in s.changes if c.at in stretch]
        out.append(Verdict(s, changes.check(obs, found, threshold, s.higher_is_better)))
    return out


def overall(verdicts: Sequence[Verdict]) -> str:
    """Regressed if any series regressed; else cannot tell if any cannot; else not regressed."""
    answers = {v.gate.answer for v in verdicts}
    for answer in ("regressed", "cannot tell"):
        if answer in answers:
            return answer
    return "not regressed" if verdicts else "cannot tell"
