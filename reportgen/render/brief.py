"""The report's first page: what a reviewer asks first, answered from the run's numbers.

- **The best configuration** and the command that starts it, or why there is none.
- **Per level**, best against the baseline: the objective and the latencies a user feels (TTFT
  and ITL, p50 and p99), each with the verdict's uncertainty in words: "better" only where the
  interval clears the margin, "no clear change" where it does not decide.
- **Failures**, one line each: the engine's own reason where the log gave one.
- **Expectations**: each experiment's stated expectation against what it measured, as far as
  its words say a direction ("slower at C=64", "equivalent"); the reading is shown, so a reader
  can check it.
- **What to try next**, from the numbers: repetitions that would decide an open verdict, a
  spread between server starts that stands in the way, a latency the best configuration pays.

Pure, like ``view``: strings out, already formatted.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from reportgen.results.model import Comparison, Experiment, Run

# (aggregate key, comparison metric or None, label, lower is better)
LATENCIES = (
    ("ttft_ms_p50", "ttft_ms", "TTFT p50", True),
    ("ttft_ms_p99", "ttft_ms_p99", "TTFT p99", True),
    ("itl_ms_p50", "itl_ms", "ITL p50", True),
    ("itl_ms_p99", None, "ITL p99", True),
)


@dataclass(frozen=True)
class BriefCell:
    baseline: str
    best: str
    ratio: str  # "×1.63"
    words: str  # "better", "no clear change", "within the margin", "no interval"
    css: str  # verdict class for colour: better | worse | inconclusive | equivalent | none
    ci: str = ""  # "98.3% CI 1.23–2.16"


@dataclass(frozen=True)
class Expectation:
    id: str
    expected: str
    reading: str  # what the text was read to say: "slower at C=64"
    outcome: str  # what was measured there
    judged: str  # met | not met | partly met | not shown | not judged


@dataclass(frozen=True)
class Brief:
    best: str  # "" when no experiment was adopted
    best_line: str  # one sentence: which, adopted against what
    command: str
    columns: list[str]
    levels: list[tuple[int, list[BriefCell]]]
    failed: list[tuple[str, str]]
    # per level in ``levels``: successful requests per run behind the best's percentiles
    # ("28-33"): a p99 of fewer than 100 is about the maximum
    samples: list[str] = field(default_factory=list)
    expectations: list[Expectation] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "–"
    if abs(value) >= 1000:
        return f"{value:,.0f}{unit}"
    if abs(value) >= 100:
        return f"{value:.0f}{unit}"
    if abs(value) >= 10:
        return f"{value:.1f}{unit}"
    return f"{value:.2f}{unit}"


def _words(c: Comparison | None, level: str) -> tuple[str, str, str]:
    """The verdict of one comparison in words, its colour class and its interval."""
    if c is None or c.ratio is None:
        return "no interval", "none", ""
    ci = ""
    if c.ci_low is not None and c.ci_high is not None:
        ci = f"{level} CI {c.ci_low:.2f}–{c.ci_high:.2f}"
    said = {
        "better": "better",
        "worse": "worse",
        "equivalent": "within the margin",
        "inconclusive": "no clear change",
    }.get(str(c.verdict), str(c.verdict))
    return said, str(c.verdict), ci


def _level_label(c: Comparison | None) -> str:
    conf = getattr(c, "confidence", None) if c is not None else None
    return f"{float(conf):.1%}".replace(".0%", "%") if conf else "95%"


def _find(comps: Sequence[Comparison], metric: str, level: int) -> Comparison | None:
    return next((c for c in comps if c.metric == metric and c.concurrency == level), None)


def _cells(
    run: Run, best: Experiment, base: Experiment, key: str, metric: str
) -> list[tuple[int, list[BriefCell]]]:
    comps = list((best.decision.metrics or {}).get("vs_baseline") or []) if best.decision else []
    objective = list(best.decision.vs_baseline) if best.decision else []
    levels = [a.concurrency for a in best.by_level if base.aggregate(a.concurrency)]
    obj_levels = [int(c) for c in (run.objective.get("concurrency") or [])] or levels
    out = []
    for level in [c for c in levels if c in obj_levels] or levels:
        b, x = base.aggregate(level), best.aggregate(level)
        if b is None or x is None:
            continue
        row = []
        for k, m, _label, _lower in [(key, metric, "", False), *LATENCIES]:
            bv, xv = b.mean(k), x.mean(k)
            comp = None
            if m is not None:
                comp = _find(objective if k == key else comps, m, level)
            words, css, ci = _words(comp, _level_label(comp))
            # the comparison's own ratio (of geometric means) where there is one
            value = comp.ratio if comp is not None and comp.ratio is not None else None
            if value is None and bv and xv is not None:
                value = xv / bv
            ratio = "–" if value is None else f"×{value:.2f}"
            row.append(BriefCell(_fmt(bv), _fmt(xv), ratio, words, css, ci))
        out.append((level, row))
    return out


def _failed(run: Run) -> list[tuple[str, str]]:
    out = []
    for e in run.experiments:
        verdict = e.decision.verdict if e.decision else None
        if e.status == "ok" and verdict != "failed":
            continue
        reason = (e.reason or e.status or "").strip()
        first = reason.splitlines()[0] if reason else e.status
        # the engine's logger prefix says nothing a reader needs
        first = re.sub(r"^(.*?: )?\d{4}-\d\d-\d\d[ T][\d:,.]+ - \S+ - ERROR - ", r"\1", first)
        out.append((e.id, first[:240] + ("…" if len(first) > 240 else "")))
    return out


_FAILS = re.compile(r"\bfails?\b", re.I)
_DIRECTIONS = (
    ("worse", re.compile(r"\b(slower|lower|fewer|worse|drops?|longer|costs?)\b", re.I)),
    ("better", re.compile(r"\b(faster|higher|better|quicker|shorter|speeds? up|gains?)\b", re.I)),
    (
        "equivalent",
        re.compile(r"\b(equivalent|no change|unchanged|the same|about the same)\b", re.I),
    ),
    ("failed", _FAILS),
)
_LEVELS = re.compile(r"C\s*=\s*(\d+)")
# A clause about a latency or the server's start speaks of something other than a throughput
# objective ("higher TTFT", "its start is quicker"): it is not read.
_ASIDE = re.compile(r"TTFT|ITL|TPOT|latenc|time to first|time per|\bstarts?\b|start-up", re.I)


def _reading(
    text: str, levels: Sequence[int], latency: bool = False
) -> list[tuple[str, list[int]]]:
    """(direction, levels) per clause of an expectation that states one direction; a clause
    naming no level speaks of every level."""
    out: list[tuple[str, list[int]]] = []
    for clause in re.split(r"[;.]\s+|\.$", text):
        if _ASIDE.search(clause) and not latency:
            continue
        found = [d for d, rx in _DIRECTIONS if rx.search(clause)]
        if len(found) != 1:
            continue
        named = [int(c) for c in _LEVELS.findall(clause) if int(c) in levels]
        out.append((found[0], named or list(levels)))
    return out


def _expectations(run: Run) -> list[Expectation]:
    out = []
    levels = [int(c) for c in (run.objective.get("concurrency") or [])]
    metric = str(run.objective.get("metric") or "output_tok_s")
    for e in run.experiments:
        if not e.expect or e.role != "experiment" or e is run.baseline:
            continue
        failed = e.status != "ok" or (e.decision is not None and e.decision.verdict == "failed")
        reading = _reading(e.expect, levels, latency=not run.higher_is_better)
        if failed:
            wanted = bool(_FAILS.search(e.expect))
            out.append(
                Expectation(
                    e.id,
                    e.expect,
                    "fails" if wanted else "runs",
                    "it failed",
                    "met" if wanted else "not met",
                )
            )
            continue
        reading = [(d, ls) for d, ls in reading if d != "failed"]
        if not reading or e.decision is None:
            out.append(
                Expectation(
                    e.id,
                    e.expect,
                    "no direction stated",
                    _measured(e, metric, levels),
                    "not judged",
                )
            )
            continue
        hits = misses = unknown = 0
        said = []
        for direction, ls in reading:
            for c in ls:
                comp = _find(e.decision.vs_parent, metric, c)
                got = str(comp.verdict) if comp else "none"
                if got == direction:
                    hits += 1
                elif got in ("inconclusive", "none"):
                    unknown += 1
                else:
                    misses += 1
            said.append(f"{direction} at C={','.join(map(str, ls))}")
        judged = (
            "met"
            if hits and not misses and not unknown
            else "not met"
            if misses and not hits
            else "not shown"
            if unknown and not hits and not misses
            else "partly met"
        )
        out.append(
            Expectation(e.id, e.expect, "; ".join(said), _measured(e, metric, levels), judged)
        )
    return out


def _measured(e: Experiment, metric: str, levels: Sequence[int]) -> str:
    if e.decision is None:
        return "–"
    parts = []
    for c in levels:
        comp = _find(e.decision.vs_parent, metric, c)
        if comp is not None and comp.ratio is not None:
            parts.append(f"C={c}: ×{comp.ratio:.2f} {comp.verdict}")
    return ", ".join(parts) or "no comparison"


def _next_steps(
    run: Run,
    best: Experiment | None,
    cells: Sequence[tuple[int, list[BriefCell]]],
    columns: Sequence[str],
) -> list[str]:
    out = []
    open_: list[tuple[str, int, int]] = []
    starts = []
    for e in run.experiments:
        if e.decision is None or e.role != "experiment":
            continue
        for c in e.decision.vs_parent:
            if c.verdict == "inconclusive" and c.reps_needed:
                open_.append((e.id, c.concurrency, int(c.reps_needed)))
            if getattr(c, "limit", None) == "starts":
                starts.append(e.id)
    decidable = sorted((n, eid, lvl) for eid, lvl, n in open_ if n <= 12)
    if decidable:
        seen: dict[str, tuple[int, int]] = {}
        for n, eid, lvl in decidable:
            seen.setdefault(eid, (n, lvl))
        said = ", ".join(
            f"{eid} (about {n} repetitions a side at C={lvl})"
            for eid, (n, lvl) in list(seen.items())[:4]
        )
        out.append(
            f"Open verdicts within reach: {said} would decide; with workload.repetitions = "
            "{ min = 3, max = 12 } a run adds repetitions only where a verdict is open."
        )
    if starts:
        out.append(
            "The spread between server starts decides nothing for "
            + ", ".join(sorted(set(starts)))
            + ": more server starts (campaign.starts) or interleaved runs (campaign.interleave) "
            "help, more repetitions on one server do not."
        )
    if best is not None:
        worse = [
            f"{columns[j]} at C={lvl} ({cell.baseline} → {cell.best})"
            for lvl, row in cells
            for j, cell in enumerate(row)
            if j > 0 and cell.css == "worse"
        ]
        if worse:
            out.append(
                f"{best.id} pays in latency: "
                + ", ".join(worse[:3])
                + "; check it against the latency the service must meet (workload.slo)."
            )
        if not run.info.get("confirm") and best is not run.baseline:
            out.append(
                f"Run {best.id} again with its changes taken out one at a time "
                "(campaign.confirm = true) to see whether each still pays with the others in."
            )
    for eid, reason in _failed(run):
        hint = failure_hint(reason)
        if hint:
            out.append(f"{eid}: {hint}")
    return out


def failure_hint(reason: str) -> str:
    """What to change where the failure's cause is a known one."""
    low = reason.lower()
    if "out of memory" in low or "no available memory" in low or "no gpu memory" in low:
        return (
            "out of GPU memory: lower the KV cache's share (gpu-memory-utilization, "
            "mem-fraction-static) or the batch limits (max-num-seqs, max-running-requests), "
            "or raise the share where the weights did not fit"
        )
    if "unrecognized arguments" in low or "invalid choice" in low or "not a flag" in low:
        return "the engine rejected a flag: check it with reportgen validate"
    return ""


