"""Ingest: every row accepted or quarantined with a reason; counts reconcile per file; whole-file faults."""

import collections
import dataclasses
import gzip
import itertools
import json

import blake3
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipelines.lib.ingest import dedupe, ingest_day, reconciliation, table_for
from pipelines.lib.ingest.readers import detect
from pipelines.lib.settings import DEFAULT_LIMITS
from tests.support.homes import DAY
from tests.support.hypo import examples


def _write(home, name, data: bytes, source="producer"):
    path = home.landing / source / DAY / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _jsonl(rows) -> bytes:
    return ("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n").encode()


def test_clean_day_is_accepted_whole(landed, hw, small_day):
    r = ingest_day(landed, DAY, hw.platforms)
    assert r.runs.height == small_day.runs.height
    assert r.utilisation_samples.height == small_day.samples.height
    assert r.quarantine.height == 0
    assert set(r.ingest_ledger["file_status"]) == {"accepted"}
    assert reconciliation(r.ingest_ledger).height == 0
    assert r.runs["source"].unique().to_list() == ["synthetic"]
    for rel, digest in r.ingest_ledger.select("source_file", "blake3").iter_rows():  # as b3sum prints it
        assert digest == blake3.blake3((landed.landing / rel).read_bytes()).hexdigest()


def test_row_faults_are_quarantined_and_counts_reconcile(landed, hw, small_day):
    run = json.loads(
        small_day.runs.head(1)
        .with_columns(pl.col("start_ts", "end_ts").dt.to_string("%Y-%m-%dT%H:%M:%SZ"))
        .write_ndjson()
        .splitlines()[0]
    )
    sample = json.loads(
        small_day.samples.head(1)
        .with_columns(pl.col("ts").dt.to_string("%Y-%m-%dT%H:%M:%SZ"))
        .write_ndjson()
        .splitlines()[0]
    )
    _write(
        landed,
        "runs-late.jsonl",
        _jsonl(
            [
                {**run, "run_id": "late-1"},  # fine
                {**run, "run_id": "late-2", "platform": "tpu"},  # unknown platform
                run,  # duplicate of a run in runs.jsonl
                "{not json",  # bad JSON
                "",  # blank lines are not rows
                {**run, "run_id": "late-3", "colour": "blue"},  # extra column: kept aside, not fatal
            ]
        ),
    )
    _write(
        landed,
        "utilisation_samples-late.jsonl",
        _jsonl(
            [
                {**sample, "run_id": "late-1", "ts": run["start_ts"]},  # fine
                {**sample, "run_id": "nobody"},  # unknown run
                {**sample, "run_id": "late-1", "ts": "2030-01-01T00:00:00Z"},  # outside the run
                {**sample, "run_id": "late-1", "ts": run["start_ts"], "cpu_util": 3},  # out of bounds
            ]
        ),
    )
    r = ingest_day(landed, DAY, hw.platforms)
    ledger = {row["source_file"]: row for row in r.ingest_ledger.iter_rows(named=True)}
    late = ledger["producer/2026-11-20/runs-late.jsonl"]
    assert (late["rows_in"], late["rows_accepted"], late["rows_quarantined"], late["file_status"]) == (
        5,
        2,
        3,
        "partial",
    )
    assert late["extra_columns"] == "colour"
    s_late = ledger["producer/2026-11-20/utilisation_samples-late.jsonl"]
    assert (s_late["rows_in"], s_late["rows_accepted"], s_late["rows_quarantined"]) == (4, 1, 3)
    assert reconciliation(r.ingest_ledger).height == 0
    reasons = dict(
        r.quarantine.select(pl.format("{}:{}", "source_file", "row_number"), "reason_code").iter_rows()
    )
    assert reasons == {
        "producer/2026-11-20/runs-late.jsonl:2": "unknown_value",
        "producer/2026-11-20/runs-late.jsonl:3": "duplicate_key",
        "producer/2026-11-20/runs-late.jsonl:4": "bad_json",
        "producer/2026-11-20/utilisation_samples-late.jsonl:2": "unknown_run",
        "producer/2026-11-20/utilisation_samples-late.jsonl:3": "ts_outside_run",
        "producer/2026-11-20/utilisation_samples-late.jsonl:4": "out_of_bounds",
    }
    bad_json = r.quarantine.filter(pl.col("reason_code") == "bad_json").row(0, named=True)
    assert bad_json["raw_record"] == "{not json" and bad_json["table_name"] == "runs"
    assert r.runs.height == small_day.runs.height + 2


