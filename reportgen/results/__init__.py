"""The results stage: what a run saved, the contract every later stage reads.

- ``model``: the typed results (``Run``, its experiments and sessions), ``records`` (an
  experiment's smaller records: ``Failure``, ``Ready``, ``Stop``...), ``levels`` (what a
  level measured: ``Level``, ``Summary``, ``Aggregate``), ``verdicts`` (``Check``,
  ``Comparison``, ``Decision``), ``base`` (their base model: unknown keys kept).
- ``rundir``: a run directory's layout (``RunDir``: where each file is, plain or gzipped).
- ``store``: a run directory on disk (results.json, the request and telemetry tables).
- ``migrate``: older results files brought to this schema; ``as_run``: a saved [campaign]
  table and workload typed as the run that wrote them ran them. ``embed``: the results a report
  carries, and the hashes of the tables beside it. ``engine_log``: what the server's log said
  (``LogEvidence``).

Imports ``reportgen.errors``, ``reportgen.redact``, ``reportgen.campaign.schema`` (the margin's
default, which way a metric improves), ``reportgen.load.records`` (the request rows) and
``reportgen.observe.gpu`` (the telemetry columns); nothing of run, analysis or render.
"""

from reportgen.results.model import SCHEMA_VERSION, Run
from reportgen.results.rundir import RESULTS, RunDir
from reportgen.results.store import (
    REQUEST_COLUMNS,
    TELEMETRY_COLUMNS,
    atomic_write_bytes,
    host_records,
    load,
    load_request_times,
    load_requests,
    load_telemetry,
    parse,
    read_log,
    read_requests,
    results_path,
    save,
    save_host,
    save_requests,
    save_telemetry,
    telemetry_records,
)

__all__ = [
    "REQUEST_COLUMNS",
    "RESULTS",
    "SCHEMA_VERSION",
    "TELEMETRY_COLUMNS",
    "Run",
    "RunDir",
    "atomic_write_bytes",
    "host_records",
    "load",
    "load_request_times",
    "load_requests",
    "load_telemetry",
    "parse",
    "read_log",
    "read_requests",
    "results_path",
    "save",
    "save_host",
    "save_requests",
    "save_telemetry",
    "telemetry_records",
]
