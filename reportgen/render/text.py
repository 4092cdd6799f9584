"""The prose parts of the report: docstrings read as text, the noise and error-rate lines,
the decisions taken again, the environment (the host's fingerprint, a free-form dict in the
results as ``observe.fingerprint`` gives it), a search's answer. The workload's description
is ``render.workload``, the methods section ``render.methods``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reportgen.observe.environment import Environment, Reached
from reportgen.render.content import Pair
from reportgen.render.fmt import field_rows
from reportgen.results.findings import AllocationFinding
from reportgen.results.model import StartPrior, rate_text
from reportgen.results.verdicts import Redecision


@dataclass(frozen=True)
class Doc:
    """A docstring split into plain paragraphs and ``- name: text`` bullets."""

    paragraphs: list[str]
    bullets: list[Pair]


def parse_doc(doc: str | None) -> Doc:
    """Paragraphs and bullets of a module docstring, with reST backticks removed.

    Empty when docstrings are stripped (python -OO); the template then points to the source.
    """
    paragraphs: list[str] = []
    bullets: list[Pair] = []
    for block in re.split(r"\n\s*\n", doc or ""):
        in_bullet = False
        lines: list[str] = []
        for raw in block.splitlines():
            line = raw.strip()
            if line.startswith("- ") and ":" in line:
                name, rest = line[2:].split(":", 1)
                bullets.append((_plain(name), rest.strip()))
                in_bullet = True
                continue
            if in_bullet and line:  # an indented continuation of the bullet above
                name, body = bullets[-1]
                bullets[-1] = (name, f"{body} {line}")
                continue
            if line:
                lines.append(line)
        if lines:
            paragraphs.append(_plain(" ".join(lines)))
    return Doc(paragraphs, [(n, _plain(t)) for n, t in bullets])


def _plain(s: str) -> str:
    """Docstring markup out: reST literals (````x````) and bold (``**x**``)."""
    return s.replace("``", "").replace("**", "").strip()


def noise_line(decisions: Sequence[Any]) -> str:
    """What the last pooled decision's noise model measured, in a sentence."""
    last = next((d.noise for d in reversed(decisions) if d is not None and d.noise), None)
    if not last:
        return ""
    within, between = last.within_sd, last.between_sd
    parts = []
    if within is not None:
        total = last.within_total_dof
        groups = f"{last.within_cells} groups" + (
            f" with {total:.0f} degrees of freedom" if total is not None else ""
        )
        parts.append(
            f"repetitions on one server spread by {within:.1%} (sd of log values, from "
            f"{groups}; they agree enough to weigh as {last.within_dof:.0f} degrees "
            "of freedom beside each comparison's own)"
        )
    by_level = last.between_sd_by_level or {}
    if by_level:
        said = ", ".join(f"{v:.1%} at {k}" for k, v in by_level.items() if v is not None)
        parts.append(
            f"server starts of one configuration by {said} beyond that "
            f"(moderated towards each other; {last.between_dof} degree(s) of freedom)"
        )
    elif between is not None:
        parts.append(
            f"server starts of one configuration by {between:.1%} beyond that "
            f"({last.between_dof} degree(s) of freedom)"
        )
    else:
        parts.append(
            "the spread between server starts was not measured (no configuration was started "
            "twice), so verdicts assume it is nothing"
        )
    said = "Measured in this run, for the objective: " + "; ".join(parts) + "."
    methods = {d.method for d in decisions if d is not None and d.noise}
    if "pooled" in methods:
        said += (
            " These verdicts were taken by the earlier method: the spread between starts pooled"
            " over levels, and Welch-Satterthwaite degrees of freedom even where a side ran on"
            " one start (`reportgen render --redecide` takes them again as described above)."
        )
    return said


