"""What the adapters read, read from what the real engines printed.

``tests/fixtures/engines/<engine>-<version>/`` holds vLLM 0.26.0's and SGLang 0.5.17's own
output on an H200 (their READMEs say how it was recorded): help text, startup logs, /metrics
before and after load, speculative-decoding lines, a real fatal error. Each test here fails if
an adapter stops reading one of them.
"""

from __future__ import annotations

import gzip
import lzma
from pathlib import Path

import pytest

from reportgen import campaign, engines, tracebacks
from reportgen.analysis.checks_engine import spec_agreement, spec_length
from reportgen.analysis.checks_server import cuda_graphs
from reportgen.observe import evidence
from reportgen.results.engine_log import LogValues
from reportgen.results.levels import Level
from reportgen.results.model import Experiment, Point
from reportgen.run import plan
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "engines"
VLLM = FIXTURES / "vllm-0.26.0"
SGLANG = FIXTURES / "sglang-0.5.17"


def _read(path: Path) -> str:
    """A recorded file, or its gzipped or xz copy (recordings over 16 kB are kept packed)."""
    gz, xz = path.with_name(path.name + ".gz"), path.with_name(path.name + ".xz")
    if gz.is_file():
        data = gzip.decompress(gz.read_bytes())
    elif xz.is_file():
        data = lzma.decompress(xz.read_bytes())
    else:
        data = path.read_bytes()
    return data.decode("utf-8", errors="replace")


@pytest.mark.parametrize(
    ("engine", "help_file", "campaign_file"),
    [
        ("vllm", VLLM / "serve-help-all.txt", "vllm-h200.toml"),
        ("vllm", VLLM / "serve-help-all.txt", "vllm-tp.toml"),
        ("sglang", SGLANG / "launch-server-help.txt", "sglang-h200.toml"),
        ("vllm", VLLM / "serve-help-all.txt", "vllm-tuning.toml"),
        ("sglang", SGLANG / "launch-server-help.txt", "sglang-tuning.toml"),
    ],
)
def test_every_flag_of_the_h200_campaigns_is_in_the_engines_own_help(
    engine: str, help_file: Path, campaign_file: str
) -> None:
    flags = engines.Flags.parse(["help"], _read(help_file))
    assert len(flags.names) > 200
    c = campaign.load(ROOT / "campaigns" / campaign_file)
    for r in plan.plan(c):  # every experiment's configuration, its parents' flags applied
        assert flags.problems(r.args) == [], (r.id, flags.problems(r.args))


@pytest.mark.parametrize(
    ("engine", "help_file"),
    [("vllm", VLLM / "serve-help-all.txt"), ("sglang", SGLANG / "launch-server-help.txt")],
)
def test_the_flags_a_server_across_nodes_adds_are_in_the_engines_own_help(
    engine: str, help_file: Path
) -> None:
    """server.nodes: every flag the launcher adds to each rank (``Engine.node_args``) is one
    the engine printed in its own help on the H200 (vLLM 0.26.0's --nnodes, --node-rank,
    --master-addr, --master-port, --headless; SGLang 0.5.17's --nnodes, --node-rank,
    --dist-init-addr)."""
    names = engines.Flags.parse(["help"], _read(help_file)).names
    adds = engines.get(engine).node_args(2, 1, "10.0.0.5", 5000)
    written = {a.lstrip("-") for a in adds if a.startswith("--")}
    assert written and written <= names, sorted(written - names)


@pytest.mark.parametrize(
    ("engine", "log", "expect"),
    [
        (
            "vllm",
            VLLM / "server-baseline.log",
            {"non_default_args": "non-default args:", "cuda_graph_captured": "Graph capturing",
             "kv_cache": "GPU KV cache size", "ready": "Application startup complete"},
        ),
        (
            "sglang",
            SGLANG / "server-baseline.log",
            {"server_args": "server_args=ServerArgs(", "decode_batch": "Decode batch, #running",
             "cuda_graph_captured": "Capture target decode CUDA graph end",
             "ready": "fired up and ready to roll"},
        ),
    ],
)  # fmt: skip
def test_startup_log_lines_are_found(engine: str, log: Path, expect: dict[str, str]) -> None:
    found = evidence.log_evidence(_read(log), engines.get(engine).patterns())["found"]
    for name, text in expect.items():
        assert found.get(name) and text in found[name], (name, found.get(name))
    resolved = evidence.server_args(found)
    assert resolved, "the engine's argument dump is parsed"


