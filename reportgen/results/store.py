"""A run directory on disk: results.json (``model.Run``) and the tables beside it, where
``rundir.RunDir`` says they are: the request tables (``RequestRecord`` rows), the telemetry
(``observe.gpu.TELEMETRY_FIELDS``), the server logs.

``render`` and ``diff`` read only these files. Older results files are read through
``migrate``; a newer one is refused, saying which reportgen wrote it.
"""

from __future__ import annotations

import contextlib
import json
import lzma
import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from reportgen.errors import ResultsError
from reportgen.load.records import RECORD_FIELDS, RequestRecord
from reportgen.observe.gpu import TELEMETRY_FIELDS
from reportgen.redact import redact_text
from reportgen.results.migrate import migrate
from reportgen.results.model import CONTROL_SUFFIX, SCHEMA_VERSION, Run
from reportgen.results.rundir import REQUESTS, RESULTS, RunDir, read_bytes

TELEMETRY_COLUMNS = ("t", "gpu", *TELEMETRY_FIELDS)
# the level's identity first, then the rest of the record as the load generator fills it
_LEVEL = ("concurrency", "rate", "repetition")
REQUEST_COLUMNS = ("experiment", *_LEVEL, *(f for f in RECORD_FIELDS if f not in _LEVEL))
# The request table's column types, from ``RequestRecord``'s fields (nullable where None).
_ARROW_TYPES = {
    "experiment": pa.string(),
    "index": pa.int64(),
    "start": pa.float64(),
    "end": pa.float64(),
    "first_token": pa.float64(),
    "chunk_times": pa.list_(pa.float64()),
    "input_tokens": pa.int64(),
    "output_tokens": pa.int64(),
    "output_tokens_source": pa.string(),
    "requested_output_tokens": pa.int64(),
    "status": pa.string(),
    "http_status": pa.int64(),
    "error": pa.string(),
    "output_text": pa.string(),
    "chunk_chars": pa.list_(pa.int64()),
    "scheduled": pa.float64(),
    "turn": pa.int64(),
    "concurrency": pa.int64(),
    "rate": pa.float64(),
    "repetition": pa.int64(),
}
REQUEST_SCHEMA = pa.schema([(name, _ARROW_TYPES[name]) for name in REQUEST_COLUMNS])


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a temporary file in the same directory and rename: never a half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would make shared reports unreadable to others
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def save(run_dir: Path, run: Run, secrets: Sequence[str] = ()) -> Path:
    """Write results.json atomically. A value that is not a finite number (NaN from a
    statistic with too little data, say) is written as null: JSON has no NaN, and the results
    already paid for must not be lost over one. Every ``secrets`` value is replaced by ***,
    wherever it is (the last line of defence: flags and environments are redacted before)."""
    results = _hidden(run.dump(), list(secrets)) if secrets else run.dump()
    try:
        text = json.dumps(results, indent=1, allow_nan=False, default=_jsonable)
    except ValueError:
        text = json.dumps(_finite(results), indent=1, allow_nan=False, default=_jsonable)
    path, data = RunDir(run_dir).target(RESULTS, text.encode("utf-8") + b"\n")
    try:
        atomic_write_bytes(path, data)
    except OSError as exc:
        raise _cannot_save(path, exc) from None
    return path


def _cannot_save(path: Path, exc: OSError) -> ResultsError:
    """A write that failed (a full disk, a file size limit, a folder gone read-only): what
    happened, that nothing saved before was touched, and what to do."""
    why = exc.strerror or type(exc).__name__
    return ResultsError(
        f"cannot save {path}: {why}. Everything saved before is intact (files are replaced "
        "only once written in full); free space or fix the folder, then continue with "
        "`reportgen run <campaign> --resume`"
    )


def _hidden(value: Any, secrets: list[str]) -> Any:
    """``value`` with the secrets hidden in its text values (never in its keys or numbers,
    whose names a short secret could otherwise cut into)."""
    if isinstance(value, dict):
        return {k: _hidden(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_hidden(v, secrets) for v in value]
    return redact_text(value, secrets) if isinstance(value, str) else value


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, infinity) replaced by None."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalars
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def results_path(target: str | Path) -> Path:
    """The results file of a run directory (results.json, or results.json.gz in a compacted
    one), or ``target`` itself when it names a file."""
    p = Path(target)
    return RunDir(p).results if p.is_dir() else p