def allocation_line(a: AllocationFinding | None) -> str:
    """How this run's repetitions would best be split over server starts, from its measured
    costs and spreads (``analysis.allocation``), in a sentence; empty where it cannot say."""
    if a is None:
        return ""
    costs = (
        f"Here a server start took about {a.start_s:.0f} s until ready and warmed up, one "
        f"repetition of the levels about {a.repetition_s:.0f} s"
    )
    ran = f"this run: campaign.starts = {a.starts}"
    m = a.per_start
    if m is None:
        return (
            f" {costs}, and starts differed no more than repetitions on one server do: more "
            f"starts would only cost time, and two (which keep measuring that spread) are "
            f"enough ({ran})."
        )
    per = "one repetition per start makes" if m < 1.5 else f"about {m:.1f} repetitions a start make"
    k = a.suggested_starts
    if k == min(a.starts, a.repetitions) or a.narrower < 0.01:
        advice = f"as this run did ({ran})"
    else:
        advice = (
            f"so for {a.repetitions} repetitions campaign.starts = {k} ({ran}), intervals "
            f"about {a.narrower:.0%} narrower for the same GPU time and the spread between "
            "starts measured on more of them"
        )
    return (
        f" {costs}; with the spreads above, {per} a mean surest for the GPU time it takes "
        f"(two-stage sampling's optimum, Cochran 1977, section 10.6), {advice}."
    )


def error_rate(
    alpha: float,
    scope: str,
    experiments: int,
    levels: int,
    *,
    fallback: bool = False,
    cost: tuple[float, float] | None = None,
) -> str:
    """Which false-alarm rate the verdicts hold, in a sentence: ``alpha`` for each
    experiment or for the campaign (over its ``experiments`` compared), shared by the
    objective's ``levels``; ``fallback``: held online by the fallback procedure (else
    Bonferroni's equal shares, as campaigns were decided before 2026-12-07); ``cost``: the
    median smallest detectable change as decided and as it would have been at ``alpha`` for
    each experiment (``online.power_cost``)."""
    each = alpha / max(1, experiments) if scope == "campaign" else alpha
    shared = f", shared by the objective's {levels} levels" if levels > 1 else ""
    if scope == "campaign" and fallback:
        paid = (
            f" What it cost: the smallest change the objective's comparisons could detect "
            f"(80% power, median) was x{cost[0]:.3f}, against x{cost[1]:.3f} at "
            f"{alpha:.0%} for each experiment."
            if cost is not None
            else ""
        )
        return (
            f"False alarms are held for the campaign as a whole (campaign.alpha_scope = "
            f'"campaign"): a campaign whose {experiments} compared experiments all change '
            f"nothing holds a wrong call (one adopted or rejected) with probability at most "
            f"{alpha:.0%}, by the fallback procedure (Wiens 2003; online, Tian and Ramdas "
            f"2021): each experiment is decided at {each:.2%}, plus the rate of the one "
            f"before it where that one was adopted or rejected{shared}.{paid}"
        )
    if scope == "campaign":
        return (
            f"False alarms are held for the campaign as a whole (campaign.alpha_scope = "
            f'"campaign"): a campaign whose {experiments} compared experiments all change '
            f"nothing holds a wrong call (one adopted or rejected) with probability at most "
            f"{alpha:.0%}, each experiment decided at {each:.2%} (Bonferroni){shared}. In "
            "simulated campaigns of eight at 5% that held with the bracket and its drift check "
            "(0.6-2.6% of campaigns) and nearly without it (2.7-6.3%, the most at 2% noise; "
            "benchmarks/verdicts.py --campaign-wide)."
        )
    return (
        f"False alarms are held for each experiment: one no different from its parent is "
        f"adopted or rejected with probability at most {alpha:.0%}{shared}. Over a campaign "
        f"of {experiments} such experiments the chance of some wrong call is higher, up to "
        f"{min(1.0, alpha * experiments):.0%}; "
        'campaign.alpha_scope = "campaign" holds it for the whole campaign instead.'
        if experiments > 1
        else f"False alarms are held for each experiment: one no different from its parent is "
        f"adopted or rejected with probability at most {alpha:.0%}{shared}."
    )


METHOD_NAMES = {
    "anchored": "with the run's noise model (the spread between starts per level; a tail "
    "too thin for an interval decided by its runs' order)",
    "levels": "with the run's noise model (the spread between starts per level, as reportgen "
    "took decisions before 2026-12-07)",
    "pooled": "with the run's noise model (the spread between starts pooled over levels, "
    "as reportgen took decisions before 2026-12)",
    "welch": "by each comparison's own repetitions (Welch)",
}


