"""Campaign files: every problem reported at once, with file, key and value; resolution."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from reportgen import campaign
from reportgen.campaign import CampaignError
from reportgen.run.plan import command_line, plan
from tests.conftest import ROOT

GOOD = """
[campaign]
name = "t"
title = "T"
objective = { metric = "output_tok_s", concurrency = [1] }

[server]
engine = "sglang"
command = ["python", "-m", "sglang.launch_server"]
args = { model-path = "m", tp-size = 8, port = 30000, disable-custom-all-reduce = true }
env = { HF_TOKEN = "hf_abcdefghijklmnopqrstuvwxyz0123", NCCL_IB_DISABLE = "1" }

[workload]
concurrency = [1, 4]
requests_per_level = 8

[[experiment]]
id = "baseline"
why = "reference"

[[experiment]]
id = "mtp"
why = "speculation"
args = { speculative-algorithm = "NEXTN", speculative-num-steps = 3, speculative-config = {k = 1} }
workload = { concurrency = [1, 4, 64] }

[[experiment]]
id = "car"
based_on = "best"
why = "custom all-reduce"
unset = ["disable-custom-all-reduce"]
"""


def problems(text: str) -> list[str]:
    with pytest.raises(CampaignError) as info:
        campaign.loads(text, "c.toml")
    return [str(p) for p in info.value.problems]


def test_good_campaign_resolves_parents_args_and_overrides() -> None:
    c = campaign.loads(GOOD, "c.toml")
    steps = plan(c)
    assert [r.id for r in steps] == ["baseline", "mtp", "car"]
    base, mtp, car = steps
    assert base.parent is None and mtp.parent == "baseline"
    # "best" is decided while running; the plan shows it as the experiment just before.
    assert car.parent == "mtp"
    assert "disable-custom-all-reduce" not in car.args
    assert car.args["speculative-algorithm"] == "NEXTN"
    assert [(f.key, f.kind) for f in car.flag_diff] == [("disable-custom-all-reduce", "removed")]
    # Workload overrides belong to the experiment that names them, not to its children.
    assert mtp.workload.concurrency == [1, 4, 64]
    assert car.workload.concurrency == [1, 4]
    argv = command_line(c, mtp)
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]
    assert "--disable-custom-all-reduce" in argv  # true -> bare flag
    i = argv.index("--speculative-config")
    assert json.loads(argv[i + 1]) == {"k": 1}  # tables -> one JSON argument
    assert argv[argv.index("--tp-size") + 1] == "8"


def test_every_problem_is_reported_at_once_with_file_key_and_value() -> None:
    text = (
        GOOD.replace('title = "T"', 'title = "T"\nmargn = 0.1')
        .replace("requests_per_level = 8", "requests_per_level = -1\nconcurency = [2]")
        .replace('based_on = "best"', 'based_on = "mpt"')
    )
    found = problems(text)
    assert len(found) == 4, found
    assert "c.toml: campaign.margn = 0.1: unknown key; did you mean 'margin'?" in found
    assert "c.toml: workload.concurency = [2]: unknown key; did you mean 'concurrency'?" in found
    assert any(p.startswith("c.toml: workload.requests_per_level = -1:") for p in found)
    assert any(
        "experiment[2] (id='car').based_on = 'mpt'" in p and "did you mean 'mtp'" in p
        for p in found
    )


def test_wrong_types_and_missing_keys() -> None:
    text = """
[campaign]
name = "bad name!"
[workload]
concurrency = "1,2"
repetitions = 1.5
[[experiment]]
id = "a"
args = { port = [1, { x = 1 }] }
"""
    found = problems(text)
    joined = "\n".join(found)
    assert "campaign.name = 'bad name!'" in joined
    assert "campaign.title: required key is missing" in joined
    assert "workload.concurrency = '1,2'" in joined
    assert "workload.repetitions = 1.5" in joined
    assert "experiment[0] (id='a').why: required key is missing" in joined
    assert "experiment[0] (id='a').args.port" in joined and "flag value must be" in joined


def test_a_table_given_as_a_plain_value_is_one_located_problem() -> None:
    # `campaign = false`, and a stray top-level key named like a type: it once lost its whole
    # location to the filter of union members' names and raised IndexError (found by
    # tests/unit/campaign/test_campaign_fuzz.py)
    text = """