def test_the_kv_cache_each_engine_allocated_is_read_from_its_log() -> None:
    """What bounds concurrency before any batch limit: vLLM's "GPU KV cache size" and
    SGLang's "KV Cache is allocated" lines, in tokens and in requests of the workload."""
    from reportgen.render.evidence import kv_cache

    said = {}
    for engine, log in (("vllm", VLLM / "server-baseline.log"),
                        ("sglang", SGLANG / "server-baseline.log")):  # fmt: skip
        found = evidence.log_evidence(_read(log), engines.get(engine).patterns())
        said[engine] = kv_cache(Experiment(id="x", status="ok", log_evidence=found), 288)
    assert said["vllm"].startswith("10,241,024 tokens, room for 35,559 requests of this "
                                   "workload's 288 tokens at once")  # fmt: skip
    assert said["sglang"].startswith("9,641,083 tokens (110.3 GB), room for 33,475 requests")
    assert kv_cache(Experiment(id="x", status="ok")) == ""  # a log that did not say


def test_graphs_turned_off_on_purpose_are_not_warned_about() -> None:
    for engine, log, args in (
        ("vllm", VLLM / "server-eager.log", {"enforce-eager": True}),
        (
            "sglang",
            SGLANG / "server-no-cuda-graphs.log",
            {"disable-decode-cuda-graph": True, "disable-prefill-cuda-graph": True},
        ),
    ):
        adapter = engines.get(engine)
        found = evidence.log_evidence(_read(log), adapter.patterns())
        assert found["found"]["cuda_graph_captured"] is None
        entry = Experiment(id="x", status="ok", log_evidence=found, args=args)
        off = adapter.graphs_disabled(args)
        (check,) = cuda_graphs(entry, list(adapter.patterns()), off)
        assert check.status == "skip" and "on purpose" in check.evidence
        (unknowing,) = cuda_graphs(entry, list(adapter.patterns()), None)
        assert unknowing.status == "warn"  # the same log without the flags: a warning
    assert engines.get("vllm").graphs_disabled({"enforce-eager": False}) is None


@pytest.mark.parametrize(
    ("engine", "before", "after", "roles"),
    [
        (
            "vllm",
            VLLM / "metrics-ngram-spec-before.txt",
            VLLM / "metrics-ngram-spec-after.txt",
            ("generation_tokens", "prompt_tokens", "prefix_hits", "prefix_queries",
             "spec_drafts", "spec_draft_tokens", "spec_accepted", "server_cpu"),
        ),
        (
            "sglang",
            SGLANG / "metrics-ngram-spec-before.txt",
            SGLANG / "metrics-ngram-spec-after.txt",
            ("generation_tokens", "prompt_tokens", "prefix_hits", "spec_accept_length",
             "server_cpu"),
        ),
    ],
)  # fmt: skip
def test_every_counter_the_adapter_names_is_in_the_engines_metrics_and_moves(
    engine: str, before: Path, after: Path, roles: tuple[str, ...]
) -> None:
    counters = dict(engines.get(engine).counters)
    a, b = evidence.parse_metrics(_read(before)), evidence.parse_metrics(_read(after))
    names = {k.split("{")[0] for k in b["series"]}
    for role in roles:
        assert counters[role] in names, (role, counters[role])
    moved = evidence.deltas(a, b)
    level = Level(concurrency=1, engine_metrics=moved)
    length, _rate = spec_length(level, counters)
    assert length is not None and 1 < length < 8  # n-gram with 3 or 4 draft tokens


def test_speculative_decoding_log_lines_are_parsed_and_agree_with_the_counters() -> None:
    for engine, log, metrics in (
        ("vllm", VLLM / "spec-decoding.log", VLLM / "metrics-ngram-spec"),
        ("sglang", SGLANG / "spec-decoding.log", SGLANG / "metrics-ngram-spec"),
    ):
        adapter = engines.get(engine)
        got = evidence.log_values(_read(log), adapter.spec_accept_log)
        assert got is not None and got["count"] >= 2 and 1 < got["mean"] < 8, engine
        a = evidence.parse_metrics(_read(Path(f"{metrics}-before.txt")))
        b = evidence.parse_metrics(_read(Path(f"{metrics}-after.txt")))
        level = Level(concurrency=1, engine_metrics=evidence.deltas(a, b))
        (check,) = spec_agreement([level], dict(adapter.counters), LogValues.model_validate(got))
        assert "log: mean" in check.evidence and "counters: mean" in check.evidence