def start_prior_line(prior: StartPrior | None) -> str:
    """Where the spread between starts came from when earlier runs measured it
    (``history.prior``), in a sentence; empty where the campaign's statement was used."""
    if prior is None or not prior.levels:
        return ""
    levels = ", ".join(f"{lv.spread:.1%} at {lv.point.label} ({lv.dof:.0f})" for lv in prior.levels)
    n = len(prior.runs)
    return (
        f" Before this run measured its own, the spread between server starts was taken from "
        f"{n} earlier run{'s' if n != 1 else ''} of this campaign on the same GPUs, engine "
        f"version, model and workload ({prior.source}: {', '.join(prior.runs)}): {levels} "
        "(degrees of freedom in brackets), instead of campaign.start_spread."
    )


def redecided(records: Sequence[Redecision], now: Mapping[str, str], best: str | None) -> str:
    """``render --redecide`` (or ``--recheck``) in a sentence: when, by what, and which
    verdicts the run's first decisions gave otherwise. ``now``: experiment id -> verdict;
    ``best``: the best configuration now."""
    if not records:
        return ""
    first, last = records[0], records[-1]
    before = first.verdicts_before
    # runs decided before the noise model had only Welch's method
    method = METHOD_NAMES.get(first.method_before or "welch", "")
    changed = [f"{k} {v} (now {now[k]})" for k, v in before.items() if k in now and now[k] != v]
    how = (
        "its assumption checks taken again first, with this reportgen's engine adapters "
        "(`render --recheck`)"
        if any(r.checks_before is not None for r in records)
        else "`render --redecide`"
    )
    first_said = (
        f"as the run first took them, {method}, "
        + ("they differed in " + "; ".join(changed) if changed else "every verdict was the same")
        + (f"; the best was {first.best_before} (now {best})" if first.best_before != best else "")
    )
    by = METHOD_NAMES.get(str(last.method), "")
    return (
        f" The decisions were taken again on {last.at[:10]} by reportgen "
        f"{last.reportgen_version} {by}, {how}; "
        f"{first_said}."
    )


def _value(v: Any) -> str:
    """A fingerprint field: collectors record ``{"error": why}`` when they could not read it."""
    if isinstance(v, Mapping) and "error" in v:
        return f"unavailable ({v['error']})"
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list | tuple):
        return ", ".join(_value(x) for x in v)
    if isinstance(v, Mapping):  # a group of fields: "key: value" pairs
        return "; ".join(f"{k}: {_value(x)}" for k, x in v.items()) or "–"
    return str(v)


HOST_FIELDS: tuple[Pair, ...] = (
    ("hostname", "hostname"),
    ("cpu_model", "CPU"),
    ("cpu_count", "CPUs"),
    ("cpu_affinity", "CPUs usable by the run"),
    ("cpu_mhz_now", "CPU MHz (now)"),
    ("cpu_max_mhz", "CPU max MHz"),
    ("frequency_governor", "frequency governor"),
    ("turbo", "turbo / boost"),
    ("numa_nodes", "NUMA nodes (CPUs)"),
    ("memory_gib", "memory (GiB)"),
    ("os", "OS"),
    ("kernel", "kernel"),
    ("machine", "architecture"),
    ("virtualization", "virtualised by"),
    ("python", "Python"),
    ("container", "container"),
    ("cgroup_limits", "cgroup limits"),
)


def reached(ex: Reached) -> str:
    """How a run reached the host that measured (``executor.*.record``), in a phrase."""
    here = f" from {ex.from_}" if ex.from_ else ""
    python = f"; Python {ex.python}" if ex.python else ""
    if ex.kind == "slurm":
        asked = ", ".join(
            x
            for x in (
                f"partition {ex.partition}" if ex.partition else "",
                f"{ex.gpus} GPUs" if ex.gpus is not None else "",
                f"time limit {ex.time}" if ex.time else "",
            )
            if x
        )
        return (
            f"as Slurm job steps{here}" + (f" ({asked})" if asked else "") + python
            + "; the host below is the node that answered the preflight, and each "
            "experiment says the node it ran on"
        )  # fmt: skip
    rtt = f"; SSH round trip {ex.ssh_rtt_ms:g} ms" if ex.ssh_rtt_ms else ""
    return f"over SSH: {ex.host}{here}{rtt}{python}"