def test_whole_file_faults_are_quarantined_and_the_rest_goes_through(landed, hw, small_day):
    _write(landed, "runs-empty.jsonl", b"")
    _write(landed, "runs-cut.jsonl.gz", gzip.compress(b'{"run_id": "x"}\n' * 50)[:-12])
    _write(landed, "runs.xlsx", b"PK\x03\x04 spreadsheet")
    _write(landed, "inventory.csv", b"a,b\n1,2\n")
    _write(landed, "runs-latin1.csv", "run_id,model_name\nr\xe9,M1\n".encode("latin-1"))
    r = ingest_day(landed, DAY, hw.platforms)
    files = r.quarantine.filter(pl.col("row_number") == 0)
    assert dict(files.select("source_file", "reason_code").iter_rows()) == {
        "producer/2026-11-20/runs-empty.jsonl": "file_empty",
        "producer/2026-11-20/runs-cut.jsonl.gz": "file_truncated",
        "producer/2026-11-20/runs.xlsx": "file_unknown_format",
        "producer/2026-11-20/inventory.csv": "file_unknown_table",
        "producer/2026-11-20/runs-latin1.csv": "file_bad_encoding",
    }
    assert "truncated" in files.filter(pl.col("source_file").str.ends_with(".gz"))["message"][0]
    assert r.runs.height == small_day.runs.height  # the good files still went through
    assert reconciliation(r.ingest_ledger).height == 0
    assert set(r.ingest_ledger.filter(pl.col("source") == "producer")["file_status"]) == {"quarantined"}


def test_format_and_table_detection():
    def name(found):
        fmt, gz = found
        return (fmt.name if fmt else None), gz

    assert name(detect("x.jsonl.gz", b"\x1f\x8b\x08\x00")) == ("jsonl", True)
    assert name(detect("x.bin", b"PAR1")) == ("parquet", False)
    assert name(detect("x.txt", b"abcd")) == (None, False)
    assert table_for("utilisation_samples-part-3.csv") == "utilisation_samples"
    assert table_for("runs.parquet") == "runs"
    assert table_for("runsheet.csv") is None


def test_reingesting_is_idempotent(landed, hw):
    a = ingest_day(landed, DAY, hw.platforms)
    b = ingest_day(landed, DAY, hw.platforms)
    for name in ("runs", "utilisation_samples", "quarantine"):
        assert a.frames()[name].equals(b.frames()[name])


def test_a_corrected_file_with_the_same_name_replaces_its_earlier_rows(landed, hw, small_day):
    path = landed.landing / "synthetic" / DAY / "runs.jsonl"
    first = ingest_day(landed, DAY, hw.platforms)
    lines = path.read_text().splitlines()
    fixed = json.loads(lines[0])
    fixed["throughput_eps"] = 12345.0
    path.write_text("\n".join([json.dumps(fixed)] + lines[1:]) + "\n")  # redelivered, corrected, same name
    second = ingest_day(landed, DAY, hw.platforms)
    assert second.runs.height == first.runs.height == small_day.runs.height
    row = second.runs.filter(pl.col("run_id") == fixed["run_id"]).row(0, named=True)
    assert row["throughput_eps"] == 12345.0
    assert (
        second.ingest_ledger.filter(pl.col("source_file").str.ends_with("runs.jsonl"))["blake3"][0]
        != first.ingest_ledger.filter(pl.col("source_file").str.ends_with("runs.jsonl"))["blake3"][0]
    )


