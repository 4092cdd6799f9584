"""What the server's log said of an experiment (``observe.evidence.log_evidence`` reads it):
the lines its engine's patterns and the campaign's log checks found, how many warnings and
errors it printed (and the first few of each), and a number its decode lines repeat."""

from __future__ import annotations

from pydantic import Field

from reportgen.results.base import _AsGiven


class LogValues(_AsGiven):
    """A number the log repeats (SGLang's speculative acceptance length): how many lines gave
    it, and its mean, range, first and last value."""

    count: int
    mean: float
    min: float
    max: float
    first: float | None = None
    last: float | None = None


class LogEvidence(_AsGiven):
    """The server log's evidence, saved as results.json's ``log_evidence``. ``found``: per
    pattern name (the engine's, and ``campaign:<i>`` for the campaign's i-th check), the
    first matching line or None. ``errors_at_stop``: error lines printed once the server was
    asked to stop (counted apart from those while it served)."""

    found: dict[str, str | None] = Field(default_factory=dict)
    warnings: int = 0
    warning_lines: list[str] = Field(default_factory=list)
    errors: int = 0
    error_lines: list[str] = Field(default_factory=list)
    errors_at_stop: int = 0
    spec_accept_length: LogValues | None = None

    def line(self, name: str) -> str:
        """The line the pattern ``name`` found ("" when none, or no such pattern)."""
        return str(self.found.get(name) or "")
