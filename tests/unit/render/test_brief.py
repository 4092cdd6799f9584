"""The report's first page (``render.brief``), read from the committed H200 runs."""

from __future__ import annotations

from pathlib import Path

from reportgen import results
from reportgen.analysis.findings import attach
from reportgen.render import brief, expectations
from reportgen.results.model import Point, Run
from tests.conftest import ROOT

EXAMPLES = ROOT / "docs" / "examples"
# vLLM 0.26 on the 0.5 B MoE, eight experiments, measured before the steady-state protocol
MOE_RUN = ROOT / "tests" / "fixtures" / "runs" / "vllm-h200-moe"
SGLANG_MOE_RUN = ROOT / "tests" / "fixtures" / "runs" / "sglang-h200-moe"

LEVELS = [Point(1), Point(16), Point(64)]


def test_the_best_configuration_its_command_and_its_cost_per_level() -> None:
    b = brief.build(results.load(MOE_RUN))
    assert b.best == "ngram-spec"
    assert "--speculative-config" in b.command and "vllm.entrypoints.cli.main serve" in b.command
    assert b.columns == [
        "output_tok_s",
        "TTFT p50 (ms)",
        "TTFT p99 (ms)",
        "TPOT p50 (ms)",
        "TPOT p99 (ms)",
        "E2E p50 (ms)",
        "E2E p99 (ms)",
    ]
    assert [str(level) for level, _ in b.levels] == ["1", "16", "64"]
    assert b.samples[0].count("–") == 1 and int(b.samples[0].split("–")[0]) < 100  # C=1: few
    first = dict(zip(b.columns, b.levels[0][1], strict=True))
    tput = first["output_tok_s"]
    # the geometric means of the repetitions, of which the ratio is made (their arithmetic
    # means, 435 and 705, were shown beside it before)
    assert (tput.baseline, tput.best, tput.ratio) == ("431", "701", "×1.63")
    assert (tput.words, tput.ci) == ("better", "98.3% CI 1.23–2.16")
    for _, cells in b.levels:  # every cell with an interval: its numbers make its ratio
        for col, cell in zip(b.columns, cells, strict=True):
            if cell.ci and "p99" not in col:
                made = float(cell.best.replace(",", "")) / float(cell.baseline.replace(",", ""))
                assert abs(made / float(cell.ratio[1:]) - 1) < 0.02, (col, cell)
    # per token, not per chunk: n-gram speculation sends several tokens a chunk, so the time
    # per output token halves at C=1 (the time between chunks rose: not on this page)
    tpot = first["TPOT p50 (ms)"]
    assert (tpot.baseline, tpot.best, tpot.ratio, tpot.words) == (
        "2.15",
        "1.11",
        "×0.52",
        "no interval",
    )
    # a latency the best pays: E2E p99 up at C=16, with its interval
    e2e = dict(zip(b.columns, b.levels[1][1], strict=True))["E2E p99 (ms)"]
    assert e2e.css == "worse" and e2e.ci.startswith("95% CI")
    ((failed, why),) = b.failed  # with vLLM's own reason (the run rechecked from its log)
    assert failed == "kv-cache-too-small"
    assert why.startswith(
        "server exited with code 1 before it was ready: ValueError: No available memory for "
        "the cache blocks."
    )
    steps = " ".join(b.next_steps)
    assert "ngram-spec (about 8 repetitions a side at C=16)" in steps
    assert "ngram-spec pays in latency: E2E p99 (ms) at C=16 (279 → 432)" in steps
    assert "ITL" not in steps
    # vLLM's own advice, quoted: more memory for the KV cache (not the generic "lower it")
    (kv,) = [s for s in b.next_steps if s.startswith("kv-cache-too-small: ")]
    assert kv == (
        "kv-cache-too-small: the error's own advice: \u201cTry increasing "
        "`gpu_memory_utilization` when initializing the engine (this flag also controls CPU "
        "memory reservation on the CPU backend, despite its name)\u201d"
    )


def _structured(run_dir: Path, expects: dict[str, list[dict[str, object]]]) -> Run:
    """A recorded run with these experiments' expectations written structured (as the run
    would have recorded them from the campaign file), their prose kept as their text."""
    run = results.load(run_dir)
    for e in run.experiments:
        if e.id in expects:
            e.expects = expects[e.id]
    return run


