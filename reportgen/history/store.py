"""The history store: one SQLite file (the standard library's ``sqlite3``) a user can copy.

SQLite and not DuckDB: what the history keeps is small (a few hundred numbers a run, its
fingerprint as text) and read whole, so DuckDB's columnar reading of parquet would earn
nothing here, while it would add a 25 MB wheel (duckdb 2.0.1, CPython 3.11: 70 MB installed).
The raw request tables stay in the run directories, named by their sha256 in ``run_tables``.
SQLite's own locking makes concurrent ``history add`` safe: each add is one ``BEGIN
IMMEDIATE`` transaction (writers queue behind each other for up to ``BUSY_S``), in
write-ahead-log mode so that readers never block them. A run is known by its id: added again
with the same results file, nothing changes; with another (resumed to its end, rendered again
with a price), its record is replaced.

Tables: ``meta`` (the format), ``runs`` (one row a run: identity, objective, fingerprint as
JSON), ``run_tables`` (its raw tables' hashes), ``levels`` (each experiment's metric at each
level, its repetitions as JSON).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from reportgen.errors import ResultsError
from reportgen.history.record import LevelValues, RunRecord
from reportgen.results.model import PriorLevel

FORMAT = 1
BUSY_S = 60.0  # how long an add waits for another one to finish before it gives up
DEFAULT = Path("output") / "history.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    campaign TEXT NOT NULL,
    title TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL,
    results_sha256 TEXT NOT NULL,
    path TEXT NOT NULL,
    metric TEXT NOT NULL,  -- the objective's metric, for queries: what is read is objective
    objective TEXT NOT NULL,
    engine TEXT NOT NULL,
    engine_version TEXT,
    label TEXT,
    gate TEXT NOT NULL,
    setup TEXT NOT NULL,
    experiments TEXT NOT NULL,
    added_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_campaign ON runs (campaign, started_at);
CREATE TABLE IF NOT EXISTS run_tables (
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (run_id, path)
);
CREATE TABLE IF NOT EXISTS levels (
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    experiment TEXT NOT NULL,
    metric TEXT NOT NULL,
    concurrency INTEGER NOT NULL,
    rate REAL,
    n INTEGER NOT NULL,
    mean REAL NOT NULL,
    reps TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS levels_by_run ON levels (run_id);
CREATE TABLE IF NOT EXISTS starts (
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    concurrency INTEGER NOT NULL,
    rate REAL,
    spread REAL NOT NULL,
    dof REAL NOT NULL
);
"""
# added to a history made before it (runs added then have no rows there: nothing measured)
_STARTS = _SCHEMA[_SCHEMA.index("CREATE TABLE IF NOT EXISTS starts") :]


@dataclass(frozen=True)
class Added:
    run_id: str
    campaign: str
    new: bool  # False: it was in the history already
    # already there, but its results file has changed since (a run resumed to its end, or
    # rendered again with a price): its record was replaced by what it holds now
    updated: bool = False