def test_a_real_fatal_error_gives_its_cause_not_only_an_exit_code() -> None:
    # vLLM: the engine core's ValueError mid-log, the API server's "see root cause above" last
    what, at = tracebacks.root_cause(_read(VLLM / "server-kv-cache-too-small.log")) or ("", 0)
    assert what.startswith("ValueError: No available memory for the cache blocks")
    assert at > 0
    # SGLang 0.5.17: its own check of --mem-fraction-static
    what, _ = tracebacks.root_cause(_read(SGLANG / "fatal-mem-fraction-static-0.005.log")) or (
        "",
        0,
    )
    assert what.startswith("ValueError: Loaded weights leave no GPU memory for the KV cache")
    # vLLM 0.26 asked for TP=2 on one GPU: pydantic's first line names only the model; what
    # was wrong is the indented line after it
    what, _ = tracebacks.root_cause(_read(VLLM / "server-tp2-on-one-gpu.log")) or ("", 0)
    assert what.startswith(
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig: "
        "World size (2) is larger than the number of available GPUs (1) in this node."
    ), what
    # a clean log and vLLM's errors at shutdown (EngineDeadError) name no cause
    assert tracebacks.root_cause(_read(VLLM / "server-baseline.log")) is None
    assert tracebacks.root_cause(_read(VLLM / "server-batched-tokens-512.log")) is None


def test_errors_vllm_prints_once_asked_to_stop_are_counted_apart(tmp_path: Path) -> None:
    from reportgen.run.server import ServerProcess

    # The server's log as written: serving until the stop signal, then vLLM's shutdown, whose
    # "AsyncLLM output_handler failed" traceback ends in EngineDeadError though no request
    # failed.
    text = _read(VLLM / "server-batched-tokens-512.log")
    cut = text.index("[shutdown] API server: shutdown triggered")
    cut = text.rfind("\n", 0, cut) + 1
    log = tmp_path / "server.log"
    log.write_text(text, encoding="utf-8")
    srv = ServerProcess(["true"], env={}, log_path=log, host="127.0.0.1", port=1,
                        engine=engines.get("vllm"))  # fmt: skip
    serving, stopping = srv.log_split(len(text[:cut].encode("utf-8")))
    assert evidence.log_evidence(serving, {})["errors"] == 0
    assert evidence.log_evidence(stopping, {})["errors"] >= 1
    assert "EngineDeadError" in stopping


def test_prefix_cache_hits_of_shared_prefix_prompts_are_read_from_both_engines() -> None:
    from reportgen.analysis.checks_engine import prefix_cache

    # Prompts of 256 tokens, 192 of them one of 8 shared prefixes: about three quarters of
    # the prompt tokens from the cache, by vLLM's hits/queries and SGLang's cached/prompt.
    for engine, base in (("vllm", VLLM), ("sglang", SGLANG)):
        counters = dict(engines.get(engine).counters)
        a = evidence.parse_metrics(_read(base / "metrics-shared-prefix-before.txt"))
        b = evidence.parse_metrics(_read(base / "metrics-shared-prefix-after.txt"))
        level = Level(concurrency=16, engine_metrics=evidence.deltas(a, b))
        check = prefix_cache([level], counters, None)
        rate = float(check.evidence.split("%")[0]) / 100
        assert 0.6 < rate < 0.8, (engine, check.evidence)
    # vLLM with --no-enable-prefix-caching still exports the counters, at zero: the check
    # says caching was off rather than that the engine has no counters.
    off = evidence.parse_metrics(_read(VLLM / "metrics-shared-prefix-no-cache-after.txt"))
    series = off["series"]
    queries = [v for k, (_, v) in series.items() if k.startswith("vllm:prefix_cache_queries_total")]
    prompts = [v for k, (_, v) in series.items() if k.startswith("vllm:prompt_tokens_total")]
    assert queries == [0.0] and sum(prompts) > 100_000
    level = Level(concurrency=16, engine_metrics=evidence.deltas(off, off))
    check = prefix_cache([level], dict(engines.get("vllm").counters), None)
    assert check.status == "skip" and "prefix caching off" in check.evidence