def test_a_prose_expectation_is_shown_not_read_and_a_structured_one_is_judged() -> None:
    """The vLLM MoE run recorded its expectations in prose: each is shown as written and
    "not judged", with how to write it so that it is (words were misread: "within noise",
    "no longer slower"). The same run with them written structured: each judged level by
    level against the verdicts."""
    got = {x.id: x for x in brief.build(results.load(MOE_RUN)).expectations}
    assert got and all(x.judged == "not judged" for x in got.values())
    assert all(x.reading == expectations.PROSE for x in got.values())
    assert "expect = { verdict, at, metric }" in expectations.PROSE_HINT
    run = _structured(MOE_RUN, {
        "eager": [{"verdict": "worse"}],
        "graph-sizes-small": [{"verdict": "equivalent", "at": [1, 16]},
                              {"verdict": "worse", "at": [64]}],
        "kv-cache-too-small": [{"verdict": "fails"}],
        "baseline-again": [{"verdict": "equivalent"}],
    })  # fmt: skip
    got = {x.id: x for x in brief.build(run).expectations}
    assert (got["eager"].reading, got["eager"].judged) == ("worse at C=1,16,64", "met")
    assert got["graph-sizes-small"].reading == "equivalent at C=1,16; worse at C=64"
    assert got["graph-sizes-small"].judged == "partly met"  # worse at 64; 1 and 16 undecided
    assert (got["kv-cache-too-small"].reading, got["kv-cache-too-small"].judged) == (
        "fails",
        "met",
    )
    assert got["baseline-again"].reading == "equivalent at C=1,16,64"
    assert got["baseline-again"].judged == "not shown"  # inconclusive everywhere
    # a failure expected that did not come is not met
    run = _structured(SGLANG_MOE_RUN, {"memory-too-small": [{"verdict": "fails"}]})
    sglang = {x.id: x for x in brief.build(run).expectations}
    assert (sglang["memory-too-small"].reading, sglang["memory-too-small"].judged) == (
        "fails",
        "not met",
    )
    assert sglang["memory-too-small"].outcome.startswith("it ran: C=1: ×1.19 inconclusive")


def test_an_expectation_about_a_latency_is_judged_on_that_latency() -> None:
    """cuda-graphs on the H200, its expectation ("Lower inter-token latency at every level")
    written { verdict = "better", metric = "itl_ms" }: judged on ITL p50's verdicts; a
    failed experiment's finished levels still say something."""
    run = _structured(EXAMPLES / "h200", {
        "cuda-graphs": [{"verdict": "better", "metric": "itl_ms"}],
        "eager-attention": [{"verdict": "worse"}],
    })  # fmt: skip
    got = {x.id: x for x in brief.build(run).expectations}
    graphs = got["cuda-graphs"]
    assert (graphs.reading, graphs.judged) == ("ITL p50 better at C=1,16,64", "met")
    assert "; ITL p50: C=1: ×0.40 better" in graphs.outcome
    eager = got["eager-attention"]  # failed at C=64; its finished levels still say something
    assert eager.judged == "not met" and eager.reading == "runs, then worse at C=1,16,64"
    assert "before that, C=1: ×0.97 inconclusive, C=16: ×0.75 inconclusive" in eager.outcome


def test_a_failure_is_one_line_without_the_loggers_prefix() -> None:
    b = brief.build(results.load(EXAMPLES / "h200"))
    failed = dict(b.failed)
    assert failed["float16"].startswith(
        "server reported a fatal error before it was ready: Error in generation loop: Cannot "
        "copy between CPU and CUDA tensors during CUDA graph capture"
    )
    assert "ContinuousBatchingLogger" not in failed["float16"]
    assert "out of GPU memory" in " ".join(b.next_steps)  # eager-attention's OOM, with a hint


def test_a_failed_experiments_finished_levels_are_drawn() -> None:
    """eager-attention's server died at C=64: C=1, 4 and 16 were measured and are drawn,
    dotted, as a failed experiment's; the level it died in is not."""
    from reportgen.render import view

    series = {s.id: s for s in view.build(results.load(EXAMPLES / "h200")).series}
    eager = series["eager-attention"]
    assert eager.partial and [p.concurrency for p in eager.levels] == [1, 4, 16]
    assert all(v is not None and v > 0 for v in eager.mean["output_tok_s"])
    assert "float16" not in series  # failed before any level: nothing to draw
    assert not series["cuda-graphs"].partial


