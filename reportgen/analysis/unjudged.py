"""Experiments whose numbers are not a verdict on a server change, and why (``Unjudged``):

- ``load``: it runs another load than its parent was measured under (other prompts, answers of
  another length, another API or arrival of requests). Its difference from the parent is the
  load's, not the server's: "rejected against the baseline" would be a category error. It is
  compared with its parent for the record and judged only against an experiment that runs the
  same load (name one in ``based_on``).
- ``expected failure``: its ``expect`` says it fails (a flag the engine should refuse, a memory
  setting too small to start) and it ran. The campaign meant to show a failure and did not;
  how fast it ran is beside the point, and more repetitions would not make it the point.
- ``machine``: it ran on other GPUs than its parent was measured on (a ``--resume`` on another
  host, or another Slurm node: each experiment run elsewhere records its node's GPUs), and its
  parent's configuration was not run beside it (interleaved). One machine's
  speed is not another's: the difference may be the GPUs'. Where the campaign measured the
  parent's configuration again on its GPUs (the bracket at the end of a campaign resumed
  there, an A/A copy run there), that measurement stands in for the parent (``stand_in``) and
  it is judged against it; otherwise it is not. Where a run did not record its GPUs' UUIDs,
  nothing is said.
- ``model build``: it served the same model folder as its parent, but that folder's files
  (config, tokenizer, weights: their sha256 as recorded) had changed between them: another
  build of the model, not a server change.
- ``degenerate outputs``: it changes speculative decoding or sampling (a flag that names a
  draft, n-gram, EAGLE, MTP, temperature...) and its answers, or its parent's, are mostly a
  short string repeated (``analysis.text.outputs``: random weights, a broken kernel). A
  speculator accepts nearly every draft of such text, so its speed-up says nothing of real
  text: 77-91% of n-gram drafts were accepted on the committed vLLM H200 run, whose answers
  all repeat themselves.

Whatever the reason, its verdict stays "inconclusive", it is never the campaign's best, and
adaptive repetitions do not try to decide it."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from reportgen.analysis import text
from reportgen.campaign.workload import Workload
from reportgen.load.records import RequestRecord
from reportgen.results.model import Experiment, Run
from reportgen.results.verdicts import Unjudged

# The workload's keys that say what load the server serves; the others say how it is measured
# (levels, repetitions, warm-up, how long, the seed of the same distributions), which an
# experiment may change against its parent and still be compared at the levels both ran.
LOAD_KEYS = (
    "api",
    "input_tokens",
    "output_tokens",
    "range_ratio",
    "turns",
    "think_s",
    "prompts",
    "arrival",
    "burstiness",
    "extra_body",
    "headers",
)
MAX_CHANGES = 4  # changes named in a reason; the rest are counted


def load_diff(parent: Workload, child: Workload) -> list[tuple[str, str, str]]:
    """What ``child`` changes in the load against ``parent``: (key, before, after), a nested
    table's keys as ``prompts.source``, in ``LOAD_KEYS`` order."""
    out: list[tuple[str, str, str]] = []
    for key in LOAD_KEYS:
        out += _changed(key, _plain(getattr(parent, key)), _plain(getattr(child, key)))
    return out


def load_changes(parent: Workload, child: Workload) -> list[str]:
    """``load_diff`` as "key before -> after" (``Unjudged.changes``)."""
    return changes_said(load_diff(parent, child))


def changes_said(diff: Sequence[tuple[str, str, str]]) -> list[str]:
    """Each (key, before, after) of ``load_diff`` as "key before -> after"."""
    return [f"{key} {a} -> {b}" for key, a, b in diff]


def _plain(value: Any) -> Any:
    return value.model_dump() if hasattr(value, "model_dump") else value


def _changed(key: str, a: Any, b: Any) -> list[tuple[str, str, str]]:
    if a == b:
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            x
            for k in sorted(a.keys() | b.keys())
            for x in _changed(f"{key}.{k}", a.get(k), b.get(k))
        ]
    return [(key, _short(a), _short(b))]


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


_FAILS = re.compile(r"\b(fails?|should fail|will fail|expected to fail)\b", re.I)
_NEGATED = re.compile(r"\b(not|no longer|never|no|n't|without)\s+(\w+\s+)?$", re.I)