def test_sglang_speculative_decodings_verify_graphs_count_as_captured() -> None:
    # With NGRAM, SGLang 0.5.17 captures prefill and target-verify graphs, no decode ones.
    adapter = engines.get("sglang")
    found = evidence.log_evidence(_read(SGLANG / "server-ngram-spec.log"), adapter.patterns())
    assert "Capture target verify CUDA graph end" in (found["found"]["cuda_graph_captured"] or "")
    entry = Experiment(id="x", status="ok", log_evidence=found, args={})
    (check,) = cuda_graphs(entry, list(adapter.patterns()), None)
    assert check.status == "pass"


def test_graphs_the_engine_turned_off_itself_are_named_with_its_reason() -> None:
    # SGLang 0.5.17 with --attention-backend torch_native: no capture, and its own line why.
    adapter = engines.get("sglang")
    found = evidence.log_evidence(_read(SGLANG / "server-attention-torch-native.log"),
                                  adapter.patterns())  # fmt: skip
    args = {"attention-backend": "torch_native"}
    entry = Experiment(id="x", status="ok", log_evidence=found, args=args)
    (check,) = cuda_graphs(entry, list(adapter.patterns()), adapter.graphs_disabled(args))
    assert check.status == "warn"
    assert "turned CUDA graphs off itself" in check.evidence
    assert "because of using torch native attention backend" in check.evidence


@pytest.mark.parametrize(
    ("fixture", "campaign_file", "engine"),
    [
        (SGLANG / "check-flags-qwen397b.json", "campaigns/qwen397b.toml", "sglang"),
        # the 0.5 B MoE campaign as its committed run ran it (campaigns/sglang-h200.toml has
        # moved on to the 8B-shaped model: its flags are in SGLang's help, above)
        (
            SGLANG / "check-flags-sglang-h200.json",
            "tests/fixtures/runs/sglang-h200-moe/campaign.toml",
            "sglang",
        ),
        (VLLM / "check-flags-vllm-h200.json", "campaigns/vllm-h200.toml", "vllm"),
        # the 0.5 B MoE campaign as its run (measured before the steady-state protocol) ran it
        (
            VLLM / "check-flags-vllm-h200-moe.json",
            "tests/fixtures/runs/vllm-h200-moe/campaign.toml",
            "vllm",
        ),
    ],
)
def test_campaign_flags_as_the_engines_own_parser_accepted_them(
    fixture: Path, campaign_file: str, engine: str
) -> None:
    """scripts/gpu/check_flags.py ran on the H200: the engine's argparse took every
    experiment's flags. The flags it checked must still be the campaign's: a changed campaign
    fails here until it is checked again (on_gpu_host.sh flags ENGINE CAMPAIGN)."""
    import json

    checked = json.loads(_read(fixture))
    assert checked["engine"].startswith(engine)
    assert all(row["error"] is None for row in checked["experiments"])
    adapter = engines.get(engine)
    now = {
        r.id: adapter.format_args(r.args) for r in plan.plan(campaign.load(ROOT / campaign_file))
    }
    assert {row["experiment"]: row["argv"] for row in checked["experiments"]} == now


def test_a_failures_traceback_is_distilled_to_the_engines_frames_and_its_whole_message() -> None:
    # vLLM 0.26.0: every line behind the engine core's logger prefix
    text = _read(VLLM / "server-kv-cache-too-small.log")
    what, at = tracebacks.root_cause(text) or ("", 0)
    start = tracebacks.traceback_before(text, at)
    assert start is not None
    got = tracebacks.distill(text, start) or ""
    assert "vllm/v1/core/kv_cache_utils.py:758 in _check_enough_kv_cache_memory" in got
    assert "(EngineCore pid=" not in got
    assert got.splitlines()[-1] == what  # the message, whole, last
    # SGLang 0.5.17: the traceback begins mid-line ("Scheduler hit an exception: Traceback")
    text = _read(SGLANG / "fatal-mem-fraction-static-0.005.log")
    got, line = tracebacks.excerpt_of_failure(engines.get("sglang"), text) or ("", "")
    assert "sglang/srt/mem_cache/kv_cache_configurator.py:1647 in _profile_available_bytes" in got
    assert got.endswith("If using speculative decoding, draft weights are now counted.")