def load(target: str | Path) -> Run:
    """Read results.json from a run directory (or the file itself): an older schema through
    ``migrate``, a newer one refused."""
    path = results_path(target)
    if path.suffix in (".toml", ".html", ".md", ".pdf") and path.is_file():
        what = {
            ".toml": f"a campaign file, not results: to run it, reportgen run {path}",
            ".html": f"a report: to check it, reportgen verify {path}",
        }.get(path.suffix, "a report, not results")
        raise ResultsError(
            f"{path}: {what}; give a run directory such as output/<campaign>/<run-id>/ (or "
            "its results.json)"
        )
    try:
        data = json.loads(read_bytes(path).decode("utf-8"))
    except FileNotFoundError:
        raise ResultsError(
            f"{path}: no results file here; give a run directory such as "
            "output/<campaign>/<run-id>/"
        ) from None
    except (OSError, EOFError, lzma.LZMAError, UnicodeDecodeError) as exc:  # a damaged .xz, .gz
        raise ResultsError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: not valid JSON ({exc}); the file is damaged") from None
    return parse(data, str(path))


def parse(data: Any, where: str = "results") -> Run:
    """A results dict (results.json's, or the one a report embeds) as a ``Run``."""
    if not isinstance(data, dict) or "schema_version" not in data:
        raise ResultsError(f"{where}: not a reportgen results file (no schema_version)")
    version = data["schema_version"]
    if not isinstance(version, int) or version > SCHEMA_VERSION or version < 1:
        raise ResultsError(
            f"{where}: schema_version = {version!r}, but this reportgen reads versions 1 to "
            f"{SCHEMA_VERSION}; use the reportgen version that wrote it "
            f"({data.get('reportgen_version', 'unknown')}) to render it"
        )
    try:
        return Run.model_validate(migrate(data))
    except (AttributeError, TypeError, KeyError, ValueError) as exc:
        if isinstance(exc, ValidationError):
            raise _invalid(where, exc) from None
        raise ResultsError(
            f"{where}: not readable as schema {version} results ({type(exc).__name__}: "
            f"{exc}); the file is damaged or was edited by hand: render it from an intact copy"
        ) from None


def _invalid(where: str, exc: ValidationError) -> ResultsError:
    """The first problem pydantic found, in one line naming its key."""
    first = exc.errors()[0]
    key = ".".join(str(x) for x in first["loc"])
    if not key:  # a rule over the whole file (``Run``'s own validators): its message alone
        said = str(first["msg"]).removeprefix("Value error, ")
        return ResultsError(
            f"{where}: {said}; the file is damaged or was edited by hand: render it from an "
            "intact copy"
        )
    return ResultsError(
        f"{where}: {key}: {first['msg']} (got {first.get('input')!r:.60}); the file is "
        "damaged or was edited by hand: render it from an intact copy"
    )


def save_requests(run_dir: Path, table: str, records: Sequence[RequestRecord]) -> Path:
    """Write one request table (an experiment's, or its control's) atomically as Parquet,
    one row per record, the columns ``REQUEST_COLUMNS`` (``experiment``: the experiment's
    id, also in its control's table)."""
    experiment = table.split(CONTROL_SUFFIX)[0]
    columns = [pa.array([experiment] * len(records), pa.string())]
    columns += [
        pa.array([getattr(r, name) for r in records], _ARROW_TYPES[name])
        for name in REQUEST_COLUMNS[1:]
    ]
    return _save_arrow(RunDir(run_dir).requests(table), pa.table(columns, REQUEST_SCHEMA))


