"""The report's methods section: metric definitions and verdict rules read from the
docstrings of the analysis modules that implement them (so the report and the code cannot
drift apart: change the definition where the number is computed and the next report says the
new thing), the load as the workload set it, the statistics and the checks."""

from __future__ import annotations

from collections.abc import Sequence

from reportgen.analysis import checks, decide, noise, sequential, summary
from reportgen.campaign.workload import Workload, repetitions_bounds
from reportgen.render.content import Methods
from reportgen.render.text import parse_doc
from reportgen.render.workload import (
    burstiness,
    lengths_said,
    level_warmup,
    line,
    pairs,
    rate_of,
    rates_of,
    slo_set,
    stagger,
    trim,
)
from reportgen.results.as_run import workload_as_run
from reportgen.results.findings import METHOD
from reportgen.results.model import Experiment

VERDICT_TERMS = ("equivalent", "better / worse", "inconclusive", "mde", "reps_needed")


def methods(
    wl: Workload,
    exps: Sequence[Experiment],
    margin: float | None,
    objective_label: str,
    interleave: bool = False,
    starts: int = 1,
    measured: str = "",
    ci_level: str = "95%",
    error: str = "",
) -> Methods:
    """Metric definitions, load settings, statistics and the assumption checks, for the
    methods section; ``wl``: the campaign's workload, ``exps``: the experiments, whose own
    workloads are listed where they differ from it."""
    metric_doc = parse_doc(summary.__doc__)
    stats_doc = parse_doc(decide.__doc__)
    checks_doc = parse_doc(checks.__doc__)
    low, high = repetitions_bounds(wl.repetitions)
    noise_doc = parse_doc(noise.__doc__)
    seq_doc = parse_doc(sequential.__doc__)
    if wl.requests_per_level is not None:
        amount = f"{wl.requests_per_level} requests per level"
    else:
        amount = f"{wl.duration_s} s per level"
    rate = rate_of(wl)
    searched_rates = wl.find_max is not None and wl.find_max.over == "request_rate"
    if wl.prompts.source == "trace":
        amount = (
            f"the trace's first {wl.requests_per_level} requests per level"
            if wl.requests_per_level is not None
            else f"the trace's first {wl.duration_s} s per level"
        )
        loop = (
            "Open loop, replaying a trace: each request is sent at its own timestamp, whether "
            "or not earlier ones have finished; the concurrency level C caps the requests in "
            "flight (a request that must wait is timed from when it is actually sent)."
        )
    elif rates_of(wl) is not None or searched_rates:
        caps = wl.concurrency or [0]
        cap = (
            f"at most {caps[0]} requests in flight (a request that must wait is timed from "
            "when it is actually sent)"
            if caps[0]
            else "with no cap on the requests in flight"
        )
        chosen = " (the rates the search chose)" if searched_rates else ""
        loop = (
            f"Open loop with the request rate as the level{chosen}: at each level's rate R, "
            f"requests arrive R per second ({wl.arrival} arrivals, seeded; R = inf: "
            f"every request of the level at its start), whether or not earlier ones have "
            f"finished, {cap}."
        )
    elif rate == float("inf"):
        loop = (
            "Open loop at an infinite rate: every request of a level is sent at its start, "
            "the concurrency level C capping the requests in flight (a request that must wait "
            "is timed from when it is actually sent)."
        )
    elif rate:
        loop = (
            f"Open loop: requests arrive at {rate:g} per second ({wl.arrival} "
            f"arrivals, seeded), whether or not earlier ones have finished; the concurrency "
            f"level C caps the requests in flight (a request that must wait is timed from when "
            f"it is actually sent)."
        )
    else:
        loop = (
            "Closed loop: at concurrency C, C clients each send a request and send the next as "
            "soon as the previous one ends, so C requests are in flight (apart from the start "
            "and the end of a level). " + stagger(wl, exps)
        )
    shape = burstiness(wl)
    if shape is not None:
        loop += (
            f" The gaps between arrivals are gamma-distributed of shape "
            f"{shape:g} with the rate's mean gap (burstiness, as vLLM's: below "
            "1 burstier than Poisson, above 1 more even)."
        )
    turns = int(wl.turns or 1)
    if turns > 1:
        think = float(wl.think_s or 0)
        loop += (
            f" Each client holds a conversation of {turns} turns at a time: every turn sends "
            "the turns before it with the answers the server gave them (the history grows "
            "as a chat's does), "
            + (f"{think:g} s after the previous answer" if think else "as soon as the "
               "previous answer ends")
            + "; a level's requests count turns, and a turn that fails ends its conversation."
        )  # fmt: skip
    src = wl.prompts
    source = src.source
    prompts_text = {
        "shared-prefix": f"prompts are synthetic and share prefixes: each begins with one of "
        f"{src.groups} seeded prefixes of {src.prefix_tokens} tokens "
        "(the same in every experiment), drawn per request, then its own text",
        "random": "prompts are synthetic"
        + (
            " and exactly that long by the campaign's tokenizer"
            if wl.tokenizer
            else ", their length approximated in words and corrected after warm-up from the "
            "server's reported prompt tokens"
        ),
        "sharegpt": "prompts are the first human turns of a ShareGPT-format dataset",
        "jsonl": "prompts come from a JSONL dataset",
        "fixed": "every request sends the same fixed prompt",
        "trace": "requests replay a trace: each sent at its timestamp, with its input and "
        "output lengths, its prompt synthetic text made of its hash_ids blocks (a block the "
        "same text wherever it appears, so requests share what the trace says they share)",
    }.get(source, "prompts are synthetic")
    sizes = (
        f"{wl.input_tokens} input tokens and {wl.output_tokens} output tokens requested per request"
        if source in ("random", "shared-prefix")
        # a dataset's prompts are as long as they are: input_tokens does not apply
        else f"{wl.output_tokens} output tokens requested per request, the "
        "prompts as long as they are"
    ) + lengths_said(wl)
    load = [
        f"{loop} {amount}; {wl.api} API; {sizes}; {prompts_text}; drawn from "
        f"seed {wl.seed}, the same for every experiment.",
        f"Warm-up: {wl.warmup_requests} requests after the server is "
        "ready and before the first level; they are excluded from every number." + level_warmup(wl),
        (
            f"Repetitions: each level is run {low} time(s); a repetition's summary is one "
            if low == high
            else f"Repetitions: adaptive, {low} to {high}: each level is run {low} times, then "
            "the objective's levels whose verdict is still open get one more repetition at a "
            + (
                "time, each round on a fresh server with the parent's configuration run again "
                "beside it on a fresh server of its own (the parent grows with the experiment: "
                "its added runs join its own in the comparison), until decided, at "
                f"{high}, or once no count within {high} would decide (a futility stop, from "
                f"{METHOD.futility_dof} degrees of freedom of a level's interval); a repetition's "
                "summary is one "
                if any(e.control is not None and e.control.grown for e in exps)
                else "time, each round on a fresh server, until decided or at "
                f"{high}; a repetition's summary is one "
            )
        )
        + "observation. Tables show the mean across repetitions and ± its sample standard "
        "deviation; chart error bars are the same standard deviation; ratios are of "
        "geometric means (the mean of log values), the same number wherever a ratio appears.",
        f"Request timeout: {wl.request_timeout_s} s.",
    ]
    if wl.extra_body:
        load.append(
            f"Every request also sends {pairs(wl.extra_body, ' = ')} (workload.extra_body)."
        )
    if wl.headers:
        load.append(
            f"Every request carries the headers {pairs(wl.headers, ': ')} (workload.headers)."
        )
    if interleave:
        load.append(
            "Interleaved: each experiment's repetitions alternated with fresh runs of its "
            "parent's configuration (parent, experiment, experiment, parent, ...), each on a "
            "fresh server, and the comparison with the parent is paired by repetition."
        )
    elif wl.fresh_server:
        load.append("A fresh server was started and warmed up for every repetition.")
    # as the run did it: a server already running (bench) is one start whatever was asked
    started = max(
        (sum(s.role == "experiment" for s in e.sessions) for e in exps if e.base_url is None),
        default=0,
    )
    split = min(starts, low, started)
    if split > 1 and not wl.fresh_server and not interleave:
        load.append(
            f"Each experiment's repetitions were split over {split} server starts "
            "(in order: the first repetitions of every level on one server, the rest on the "
            "next), so the run measures how much two starts of one configuration differ "
            "(memory placement, clocks, compiled-kernel caches), which repetitions on one "
            "server never show, and no verdict rests on one start."
        )
    if any(s.role == "prime" for e in exps for s in e.sessions):
        load.append(
            "Priming: the baseline's configuration was started once before the baseline and "
            "every level warmed up on it until steady, then stopped, and nothing it measured "
            "is used: engines compile kernels per batch shape at first use and keep them on "
            "disk, so without it the first configuration measured on a fresh machine pays "
            "for compilations every later one is spared."
        )
    bracket = next((e for e in exps if e.role == "bracket"), None)
    compared = [e for e in exps[1:] if e.role == "experiment" and e.base_url is None]
    if bracket is None and not interleave and len(compared) >= 2 and exps[0].base_url is None:
        load.append(
            "Not bracketed: the baseline's configuration was not measured again after the "
            "experiments (campaign.bracket off), so how far the host drifted over the campaign "
            "is not known and an adoption that drift could explain is not withdrawn "
            "(campaign.bracket = true, or campaign.interleave, checks it)."
        )
    first = exps[0].id if exps else None
    anchors = [e.id for e in exps if e.role == "anchor" and e.parent in (None, first)]
    if anchors:
        load.append(
            f"The baseline re-measured: its configuration was started again during the "
            f"campaign ({', '.join(anchors)}), and "
            "every experiment built on the baseline was compared with the baseline as measured "
            "nearest to it in time (both measurements where two were as near), decided again "
            "whenever a nearer one was made: drift of the host over the campaign then bends no "
            "ratio by more than it moved between neighbours. Each is one more start of the "
            "baseline for the noise model's spread between starts."
        )
    others = [e for e in exps if e.role == "anchor" and e.parent not in (None, first)]
    if others:
        load.append(
            "Parents re-measured: "
            + ", ".join(f"{e.parent} as {e.id}" for e in others)
            + ". Experiments built on them (based_on) were compared with them as measured "
            "nearest in time, as with the baseline."
        )
    if bracket is not None:
        load.append(
            f"Bracketing: the baseline's configuration was measured again after every "
            f"experiment ({bracket.id}) and compared with the baseline's first measurement: "
            "what differs between the two is the host's or the engine's drift over the "
            "campaign (said with the decisions), and it is one more start of the baseline for "
            "the noise model."
        )
    if not wl.stream:
        load.append(
            "Responses were not streamed: a response arrives whole, so time to first token "
            "and inter-token latency are not measured (shown as –), and an SLO on them is "
            "not applied."
        )
    load.append(trim(wl))
    if wl.duration_s and not wl.request_rate:
        least = float(wl.duration_s)
        most = float(wl.max_duration_s or 3 * least)
        if most > least:
            load.append(
                f"Duration levels ran at least {least:g} s and on, up to {most:g} s, until "
                "their output tok/s was known within the margin: the 95% interval of the mean "
                "of their windows (one request time long, tokens counted by arrival) narrower "
                "than the margin; then their clients stopped and the requests in flight "
                "finished."
            )
    slo = slo_set(wl)
    if slo:
        load.append(
            "Goodput counts requests meeting every SLO: "
            + ", ".join(f"{k} ≤ {v:g}" for k, v in slo.items())
            + "."
        )
    own = [(e.id, workload_as_run(e.workload)) for e in exps if e.workload]
    overrides = [(exp_id, line(typed)) for exp_id, typed in own if typed != wl]
    margin_text = "–" if margin is None else f"{float(margin):.0%}"
    return Methods(
        metric_intro=metric_doc.paragraphs[1:2],
        metrics=metric_doc.bullets,
        metric_notes=metric_doc.paragraphs[2:],
        load=load,
        overrides=overrides,
        # a paragraph that introduces a list ("Verdicts against the campaign's margin m:")
        # would dangle here: its list is given below, with the verdict terms
        stats_intro=[
            p
            for p in stats_doc.paragraphs[1:]
            if not p.startswith("How the ") and not p.endswith(":")
        ],
        rules=[(n, t) for n, t in stats_doc.bullets if n in VERDICT_TERMS],
        noise_intro=noise_doc.paragraphs[1:2],
        noise=noise_doc.bullets,
        noise_notes=noise_doc.paragraphs[2:],
        measured=measured,
        error_rate=error,
        ci_level=ci_level,
        sequential=seq_doc.paragraphs[1:2] if high > low else [],
        checks_intro=checks_doc.paragraphs[1:],
        checks=[
            (n, t)
            for n, t in checks_doc.bullets
            if n not in checks.SINCE or any(c.id == n for e in exps for c in e.checks)
        ],
        margin=margin_text,
        objective=objective_label,
    )