def test_torchs_call_plumbing_is_left_out_and_an_oom_message_kept_whole() -> None:
    """The H200 run's transformers serve: the generation loop dies of CUDA OOM under load."""
    from reportgen.results import store
    from tests.conftest import ROOT

    text = store.read_log(ROOT / "docs" / "examples" / "h200", "logs/eager-attention.server.log")
    assert text is not None  # committed gzipped (scripts/compact_run.py)
    got, line = tracebacks.excerpt_of_failure(engines.get("transformers"), text) or ("", "")
    assert line.endswith("Error in generation loop: CUDA out of memory. Tried to allocate "
                         "6.00 GiB. GPU 0 has a total capacity of 139.80 GiB of which 2.24 "
                         "GiB is free. Including non-PyTorch memory, this process has 137.55 "
                         "GiB memory in use. Of the allocated memory 136.64 GiB is allocated "
                         "by PyTorch, with 15.40 GiB allocated in private pools (e.g., CUDA "
                         "Graphs), and 104.54 MiB is reserved by PyTorch but unallocated. If "
                         "reserved but unallocated memory is large try setting "
                         "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
                         "fragmentation.  See documentation for Memory Management  "
                         "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-"
                         "memory-usage-with-pytorch-cuda-alloc-conf)")  # fmt: skip
    assert "_call_impl" not in got and "frames of call plumbing" in got
    assert "transformers/integrations/eager_paged.py:60 in eager_paged_attention_forward" in got
    last = got.splitlines()[-1]
    assert last.startswith("torch.OutOfMemoryError: CUDA out of memory.")
    assert "Service Unavailable" not in got and "[transformers]" not in got


# -- what else a change changed (the engine's resolved configuration) ----------------------------


def _config(engine: str, path: Path) -> dict:
    e = engines.get(engine)
    got = evidence.engine_config(_read(path), e.config_lines, e.config_values)
    assert got is not None
    return got


def test_vllm_resolved_configuration_read_from_its_log() -> None:
    base = _config("vllm", VLLM / "server-baseline.log")
    assert base["compilation_config.max_cudagraph_capture_size"] == 512
    assert len(base["compilation_config.cudagraph_capture_sizes"]) == 51
    assert base["compilation_config.cudagraph_mode"] == "CUDAGraphMode.FULL_AND_PIECEWISE"
    assert base["max_num_batched_tokens"] == 8192
    assert base["async_scheduling"] == "enabled"
    assert base["enable_prefix_caching"] is True
    assert base["kv_cache_tokens"] == 10_241_024
    assert base["cuda_graph_memory_gib"] == 0.25


def test_smaller_graph_sizes_also_shrank_the_capture_limit_and_its_memory() -> None:
    """``--cudagraph-capture-sizes 1 2 4 8 16``: the flag names the sizes; vLLM also moved
    the largest size a graph covers (512 -> 16) and the graphs' memory, which no flag names;
    the KV cache's 0.1% difference is not a change."""
    from reportgen.analysis import engine_config

    base = _config("vllm", VLLM / "server-baseline.log")
    small = _config("vllm", VLLM / "server-graph-sizes-small.log")
    vllm = engines.get("vllm")
    changes = engine_config.also_changed(base, small, ["cudagraph-capture-sizes"],
                                         vllm.config_volatile)  # fmt: skip
    keys = [c.key for c in changes]
    assert keys[0] == "compilation_config.max_cudagraph_capture_size"
    assert (changes[0].before, changes[0].after) == (512, 16)
    assert "cuda_graph_memory_gib" in keys
    assert "compilation_config.cudagraph_capture_sizes" not in keys  # the flag's own
    assert "kv_cache_tokens" not in keys  # within 2%
    words = engine_config.said(changes)
    assert "CUDA graphs captured up to 16 tokens a step instead of 512" in words
    # the same configuration started again changes nothing
    assert engine_config.also_changed(base, base, [], vllm.config_volatile) == []


def test_fewer_batched_tokens_also_moved_the_compile_range() -> None:
    from reportgen.analysis import engine_config

    base = _config("vllm", VLLM / "server-baseline.log")
    small = _config("vllm", VLLM / "server-batched-tokens-512.log")
    changes = engine_config.also_changed(base, small, ["max-num-batched-tokens"])
    keys = [c.key for c in changes]
    assert "max_num_batched_tokens" not in keys  # the flag's own
    assert "compilation_config.compile_ranges_endpoints" in keys