campaign = false
int = false
[workload]
concurrency = [1]
[[experiment]]
id = "a"
why = "x"
"""
    found = problems(text)
    assert any("campaign = False: input should be a valid dictionary" in p for p in found)
    assert any("int = False: unknown key" in p for p in found)


def test_cross_key_rules() -> None:
    text = GOOD.replace('id = "car"', 'id = "mtp"').replace(
        'unset = ["disable-custom-all-reduce"]', 'unset = ["disable-custom-allreduce"]'
    )
    text = text.replace('why = "reference"', 'why = "reference"\nbased_on = "mtp"')
    text = text.replace("concurrency = [1] }", "concurrency = [1, 32] }")
    found = "\n".join(problems(text))
    assert "duplicate id" in found
    assert "the first experiment is the baseline and cannot have a parent" in found
    assert "did you mean 'disable-custom-all-reduce'" in found
    assert "campaign.objective.concurrency = 32: no experiment runs at concurrency 32" in found


def test_an_objective_of_no_levels_is_refused_not_judged_two_ways() -> None:
    """``objective.concurrency = []`` judged no level in the verdicts and every level in the
    results' own rule; it is refused, saying what to write instead."""
    for key in ("concurrency = []", "request_rate = []"):
        text = GOOD.replace("concurrency = [1] }", f"{key} }}")
        (found,) = problems(text)
        assert found.startswith(f"c.toml: campaign.objective.{key.split()[0]} = []: an empty ")
        assert "leave the key out to judge every level" in found


def test_values_that_read_as_something_else_are_refused_at_their_key() -> None:
    """Four campaigns that validated, or were refused for the wrong reason: nan read as "should
    be less than 1", 1e400 read as infinity (every request at once), a parent naming its own
    experiment said to "come later", and a closed-loop objective over rate levels, whose
    headline then judged nothing and said no experiment beat the baseline."""
    (found,) = problems(GOOD.replace('title = "T"\n', 'title = "T"\nmargin = nan\n'))
    assert found == "c.toml: campaign.margin = nan: not a number; give a number"
    text = GOOD.replace("concurrency = [1, 4]\n", "concurrency = [1]\nrequest_rate = [2, 1e400]\n")
    found = problems(text.replace("concurrency = [1] }", "request_rate = [2] }"))
    assert found == [
        "c.toml: workload.request_rate[1] = 1e400: too large to hold as a number (it would be "
        "read as infinity); write inf where infinity is meant, or a smaller number"
    ]
    itself = GOOD.replace('id = "car"\nbased_on = "best"', 'id = "car"\nbased_on = "car"')
    (found,) = problems(itself)
    assert found.endswith(
        "based_on = 'car': names this experiment itself; a parent is an earlier experiment "
        '(or "best")'
    )
    text = GOOD.replace("concurrency = [1, 4]\n", "concurrency = [1]\nrequest_rate = [1, 2, inf]\n")
    (found,) = problems(text)
    assert found.startswith(
        "c.toml: campaign.objective.concurrency = [1]: no level runs closed-loop: the levels "
        "are workload.request_rate's rates"
    )
    # inf, written as such, stays every request at once; the objective by rate is accepted
    text = text.replace("workload = { concurrency = [1, 4, 64] }\n", "")
    ok = campaign.loads(text.replace("concurrency = [1] }", "request_rate = [2, inf] }"), "c.toml")
    assert ok.model.workload.request_rate == [1, 2, math.inf]


def test_headers_are_plain_one_line_and_never_credentials() -> None:
    def with_headers(table: str) -> str:
        return GOOD.replace("requests_per_level = 8", f"requests_per_level = 8\nheaders = {table}")

    def headers(table: str) -> list[str]:
        return problems(with_headers(table))

    (found,) = headers('{ "X Route" = "a" }')
    assert "'X Route' is not a header name" in found
    (found,) = headers('{ X-Route = "a\\nX-Other: b" }')
    assert "a header value is one line" in found
    for name in ("Authorization", "X-Api-Key", "Cookie"):
        (found,) = headers(f'{{ {name} = "s3cret-value" }}')
        assert "its value would be written in the results and reports" in found
        assert "OPENAI_API_KEY" in found and "s3cret" not in found
    ok = campaign.loads(with_headers('{ X-Route = "pool-a" }'), "c.toml")
    assert ok.model.workload.headers == {"X-Route": "pool-a"}


