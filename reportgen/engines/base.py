"""What an engine adapter is (``Engine``), and the flags an engine's help lists (``Flags``).

One small object per engine: how it is started, its flags written, readiness judged, exact
output lengths asked for, where its own evidence is (info endpoints, Prometheus metrics, log
lines worth quoting), how a running one is recognised, and which packages and environment
variables of its host are its. The runner only ever talks to an engine through this interface.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import signal
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reportgen.redact import redact_argv


@dataclass(frozen=True)
class Engine:
    name: str
    default_command: tuple[str, ...] | None  # None: the campaign must give one
    default_port: int
    health_path: str | None  # GET path that answers 200 once loaded; None: skip that step
    ready_log_line: str | None = None  # informational: the line the engine prints when ready
    simulated: bool = False
    # Request fields this engine understands for "produce exactly N tokens".
    exact_length_fields: tuple[str, ...] = ()
    info_paths: tuple[str, ...] = ("/v1/models",)  # GETs recorded once the server is ready
    metrics_path: str | None = "/metrics"  # Prometheus text, scraped around every level
    # Named regular expressions whose first matching log line the report shows.
    log_patterns: tuple[tuple[str, str], ...] = ()
    # Prometheus series the checks and the report read, by role: "generation_tokens" (output
    # tokens the engine produced), "prompt_tokens", "prefix_hits" (prompt tokens served from
    # the prefix cache), "prefix_queries" (prompt tokens looked up; prompt_tokens when
    # absent); for speculative decoding "spec_drafts" (draft rounds), "spec_draft_tokens"
    # (tokens proposed), "spec_accepted" (tokens accepted), or the gauge "spec_accept_length"
    # (mean tokens per step) where the engine exports that instead.
    counters: tuple[tuple[str, str], ...] = ()
    # A log line's number that is the speculative acceptance length (SGLang's decode lines).
    spec_accept_log: str | None = None
    # Arguments written first and without a flag, in this order (``vllm serve MODEL``).
    positional: tuple[str, ...] = ()
    # How a false boolean is written: "no-" gives ``--no-compile`` (vLLM's and typer's
    # negatable flags); None leaves the flag out (SGLang's store_true flags).
    negate: str | None = None
    # The argument that makes the engine print every flag it accepts; the campaign's flags are
    # checked against that list before anything starts. None: no check.
    help_flag: str | None = None
    # Log lines that mean the server can no longer generate although its process may live on
    # (transformers serve answers 503 forever once its generation loop has died): seen before
    # it is ready or between levels, the experiment fails at once with that line.
    fatal_patterns: tuple[str, ...] = ()
    # Cheap GETs that open a level's connections before it starts (the first that answers
    # below 400 is used); transformers serve scans the model hub's cache on /v1/models.
    preopen_paths: tuple[str, ...] = ("/v1/models", "/health")
    # Flag sets that turn CUDA graphs off on purpose (every flag of one set true): an
    # experiment run so is not warned that its log has no capture line.
    graphs_off: tuple[tuple[str, ...], ...] = ()
    # How one server spans several nodes (``server.nodes``): the flags every rank gets, with
    # {nnodes}, {rank}, {addr} (rank 0's address) and {port} (its rendezvous port) filled in,
    # and those the ranks after 0 get besides (vLLM's --headless: no API server there).
    # Empty: the engine cannot span nodes.
    node_flags: tuple[str, ...] = ()
    worker_flags: tuple[str, ...] = ()
    # Log lines that say the engine left its steady state while serving (a kernel compiled at
    # run time, a recompilation, a graph captured, requests preempted), by kind: one inside a
    # level's window has that level measured again (``observe.events``).
    event_patterns: tuple[tuple[str, str], ...] = ()
    # The engine's resolved configuration, as its log prints it at start (``observe.evidence.
    # engine_config``): lines whose first group is a ``key=value, ...`` list, then single
    # values by name (a line's first group); keys that differ between two starts of one
    # configuration (a random seed, a port picked at start) are left out of comparisons.
    config_lines: tuple[str, ...] = ()
    config_values: tuple[tuple[str, str], ...] = ()
    config_volatile: tuple[str, ...] = ()
    # A log line per decode step saying whether it ran as a CUDA graph (its first group
    # "True" or "False"): counted inside each level's window (``Level.graph_steps``)
    graph_step: str | None = None
    # The resolved settings that bound the largest decode batch a graph covers, and the
    # running requests (``engine_config``'s keys, the first present)
    graph_max_keys: tuple[str, ...] = ()
    running_max_keys: tuple[str, ...] = ()
    # Its Python distributions (the fingerprint records their versions) and the prefixes of
    # the environment variables that change how it runs (recorded, secrets redacted)
    packages: tuple[str, ...] = ()
    env_prefixes: tuple[str, ...] = ()
    # How a server already running is told to be this engine (``run.external.detect_engine``):
    # the prefix of its Prometheus series ("vllm:"), then GET paths that answer 200 only on
    # it, each with a word its answer must hold (None: any answer)
    metric_prefix: str | None = None
    detect_paths: tuple[tuple[str, str | None], ...] = ()
    # It compiles kernels at first use, kept on disk: the baseline is primed by default
    # (``campaign.prime``)
    compiles: bool = False

    def node_args(self, nnodes: int, rank: int, addr: str, port: int | str) -> list[str]:
        """The flags that make this process rank ``rank`` of ``nnodes`` (``node_flags``);
        ``port`` may be a placeholder ("PORT") for a plan to show."""
        host = f"[{addr}]" if ":" in addr else addr
        fill = {"nnodes": nnodes, "rank": rank, "addr": addr, "port": port, "host": host}
        argv = [f.format(**fill) for f in self.node_flags]
        return argv + (list(self.worker_flags) if rank else [])

    def graphs_disabled(self, args: Mapping[str, Any]) -> str | None:
        """The flags by which ``args`` turn CUDA graphs off ("--enforce-eager"), or None."""
        for flags in self.graphs_off:
            if flags and all(args.get(f) is True for f in flags):
                return " ".join(f"--{f}" for f in flags)
        return None

    def fatal_in(self, text: str) -> str | None:
        """The first line of ``text`` matching one of the fatal patterns, or None."""
        if not self.fatal_patterns:
            return None
        found = re.search("|".join(f"(?:{p})" for p in self.fatal_patterns), text)
        if found is None:
            return None
        start = text.rfind("\n", 0, found.start()) + 1
        end = text.find("\n", found.end())
        return text[start : end if end >= 0 else len(text)]

    def patterns(self) -> dict[str, str]:
        found = dict(self.log_patterns)
        if self.ready_log_line:
            found.setdefault("ready", re.escape(self.ready_log_line))
        return found

    def command(self, configured: list[str] | None) -> list[str]:
        if configured:
            return list(configured)
        if self.default_command is None:
            raise ValueError(f"engine {self.name!r} has no default command; set server.command")
        return list(self.default_command)

    def port(self, args: dict[str, Any]) -> int:
        value = args.get("port", self.default_port)
        return int(value)

    def format_args(self, args: dict[str, Any]) -> list[str]:
        """Flags as the engine's argparse expects them.

        The engine's positional arguments come first (their values only); ``true`` becomes a
        bare ``--flag``; ``false`` becomes ``--no-flag`` where the engine negates flags that
        way, else the flag is left out; a list becomes ``--flag a b``; a table becomes one
        JSON argument (vLLM's ``--speculative-config``).
        """
        argv = [_scalar(args[k]) for k in self.positional if args.get(k) not in (None, False)]
        for key, value in args.items():
            flag = f"--{key}"
            if key in self.positional:
                continue
            if value is True:
                argv.append(flag)
            elif value is False and self.negate:
                argv.append(f"--{self.negate}{key}")
            elif value is False or value is None:
                continue
            elif isinstance(value, list):
                argv.append(flag)
                argv.extend(_scalar(v) for v in value)
            elif isinstance(value, dict):
                argv.extend([flag, json.dumps(value, separators=(",", ":"), sort_keys=True)])
            else:
                argv.extend([flag, _scalar(value)])
        return argv

    def auth_headers(self, args: Mapping[str, Any]) -> dict[str, str]:
        """The header a server started with ``--api-key`` (SGLang, vLLM) wants on every
        request; the key is sent, never recorded."""
        key = args.get("api-key")
        return {"Authorization": f"Bearer {key}"} if isinstance(key, str) and key else {}

    def request_extras(self, output_tokens: int) -> dict[str, Any]:
        """Fields that ask the engine for exactly ``output_tokens`` tokens."""
        extras: dict[str, Any] = {}
        if "ignore_eos" in self.exact_length_fields:
            extras["ignore_eos"] = True
        if "min_tokens" in self.exact_length_fields:
            extras["min_tokens"] = output_tokens
        return extras


# An exception with its message, as a Python traceback ends ("ValueError: No available memory
# for the cache blocks."), after whatever prefix the engine's logger put before it.
def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# A flag in help text ("--tp-size", "--no-compile", "--help=all"), and argparse's choices
# after a flag in its usage lines ("--dtype {auto,half,bfloat16}").
_FLAG = re.compile(r"(?<![\w-])--([A-Za-z0-9][\w.-]*)")
_CHOICES = re.compile(r"(?<![\w-])--([A-Za-z0-9][\w.-]*)[ =]\{([^{}\s]+)\}")


def _norm(flag: str) -> str:
    return flag.replace("_", "-").lower()


@dataclass
class Flags:
    """The flags an engine says it accepts, read from its own help text."""

    command: list[str]
    names: frozenset[str] = frozenset()
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    error: str | None = None  # why there is no list (engine not installed here, say)

    @classmethod
    def parse(cls, command: list[str], text: str) -> Flags:
        names = frozenset(_norm(m) for m in _FLAG.findall(text))
        choices = {_norm(k): tuple(v.split(",")) for k, v in _CHOICES.findall(text)}
        return cls(command, names, choices)

    def problems(
        self, args: Mapping[str, Any], skip: Iterable[str] = ()
    ) -> list[tuple[str, Any, str]]:
        """(flag, value, what is wrong) for each flag the engine does not know, or value
        outside the flag's choices."""
        if self.error or not self.names:
            return []
        out: list[tuple[str, Any, str]] = []
        skipped = set(skip)
        for key, value in args.items():
            if key in skipped or value is None:
                continue
            name = _norm(key)
            if name not in self.names:
                near = difflib.get_close_matches(name, sorted(self.names), n=1, cutoff=0.75)
                hint = f"; did you mean --{near[0]}?" if near else ""
                out.append((key, value, f"not a flag of this engine{hint}"))
                continue
            allowed = self.choices.get(name)
            scalar = isinstance(value, (str, int, float)) and not isinstance(value, bool)
            if allowed and scalar and _scalar(value) not in allowed:
                out.append((key, value, f"not one of its choices {{{','.join(allowed)}}}"))
        return out

    def record(self) -> dict[str, Any]:
        return {"command": redact_argv(self.command), "flags": len(self.names), "error": self.error}


def read_flags(argv: list[str], timeout_s: float = 120.0) -> Flags:
    """Run the engine's help command (``argv``, ending in its help flag) in its own process
    group and parse the flags it prints. A missing engine or a failing help is no error: the
    check is skipped (``Flags.error`` says why) and the engine judges the flags at start."""
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1", "COLUMNS": "200"},
            start_new_session=True,
        )
    except OSError as exc:
        return Flags(argv, error=f"cannot run it: {exc.strerror or exc}")
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return Flags(argv, error=f"no answer within {timeout_s:g} s")
    finally:
        # The help command may leave helpers behind in its group: none outlive the check.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    text = out.decode("utf-8", "replace")
    flags = Flags.parse(argv, text)
    if proc.returncode != 0 or len(flags.names) < 2:
        last = text.strip().splitlines()[-1:] or [""]
        return Flags(argv, error=f"exit code {proc.returncode}: {last[0][:200]}")
    return flags