def expects_failure(text: str) -> bool:
    """Whether an expectation says the experiment fails ("Fails at start", "should fail"),
    not that it no longer does ("should not fail") or what a failure was ("the capture that
    fails")."""
    for m in _FAILS.finditer(text):
        before = text[: m.start()]
        if _NEGATED.search(before) or re.search(r"\b(that|which)\s+$", before, re.I):
            continue
        return True
    return False


# A server flag that changes speculative decoding or sampling (vLLM's --speculative-config,
# SGLang's --speculative-algorithm, --speculative-num-draft-tokens..., the simulator's
# --spec-draft-tokens; a sampling default)
SPEC_OR_SAMPLING = re.compile(
    r"spec|draft|ngram|eagle|medusa|mtp|lookahead|temperature|top[-_]?[pk]\b|sampling"
    r"|generation-config",
    re.I,
)


def speculation_or_sampling(entry: Experiment) -> list[str]:
    """The flags by which ``entry`` changes speculative decoding or sampling."""
    return [f.key for f in entry.flag_diff if SPEC_OR_SAMPLING.search(f.key)]


def model_changes(parent: Experiment, child: Experiment) -> list[str]:
    """The files of the same model folder whose sha256 differ between ``parent`` and
    ``child`` (a file only one recorded is not compared): "config.json e0b4ec21 -> 7a1c..."."""
    a, b = parent.model_files or {}, child.model_files or {}
    if not a.get("model") or a.get("model") != b.get("model"):
        return []  # another model on purpose (a flag), or none recorded
    fa, fb = a.get("files") or {}, b.get("files") or {}
    return [
        f"{name} {str(fa[name])[:8]} -> {str(fb[name])[:8]}"
        for name in sorted(set(fa) & set(fb))
        if fa[name] != fb[name]
    ]


def gpus_at(run: Run, when: str | None) -> tuple[str, ...] | None:
    """The UUIDs of the GPUs the run was on at ``when`` (an experiment's start): the run's
    own, or those of the last ``--resume`` before it; None where they were not recorded."""
    if when is None:
        return None
    found: list[str | None] = list(run.fingerprint.gpus.uuids)
    for r in run.resumed:
        if r.at <= when:
            found = list(r.gpu_uuids)
    known = tuple(u for u in found if u)
    return known or None


def gpus_of(run: Run, e: Experiment) -> tuple[str, ...] | None:
    """The UUIDs of the GPUs ``e``'s servers ran on: those its own node sent back where it
    ran elsewhere (a Slurm job's node, an SSH host: ``ran_on``), else the run's at its start
    (``gpus_at``); None where not recorded."""
    fp = e.ran_on.fingerprint if e.ran_on is not None else None
    if isinstance(fp, dict):
        own = tuple(str(u) for u in fp.get("uuids") or () if u)
        if own:
            return own
    return gpus_at(run, e.started_at)


def stand_in(run: Run, entry: Experiment) -> Experiment | None:
    """Where ``entry`` ran on other GPUs than its parent (not beside it, interleaved), the
    experiment that measured the parent's server configuration (its command and environment)
    again on ``entry``'s GPUs, under ``entry``'s load: the bracket at the end of a campaign
    resumed on another host, an A/A copy run there. It stands in for the parent in the
    verdict, the one machine on both sides. The nearest in time where there are several;
    None where there is none, or the GPUs were not recorded."""
    parent = run.experiment(entry.parent)
    if parent is None or (entry.control is not None and entry.control.paired):
        return None  # interleaved: the parent's configuration ran beside it
    mine, theirs = gpus_of(run, entry), gpus_of(run, parent)
    if not mine or not theirs or set(mine) == set(theirs):
        return None
    load = entry.ran_workload
    found = [
        e
        for e in run.experiments
        if e.id not in (entry.id, parent.id)
        and e.ok
        and e.levels
        and not (e.decision is not None and e.decision.verdict == "failed")  # checks failed
        and e.command
        and (e.command, e.env) == (parent.command, parent.env)
        and set(gpus_of(run, e) or ()) == set(mine)
        and load is not None
        and e.ran_workload is not None
        and not load_diff(e.ran_workload, load)
    ]
    at = _when(entry)
    return min(found, key=lambda e: abs(_when(e) - at), default=None)


def _when(e: Experiment) -> float:
    """When ``e`` started, in seconds since the epoch (0 where not recorded)."""
    if not e.started_at:
        return 0.0
    return datetime.fromisoformat(e.started_at).timestamp()