def environment(env: Environment) -> dict[str, Any]:
    """Host, software and GPUs as (label, value) rows, every value a string."""
    sw, gpus, rg = env.software, env.gpus, env.software.reportgen
    software = [
        ("reportgen", _value(rg.version)),
        ("reportgen commit", _value(rg.commit) + (" (uncommitted changes)" if rg.dirty else "")),
    ]
    if "installed_packages_count" in sw.model_fields_set:
        software.append(
            (
                "installed Python packages",
                f"{sw.installed_packages_count} (list sha256 {sw.installed_packages_sha256})",
            )
        )
    if sw.torch_stack:
        software.append(("torch stack (reportgen's Python)", _value(sw.torch_stack)))
    for repo in sw.repos:
        state = (
            f"unavailable ({repo.error})"
            if "error" in repo.model_fields_set
            else f"{repo.commit}"
            + (f" ({repo.changed_files} uncommitted changes)" if repo.dirty else "")
        )
        software.append((f"repository {repo.path}", state))
    # reportgen's own row is above: a source checkout has no installed distribution, which
    # the package list would call "not installed" beside its version.
    packages = [
        (str(k), "not installed" if v is None else _value(v))
        for k, v in sw.packages.items()
        if not (k == "reportgen" and rg.version)
    ]
    env_vars = [(str(k), _value(v)) for k, v in sorted(sw.env.items())]
    host = env.host.fields()  # what the OS showed: the known fields first, in their order
    known = {k for k, _ in HOST_FIELDS}
    raw = [(label, host.get(k)) for k, label in HOST_FIELDS if k in host]
    raw += [(str(k), v) for k, v in sorted(host.items()) if k not in known]
    host_rows = [(label, _value(v)) for label, v in raw]
    # the fields the OS would not show (a collector's ``{"error": why}``)
    unread = [label for label, v in raw if isinstance(v, Mapping) and "error" in v]
    if env.executor is not None:
        host_rows.insert(0, ("reached", reached(env.executor)))
    devices = []
    for d in gpus.devices:
        mem = d.memory_total_bytes
        devices.append(
            {
                "index": _value(d.index),
                "name": _value(d.name),
                "cc": _value(d.compute_capability),
                "memory": f"{mem / 1024**3:.1f}" if isinstance(mem, int | float) else _value(mem),
                "power": _value(d.power_limit_w),
                "uuid": _value(d.uuid),
            }
        )
    return {
        "host": host_rows,
        # in print, the host's fields the OS would not show are named on one line
        "host_read": [(k, v) for k, v in host_rows if k not in unread],
        "host_unread": unread,
        "software": software,
        "packages": packages,
        "env": env_vars,
        "gpu_available": bool(gpus.available),
        "gpu_reason": str(gpus.reason or "no reason recorded"),
        "gpu_rows": [
            ("driver", _value(gpus.driver)),
            ("CUDA driver", _value(gpus.cuda_driver_version or gpus.cuda_driver)),
            ("count", _value(gpus.count if "count" in gpus.model_fields_set else len(devices))),
        ],
        "devices": devices,
        "device_details": [
            {"index": _value(d.index), "rows": field_rows(d.fields())} for d in gpus.devices
        ],
        "topology": [
            {
                "gpus": " - ".join(str(g) for g in t.get("gpus") or []),
                "ancestor": _value(t.get("common_ancestor")),
                **{
                    k: _value((t.get("p2p") or {}).get(k))
                    for k in ("read", "write", "nvlink", "atomics")
                },
            }
            for t in gpus.topology or []
            if isinstance(t, dict)
        ],
    }


def _holds_differ(bound: str, ci: Sequence[float]) -> bool:
    """Whether a bound (as written, ``ttft_ms.p99<500``) holds at one end of an interval and
    not at the other."""
    from reportgen.campaign.bounds import parse

    (b,) = parse(bound)
    return b.holds(ci[0]) != b.holds(ci[1])


def _latency(bound: str) -> bool:
    """Whether a bound (as written) is on a latency's statistic, not a throughput."""
    from reportgen.campaign.bounds import parse

    (b,) = parse(bound)
    return b.stat is not None


def search_over_rates(record: Any) -> bool:
    """Whether a search varied the request rate (else the concurrency)."""
    return getattr(record, "over", "concurrency") == "request_rate"