class Store:
    """A history file, opened for reading and adding (``open_store``)."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.db = db
        self.path = path

    def add(self, record: RunRecord) -> Added:
        """Record a run. A run already recorded (by its id) is left as it is when its results
        file is the same, and its record replaced when that file has changed since."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute(
                "SELECT results_sha256 FROM runs WHERE run_id = ?", (record.run_id,)
            ).fetchone()
            if row is not None and row[0] == record.results_sha256:
                db.execute("ROLLBACK")
                return Added(record.run_id, record.campaign, False)
            updated = row is not None
            if updated:
                for table in ("levels", "starts", "run_tables", "runs"):
                    db.execute(f"DELETE FROM {table} WHERE run_id = ?", (record.run_id,))
            db.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.run_id,
                    record.campaign,
                    record.title,
                    record.started_at,
                    record.finished_at,
                    record.status,
                    record.results_sha256,
                    record.path,
                    record.metric,
                    json.dumps(record.objective, sort_keys=True),
                    record.engine,
                    record.engine_version,
                    record.label,
                    json.dumps(record.gate, sort_keys=True),
                    json.dumps(record.setup, sort_keys=True),
                    json.dumps(record.experiments),
                    datetime.now(UTC).isoformat(timespec="seconds"),
                ),
            )
            db.executemany(
                "INSERT INTO run_tables VALUES (?, ?, ?)",
                [(record.run_id, p, h) for p, h in sorted(record.tables.items())],
            )
            db.executemany(
                "INSERT INTO levels VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        record.run_id,
                        lv.experiment,
                        lv.metric,
                        lv.concurrency,
                        lv.rate,
                        len(lv.values),
                        sum(lv.values) / len(lv.values),
                        json.dumps(lv.values),
                    )
                    for lv in record.levels
                ],
            )
            db.executemany(
                "INSERT INTO starts VALUES (?, ?, ?, ?, ?)",
                [(record.run_id, x.concurrency, x.rate, x.spread, x.dof) for x in record.starts],
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return Added(record.run_id, record.campaign, not updated, updated)

    def campaigns(self) -> dict[str, int]:
        """Every campaign in the history, with how many runs it has."""
        rows = self.db.execute(
            "SELECT campaign, COUNT(*) FROM runs GROUP BY campaign ORDER BY campaign"
        ).fetchall()
        return {name: n for name, n in rows}

    def runs(self, campaign: str) -> list[RunRecord]:
        """A campaign's runs, oldest first (by when each started): three queries whatever
        the number of runs."""
        rows = self.db.execute(
            "SELECT run_id, campaign, title, started_at, finished_at, status, results_sha256, "
            "path, objective, engine, engine_version, label, gate, setup, experiments "
            "FROM runs WHERE campaign = ? ORDER BY started_at, run_id",
            (campaign,),
        ).fetchall()
        tables: dict[str, dict[str, str]] = {}
        for run_id, path, sha in self.db.execute(
            "SELECT t.run_id, t.path, t.sha256 FROM run_tables t JOIN runs r USING (run_id) "
            "WHERE r.campaign = ? ORDER BY t.path",
            (campaign,),
        ):
            tables.setdefault(run_id, {})[path] = sha
        levels: dict[str, list[LevelValues]] = {}
        for run_id, e, m, c, rate, reps in self.db.execute(
            "SELECT l.run_id, l.experiment, l.metric, l.concurrency, l.rate, l.reps FROM levels l "
            "JOIN runs r USING (run_id) WHERE r.campaign = ? ORDER BY l.rowid",
            (campaign,),
        ):
            levels.setdefault(run_id, []).append(
                LevelValues(e, m, c, rate, tuple(json.loads(reps)))
            )
        starts: dict[str, list[PriorLevel]] = {}
        for run_id, c, rate, spread, dof in self.db.execute(
            "SELECT s.run_id, s.concurrency, s.rate, s.spread, s.dof FROM starts s "
            "JOIN runs r USING (run_id) WHERE r.campaign = ? ORDER BY s.rowid",
            (campaign,),
        ):
            starts.setdefault(run_id, []).append(
                PriorLevel(concurrency=c, rate=rate, spread=spread, dof=dof)
            )
        return [
            RunRecord(
                run_id=r[0],
                campaign=r[1],
                title=r[2],
                started_at=r[3],
                finished_at=r[4],
                status=r[5],
                results_sha256=r[6],
                path=r[7],
                objective=json.loads(r[8]),
                engine=r[9],
                engine_version=r[10],
                label=r[11],
                gate=json.loads(r[12]),
                setup=json.loads(r[13]),
                experiments=json.loads(r[14]),
                tables=tables.get(r[0], {}),
                levels=levels.get(r[0], []),
                starts=starts.get(r[0], []),
            )
            for r in rows
        ]


@contextmanager
def open_store(path: Path, create: bool = True) -> Iterator[Store]:
    """The history at ``path``, made there if ``create`` and it is not there yet. A file that
    is not a reportgen history, or of a later format, is refused (ResultsError, one line)."""
    if not path.exists() and not create:
        raise ResultsError(
            f"{path}: no history here; record runs first: reportgen history add RUN_DIR "
            f"--store {path}"
        )
    if path.is_dir():
        raise ResultsError(f"{path}: a folder, not a history file; give a file such as {DEFAULT}")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        db = sqlite3.connect(path, timeout=BUSY_S, isolation_level=None)
    except sqlite3.Error as exc:
        raise ResultsError(f"{path}: cannot open the history: {exc}") from None
    with closing(db):
        try:
            _prepare(db, path)
        except sqlite3.DatabaseError as exc:
            raise ResultsError(
                f"{path}: not a reportgen history ({exc}); give another --store"
            ) from None
        yield Store(db, path)


def _prepare(db: sqlite3.Connection, path: Path) -> None:
    """Check that the file is a history of a format this reads, or make one of an empty file:
    in one transaction, so that two adds making the same new file do it once."""
    db.execute("BEGIN IMMEDIATE")
    try:
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        made = not names
        if made:
            for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                db.execute(statement)
            db.execute("INSERT INTO meta VALUES ('format', ?)", (str(FORMAT),))
        elif not {"meta", "runs", "levels"} <= names:
            raise ResultsError(
                f"{path}: a SQLite file, but not a reportgen history (no runs table); "
                "give another --store"
            )
        row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if row is None or int(row[0]) > FORMAT:
            raise ResultsError(
                f"{path}: a history of format {row[0] if row else '?'}, newer than this "
                f"reportgen reads ({FORMAT}); upgrade reportgen"
            )
        if "starts" not in names:
            db.execute(_STARTS)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    if made:  # readers never block an add, nor an add them
        db.execute("PRAGMA journal_mode = WAL")
