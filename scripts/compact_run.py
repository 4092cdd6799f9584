#!/usr/bin/env python3
"""Make a run directory compact enough to commit as an example, losing nothing.

    .venv/bin/python scripts/compact_run.py RUN_DIR [RUN_DIR ...] [--drop-html]
    .venv/bin/reportgen render RUN_DIR          # then: the report's table hashes again

- every Parquet table (requests/, telemetry/) is rewritten as ``results.store.write_parquet``
  writes new ones, at zstd level 19 (the same rows, to the last bit; about a third of the
  snappy files runs wrote before);
- results.json, report.html and every server log (logs/*.log) over 8 KiB are compressed
  with xz under their name plus ``.xz`` (``results.json.xz``: about a fifteenth of its size,
  the page a sixth; logs gzipped by earlier compactions are converted). Every command reads
  each form (``results.RunDir``), and ``reportgen render`` writes the results and page again
  in the form it finds, so a compacted example rendered again stays compacted; the reports
  link a log by its name. The PDF and Markdown stay as they are, for readers on the web;
- ``--drop-html``: the HTML report is removed instead (``reportgen render RUN_DIR`` makes it
  anew; ``reportgen verify`` needs it).

The tables' sha256 change, so the report must be rendered again (it records them): run
``reportgen render RUN_DIR`` after this, which ``reportgen verify`` then checks.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow.parquet as pq

from reportgen.results import rundir, store

LOG_BYTES = 8 * 1024


def compact(run_dir: Path, drop_html: bool) -> tuple[int, int]:
    before = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
    for path in sorted([*run_dir.glob("requests/*.parquet"), *run_dir.glob("telemetry/*.parquet")]):
        table = pq.read_table(path)
        tmp = path.with_name(f".{path.name}.tmp")
        store.write_parquet(table, tmp, level=19)
        if not pq.read_table(tmp).equals(table):
            tmp.unlink()
            raise SystemExit(f"compact_run: {path}: the rewritten table differs; left as it was")
        tmp.replace(path)
    if drop_html:
        (run_dir / rundir.HTML).unlink(missing_ok=True)
    where = rundir.RunDir(run_dir)
    logs = sorted({p.name.removesuffix(".gz") for p in run_dir.glob(f"{rundir.LOGS}/*.log*")})
    logs = [f"{rundir.LOGS}/{n}" for n in logs if n.endswith(".log")]  # not .log.xz: done
    for name in [rundir.RESULTS, rundir.HTML, *logs]:
        kept = where.stored(name)
        if not kept.is_file() or kept.suffix == rundir.PACKED:
            continue  # not there, or compacted already
        if name in logs and kept == run_dir / name and kept.stat().st_size <= LOG_BYTES:
            continue  # a small log stays as it is
        data = rundir.read_bytes(kept)
        packed = run_dir / (name + rundir.PACKED)
        packed.write_bytes(rundir.pack(data))
        if rundir.read_bytes(packed) != data:
            raise SystemExit(f"compact_run: {kept}: its compressed copy differs; left as it was")
        kept.unlink()
    after = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
    return before, after


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--drop-html", action="store_true")
    args = ap.parse_args(argv)
    for run in args.runs:
        if not store.RunDir(run).results.is_file():
            print(f"compact_run: {run}: no results.json: not a run directory", file=sys.stderr)
            return 2
        before, after = compact(run, args.drop_html)
        print(f"compact_run: {run}: {before / 1e6:.1f} -> {after / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
