"""The ingest limits are the deployment's: each one, set lower than its default, takes effect on every
reader, and the answers stay those of the default limits wherever a limit is not reached."""

from __future__ import annotations

import gzip
import json

import polars as pl
import pyarrow.parquet as pq

from pipelines.lib.ingest import ingest_day
from pipelines.lib.settings import IngestLimits, Settings
from synthetic_fleet.writers import write_day
from tests.conftest import DAY


def _rows(small_day, n: int) -> list[dict]:
    s = small_day.samples.head(n).with_columns(pl.col("ts").dt.to_string("%Y-%m-%dT%H:%M:%SZ"))
    return [json.loads(line) for line in s.write_ndjson().splitlines()]


def _write(home, name: str, rows: list[dict]) -> None:
    folder = home.landing / "acme" / DAY
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_environment_sets_the_limits(tmp_path):
    env = {"FLEET_BATCH_ROWS": "50_000", "FLEET_MAX_RECORD_BYTES": "8192", "FLEET_DUCKDB_MEMORY": "1GB"}
    limits = Settings.resolve(tmp_path, environ=env).ingest
    assert (limits.batch_rows, limits.max_record_bytes, limits.duckdb_memory) == (50_000, 8192, "1GB")
    assert limits.max_rejects_per_file == IngestLimits().max_rejects_per_file


def test_batches_rejects_and_records_follow_the_limits(home, hw, small_day):
    write_day(small_day, home.landing, source="acme", fmt="jsonl")
    rows = _rows(small_day, 10)
    _write(home, "utilisation_samples-bad.jsonl", [{**r, "cpu_util": 7.0} for r in rows])  # 10 row rejects
    _write(home, "utilisation_samples-long.jsonl", [{**rows[0], "note": "x" * 6000}])  # above 4 KiB
    (home.landing / "acme" / DAY / "utilisation_samples-gz.jsonl.gz").write_bytes(
        gzip.compress(b"\n" * (3 << 20))  # 3 MiB of blank lines from a few KiB: past a 2x ratio
    )
    limits = IngestLimits(
        batch_rows=1000,
        max_record_bytes=4096,
        max_rejects_per_file=3,
        max_expanded_bytes=2 << 20,
        max_expansion_ratio=2,
    )
    r = ingest_day(home, DAY, hw.platforms, limits=limits)
    try:
        n = small_day.samples.height
        assert r.samples_rows == n
        assert pq.ParquetFile(r.samples_path).metadata.num_row_groups >= n // 1000  # batches of 1000 rows
        q = r.quarantine
        bad = q.filter(pl.col("source_file").str.ends_with("-bad.jsonl"))
        assert bad["reason_code"].to_list() == ["out_of_bounds"] * 3 + ["rejects_capped"]
        assert "only the first 3 are listed one by one" in bad["message"][-1]
        whole = dict(q.filter(pl.col("row_number") == 0).select("source_file", "message").iter_rows())
        reasons = dict(q.filter(pl.col("row_number") == 0).select("source_file", "reason_code").iter_rows())
        long, gz = f"acme/{DAY}/utilisation_samples-long.jsonl", f"acme/{DAY}/utilisation_samples-gz.jsonl.gz"
        assert reasons[long] == "file_oversized_line" and "above the 4,096-byte limit" in whole[long]
        assert reasons[gz] == "file_decompression_limit" and "over 2x" in whole[gz]
        led = r.ingest_ledger
        assert (led["rows_in"] == led["rows_accepted"] + led["rows_quarantined"]).all()
    finally:
        r.discard()


def test_a_raw_record_is_cut_at_its_limit(home, hw, small_day):
    write_day(small_day, home.landing, source="acme", fmt="jsonl")
    row = _rows(small_day, 1)[0]
    _write(home, "utilisation_samples-bad.jsonl", [{**row, "cpu_util": 7.0, "note": "é" * 3000}])
    r = ingest_day(home, DAY, hw.platforms, limits=IngestLimits(raw_record_max_bytes=1024))
    try:
        q = r.quarantine.filter(pl.col("reason_code") == "out_of_bounds")
        assert q.height == 1 and q["raw_record_cut"][0]
        assert len(q["raw_record"][0].encode()) <= 1024
    finally:
        r.discard()
