"""Compact run directories, nothing lost: request tables written zstd with their times
byte-stream-split, committed examples' results, page and logs compressed and read back, a
large report's results embedded gzipped and verified."""

from __future__ import annotations

import base64
import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from reportgen.load.records import RequestRecord
from reportgen.results import embed, store
from tests.conftest import ROOT, reportgen_main


def records(n: int) -> list[RequestRecord]:
    out = []
    for i in range(n):
        t0 = i * 0.0137
        chunks = [t0 + 0.02 + k * 0.004917 for k in range(64)]
        out.append(
            RequestRecord(
                index=i, start=t0, end=chunks[-1], first_token=chunks[0], chunk_times=chunks,
                output_tokens=64, requested_output_tokens=64, output_text="word " * 64,
                chunk_chars=[5] * 64, concurrency=16,
            )
        )  # fmt: skip
    return out


def test_request_tables_are_compact_and_read_back_to_the_last_bit(tmp_path: Path) -> None:
    recs = records(2000)
    path = store.save_requests(tmp_path, "e", recs)
    meta = pq.ParquetFile(path).metadata.row_group(0)
    columns = {meta.column(i).path_in_schema: meta.column(i) for i in range(meta.num_columns)}
    times = columns["chunk_times.list.element"]
    assert times.compression == "ZSTD" and "BYTE_STREAM_SPLIT" in times.encodings
    assert store.read_requests(tmp_path, "e") == recs  # every float as it was
    # about a third of what snappy with dictionaries made of the same rows
    snappy = tmp_path / "snappy.parquet"
    pq.write_table(pq.read_table(path), snappy)
    assert path.stat().st_size < 0.6 * snappy.stat().st_size


def test_a_compacted_example_keeps_its_rows_and_logs_and_still_verifies(tmp_path: Path) -> None:
    run = Path(shutil.copytree(ROOT / "docs" / "examples" / "bench-vllm-h200", tmp_path / "b"))
    log = run / "logs" / "big.server.log"
    log.write_text("Decode batch, #running-req: 4\n" * 4000)  # 120 kB: compressed
    old = run / "logs" / "old.server.log.gz"  # as an earlier compaction left one: converted
    old.write_bytes(gzip.compress(b"INFO started\n" * 9000))
    for p in run.glob("*/*.parquet"):  # as runs wrote their tables before: snappy
        pq.write_table(pq.read_table(p), p)
    assert reportgen_main("render", run, "--no-pdf").returncode == 0
    before = {p.name: pq.read_table(p) for p in run.glob("requests/*.parquet")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "compact_run.py"), str(run)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "compact_run:" in done.stdout and " MB" in done.stdout
    for p in run.glob("requests/*.parquet"):
        assert pq.read_table(p).equals(before[p.name])
    assert not log.exists() and (run / "logs" / "big.server.log.xz").is_file()
    assert store.read_log(run, "logs/big.server.log") == "Decode batch, #running-req: 4\n" * 4000
    assert store.read_log(run, "logs/none.server.log") is None
    assert (
        not old.exists() and store.read_log(run, "logs/old.server.log") == "INFO started\n" * 9000
    )
    assert (run / "logs" / "old.server.log.xz").is_file()
    # results and page compressed: every command reads them, render and save keep the form
    for name in ("results.json", "report.html"):
        assert not (run / name).exists() and (run / f"{name}.xz").is_file()
    assert (run / "results.json.xz").stat().st_size < 0.2 * len(
        json.dumps(store.load(run).dump(), indent=1)
    )
    assert store.save(run, store.load(run)) == run / "results.json.xz"
    assert not (run / "results.json").exists()
    # the tables' hashes changed: the report says so until rendered again, then verifies
    assert reportgen_main("verify", run).returncode == 1
    assert reportgen_main("render", run, "--no-pdf").returncode == 0
    assert not (run / "report.html").exists()
    res = reportgen_main("verify", run)
    assert res.returncode == 0 and "report.html.xz: matches its raw data" in res.stdout
    assert reportgen_main("diff", run, ROOT / "docs" / "examples" / "bench-vllm-h200", "--out",
                          tmp_path / "d", "--no-pdf").returncode == 0  # fmt: skip


def test_large_results_are_embedded_gzipped_and_read_back() -> None:
    results = {"schema_version": 2, "rows": [{"i": i, "x": i * 0.5} for i in range(20_000)]}
    body = embed.embed(results, {"requests/e.parquet": "ab" * 32})
    assert len(body) < embed.PACK_OVER  # the JSON is about 600 kB, the page holds less
    outer = json.loads(body)
    assert outer["format"] == embed.EMBED_FORMAT and set(outer) == {"format", "gzip"}
    page = f'<html><script type="application/json" id="{embed.DATA_ID}">{body}</script></html>'
    got = embed.extract(page)
    assert got["results"] == results and got["tables"] == {"requests/e.parquet": "ab" * 32}
    # small ones stay readable JSON, as before
    small = json.loads(embed.embed({"schema_version": 2}, {}))
    assert small["results"] == {"schema_version": 2}
    assert gzip.decompress(base64.b64decode(outer["gzip"]))  # really gzip