def test_warnings_shared_by_experiments_are_merged_without_misattributing_a_part() -> None:
    """Print merges one warning found in several experiments: the shared head and tail said
    once. A key whose value differs ("probe 1: ", "C=1: ") and an aside that could belong to
    the last part only are never factored out."""
    from reportgen.render.view import _factor

    assert _factor([
        "largest coefficient of variation of output tok/s: 19.9% at C=1 (bound 5%)",
        "largest coefficient of variation of output tok/s: 26.8% at C=4 (bound 5%)",
    ]) == ("largest coefficient of variation of output tok/s: ", ["19.9% at C=1", "26.8% at C=4"],
           " (bound 5%)")  # fmt: skip
    probes = ["probe 1: same for 0% of the words; probe 2: same for 40%", "probe 1: same for 10%"]
    assert _factor(probes) == ("", probes, "")
    ratios = ["ratio 1.05x (C=1), 1.10x (C=16)", "ratio 1.07x (C=1), 1.10x (C=16)"]
    assert _factor(ratios) == ("", ratios, "")
    few = _factor([
        "successful requests per level run, too few for a p99 of TTFT and E2E: C=1: 12-16; "
        "a p99 needs 100, a p90 10",
        "successful requests per level run, too few for a p99 of TTFT and E2E: C=1: 9-11 (too "
        "few even for a p90); a p99 needs 100, a p90 10",
    ])  # fmt: skip
    assert few[1] == ["C=1: 12-16", "C=1: 9-11 (too few even for a p90)"]
    assert few[2] == "; a p99 needs 100, a p90 10"


def test_the_baseline_measured_again_at_the_end_says_whether_the_host_drifted() -> None:
    """The bracket's verdict in words ("equivalent (drift)" read as if drift were found)."""
    from reportgen.render import sentences

    examples = ROOT / "docs" / "examples"
    said = sentences._confirmation(results.load(examples / "vllm-h100"))
    assert "the baseline measured again at the end is equivalent to the first" in said
    assert said.endswith(": no drift.")
    said = sentences._confirmation(results.load(examples / "sglang-h100"))  # open at C=64
    assert said.endswith("neither matches nor differs from the first (1.00× at C=1): drift "
                         "cannot be ruled out.")  # fmt: skip
    assert "differs from the first (0.90×): the host drifted" in sentences._bracket_said(
        "rejected", " (0.90×)"
    )


def test_equivalent_is_printed_with_the_bound_it_rests_on() -> None:
    """Wherever a comparison reads "equivalent", the largest change it leaves possible is
    printed beside it (and, for decisions that record it, the two one-sided tests' interval):
    the interval the tables show is wider and may reach past the margin."""
    import lzma

    from reportgen.render import experiment, fmt, sentences

    examples = ROOT / "docs" / "examples"
    run = results.load(examples / "vllm-h100")
    again = run.experiment("baseline-again")
    assert again is not None and again.decision is not None
    rows = experiment.comparisons(again.decision.vs_parent)
    assert [r.rests_on for r in rows] == [
        "no change beyond 1.2%",
        "no change beyond 1.4%",
        "no change beyond 4.6%",  # its 95% interval reaches further; the margin is 5%
    ]
    seqs = run.experiment("max-num-seqs-48")
    assert seqs is not None and seqs.decision is not None
    assert [fmt.fmt_rests_on(c) for c in seqs.decision.vs_parent] == [
        "no change beyond 2.6%",
        "",  # worse: no bound to state
        "",
    ]
    c64 = again.decision.vs_parent[2].model_copy(
        update={"eq_low": 0.962, "eq_high": 1.031, "eq_confidence": 0.9}
    )
    assert fmt.fmt_rests_on(c64) == "no change beyond 4.6%; 90% TOST 0.962–1.031"
    # the bracket's sentence, and the report as committed: the table's verdict cell
    assert "equivalent to the first (1.00× at C=1; no change beyond 3.3% at any level)" in (
        sentences._confirmation(run)
    )
    page = lzma.decompress((examples / "vllm-h100" / "report.html.xz").read_bytes()).decode()
    assert 'equivalent</span> <span class="rests-on">(no change beyond 4.6%)</span>' in page
    # the experiment's own verdict too, in the overview table and in report.md
    assert '<span class="rests-on">no change beyond 4.6%</span>' in page
    md = (examples / "vllm-h100" / "report.md").read_text()
    assert "| 2 | baseline-again | equivalent (no change beyond 4.6%) |" in md