def test_odd_files_are_quarantined_not_fatal(landed, hw, small_day):
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    run = json.loads(
        small_day.runs.head(1)
        .with_columns(pl.col("start_ts", "end_ts").dt.to_string("%Y-%m-%dT%H:%M:%SZ"))
        .write_ndjson()
        .splitlines()[0]
    )
    _write(landed, "runs-reserved.jsonl", _jsonl([{**run, "run_id": "r-res", "__fleet_raw": 1}]))
    _write(landed, "runs-emptykey.jsonl", _jsonl([{**run, "run_id": "r-empty", "": 1}]))
    nested = pa.table(
        {
            "run_id": ["r-nested"],
            "tags": pa.array([[1, 2]], type=pa.list_(pa.int64())),
            "elapsed": pa.array([5], type=pa.duration("s")),
        }
    )
    buf = io.BytesIO()
    pq.write_table(nested, buf)
    _write(landed, "runs-nested.parquet", buf.getvalue())
    r = ingest_day(landed, DAY, hw.platforms)
    q = dict(
        r.quarantine.filter(pl.col("source").eq("producer")).select("source_file", "reason_code").iter_rows()
    )
    assert q["producer/2026-11-20/runs-reserved.jsonl"] == "file_unreadable"
    # columns no contract knows, of any type, do not refuse the file: its one row is read, and rejected
    # only for the run fields it lacks (test_hostile_files keeps such columns of a good row)
    assert q["producer/2026-11-20/runs-nested.parquet"] == "missing_required"
    assert "r-empty" in r.runs["run_id"].to_list()  # an empty key is not addressable; the row itself is fine
    assert r.runs.height == small_day.runs.height + 1 and reconciliation(r.ingest_ledger).height == 0


def test_extra_fields_are_kept_only_for_rows_finally_accepted(landed, hw, small_day):
    run = json.loads(
        small_day.runs.head(1)
        .with_columns(pl.col("start_ts", "end_ts").dt.to_string("%Y-%m-%dT%H:%M:%SZ"))
        .write_ndjson()
        .splitlines()[0]
    )
    _write(
        landed,
        "runs-extra.jsonl",
        _jsonl([{**run, "colour": "red"}, {**run, "run_id": "new-1", "colour": "blue"}]),
    )
    r = ingest_day(landed, DAY, hw.platforms)  # the first row duplicates a run delivered earlier
    assert r.extra_fields["fields"].to_list() == ['{"colour":"blue"}']


@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    groups=st.lists(st.lists(st.integers(0, 12), min_size=1, max_size=30), min_size=1, max_size=6),
    dead=st.sets(st.integers(0, 5)),
    pass_rows=st.integers(1, 80),
    cuts=st.sets(st.integers(1, 5), max_size=3),
)
@example(groups=[[0, 0, 0, 0, 0]], dead={0}, pass_rows=1, cuts=set())  # many passes, every group dead
def test_key_clashes_are_the_repeated_hashes_of_live_groups_in_any_number_of_passes(
    tmp_path, groups, dead, pass_rows, cuts
):
    # The staged key hashes: one row group per batch, in one file or cut into parts (a split day's
    # slices); the clashes are exactly the positions whose hash repeats among the live groups, counted
    # across the parts, whatever the number of passes.
    bounds = [0, *sorted(c for c in cuts if c < len(groups)), len(groups)]
    paths = []
    for a, b in itertools.pairwise(bounds):
        path = tmp_path / f"h{len(list(tmp_path.iterdir()))}.parquet"
        with pq.ParquetWriter(path, dedupe.HASH_SCHEMA) as w:
            for g in groups[a:b]:
                w.write_table(pa.table({"h": pa.array(g, pa.uint64()), "row": pa.array(g, pa.int64())}))
        paths.append(path)
    live = [
        (pos, h)
        for pos, (gi, h) in enumerate((gi, h) for gi, g in enumerate(groups) for h in g)
        if gi not in dead
    ]
    count = collections.Counter(h for _, h in live)
    want = [pos for pos, h in live if count[h] > 1]
    got = dedupe.key_clashes(paths, dead, pass_rows=pass_rows)
    assert got["pos"].to_list() == want
    assert got.schema == pl.Schema({"pos": pl.Int64, "h": pl.UInt64, "row": pl.Int64})


