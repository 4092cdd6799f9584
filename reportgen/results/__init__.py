"""The results stage: what a run saved, the contract every later stage reads.

``store`` writes and reads a run directory (results.json, the request and telemetry
tables). Imports ``reportgen.errors``, ``reportgen.redact`` and ``reportgen.observe.gpu``
(the telemetry table's columns); no stage below it.
"""

from reportgen.results.store import (
    REQUEST_COLUMNS,
    RESULTS,
    SCHEMA_VERSION,
    TELEMETRY_COLUMNS,
    atomic_write_bytes,
    load,
    load_requests,
    load_telemetry,
    request_records,
    results_path,
    save,
    save_requests,
    save_telemetry,
    telemetry_records,
)

__all__ = [
    "REQUEST_COLUMNS",
    "RESULTS",
    "SCHEMA_VERSION",
    "TELEMETRY_COLUMNS",
    "atomic_write_bytes",
    "load",
    "load_requests",
    "load_telemetry",
    "request_records",
    "results_path",
    "save",
    "save_requests",
    "save_telemetry",
    "telemetry_records",
]