def test_each_change_shows_its_latency_effect_beside_its_throughput() -> None:
    """Page one's table of experiments gives, under each change's throughput ratio to the
    baseline, its latency effect there: TTFT p99 (from its comparison) and TPOT p50 (a ratio
    of means). max-num-seqs-48 on the H100: 0.64x the throughput at C=64, with a TTFT p99
    13 times the baseline's and TPOT 14% slower (decode steps beyond its 96-token graphs).
    On paper, only adopted changes give it there (a page an experiment)."""
    import lzma

    examples = ROOT / "docs" / "examples" / "vllm-h100"
    page = lzma.decompress((examples / "report.html.xz").read_bytes()).decode()
    assert '<span class="latency-effect">TTFT p99 13.05×, TPOT 1.14×</span>' in page
    assert "each decided change's latency effect (TTFT p99, and TPOT p50 as a ratio of" in page
    md = (examples / "report.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| 3 | max-num-seqs-48 |"))
    assert "| 0.99× / 0.92× / 0.64× | TTFT p99 2.40×, TPOT 1.00× / TTFT p99 1.56×, TPOT 1.09×" in (
        row
    )


def test_a_search_says_its_answer_and_model_on_page_one_with_its_levels_in_order() -> None:
    """The rate search on the H100: page one's lead gives the search's answer, the header the
    model the server served, and the table of levels runs low to high (not in probe order)."""
    from pypdf import PdfReader

    run_dir = ROOT / "docs" / "examples" / "bench-rate-search-sglang-h100"
    b = brief.build(attach(results.load(run_dir)))  # its findings, as render gets them
    assert b.best_line.endswith(
        "nothing to compare it with. The highest request rate meeting ttft_ms.p99<200 is R=96/s; "
        "at R=128/s, which did not, the server CPU (tokenizer 0.89 cores; GPU busy 27%) set the "
        "pace."
    )  # the limit: nothing saturated at R=96/s (GPU busy 33%), SGLang's tokenizer above it
    rates = [p.rate for p, _ in b.plain]
    assert rates == sorted(rates) and rates[0] == 16 and rates[-1] == 128
    page = PdfReader(run_dir / "report.pdf").pages[0].extract_text()
    assert "MODEL\noutput/models/small-moe-eos" in page
    assert "The highest\nrequest rate meeting ttft_ms.p99<200 is R=96/s; at R=128/s" in page


def test_a_pooled_search_shows_on_page_one_the_p99_it_judged() -> None:
    """The rate search judged each level's TTFT p99 over every repetition's requests pooled
    (``SearchRecord.pooled``), as the latency distributions draw them; page one's table of
    levels gives that number, not the mean of the runs' own p99s, and says so: at R=128/s,
    618 ms (the mean of its six runs' p99s: 374), at R=32/s 162 (77.3)."""
    b = brief.build(results.load(EXAMPLES / "bench-rate-search-sglang-h100"))
    search = results.load(EXAMPLES / "bench-rate-search-sglang-h100").experiments[0].search
    assert search is not None and search.pooled
    col = b.plain_columns.index("TTFT p99 (ms)")
    shown = {p.rate: cells[col] for p, cells in b.plain}
    judged = {p.rate: p.values["ttft_ms.p99<200"] for p in search.probes}
    assert shown == {r: brief._fmt(v) for r, v in judged.items()}
    assert shown[128] == "618" and shown[32] == "162"
    assert b.plain_note.startswith("TTFT p99: over every repetition's requests pooled")
    # the other columns stay the means over repetitions
    assert shown[96] == "30.0" and b.plain[-2][1][b.plain_columns.index("E2E p99 (ms)")] == "421"