def test_a_value_outside_a_choice_is_pointed_to_the_one_meant() -> None:
    (found,) = problems(GOOD.replace('metric = "output_tok_s"', 'metric = "ttft"'))
    assert found.endswith("'ttft_ms', 'itl_ms', 'tpot_ms' or 'e2e_ms'; did you mean 'ttft_ms'?")
    api = GOOD.replace("requests_per_level = 8", 'requests_per_level = 8\napi = "chat-completions"')
    (found,) = problems(api)
    assert found.endswith("must be one of 'chat' or 'completions'; did you mean 'chat'?")


def test_invalid_toml_and_missing_file_are_one_line_problems(tmp_path: Path) -> None:
    found = problems("[campaign\nname=1")
    assert len(found) == 1 and found[0].startswith("c.toml: invalid TOML:")
    with pytest.raises(CampaignError) as info:
        campaign.load(tmp_path / "nope.toml")
    assert "file not found" in str(info.value)
    with pytest.raises(CampaignError) as info:  # a folder: unreadable as a file
        campaign.load(tmp_path)
    assert str(info.value).startswith(f"{tmp_path}: cannot read: ")


def test_dashes_in_flag_names_are_rejected_with_a_fix() -> None:
    found = problems(GOOD.replace("tp-size = 8", '"--tp-size" = 8'))
    assert any("write flag names without dashes: 'tp-size'" in p for p in found)


def test_published_json_schema_is_current() -> None:
    published = json.loads((ROOT / "campaigns" / "campaign.schema.json").read_text())
    assert published == campaign.json_schema(), "run `make schema` to regenerate it"
    assert published["properties"]["experiment"]["type"] == "array"


@pytest.mark.parametrize("path", sorted((ROOT / "campaigns").glob("*.toml")), ids=lambda p: p.name)
def test_shipped_campaigns_validate(path: Path) -> None:
    c = campaign.load(path)
    assert c.experiments


def test_checks_probes_and_new_settings_are_validated() -> None:
    text = (
        GOOD
        + """
[[probe]]
prompt = "What is 2 + 2?"
expect = "4("

[[check]]
metric = "ttft_ms"
stat = "p99"

[[check]]
log_contains = "x"
max = 3
"""
    )
    text = text.replace('title = "T"', 'title = "T"\ncv_bound = 1.5')
    text = text.replace("requests_per_level = 8", "requests_per_level = 8\n"
                        "prefix_cache_hit_rate = [0.5, 0.1]")  # fmt: skip
    found = "\n".join(problems(text))
    assert "probe[0].expect = '4(': not a valid regular expression" in found
    assert "check[0]" in found and "metric = 'ttft_ms' needs max or min" in found
    assert "check[1]" in found and "max, min and concurrency go with metric" in found
    assert "campaign.cv_bound = 1.5" in found
    assert (
        "workload.prefix_cache_hit_rate = [0.5, 0.1]: [lowest, highest]: the lowest comes first"
        in found
    )
    ok = (
        GOOD.replace('title = "T"', 'title = "T"\ninterleave = true\ncv_bound = 0.1')
        + """
[[check]]
metric = "output_tok_s"
min = 10
concurrency = [1]
invalidates = true
"""
    )
    c = campaign.loads(ok, "c.toml")
    assert c.model.campaign.interleave and c.model.campaign.cv_bound == 0.1
    steps = plan(c)
    assert all(s.checks[0].metric == "output_tok_s" for s in steps)  # on every experiment


def test_settings_named_as_the_peers_name_them_are_pointed_to_their_key(tmp_path: Path) -> None:
    """A `vllm bench serve` user writes num_prompts or random_input_len: the error says
    where that setting lives here."""
    path = tmp_path / "peer.toml"
    path.write_text(
        '[campaign]\nname = "p"\ntitle = "t"\n[workload]\nnum_prompts = 10\n'
        'random_input_len = 5\n[[experiment]]\nid = "a"\nwhy = "b"\n'
    )
    with pytest.raises(CampaignError) as got:
        campaign.load(path)
    said = [str(p) for p in got.value.problems]
    assert any("workload.num_prompts = 10: unknown key; as the benchmark tools call it: here "
               "it is workload.requests_per_level" in s for s in said), said  # fmt: skip
    assert any("random_input_len = 5: unknown key; as the benchmark tools call it: here it is "
               "workload.input_tokens" in s for s in said), said  # fmt: skip