def unjudged(
    entry: Experiment,
    parent: Experiment | None,
    rows: Sequence[RequestRecord] | None = None,
    parent_rows: Sequence[RequestRecord] | None = None,
    machines: tuple[tuple[str, ...] | None, tuple[str, ...] | None] = (None, None),
) -> list[Unjudged]:
    """Why ``entry`` (an experiment that ran) is not judged against ``parent``: [] where it
    is judged. ``rows``, ``parent_rows``: their request records, whose answers say whether
    they are degenerate (not looked at where not given); ``machines``: the GPUs each ran on
    (``gpus_of``; not compared where either is None)."""
    out = []
    if parent is not None:
        rebuilt = model_changes(parent, entry)
        if rebuilt:
            out.append(Unjudged(kind="model build", changes=rebuilt))
    mine_gpus, their_gpus = machines
    if mine_gpus and their_gpus and set(mine_gpus) != set(their_gpus):
        out.append(
            Unjudged(kind="machine", changes=[f"{', '.join(their_gpus)} -> {', '.join(mine_gpus)}"])
        )
    wanted = (
        any(x.get("verdict") == "fails" for x in entry.expects)
        if entry.expects
        else expects_failure(entry.expect or "")
    )
    if wanted:
        out.append(Unjudged(kind="expected failure"))
    flags = speculation_or_sampling(entry)
    if flags:
        said = [
            f"{who}'s answers: {seen.said()}"
            for who, got in ((entry.id, rows), (parent.id if parent else "", parent_rows))
            if got and (seen := answers(got)).degenerate
        ]
        if said:
            out.append(Unjudged(kind="degenerate outputs", changes=flags, outputs=said))
    mine = entry.ran_workload
    theirs = parent.ran_workload if parent is not None else None
    if mine is not None and theirs is not None:
        changes = load_changes(theirs, mine)
        if changes:
            out.append(Unjudged(kind="load", changes=changes))
    return out


def answers(rows: Sequence[RequestRecord]) -> text.Outputs:
    """``analysis.text.outputs`` of the answers of ``rows`` that succeeded."""
    return text.outputs(r.output_text for r in rows if r.status == "ok" and r.output_text)


def reason(u: Unjudged, parent_id: str) -> str:
    """``u`` in a sentence."""
    if u.kind == "degenerate outputs":
        return (
            f"Not judged: it changes speculative decoding or sampling ({', '.join(u.changes)}) "
            f"and the text it was measured on is degenerate ({'; '.join(u.outputs)}). A "
            "speculator accepts "
            "nearly every draft of text that repeats itself, so the speed-up says nothing of "
            "real text: measure it on a model with real weights and prompts it answers."
        )
    if u.kind == "model build":
        return (
            f"Not judged: it served another build of {parent_id}'s model, from the same folder "
            f"({'; '.join(u.changes)}), so its difference may be the model's. Measure the "
            "parent's configuration again on this build and compare with that."
        )
    if u.kind == "machine":
        return (
            f"Not judged: it ran on other GPUs than {parent_id} was measured on "
            f"({'; '.join(u.changes)}): another machine (a resumption elsewhere, another "
            "node), so its difference may be the machines'. Measure the parent's configuration "
            "again on this machine (as an experiment of its own, or the campaign's bracket): "
            "it is then compared with that."
        )
    if u.kind == "expected failure":
        return (
            "The expected failure did not happen: its expectation says it fails, and it ran. "
            "Its numbers are shown, not judged; if it should fail, its settings do not do what "
            "was meant."
        )
    named = ", ".join(u.changes[:MAX_CHANGES])
    more = len(u.changes) - MAX_CHANGES
    if more > 0:
        named += f" and {more} more"
    return (
        f"Not judged: it runs another load than {parent_id} ({named}), so its difference is "
        "the load's, not a server change's. To judge it, compare it with an experiment that "
        "runs the same load (name one in based_on)."
    )


def short(u: Unjudged, parent: str) -> str:
    """``u`` in a few words, for page one's list (``reason`` says it in full)."""
    if u.kind == "load":
        return f"runs another load than {parent} ({', '.join(u.changes[:2])})"
    if u.kind == "expected failure":
        return "expected to fail, and ran: the expected failure did not happen"
    if u.kind == "degenerate outputs":
        return (
            f"changes speculative decoding or sampling ({', '.join(u.changes)}) over "
            "degenerate answers, where drafts are accepted that real text would refuse"
        )
    if u.kind == "machine":
        return f"measured on other GPUs than {parent}"
    return f"served another build of {parent}'s model"
