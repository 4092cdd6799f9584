"""Secrets planted everywhere a user might put one (the server's environment, reportgen's own
environment, an --api-key flag the client must send back as a header) never reach the run
directory: results, tables, the campaign's copy, server logs, the report."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import free_port, reportgen_main

API_KEY = "planted-api-key-4242"  # no token shape: found only because its name is secret
HF_TOKEN = "hf_PlantedTokenValue1234567890abcd"
PASSWORD = "pw-planted-XYZ-987"
SECRETS = (API_KEY, HF_TOKEN, PASSWORD)


@pytest.mark.slow
def test_planted_secrets_never_reach_the_run_directory(tmp_path: Path, cache: Path) -> None:
    port = free_port()
    path = tmp_path / "secret.toml"
    path.write_text(f"""
[campaign]
name = "secrets"
title = "Secrets stay out"

[server]
engine = "sim"
args = {{ port = {port}, ttft-ms = 5, itl-ms = 1, api-key = "{API_KEY}" }}
env = {{ HF_TOKEN = "{HF_TOKEN}", SERVICE_PASSWORD = "{PASSWORD}" }}
ready_timeout_s = 20

[workload]
concurrency = [1, 2]
requests_per_level = 6
input_tokens = 16
output_tokens = 8
warmup_requests = 1
warmup = {{ steady = false }}  # what is tested is what is written, not the warm-up

[[probe]]
prompt = "Repeat after me: hello"
expect = "hello"

[[experiment]]
id = "baseline"
why = "The sim demands the key as a bearer token and prints its own arguments."
""")
    # in this process, with the token in reportgen's own environment
    res = reportgen_main(
        "run", path, "--output", tmp_path / "out", cache=cache, env={"HF_TOKEN": HF_TOKEN}
    )
    assert res.returncode == 0, res.stdout + res.stderr
    (run_dir,) = (tmp_path / "out" / "secrets").iterdir()
    # the key went out as a header: every request was answered (401 otherwise)
    rows = pd.read_parquet(run_dir / "requests" / "baseline.parquet")
    assert len(rows) == 12 and set(rows["status"]) == {"ok"}
    log = (run_dir / "logs" / "baseline.server.log").read_text()
    assert "api_key='***'" in log  # the engine printed it; the kept log has it hidden
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"results.json", "campaign.toml", "report.html"}
    assert any(p.suffix == ".pdf" for p in files)
    for p in files:
        data = p.read_bytes()
        if p.suffix == ".parquet":  # compressed columns: read them back
            data = pd.read_parquet(p).to_csv().encode()
        elif p.suffix == ".pdf":
            data = subprocess.run(
                ["pdftotext", str(p), "-"], capture_output=True, check=True
            ).stdout
        for secret in SECRETS:
            assert secret.encode() not in data, f"{secret} found in {p.relative_to(run_dir)}"
    for secret in SECRETS:
        assert secret not in res.stdout + res.stderr
    copy = (run_dir / "campaign.toml").read_text()
    assert 'api-key = "***"' in copy and 'HF_TOKEN = "***"' in copy
