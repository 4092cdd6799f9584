"""The peers' virtual environments under benchmarks/.peers-venv/<tool>/ (git-ignored).

One venv per tool: their pins disagree (AIPerf would downgrade pandas, rich and
huggingface-hub under GuideLLM). Each is installed once with pip from PyPI and marked with
`.installed.json` (time taken, size, versions); a failed install is recorded and the tool
is reported as not working, with pip's last lines, instead of stopping the benchmark.

SGLang: `pip install sglang` pulls the whole engine (flashinfer, sglang-kernel, CUDA
wheels). Its bench client (sglang.benchmark.serving) is pure Python but imports a constant
from the runtime (sglang.srt.disaggregation.utils), which drags in the model-config and
quantization modules. So: sglang with --no-deps, then only the modules that import chain
needs, at the versions sglang pins.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lgbench.clients import PEERS

# Modules the import chain of `python -m sglang.benchmark.serving --help` needs (found by
# running it until it stopped failing), as PyPI names.
SGLANG_CLIENT_DEPS = [
    "aiohttp",
    "apache-tvm-ffi",
    "compressed-tensors",
    "datasets",
    "gguf",
    "ipython",
    "msgspec",
    "numpy",
    "orjson",
    "packaging",
    "pillow",
    "psutil",
    "pybase64",
    "pydantic",
    "pyzmq",
    "requests",
    "sentencepiece",
    "starlette",
    "torch",
    "torchvision",
    "tqdm",
    "transformers",
]

RECIPES: dict[str, list[list[str]]] = {
    "guidellm": [["guidellm"]],
    "aiperf": [["aiperf"]],
    "sglang": [["--no-deps", "sglang"], ["@sglang-pinned"]],
    "vllm": [["vllm[bench]"]],
}
# What `--version`-style check proves each tool runs at all.
SMOKE: dict[str, list[str]] = {
    "guidellm": ["bin/guidellm", "--version"],
    "aiperf": ["bin/aiperf", "--version"],
    "sglang": ["bin/python", "-m", "sglang.benchmark.serving", "--help"],
    "vllm": ["bin/vllm", "bench", "serve", "--help"],
}
DIST = {"guidellm": "guidellm", "aiperf": "aiperf", "sglang": "sglang", "vllm": "vllm"}


def _pinned(venv: Path, dist: str, names: list[str]) -> list[str]:
    """`names` with the version specifiers `dist` declares for them (its Requires-Dist)."""
    code = (
        f"import json, importlib.metadata as m, sys;print(json.dumps(m.requires({dist!r}) or []))"
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True
    )
    declared: dict[str, str] = {}
    for req in json.loads(out.stdout):
        if ";" in req:  # extras and platform markers: not ours
            continue
        name = req.split("[")[0]
        for sep in "=<>!~ ":
            name = name.split(sep)[0]
        declared[name.lower().replace("_", "-")] = req.replace(" ", "")
    return [declared.get(n, n) for n in names]


def _du(path: Path) -> int:
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=False)
    return int(out.stdout.split()[0]) if out.returncode == 0 else 0


def _version(venv: Path, dist: str) -> str | None:
    code = f"import importlib.metadata as m; print(m.version({dist!r}))"
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=False
    )
    return out.stdout.strip() or None


def status(tool: str) -> dict[str, Any] | None:
    marker = PEERS / tool / ".installed.json"
    return json.loads(marker.read_text()) if marker.exists() else None


def ensure(tool: str, log: Path, say: Any = print) -> dict[str, Any]:
    """Install `tool`'s venv unless it is already marked installed; return its record."""
    known = status(tool)
    if known is not None:
        return known
    venv = PEERS / tool
    if venv.exists():
        shutil.rmtree(venv)  # half-made by an interrupted run
    say(f"setting up {tool} in {venv} (once; a few minutes) ...")
    t0 = time.monotonic()
    record: dict[str, Any] = {"tool": tool, "ok": False, "steps": []}
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        subprocess.run(pip + ["--upgrade", "pip"], check=True, capture_output=True)
        for step in RECIPES[tool]:
            if step == ["@sglang-pinned"]:
                step = _pinned(venv, "sglang", SGLANG_CLIENT_DEPS)
            record["steps"].append(" ".join(step))
            with open(log, "ab") as out:
                step_run = subprocess.run(pip + step, stdout=out, stderr=subprocess.STDOUT)
            if step_run.returncode != 0:
                tail = log.read_text(errors="replace").splitlines()[-8:]
                raise RuntimeError(f"pip install {' '.join(step)} failed: " + " | ".join(tail))
        smoke = SMOKE[tool]
        done = subprocess.run(
            [str(venv / smoke[0]), *smoke[1:]],
            capture_output=True,
            text=True,
            env={**os.environ, **_offline_env()},
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(smoke)} failed: {done.stderr.strip()[-600:]}")
        record["ok"] = True
    except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
        record["error"] = str(exc)[-1500:]
    record["install_s"] = round(time.monotonic() - t0, 1)
    record["size_bytes"] = _du(venv) if venv.exists() else 0
    has_python = (venv / "bin" / "python").exists()
    record["version"] = _version(venv, DIST[tool]) if has_python else None
    if not record["ok"]:
        record["error"] += f" (recorded in {venv}/.installed.json; delete {venv} to retry)"
    venv.mkdir(parents=True, exist_ok=True)
    (venv / ".installed.json").write_text(json.dumps(record, indent=1))
    return record


def _offline_env() -> dict[str, str]:
    from lgbench.clients import OFFLINE_ENV

    return dict(OFFLINE_ENV)