def search_level(rates: bool, x: Any) -> str:
    """A level a search probed, as the report names it: "R=16/s" or "C=16"."""
    return f"R={rate_text(float(x))}/s" if rates else f"C={int(float(x))}"


def search_answer(record: Any) -> str:
    """A search's answer, its first clause: "The highest concurrency meeting ttft_ms.p99<200
    is C=16", or "No concurrency probed met ... (C=1 and above fail)" (``search_said`` goes
    on from it)."""
    bounds = " and ".join(record.bounds) or record.slo
    rates = search_over_rates(record)
    what = "request rate" if rates else "concurrency"

    def at(x: Any) -> str:
        return search_level(rates, x)

    low = record.lowest_failure
    if record.best is None:
        return f"No {what} probed met {bounds}" + (f" ({at(low)} and above fail)" if low else "")
    return f"The highest {what} meeting {bounds} is {at(record.best)}"


def search_said(record: Any) -> str:
    """A search's answer in a sentence (``workload.find_max``): the highest concurrency, or
    request rate, meeting the bounds."""
    n = len(record.probes)
    pooled = bool(getattr(record, "pooled", False))  # latency bounds over all runs' requests
    rates = search_over_rates(record)

    def at(x: Any) -> str:
        return search_level(rates, x)

    def where(p: Any) -> float:
        return float(p.rate) if rates and p.rate is not None else float(p.concurrency)

    low = record.lowest_failure
    failed = next((p for p in record.probes if low is not None and where(p) == low), None)
    why = ""
    if failed is not None:
        over = [f"{k} {v:.4g}" for k, v in failed.values.items() if v is not None] + (
            [f"{failed.error_share:.0%} errors"] if failed.error_share > 0.01 else []
        )
        why = f"; {at(low)} did not ({', '.join(over)})"
    head = search_answer(record)
    if record.best is not None:
        passed = next((p for p in record.probes if p.passed and where(p) == record.best), None)
        values = passed.values if passed is not None else {}
        held = [
            f"{k} {values[k]:.4g} (95% interval {lo:.4g}-{hi:.4g})"
            for k, (lo, hi) in (passed.intervals.items() if passed is not None else [])
            if values.get(k) is not None
        ]
        if held:  # the answer with its interval over the repetitions there
            head += f", where {', '.join(held)}"
        head += why
        if low is not None and record.converged:
            why = ""
            head += f": the boundary lies between {at(record.best)} and {at(low)}"
    confirmed = sorted((p for p in record.probes if getattr(p, "confirmed", False)), key=where)
    if confirmed:  # the boundary probed again at the end (``find_max.confirm``)
        again = ", ".join(
            f"{at(where(p))} {'passed' if p.passed else 'failed'} on its {p.runs} runs"
            for p in confirmed
        )
        head += f" (probed again at the end: {again})"
    ends = getattr(record, "interval", None)
    if ends and ends != [record.best, low]:  # noise moves an end of the answer's interval
        lo, hi = ends
        head += (
            f"; allowing for noise, the answer lies between "
            f"{at(lo) if lo is not None else 'the lowest probe or below'} and "
            f"{at(hi) if hi is not None else 'beyond the probes'}"
        )
    near = [p for p in record.probes if getattr(p, "near", False)]
    note = ""
    if near:
        said = []
        for p in near[:2]:
            bound, (lo, hi) = next(
                (k, v) for k, v in p.intervals.items() if v and _holds_differ(k, v)
            )
            again = ", after its repetitions ran again" if p.repeated else ""
            how = (
                "its runs resampled, their requests pooled"
                if pooled and _latency(bound)
                else "over its repetitions on one server"
            )
            said.append(
                f"{at(where(p))} {'passed' if p.passed else 'failed'} within noise ({bound}: 95% "
                f"interval {lo:.4g}-{hi:.4g}, {how}{again})"
            )
        note = "; " + "; ".join(said)
    if record.converged:
        tail = f", found in {n} probes."
    elif low is None:
        tail = f"; the {n} probes allowed ran out before {at(record.max)}, the most to try."
    elif record.best is None:
        tail = f"; the {n} probes allowed ran out before one passed."
    else:
        tail = (
            f"; the {n} probes allowed ran out with the answer between {at(record.best)} and "
            f"{at(low)}."
        )
    return head + note + tail
