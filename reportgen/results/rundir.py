"""The layout of a run directory, in one place: every path a stage reads or writes there.

::

    campaign.toml                   the campaign file as given (its sha256 is in results.json)
    results.json                    ``model.Run``, rewritten atomically after every experiment
    requests/<table>.parquet        one row per request, every chunk's arrival
    telemetry/<table>.parquet       GPU samples
    host/<table>.parquet            the host's CPU samples (``observe.host``)
    logs/<experiment>.server.log    each server start's output (``Session.log_file``)
    logs/<experiment>.server.json   a running server's record, for the reaper
    report.html, report.pdf, report.md, tables/*.csv     what ``reportgen render`` writes

A directory may be *compacted* (``scripts/compact_run.py``, for committed examples): its
results, report page and large logs are kept xz-compressed under their names plus ``.xz``
(``results.json.xz``; ``.gz`` is read too). Reading takes any form; writing keeps the form the
directory has, so a compacted example rendered again stays compacted and its verification
reads what was written.
"""

from __future__ import annotations

import gzip
import lzma
from dataclasses import dataclass
from pathlib import Path

RESULTS = "results.json"
CAMPAIGN = "campaign.toml"
HTML = "report.html"
PDF = "report.pdf"
MARKDOWN = "report.md"
REQUESTS = "requests"
TELEMETRY = "telemetry"
HOST = "host"
LOGS = "logs"
TABLES = "tables"
TABLE_FOLDERS = (REQUESTS, TELEMETRY, HOST)  # the raw tables, hashed into every report
SENT = (REQUESTS, TELEMETRY, HOST, LOGS)  # what an experiment on another host writes and sends back
PACKED = ".xz"  # what compaction writes: a third smaller than gzip -9 on results
_READ = {".xz": lzma.decompress, ".gz": gzip.decompress}  # what reading unpacks


@dataclass(frozen=True, init=False)
class RunDir:
    """A run directory: where each of its files is, and reading or writing one whole
    whichever form (plain or compressed) the directory keeps it in."""

    path: Path

    def __init__(self, path: str | Path) -> None:
        object.__setattr__(self, "path", Path(path))

    # the raw tables and logs
    def requests(self, table: str) -> Path:
        return self.path / REQUESTS / f"{table}.parquet"

    def telemetry(self, table: str) -> Path:
        return self.path / TELEMETRY / f"{table}.parquet"

    def host(self, table: str) -> Path:
        return self.path / HOST / f"{table}.parquet"

    def tables(self, folder: str) -> list[Path]:
        """The Parquet tables of one folder (``REQUESTS``, ``TELEMETRY`` or ``HOST``), sorted."""
        return sorted((self.path / folder).glob("*.parquet"))

    @staticmethod
    def log_name(experiment: str, start: int | None = None, role: str = "") -> str:
        """A server start's log, relative to the run directory: ``logs/<id>.server.log`` for an
        experiment's first start, ``logs/<id>.<n>-<role>.server.log`` for the others."""
        if start is None:
            return f"{LOGS}/{experiment}.server.log"
        return f"{LOGS}/{experiment}.{start + 1}-{role}.server.log"

    def server_records(self) -> list[Path]:
        """The records of servers a run started and has not yet seen stop."""
        return sorted((self.path / LOGS).glob("*.server.json"))

    # the results, the report
    @property
    def results(self) -> Path:
        """results.json, or its compressed copy where only that is there."""
        return self.stored(RESULTS)

    @property
    def html(self) -> Path:
        return self.stored(HTML)

    @property
    def pdf(self) -> Path:
        return self.path / PDF

    @property
    def markdown(self) -> Path:
        return self.path / MARKDOWN

    def csv(self, name: str) -> Path:
        return self.path / TABLES / name

    @property
    def campaign(self) -> Path:
        return self.path / CAMPAIGN

    def stored(self, name: str) -> Path:
        """Where the file ``name`` (relative) is kept: itself, or ``name.xz`` (``name.gz``)
        where only a compressed copy is there (itself again when none is)."""
        plain = self.path / name
        if plain.exists():
            return plain
        for suffix in _READ:
            packed = plain.with_name(plain.name + suffix)
            if packed.exists():
                return packed
        return plain

    def read_bytes(self, name: str) -> bytes:
        """The file ``name`` (relative), unpacked where it is kept compressed;
        FileNotFoundError when no form of it is there."""
        return read_bytes(self.stored(name))

    def read_text(self, name: str) -> str | None:
        """The text of ``name`` (undecodable bytes replaced), or None when it is not there."""
        try:
            return self.read_bytes(name).decode("utf-8", errors="replace")
        except FileNotFoundError:
            return None

    def target(self, name: str, data: bytes) -> tuple[Path, bytes]:
        """Where to write ``name`` and the bytes to write there: ``data`` as it is, or
        compressed where the directory keeps only a compressed copy of ``name``."""
        path = self.stored(name)
        return path, pack(data, path.suffix) if path != self.path / name else data


def read_bytes(path: Path) -> bytes:
    """A file's bytes, unpacked when its name ends in .xz or .gz."""
    data = path.read_bytes()
    unpack = _READ.get(path.suffix)
    return unpack(data) if unpack else data


def pack(data: bytes, suffix: str = PACKED) -> bytes:
    """``data`` compressed as a file named ``*suffix`` holds it, reproducibly (no name or
    time in a gzip header)."""
    if suffix == ".gz":
        return gzip.compress(data, 9, mtime=0)
    return lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)