@pytest.mark.parametrize("pass_rows", [150_000, 400_000])  # 8 passes (by remainder files), 3 (rescans)
def test_key_clashes_on_a_large_staged_day_with_late_repeats_and_dead_groups(tmp_path, pass_rows):
    # 1.2M hashes in 6 row groups, read in several passes: repeats placed in the last group and across
    # groups, one group dead (a file that fell back), compared with numpy's own count.
    rng = np.random.default_rng(3)
    h = rng.integers(0, 2**63, 1_200_000, dtype=np.uint64)
    h[-5:] = h[:5]  # the day's last rows repeat its first
    h[-10] = h[-11]  # neighbours in the last batch
    h[450_000] = h[650_000]  # a repeat whose other copy is in the dead group
    path = tmp_path / "keys.parquet"
    with pq.ParquetWriter(path, dedupe.HASH_SCHEMA) as w:
        for start in range(0, h.size, 200_000):
            part = h[start : start + 200_000]
            w.write_table(pa.table({"h": part, "row": np.arange(start, start + part.size, dtype=np.int64)}))
    dead = {3}
    live = np.ones(h.size, dtype=bool)
    live[600_000:800_000] = False
    values, counts = np.unique(h[live], return_counts=True)
    want = np.flatnonzero(live & np.isin(h, values[counts > 1]))
    got = dedupe.key_clashes([path], dead, pass_rows=pass_rows)
    assert got["pos"].to_list() == want.tolist() and len(want) == 12


def test_a_failed_ingest_removes_its_staging_and_stops_its_writers(landed, hw, monkeypatch):
    import errno
    import threading

    real = pq.ParquetWriter.write_table
    calls = {"n": 0}

    def fill_up(self, table, **kw):  # the disk fills after the first row group
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, table, **kw)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", fill_up)
    before = threading.active_count()
    with pytest.raises(OSError, match="No space left"):
        ingest_day(landed, DAY, hw.platforms, limits=dataclasses.replace(DEFAULT_LIMITS, batch_rows=1_000))
    assert not any(landed.staging.iterdir())
    assert threading.active_count() <= before  # no writer left holding an open (deleted) file


def test_a_full_disk_while_writing_a_staged_footer_is_not_taken_for_success(tmp_path, monkeypatch):
    import errno

    from pipelines.lib.ingest.staging import StagedParquet

    def no_room(self):
        raise OSError(errno.ENOSPC, "No space left on device")

    staged = StagedParquet(tmp_path / "x.parquet", pa.schema([("a", pa.int64())]))
    staged.write(pa.table({"a": [1, 2]}))
    monkeypatch.setattr(pq.ParquetWriter, "close", no_room)
    with pytest.raises(OSError, match="No space left"):
        staged.close()


def test_staged_samples_dictionary_encode_the_columns_whose_values_repeat(tmp_path):
    """Rounded readings are dictionary-encoded, full-precision ones stay plain (a dictionary would only
    cost them); text columns follow their own list; the values read back unchanged."""
    from pipelines.lib.ingest.staging import StagedParquet, repetitive_columns

    rng = np.random.default_rng(0)
    n = 4_000
    table = pa.table(
        {
            "run_id": pa.array([f"r{i % 3}" for i in range(n)]),
            "note": pa.array([f"n{i}" for i in range(n)]),
            "rounded_util": pa.array(np.round(rng.random(n), 2)),
            "precise_util": pa.array(rng.random(n)),
            "ts": pa.array((np.arange(n) // 50 * 300_000_000).astype("datetime64[us]")),
            "always_null": pa.nulls(n, pa.float64()),
        }
    )
    assert repetitive_columns(table) == ["rounded_util", "ts", "always_null"]
    staged = StagedParquet(
        tmp_path / "x.parquet", table.schema, use_dictionary=["run_id"], dictionary_where_repetitive=True
    )
    # a later batch whose readings no longer repeat: the writer falls back to plain, the values stay
    later = table.set_column(2, "rounded_util", pa.array(rng.random(n)))
    staged.write(table)
    staged.write(later)
    path = staged.close()
    meta = pq.ParquetFile(path).metadata
    dictionary = {
        meta.schema.column(i).name
        for i in range(meta.num_columns)
        if "RLE_DICTIONARY" in meta.row_group(0).column(i).encodings
    }
    assert dictionary == {"run_id", "rounded_util", "ts", "always_null"}
    assert pq.read_table(path).equals(pa.concat_tables([table, later]))