def test_a_server_across_nodes_is_launched_rank_by_rank_and_only_through_slurm() -> None:
    """nodes = 2 runs the engine's command through the launcher, which adds each rank's
    flags (SGLang's and vLLM's own); an experiment may change it, said as a change; it needs
    Slurm and an engine whose multi-node flags reportgen knows."""
    from reportgen import engines

    text = GOOD.replace("[server]\n", '[host]\nexecutor = "slurm"\n\n[server]\nnodes = 2\n')
    text = text.replace('id = "car"', 'id = "car"\nnodes = 1')
    c = campaign.loads(text, "c.toml")
    base, mtp, car = plan(c)
    assert (base.nodes, mtp.nodes, car.nodes) == (2, 2, 1)
    argv = command_line(c, base)
    assert argv[1:8] == ["-m", "reportgen.run.nodes", "--engine", "sglang", "--nodes", "2", "--"]
    assert argv[8:11] == ["python", "-m", "sglang.launch_server"]
    assert command_line(c, car)[:3] == ["python", "-m", "sglang.launch_server"]
    assert [(f.key, f.before, f.after) for f in car.flag_diff if f.key == "nodes"] == [
        ("nodes", 2, 1)
    ]
    sglang, vllm = engines.get("sglang"), engines.get("vllm")
    assert sglang.node_args(2, 1, "10.0.0.5", 5000) == [
        "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.5:5000"
    ]  # fmt: skip
    assert vllm.node_args(2, 0, "10.0.0.5", 5000) == [
        "--nnodes", "2", "--node-rank", "0", "--master-addr", "10.0.0.5", "--master-port", "5000"
    ]  # fmt: skip
    assert vllm.node_args(2, 1, "10.0.0.5", 5000)[-1] == "--headless"
    local = "\n".join(problems(text.replace('executor = "slurm"', 'executor = "local"')))
    assert (
        'server: nodes = 2 spans a server across a Slurm job\'s nodes: set host.executor = "slurm"'
        in local
    )
    generic = text.replace('engine = "sglang"', 'engine = "transformers"')
    assert "no multi-node flags for the transformers engine" in "\n".join(problems(generic))


def test_leaving_out_an_adopted_change_of_nodes_undoes_its_node_count() -> None:
    """campaign.confirm: the best configuration without an adopted change that moved the
    server from two nodes to one is the best configuration on two nodes again."""
    from reportgen.results.model import Experiment
    from reportgen.results.verdicts import Decision
    from reportgen.run import confirm

    text = GOOD.replace("[server]\n", '[host]\nexecutor = "slurm"\n\n[server]\nnodes = 2\n')
    text = text.replace('id = "car"', 'id = "car"\nnodes = 1')
    resolved = {r.id: r for r in plan(campaign.loads(text, "c.toml"))}
    adopted = Decision(verdict="adopted", explanation="")
    entries = {
        "baseline": Experiment(id="baseline"),
        "mtp": Experiment(id="mtp", parent="baseline", decision=adopted),
        "car": Experiment(id="car", parent="mtp", decision=adopted),
    }

    class Ran:
        best = "car"
        baseline = entries["baseline"]

        def experiment(self, exp_id: str | None) -> Experiment | None:
            return entries.get(exp_id or "")

    runs = {e.id: r for e, r in confirm.plan(Ran(), resolved)}  # type: ignore[arg-type]
    without = runs["without-car"]
    assert without.nodes == 2 and runs["confirm-best"].nodes == 1
    assert ("nodes", 1, 2) in [(f.key, f.before, f.after) for f in without.flag_diff]
    assert without.args.get("disable-custom-all-reduce") is True  # its flag undone too
    assert runs["without-mtp"].nodes == 1  # mtp changed flags only


