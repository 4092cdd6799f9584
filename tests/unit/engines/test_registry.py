"""A new engine is one module of ``reportgen.engines``: every list of engines elsewhere (the
campaign's ``server.engine``, ``bench --engine``, the fingerprint's packages and environment
variables, recognising a running server, priming) derives from the registry."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from reportgen import engines

ROOT = Path(__file__).resolve().parents[3]

FAKE = '''"""An engine that exists only in this test."""

import sys

from reportgen.engines.base import Engine

ENGINE = Engine(
    name="fakeserve",
    default_command=(sys.executable, "-m", "fakeserve"),
    default_port=8123,
    health_path="/health",
    packages=("fakeserve-kernels",),
    env_prefixes=("FAKESERVE_",),
    metric_prefix="fakeserve:",
    compiles=True,
)
'''

CAMPAIGN = """
[campaign]
name = "fake"
title = "an engine added as one module"
objective = { metric = "output_tok_s", concurrency = [1] }

[server]
engine = "fakeserve"

[workload]
concurrency = [1]

[[experiment]]
id = "baseline"
why = "reference"
"""

PROBE = """
import http.server, json, threading
from reportgen import engines
from reportgen.campaign import load
from reportgen.cli.parser import build_parser
from reportgen.observe import fingerprint
from reportgen.run.external import detect_engine

class Metrics(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"fakeserve:requests_total 3\\n" if self.path == "/metrics" else b"{}"
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
threading.Thread(target=server.serve_forever, daemon=True).start()
bench = next(a for a in build_parser()._subparsers._group_actions[0].choices["bench"]._actions
             if "--engine" in a.option_strings)
c = load("c.toml")
print(json.dumps({
    "names": list(engines.names()),
    "bench": list(bench.choices),
    "packages": list(fingerprint.PACKAGES),
    "env": list(fingerprint.ENV_PREFIXES),
    "primes": c.model.primes,
    "detected": detect_engine(f"http://127.0.0.1:{server.server_port}", {}),
}))
server.shutdown()
"""


def test_an_engine_added_as_one_module_is_known_everywhere(tmp_path: Path) -> None:
    """A copy of reportgen with one more module in ``reportgen/engines`` (nothing else
    changed): a campaign naming it validates and is primed (it compiles), ``bench --engine``
    offers it, the fingerprint records its package and its environment variables, and a
    running server whose /metrics names its prefix is recognised as it."""
    src = tmp_path / "src"
    shutil.copytree(
        ROOT / "reportgen", src / "reportgen", ignore=shutil.ignore_patterns("__pycache__")
    )
    (src / "reportgen" / "engines" / "fakeserve.py").write_text(FAKE)
    (tmp_path / "c.toml").write_text(CAMPAIGN)
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONSAFEPATH": "1"}
    ran = subprocess.run(
        [sys.executable, "-m", "reportgen", "validate", "c.toml"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "c.toml: ok (1 experiment" in ran.stdout, ran.stdout
    probe = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    got = json.loads(probe.stdout)
    assert "fakeserve" in got["names"] and "fakeserve" in got["bench"]
    assert "fakeserve-kernels" in got["packages"] and "FAKESERVE_" in got["env"]
    assert got["primes"] is True
    assert got["detected"] == ["fakeserve", "its /metrics names fakeserve:* series"]


def test_the_registry_lists_each_engine_once_simulator_first_generic_last() -> None:
    names = engines.names()
    assert names[0] == "sim" and names[-1] == "generic"
    assert set(names) == {"sim", "sglang", "vllm", "transformers", "generic"}
    assert [e for e in names if engines.get(e).compiles] == ["sglang", "vllm"]
    # the fingerprint records every engine's packages (and vLLM's and SGLang's own)
    from reportgen.observe import fingerprint

    assert {"sglang", "vllm", "transformers", "flashinfer-python"} <= set(fingerprint.PACKAGES)
    assert {"VLLM_", "SGLANG_", "TRANSFORMERS_"} <= set(fingerprint.ENV_PREFIXES)
