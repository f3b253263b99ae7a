"""The ingest limits are the deployment's: each one, set lower than its default, takes effect on every
reader, and the answers stay those of the default limits wherever a limit is not reached."""

from __future__ import annotations

import gzip
import json
import os

import polars as pl
import pyarrow.parquet as pq

from pipelines.lib.ingest import ingest_day
from pipelines.lib.settings import IngestLimits, Settings
from synthetic_fleet.writers import write_day
from tests.support.homes import DAY


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
    # 3 MiB of blank lines: under the 16 MiB floor of the ratio, so only the size limit can refuse it
    (home.landing / "acme" / DAY / "utilisation_samples-gz.jsonl.gz").write_bytes(
        gzip.compress(b"\n" * (3 << 20))
    )
    limits = IngestLimits(
        batch_rows=1000, max_record_bytes=4096, max_rejects_per_file=3, max_expanded_bytes=2 << 20
    )
    r = ingest_day(home, DAY, hw.platforms, limits=limits)
    try:
        n = small_day.samples.height
        assert r.samples_rows == n
        assert pq.ParquetFile(r.samples_paths[0]).metadata.num_row_groups >= n // 1000  # batches of 1000 rows
        q = r.quarantine
        bad = q.filter(pl.col("source_file").str.ends_with("-bad.jsonl"))
        assert bad["reason_code"].to_list() == ["out_of_bounds"] * 3 + ["rejects_capped"]
        assert "only the first 3 are listed one by one" in bad["message"][-1]
        whole = dict(q.filter(pl.col("row_number") == 0).select("source_file", "message").iter_rows())
        reasons = dict(q.filter(pl.col("row_number") == 0).select("source_file", "reason_code").iter_rows())
        long, gz = f"acme/{DAY}/utilisation_samples-long.jsonl", f"acme/{DAY}/utilisation_samples-gz.jsonl.gz"
        assert reasons[long] == "file_oversized_line" and "above the 4,096-byte limit" in whole[long]
        assert reasons[gz] == "file_decompression_limit" and "or 2 MiB)" in whole[gz]
        led = r.ingest_ledger
        assert (led["rows_in"] == led["rows_accepted"] + led["rows_quarantined"]).all()
    finally:
        r.discard()


def test_the_expansion_ratio_is_the_deployments(home, hw, small_day):
    """8 MiB of random hex among twice as many blank lines (24 MiB), gzipped about 4.7x: past the 16 MiB
    floor of the ratio. Refused at a ratio limit of 3, read (its lines rejected) at the default 200."""
    write_day(small_day, home.landing, source="acme", fmt="jsonl")
    text = os.urandom(4 << 20).hex().encode()  # 8 MiB of text, 4 bits of entropy a character
    lines = b"".join(text[i : i + 64] + b"\n" * 128 for i in range(0, len(text), 64))
    gz = home.landing / "acme" / DAY / "utilisation_samples-hex.jsonl.gz"
    gz.write_bytes(gzip.compress(lines, 6))
    assert 4 < len(lines) / gz.stat().st_size < 200 and len(lines) > 16 << 20
    for limits, refused in ((IngestLimits(max_expansion_ratio=3), True), (IngestLimits(), False)):
        # a ratio above 3 is refused as the stream goes: once past 16 MiB, well before the end
        r = ingest_day(home, DAY, hw.platforms, limits=limits)
        try:
            q = r.quarantine.filter(pl.col("source_file").str.ends_with("-hex.jsonl.gz"))
            assert (q["reason_code"].to_list() == ["file_decompression_limit"]) == refused, q
            if refused:
                assert "over 3x or 64 GiB" in q["message"][0]
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


def test_the_callers_limits_reach_the_days_run(home, hw, small_day):
    """`fleet run` passes its limits in the run's configuration, so a day keeps them wherever it runs (a
    worker's own environment does not apply)."""
    import dagster as dg

    from pipelines.defs.partitions import add_days
    from pipelines.lib.storage import lake
    from pipelines.orchestrate import _run_day

    write_day(small_day, home.landing, source="acme", fmt="jsonl")
    _write(home, "utilisation_samples-bad.jsonl", [{**r, "cpu_util": 7.0} for r in _rows(small_day, 5)])
    with dg.DagsterInstance.ephemeral() as instance:
        add_days(instance, [DAY])
        _run_day(home, DAY, {}, IngestLimits(max_rejects_per_file=2), instance)
    q = lake.read_table(home, "quarantine").filter(pl.col("source_file").str.ends_with("-bad.jsonl"))
    assert sorted(q["reason_code"].to_list()) == ["out_of_bounds", "out_of_bounds", "rejects_capped"]
