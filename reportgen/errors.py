"""The exception tree. Only the CLI turns these into exit codes and one-line messages.

ReportgenError
├── CampaignError      a campaign file that cannot be read or is invalid (carries every problem)
├── ServerError        a server that would not start, exited, or would not stop
├── LoadError          the load generator could not run a level
├── GpuError           NVML or host inspection failed where it was required
├── ResultsError       a results file that is missing, corrupt or of another schema version
└── RenderError        a report that could not be written
"""

from __future__ import annotations

from dataclasses import dataclass


class ReportgenError(Exception):
    """Root of every error reportgen raises on purpose."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a campaign file: where, what value, what is wrong, what to do."""

    file: str
    key: str
    value: object
    message: str

    def __str__(self) -> str:
        shown = _short_repr(self.value)
        where = f"{self.file}: {self.key}" if self.key else self.file
        if shown is None:
            return f"{where}: {self.message}"
        return f"{where} = {shown}: {self.message}"


_MISSING = object()


def _short_repr(value: object) -> str | None:
    if value is _MISSING:
        return None
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


MISSING = _MISSING


class CampaignError(ReportgenError):
    """A campaign file with one or more problems, all reported at once."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class ServerError(ReportgenError):
    """The server process failed to start, become ready, or stop. Beside its message, what
    happened as data (``results.model.Failure``): ``kind`` ("start", "not ready", "exited",
    "fatal", "other"), the exit code where it exited, and the level run (a ``Point``) and
    repetition it failed during, set by the session that ran it."""

    def __init__(
        self,
        message: str,
        log_tail: str = "",
        log_heading: str = "",
        kind: str = "other",
        exit_code: int | None = None,
    ):
        self.log_tail = log_tail  # the server's log lines that show what happened
        self.log_heading = log_heading  # what those lines are, when not the log's last ones
        self.kind = kind
        self.exit_code = exit_code
        self.level: object | None = None  # the level run it failed during
        self.repetition: int | None = None
        super().__init__(message)


class LoadError(ReportgenError):
    """A load level could not be run."""


class GpuError(ReportgenError):
    """Host or GPU inspection failed where it was required."""


class ResultsError(ReportgenError):
    """A results file that cannot be used."""


class RenderError(ReportgenError):
    """A report that could not be rendered or written."""


class HostLost(ReportgenError):
    """The GPU host of a run over SSH went away mid-experiment (the connection dropped, the
    host rebooted): the run stops as an interrupted one does, what finished is kept, and
    ``--resume`` goes on."""
