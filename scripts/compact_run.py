#!/usr/bin/env python3
"""Make a run directory compact enough to commit as an example, losing nothing.

    .venv/bin/python scripts/compact_run.py RUN_DIR [RUN_DIR ...] [--drop-html]
    .venv/bin/reportgen render RUN_DIR          # then: the report's table hashes again

- every Parquet table (requests/, telemetry/) is rewritten as ``results.store.write_parquet``
  writes new ones, at zstd level 19 (the same rows, to the last bit; about a third of the
  snappy files runs wrote before);
- every server log (logs/*.log) over 64 KiB is gzipped beside itself (``NAME.log.gz``; the
  reports link the name, ``reportgen render --recheck`` reads either);
- ``--drop-html``: the HTML report is removed (it embeds results.json again; ``reportgen
  render RUN_DIR`` makes it anew, the PDF and Markdown stay).

The tables' sha256 change, so the report must be rendered again (it records them): run
``reportgen render RUN_DIR`` after this, which ``reportgen verify`` then checks.
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

import pyarrow.parquet as pq

from reportgen.results import store

LOG_BYTES = 64 * 1024


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
    for log in sorted(run_dir.glob("logs/*.log")):
        if log.stat().st_size > LOG_BYTES:
            data = log.read_bytes()
            packed = log.with_name(log.name + ".gz")
            packed.write_bytes(gzip.compress(data, 9, mtime=0))
            if gzip.decompress(packed.read_bytes()) != data:
                raise SystemExit(f"compact_run: {log}: its gzip copy differs; left as it was")
            log.unlink()
    if drop_html:
        (run_dir / "report.html").unlink(missing_ok=True)
    after = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
    return before, after


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--drop-html", action="store_true")
    args = ap.parse_args(argv)
    for run in args.runs:
        if not (run / "results.json").is_file():
            print(f"compact_run: {run}: no results.json: not a run directory", file=sys.stderr)
            return 2
        before, after = compact(run, args.drop_html)
        print(f"compact_run: {run}: {before / 1e6:.1f} -> {after / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