def test_every_engine_but_the_simulator_is_bracketed_by_default() -> None:
    """campaign.bracket: the baseline measured again at the end (the campaign's drift) unless
    the engine is the simulator or the campaign says otherwise; priming stays with the
    engines that compile kernels at first use."""

    def model(engine: str, extra: str = "") -> Any:
        text = GOOD.replace('engine = "sglang"', f'engine = "{engine}"')
        text = text.replace("[campaign]\n", f"[campaign]\n{extra}")
        return campaign.loads(text, "c.toml").model

    assert [model(e).brackets for e in ("sglang", "vllm", "transformers", "generic")] == [True] * 4
    assert [model(e).primes for e in ("sglang", "vllm", "transformers", "generic")] == [
        True,
        True,
        False,
        False,
    ]
    assert not model("sim").brackets and not model("sim").primes
    assert not model("generic", "bracket = false\n").brackets
    assert model("sim", "bracket = true\n").brackets


@pytest.mark.parametrize(
    "edit, why",
    [
        (("[server]\n", '[server]\nbase_url = "http://127.0.0.1:1"\n'), "already running"),
        (('title = "T"\n', 'title = "T"\nparallel = 2\n'), "campaign.parallel = 2 runs"),
        (("requests_per_level = 8\n", 'find_max = { slo = "ttft_ms.p99<500" }\n'), "find_max"),
    ],
)
def test_re_measuring_the_baseline_where_it_cannot_be_is_refused_at_its_key(
    edit: tuple[str, str], why: str
) -> None:
    """``campaign.anchors`` asks for fresh starts of the baseline between experiments: a
    server already running, experiments run at once and a find_max search cannot honour it;
    each is refused naming the key, while the default then simply makes none."""
    asked = GOOD.replace('title = "T"\n', 'title = "T"\nanchors = 2\n').replace(*edit)
    found = [p for p in problems(asked) if "anchors" in p]
    assert len(found) == 1 and found[0].startswith("c.toml: campaign.anchors = 2"), found
    assert why in found[0] and "set campaign.anchors = 0" in found[0]
    try:  # left out, the default makes none there: nothing to refuse
        said = [str(p) for p in campaign.loads(GOOD.replace(*edit), "c.toml").model.experiment]
    except CampaignError as exc:
        said = [str(p) for p in exc.problems]
    assert not [p for p in said if "anchors" in p]


def test_the_baseline_is_re_measured_every_two_experiments_by_default_where_bracketed() -> None:
    """The default (2) wherever the bracket is on (every engine but the simulator), recorded
    resolved with the run; off for the simulator. The best is then confirmed by default
    (confirm-best alone: campaign.confirm = "best")."""
    c = campaign.loads(GOOD, "c.toml")
    assert c.model.brackets and c.model.anchor_every == 2 and c.model.confirms == "best"
    assert c.model.recorded()["campaign"]["anchors"] == 2
    assert c.model.recorded()["campaign"]["confirm"] == "best"
    sim = campaign.loads(GOOD.replace('engine = "sglang"', 'engine = "sim"'), "c.toml")
    assert sim.model.anchor_every == 0 and sim.model.confirms is False
    full = campaign.loads(GOOD.replace('title = "T"\n', 'title = "T"\nconfirm = true\n'), "c.toml")
    assert full.model.confirms is True


def test_a_structured_expectation_is_kept_and_a_wrong_one_named_in_one_line() -> None:
    text = GOOD.replace(
        'why = "speculation"',
        'why = "speculation"\nexpect = [{ verdict = "better", at = [4] }, '
        '{ verdict = "worse", metric = "ttft_ms", text = "a slower first token" }]',
    )
    c = campaign.loads(text, "c.toml")
    mtp = next(r for r in plan(c) if r.id == "mtp")
    assert mtp.expect == "better at C=4; a slower first token"
    assert mtp.expects == [
        {"verdict": "better", "at": [4]},
        {"verdict": "worse", "metric": "ttft_ms", "text": "a slower first token"},
    ]
    bad = GOOD.replace(
        'why = "speculation"', 'why = "speculation"\nexpect = { verdict = "slower" }'
    )
    assert problems(bad) == [
        "c.toml: experiment[1] (id='mtp').expect.verdict = 'slower': must be one of 'better', "
        "'worse', 'equivalent' or 'fails'"
    ]