def read_table(path: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """A saved Parquet table (those ``columns`` of it); ResultsError naming the file when it
    cannot be read (truncated, overwritten, not Parquet)."""
    try:
        return pq.read_table(path, columns=list(columns) if columns else None)
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise ResultsError(
            f"{path}: cannot read this raw table ({type(exc).__name__}: {str(exc)[:160]}); "
            "the run directory is damaged: restore the file from a copy of the run"
        ) from None


def read_requests(run_dir: Path, table: str) -> list[RequestRecord]:
    """One request table's rows as records (empty when it was never saved). Tables written
    before a field existed give its default."""
    path = RunDir(run_dir).requests(table)
    if not path.exists():
        return []
    frame = read_table(path)
    names = [n for n in RECORD_FIELDS if n in frame.column_names]
    cols = [frame.column(n).to_pylist() for n in names]
    return [RequestRecord(**dict(zip(names, row, strict=True))) for row in zip(*cols, strict=True)]


def save_telemetry(run_dir: Path, experiment: str, rows: list[dict[str, Any]]) -> Path:
    """Write one experiment's GPU telemetry rows (``reportgen.observe.gpu``'s fields, ``t`` on the
    records' perf_counter clock) atomically as a Parquet table."""
    frame = pd.DataFrame(rows, columns=list(TELEMETRY_COLUMNS))
    return _save_table(RunDir(run_dir).telemetry(experiment), frame)


def load_telemetry(
    run_dir: Path, experiment: str, columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """One experiment's telemetry rows, all columns or the ones named (empty table when none
    were saved)."""
    path = RunDir(run_dir).telemetry(experiment)
    if not path.exists():
        return pd.DataFrame(columns=list(columns or TELEMETRY_COLUMNS))
    return read_table(path, columns).to_pandas()


HOST_COLUMNS = ("t", "canary_ms", "busy_cores", "steal_share", "procs", "client_group")


def save_host(run_dir: Path, experiment: str, rows: list[dict[str, Any]]) -> Path:
    """Write one experiment's host CPU samples (``reportgen.observe.host``) as a Parquet table."""
    frame = pd.DataFrame(rows, columns=list(HOST_COLUMNS))
    return _save_table(RunDir(run_dir).host(experiment), frame)


def host_records(run_dir: Path, experiment: str) -> list[dict[str, Any]]:
    """One experiment's host CPU samples as records, missing values as None (none saved:
    empty)."""
    path = RunDir(run_dir).host(experiment)
    if not path.exists():
        return []
    frame = read_table(path).to_pandas()
    out = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return [{str(k): v for k, v in r.items()} for r in out]


TIME_COLUMNS = ("concurrency", "rate", "status", "start", "first_token", "end")


def load_request_times(run_dir: Path, table: str) -> pd.DataFrame:
    """One request table's level, status and times (``TIME_COLUMNS``), not every chunk's:
    ``rate`` NaN where the table has none (closed-loop levels, tables written before rates).
    ResultsError naming the file when it is missing or cannot be read."""
    path = RunDir(run_dir).requests(table)
    try:
        rated = "rate" in pq.read_schema(path).names
    except (OSError, ValueError):  # missing or damaged: read_table says which, in one line
        rated = False
    columns = [c for c in TIME_COLUMNS if rated or c != "rate"]
    frame = read_table(path, columns).to_pandas()
    if not rated:
        frame["rate"] = float("nan")
    return frame


def _save_table(path: Path, frame: pd.DataFrame) -> Path:
    return _save_arrow(path, pa.Table.from_pandas(frame, preserve_index=False))


ZSTD_LEVEL = 9  # new tables; scripts/compact_run.py rewrites committed examples at 19


def write_parquet(table: pa.Table, path: Path | str, level: int = ZSTD_LEVEL) -> None:
    """A table as Parquet, compact and lossless: zstd, floating-point columns (times, chunk
    arrival times) byte-stream-split first (their bytes of like significance side by side,
    which zstd then finds alike: about a third of the size of snappy's for request tables)."""
    floats = [
        name
        for name, kind in zip(table.schema.names, table.schema.types, strict=True)
        if pa.types.is_floating(kind)
        or (pa.types.is_list(kind) and pa.types.is_floating(kind.value_type))
    ]
    split = [
        f"{n}.list.element" if pa.types.is_list(table.schema.field(n).type) else n for n in floats
    ]
    others = [n for n in table.schema.names if n not in floats]  # dictionaries there only
    pq.write_table(
        table,
        path,
        compression="zstd",
        compression_level=level,
        use_dictionary=others,
        use_byte_stream_split=split or False,
    )


def read_log(run_dir: Path, name: str) -> str | None:
    """A server log saved in the run directory (``logs/<id>.server.log``), or its compressed
    copy (``.gz``, as scripts/compact_run.py leaves committed examples); None when neither
    is there."""
    return RunDir(run_dir).read_text(name)


def _save_arrow(path: Path, table: pa.Table) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _cannot_save(path, exc) from None
    os.fchmod(fd, 0o644)
    os.close(fd)
    try:
        write_parquet(table, tmp)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise _cannot_save(path, exc) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def telemetry_records(run_dir: Path, experiment: str) -> list[dict[str, Any]]:
    """One experiment's telemetry rows as records, missing values as None."""
    frame = load_telemetry(run_dir, experiment)
    out = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return [{str(k): v for k, v in r.items()} for r in out]


def load_requests(run_dir: Path, experiment: str | None = None) -> pd.DataFrame:
    """Request records of one experiment, or of all (empty table when none were saved)."""
    where = RunDir(run_dir)
    files = [where.requests(experiment)] if experiment else where.tables(REQUESTS)
    frames = [read_table(f).to_pandas() for f in files if f.exists()]
    if not frames:
        return pd.DataFrame(columns=list(REQUEST_COLUMNS))
    return pd.concat(frames, ignore_index=True)
