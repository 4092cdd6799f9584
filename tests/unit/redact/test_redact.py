"""Which names hide their values: credentials do, engines' token-count flags do not."""

from __future__ import annotations

import pytest

from reportgen.redact import REDACTED, is_secret_name, redact_argv, redact_flag


@pytest.mark.parametrize(
    "name",
    ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "hf-token", "--token", "token", "x-api-token",
     "api-key", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "password", "Authorization",
     "auth_header", "ssl-private-key"],
)  # fmt: skip
def test_credential_names_are_secret(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["max-num-batched-tokens", "speculative-num-draft-tokens", "max-prefill-tokens",
     "long-prefill-token-threshold", "max-total-tokens", "tokenizer", "tokenizer-mode",
     "max_tokens", "author", "tp-size"],
)  # fmt: skip
def test_token_counts_and_ordinary_flags_stay_visible(name: str) -> None:
    assert not is_secret_name(name)


def test_flag_values_in_plans_and_command_lines() -> None:
    assert redact_flag("max-num-batched-tokens", 8192) == 8192
    assert redact_flag("hf-token", "hf_abc") == REDACTED
    argv = ["serve", "--max-num-batched-tokens", "8192", "--api-key", "k", "--hf-token=x"]
    assert redact_argv(argv) == [
        "serve", "--max-num-batched-tokens", "8192", "--api-key", REDACTED, f"--hf-token={REDACTED}"
    ]  # fmt: skip


def test_a_short_secret_never_cuts_into_names_or_keys(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A key of "token" (an API key someone chose) hides the word, not every "input_tokens":
    results.json's keys and the names in a line stay whole."""
    import json

    from reportgen.redact import redact_text
    from reportgen.results import store
    from reportgen.results.model import CampaignFile, EngineRecord, Run

    assert redact_text("input_tokens=64 key token; tokenizer", ["token"]) == (
        "input_tokens=64 key ***; tokenizer"
    )
    run = Run(
        reportgen_version="x", run_id="r", started_at="t",
        campaign={"workload": {"input_tokens": 64}, "note": "the key is token"},
        campaign_file=CampaignFile(path="c.toml", sha256="", text=""),
        engine=EngineRecord(name="sim"),
    )  # fmt: skip
    saved = json.loads(store.save(tmp_path, run, ["token"]).read_text())
    assert saved["campaign"] == {"workload": {"input_tokens": 64}, "note": "the key is ***"}