def build(run: Run) -> Brief:
    metric = str(run.objective.get("metric") or "output_tok_s")
    key = metric if metric.endswith("_s") else f"{metric}_p50"
    base = run.baseline
    best = next((e for e in run.experiments if e.id == run.best), None)
    columns = [metric, *(f"{label} (ms)" for _, _, label, _ in LATENCIES)]
    failed = _failed(run)
    if best is None or base is None or best is base:
        line = (
            "No experiment was adopted: the baseline stays the configuration to run."
            if base is not None
            else "No configuration finished."
        )
        cmd = shlex.join(base.command) if base is not None and base.command else ""
        return Brief(
            best="",
            best_line=line,
            command=cmd,
            columns=columns,
            levels=[],
            failed=failed,
            expectations=_expectations(run),
            next_steps=_next_steps(run, None, [], columns),
        )
    cells = _cells(run, best, base, key, metric)
    from reportgen.render.experiment import runs_by_level, samples  # (it imports this module)

    runs = runs_by_level(best)
    parent = best.parent or base.id
    line = (
        f"{best.id} is the best configuration: adopted against {parent}"
        + ("" if parent == base.id else f", built on the baseline {base.id}")
        + "."
    )
    return Brief(
        best=best.id,
        best_line=line,
        command=shlex.join(best.command) if best.command else "",
        columns=columns,
        levels=cells,
        failed=failed,
        samples=[samples(runs.get(level) or []) for level, _ in cells],
        expectations=_expectations(run),
        next_steps=_next_steps(run, best, cells, columns),
    )