def test_sglang_resolved_configuration_read_from_its_log() -> None:
    base = _config("sglang", SGLANG / "server-baseline.log")
    assert base["cuda_graph_config.decode.max_bs"] == 256
    assert base["chunked_prefill_size"] == 8192
    assert base["max_running_requests"] == 4096
    assert base["max_total_num_tokens"] == 9_641_083
    # SGLang draws a random seed at start: never a change between two starts
    assert "random_seed" in engines.get("sglang").config_volatile


# -- CUDA-graph coverage -----------------------------------------------------------------------


def test_sglang_decode_steps_with_and_without_graphs_counted_from_its_log() -> None:
    from reportgen.run import events

    sglang = engines.get("sglang")
    assert events.graph_steps(sglang, _read(SGLANG / "server-baseline.log")) == [23, 0]
    without = events.graph_steps(sglang, _read(SGLANG / "server-no-cuda-graphs.log"))
    assert without is not None and without[0] == 0 and without[1] > 0
    assert events.graph_steps(engines.get("vllm"), _read(VLLM / "server-baseline.log")) is None


def test_a_level_beyond_the_largest_captured_graph_is_named() -> None:
    """vLLM's interactivity mode captures up to 32 tokens: C=64's decode steps (64 tokens)
    run without a graph; ``--max-num-seqs 48`` keeps C=64's decode at 48 running requests,
    inside its 96-token capture. SGLang counts its steps: 30 of 100 without a graph."""
    from reportgen.analysis import graphs

    def exp(config: dict, args: dict | None = None, steps: list[int] | None = None) -> Experiment:
        levels = [Level(concurrency=c, graph_steps=steps if c == 64 else None) for c in (1, 64)]
        return Experiment(id="x", engine_config=config, args=args or {}, levels=levels)

    small = exp({"compilation_config.max_cudagraph_capture_size": 32})
    (u,) = graphs.uncovered(small, "vllm")
    assert u.said == (
        "C=64: decode batches of up to 64 requests without a CUDA graph "
        "(the largest captured is 32)"
    )
    capped = exp({"compilation_config.max_cudagraph_capture_size": 96}, {"max-num-seqs": 48})
    assert graphs.uncovered(capped, "vllm") == []
    counted = exp({"cuda_graph_config.decode.max_bs": 48}, steps=[70, 30])
    (u,) = graphs.uncovered(counted, "sglang")
    assert u.said == "C=64: 30% of decode steps without a CUDA graph (the largest captured is 48)"
    assert "Measured partly without CUDA graphs: x C=64" in graphs.uncovered_said(
        counted, None, "sglang", [Point(1), Point(64)]
    )


def test_the_committed_h100_run_says_max_num_seqs_48_also_shrank_its_graphs() -> None:
    """``docs/examples/vllm-h100``: ``--max-num-seqs 48`` lost 8% at C=16 where nothing
    waits for a slot. vLLM's own log in that run says the flag also cut CUDA-graph capture
    from 512 tokens to 96 (graph memory 0.98 -> 0.19 GiB): read from the recorded logs, as
    ``render --recheck`` reads them, the decision's words say so."""
    from reportgen import results
    from reportgen.analysis import engine_config

    run_dir = ROOT / "docs" / "examples" / "vllm-h100"
    run = results.load(run_dir)
    vllm = engines.get("vllm")
    configs = {}
    for exp_id in ("baseline", "max-num-seqs-48"):
        e = run.experiment(exp_id)
        assert e is not None and e.log_file
        text = results.read_log(run_dir, e.log_file)
        assert text is not None
        configs[exp_id] = evidence.engine_config(text, vllm.config_lines, vllm.config_values)
    child = run.experiment("max-num-seqs-48")
    assert child is not None
    changes = engine_config.also_changed(
        configs["baseline"],
        configs["max-num-seqs-48"],
        [f.key for f in child.flag_diff],
        vllm.config_volatile,
    )
    words = engine_config.said(changes)
    assert "CUDA graphs captured up to 96 tokens a step instead of 512" in words, words
    assert "graph memory 0.19 GiB instead of 0.98" in words, words
