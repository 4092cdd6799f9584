"""A server's log file as reportgen writes and reads it: opened for the server's output,
read back while it runs (its tail, its text so far, what it wrote between two readings, the
first line its engine calls fatal and the traceback after it), every text with the run's
secrets hidden, and the file itself redacted once the server is gone.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from reportgen.engines import Engine
from reportgen.redact import redact_text

MESSAGE_CHARS = 2000  # an error message is kept whole up to this (CUDA's OOM runs to 600)


def tail(path: Path, lines: int = 40, secrets: Sequence[str] = ()) -> str:
    """The last lines of a log file, secrets redacted ('' if unreadable)."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            return redact_text("".join(deque(fh, maxlen=lines)), secrets)
    except OSError:
        return ""


class ServerLog:
    """One server launch's log (``ServerProcess.log``)."""

    def __init__(self, path: Path, secrets: Sequence[str], engine: Engine) -> None:
        self.path = path
        self.secrets = list(secrets)
        self.engine = engine
        self._handle: IO[bytes] | None = None
        self._scanned = 0  # bytes of the log already searched for a fatal line
        self._fatal: str | None = None
        self.fatal_at = 0  # where in the log the fatal line starts (bytes)

    def open(self) -> IO[bytes]:
        """The file the server writes to, created (with its folder) empty."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = self.path.open("wb")
        return self._handle

    def _flush(self) -> None:
        """What the server wrote through our handle, out to the file before it is read."""
        if self._handle is not None:
            with contextlib.suppress(OSError, ValueError):
                self._handle.flush()

    def tail(self, lines: int = 40) -> str:
        self._flush()
        return tail(self.path, lines, self.secrets)

    def text(self, limit: int = 8 * 1024 * 1024) -> str:
        """The server's log so far (its first ``limit`` bytes), secrets redacted."""
        return redact_text(self.read(0, limit).decode("utf-8", errors="replace"), self.secrets)

    def size(self) -> int:
        """How much of the log is written so far (its size in bytes; 0 if unreadable)."""
        self._flush()
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def split(self, at: int, limit: int = 8 * 1024 * 1024) -> tuple[str, str]:
        """The log before byte ``at`` and from it on (each its first ``limit`` bytes), secrets
        redacted: what the server wrote while serving, and once asked to stop."""
        whole = self.read(0, at + limit)
        before, after = whole[: min(at, limit)], whole[at:]

        def text(b: bytes) -> str:
            return redact_text(b.decode("utf-8", errors="replace"), self.secrets)

        return text(before), text(after)

    def slice(self, start: int, end: int) -> str:
        """What the server wrote between two ``size`` readings, secrets redacted."""
        data = self.read(start, max(0, end - start))
        return redact_text(data.decode("utf-8", errors="replace"), self.secrets)

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes of the log from ``offset``, as written so far (b'' if unreadable)."""
        self._flush()
        try:
            with self.path.open("rb") as f:
                f.seek(offset)
                return f.read(size)
        except OSError:
            return b""

    def fatal_line(self) -> str | None:
        """The first log line so far matching the engine's fatal patterns (a server whose
        process lives on but can no longer generate), secrets redacted; None if none. Each
        call reads only what was written since the last one, up to its last whole line."""
        if self._fatal is not None or not self.engine.fatal_patterns:
            return self._fatal
        chunk = self.read(self._scanned, 4 * 1024 * 1024)
        whole = chunk[: chunk.rfind(b"\n") + 1]
        text = whole.decode("utf-8", errors="replace")
        line = self.engine.fatal_in(text)
        if line is not None:
            self._fatal = redact_text(line.strip(), self.secrets)[:MESSAGE_CHARS]
            self.fatal_at = self._scanned + len(text[: text.find(line)].encode("utf-8"))
        self._scanned += len(whole)
        return self._fatal

    def fatal_excerpt(self, lines: int = 40) -> str:
        """The log from its fatal line on (the traceback that follows it, where the engine
        prints one), ``lines`` at most, secrets redacted; '' before a fatal line was seen."""
        if self._fatal is None:
            return ""
        head = self.read(self.fatal_at, 256 * 1024).decode("utf-8", errors="replace")
        return redact_text("".join(head.splitlines(keepends=True)[:lines]), self.secrets)

    def redact(self) -> None:
        """Hide the known secrets in the log file itself, once the server is gone (an engine
        may print its own arguments, API key included): the run directory keeps none."""
        if not self.secrets:
            return
        try:
            text = self.path.read_bytes().decode("utf-8", errors="surrogateescape")
        except OSError:
            return
        clean = redact_text(text, self.secrets)
        if clean != text:
            from reportgen.results import atomic_write_bytes

            with contextlib.suppress(OSError):
                atomic_write_bytes(self.path, clean.encode("utf-8", "surrogateescape"))

    def close(self) -> None:
        if self._handle is not None:
            with contextlib.suppress(OSError):
                self._handle.close()
            self._handle = None
