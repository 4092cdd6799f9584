"""The ``reportgen`` command. It parses arguments, calls the core, and maps errors to exit codes:
0 success, 1 a run or render that failed, 2 bad input (campaign file, arguments, results file),
3 ``history check`` cannot tell, 130 interrupted (Ctrl-C), 143 stopped by SIGTERM.

- ``parser``: every command's arguments and help; ``argtypes``: the types its flags are read
  with (each refuses a bad value saying how to write one).
- ``prepare``: the commands before a run (validate, plan, calibrate, fingerprint, schema).
- ``runs``: running a campaign (run, --resume) and reading a run back (render, verify);
  ``summary``: the table and ``--json`` a run ends with.
- ``compare``: ``reportgen diff``; ``history``: ``reportgen history``; ``compare_args``: the
  arguments of both.
- ``codes``: the exit codes.

Each command imports the stage it calls when it runs, so ``reportgen --help`` stays quick.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Callable
from typing import IO, TextIO, cast

from rich.console import Console

from reportgen.cli.bench import cmd_bench
from reportgen.cli.codes import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from reportgen.cli.compare import cmd_diff
from reportgen.cli.history import cmd_history
from reportgen.cli.parser import build_parser
from reportgen.cli.prepare import (
    cmd_calibrate,
    cmd_completion,
    cmd_fingerprint,
    cmd_plan,
    cmd_schema,
    cmd_validate,
)
from reportgen.cli.runs import cmd_render, cmd_run, cmd_verify
from reportgen.errors import CampaignError, ReportgenError, ResultsError

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "main"]

Handler = Callable[[argparse.Namespace, Console, Console], int]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        from reportgen import sim

        return sim.main(argv[1:])
    args = build_parser().parse_args(argv)
    stdout, stderr = _Tolerant(sys.stdout), _Tolerant(sys.stderr)
    err = Console(file=cast(IO[str], stderr), stderr=True, highlight=False, soft_wrap=True)
    out = Console(file=cast(IO[str], stdout), highlight=False, soft_wrap=True)
    try:
        handler = _COMMANDS[args.command]
        return handler(args, out, err)
    except CampaignError as exc:
        for problem in exc.problems:
            err.print(f"error: {problem}", markup=False)
        n = len(exc.problems)
        err.print(f"{n} problem{'s' if n != 1 else ''} found.", markup=False)
        return EXIT_BAD_INPUT
    except ResultsError as exc:
        err.print(f"error: {exc}", markup=False)
        return EXIT_BAD_INPUT
    except ReportgenError as exc:
        err.print(f"error: {exc}", markup=False)
        return EXIT_FAILED
    except KeyboardInterrupt:
        from reportgen.run import interrupt

        err.print("interrupted", markup=False)
        return interrupt.exit_code()  # 130 for Ctrl-C, 143 for SIGTERM
    finally:
        stdout.close_if_broken()
        stderr.close_if_broken()


class _Tolerant(io.TextIOBase):
    """Standard output that outlives its reader (`reportgen run ... | head`): once the pipe
    is closed, what is written is dropped, so a run goes on, saves and renders as it would
    have, and exits with its own code rather than dying mid-campaign."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.broken = stream is None  # closed before we started (a daemon, `>&-`)

    def write(self, text: str) -> int:
        if not self.broken and self.stream is not None:
            try:
                self.stream.write(text)
            except (BrokenPipeError, ValueError):  # ValueError: a closed file
                self.broken = True
        return len(text)

    def flush(self) -> None:
        if not self.broken and self.stream is not None:
            try:
                self.stream.flush()
            except (BrokenPipeError, ValueError):
                self.broken = True

    def isatty(self) -> bool:
        return self.stream is not None and self.stream.isatty()

    def fileno(self) -> int:
        if self.stream is None:
            raise OSError("no stream")
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")

    def close_if_broken(self) -> None:
        """After a broken pipe, point the descriptor at /dev/null, so the interpreter's own
        flush at exit has nowhere to fail."""
        if self.broken and self.stream is not None:
            with contextlib.suppress(OSError, ValueError):
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, self.stream.fileno())


_COMMANDS: dict[str, Handler] = {
    "diff": cmd_diff,
    "history": cmd_history,
    "validate": cmd_validate,
    "plan": cmd_plan,
    "run": cmd_run,
    "bench": cmd_bench,
    "render": cmd_render,
    "verify": cmd_verify,
    "calibrate": cmd_calibrate,
    "fingerprint": cmd_fingerprint,
    "schema": cmd_schema,
    "completion": cmd_completion,
}
