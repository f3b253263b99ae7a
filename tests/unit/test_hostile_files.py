"""Hostile and unusual files: names are data, never patterns; the lake never holds text that is not UTF-8;
valid Parquet in other encodings is read; a file that changes while it is read is read again."""

from __future__ import annotations

import json

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.lib.ingest import day as day_module
from pipelines.lib.ingest import ingest_day, ingest_partition, reconciliation
from pipelines.lib.ingest.readers import jsonl
from pipelines.lib.storage import lake
from synthetic_fleet.writers import write_day
from tests.support.homes import DAY


def _samples(small_day, n: int, offset: int = 0) -> list[dict]:
    s = small_day.samples.slice(offset, n).with_columns(pl.col("ts").dt.to_string("%Y-%m-%dT%H:%M:%SZ"))
    return [json.loads(line) for line in s.write_ndjson().splitlines()]


def _jsonl(rows: list[dict]) -> bytes:
    return ("\n".join(json.dumps(r) for r in rows) + "\n").encode()


NAMES = [
    "utilisation_samples-[ab].jsonl",
    "utilisation_samples-*.jsonl",
    "utilisation_samples-?.jsonl",
    "utilisation_samples-{a,b}.jsonl",
    "utilisation_samples-'q\".jsonl",
]


@pytest.mark.parametrize("swap", [False, True])
def test_file_names_are_data_never_patterns(landed, hw, small_day, swap):
    """`[ab]`, `*`, `?`, `{a,b}` and quotes in a name reach no engine that reads them as a pattern: each
    file is read for its own rows, whatever the other files of the folder hold."""
    folder = landed.landing / "producer" / DAY
    folder.mkdir(parents=True)
    sizes = {}
    for i, name in enumerate([*NAMES, "utilisation_samples-a.jsonl"]):
        rows = _samples(small_day, 10 + i, offset=0 if not swap else 5)
        if swap and name == "utilisation_samples-a.jsonl":
            (folder / name).write_bytes(b"not json at all\n" * 3)
            sizes[name] = 3
            continue
        (folder / name).write_bytes(_jsonl(rows))
        sizes[name] = len(rows)
    r = ingest_day(landed, DAY, hw.platforms)
    led = r.ingest_ledger.filter(pl.col("source") == "producer")
    got = {f.rsplit("/", 1)[1]: n for f, n in led.select("source_file", "rows_in").iter_rows()}
    assert got == sizes
    assert reconciliation(r.ingest_ledger).height == 0
    if not swap:  # a fast tier (which opens files by name) read them, under a neutral link
        assert "precise" not in set(led["reader_tier"])


def test_invalid_utf8_inside_a_json_string_never_reaches_the_lake(landed, hw, small_day, monkeypatch):
    folder = landed.landing / "producer" / DAY
    folder.mkdir(parents=True)
    data = _jsonl(_samples(small_day, 50)).replace(b'"role": "', b'"role": "\xff', 1)
    (folder / "utilisation_samples-bad.jsonl").write_bytes(data)
    for tiers in (("duckdb", "precise"), ("pyarrow", "precise"), ("precise",)):
        monkeypatch.setattr(jsonl, "TIERS", tiers)
        r = ingest_day(landed, DAY, hw.platforms)
        q = r.quarantine.filter(pl.col("source") == "producer")
        assert q.select("row_number", "reason_code").rows() == [(0, "file_bad_encoding")], tiers
        r.discard()


def test_the_lake_refuses_text_that_is_not_utf8_whatever_a_reader_lets_through(
    landed, hw, small_day, monkeypatch
):
    """A guard at write time: a reader that hands over invalid UTF-8 quarantines the file, nothing is
    written, and the day's other files are accepted."""
    folder = landed.landing / "producer" / DAY
    folder.mkdir(parents=True)
    (folder / "utilisation_samples-x.jsonl").write_bytes(_jsonl(_samples(small_day, 20)))
    real = jsonl._READERS["precise"]

    def poisoning(src, c, info):
        for batch in real(src, c, info):
            if "producer" in src.rel:
                bad = pa.Array.from_buffers(
                    pa.string(),
                    1,
                    [None, pa.py_buffer(b"\x00\x00\x00\x00\x02\x00\x00\x00"), pa.py_buffer(b"\xff\xfe")],
                )
                ids = batch.frame["server_id"].to_arrow()
                mixed = pa.concat_arrays([bad, ids.slice(1).cast(pa.string())])
                batch.frame = batch.frame.with_columns(pl.from_arrow(mixed).alias("server_id"))
            yield batch

    monkeypatch.setattr(jsonl, "TIERS", ("precise",))
    monkeypatch.setitem(jsonl._READERS, "precise", poisoning)
    out = ingest_partition(landed, DAY, hw.platforms)
    q = out.result.quarantine.filter(pl.col("source") == "producer")
    assert q.select("reason_code").to_series().to_list() == ["file_bad_encoding"]
    assert out.promoted
    samples = lake.read_partition(landed, "utilisation_samples", DAY)
    assert samples.height == small_day.samples.height
    samples.to_arrow().validate(full=True)


def test_parquet_with_invalid_utf8_text_is_refused(landed, hw, small_day):
    folder = landed.landing / "producer" / DAY
    folder.mkdir(parents=True)
    t = small_day.samples.head(5).to_arrow()
    role = pa.Array.from_buffers(
        pa.string(),
        5,
        [
            None,
            pa.py_buffer(pa.array([0, 7, 7, 7, 7, 9], pa.int32()).buffers()[1]),
            pa.py_buffer(b"trainer\xff\xfe"),
        ],
    )
    t = t.set_column(t.schema.get_field_index("role"), "role", role)
    pq.write_table(t, folder / "utilisation_samples-bad.parquet")
    r = ingest_day(landed, DAY, hw.platforms)
    q = r.quarantine.filter(pl.col("source") == "producer")
    assert q.select("row_number", "reason_code").rows() == [(0, "file_bad_encoding")]


def test_valid_parquet_in_other_encodings_is_read(landed, hw, small_day):
    """Categorical, Enum and dictionary text, and timestamps with a fixed-offset zone, are valid data."""
    folder = landed.landing / "producer" / DAY
    folder.mkdir(parents=True)
    want = small_day.samples.slice(0, 200)
    roles = pl.Enum(["trainer", "sparse_ps", "dense_ps", "reader"])
    shaped = want.with_columns(
        pl.col("run_id").cast(pl.Categorical),
        pl.col("role").cast(roles),
        pl.col("ts").dt.convert_time_zone("Etc/GMT-2"),
    )
    table = shaped.to_arrow()
    ts = table.column("ts").cast(pa.timestamp("us", tz="+02:00"))
    table = table.set_column(table.schema.get_field_index("ts"), "ts", ts)
    table = table.set_column(
        table.schema.get_field_index("server_id"), "server_id", table.column("server_id").dictionary_encode()
    )
    pq.write_table(table, folder / "utilisation_samples-typed.parquet")
    # the same rows again in the synthetic files: delete those so the keys are new
    (landed.landing / "synthetic" / DAY / "utilisation_samples.jsonl").unlink()
    r = ingest_day(landed, DAY, hw.platforms)
    led = r.ingest_ledger.filter(pl.col("source") == "producer")
    assert led.select("rows_in", "rows_accepted", "file_status").rows() == [(200, 200, "accepted")]
    got = r.utilisation_samples.filter(pl.col("server_id").is_in(want["server_id"].implode()))
    cols = [c for c in want.columns if c != "day"]
    assert (
        got.select(cols)
        .sort("run_id", "server_id", "ts")
        .equals(want.select(cols).sort("run_id", "server_id", "ts"))
    )


def test_a_file_that_changes_while_it_is_read_is_read_again(landed, hw, small_day, monkeypatch):
    folder = landed.landing / "producer" / DAY
    folder.mkdir(parents=True)
    path = folder / "utilisation_samples-growing.jsonl"
    path.write_bytes(_jsonl(_samples(small_day, 30)))
    real = day_module.Day._read
    reads = []

    def appending(self, f, c, head):  # a producer appends while the first read is under way
        real(self, f, c, head)
        if f.lf.path == path:
            reads.append(f.entry.rows_in)
        if reads == [30] and f.lf.path == path:
            with open(path, "ab") as fh:
                fh.write(_jsonl(_samples(small_day, 10, offset=30)))

    monkeypatch.setattr(day_module.Day, "_read", appending)
    r = ingest_day(landed, DAY, hw.platforms)
    led = r.ingest_ledger.filter(pl.col("source") == "producer")
    assert reads == [30, 40]
    assert led.select("rows_in").rows() == [(40,)]
    assert reconciliation(r.ingest_ledger).height == 0


def test_a_file_that_never_stops_changing_is_quarantined_whole(landed, hw, small_day, monkeypatch):
    folder = landed.landing / "producer" / DAY
    folder.mkdir(parents=True)
    path = folder / "utilisation_samples-live.jsonl"
    path.write_bytes(_jsonl(_samples(small_day, 30)))
    real = day_module.Day._read

    def appending(self, f, c, head):
        real(self, f, c, head)
        if f.lf.path == path:
            with open(path, "ab") as fh:
                fh.write(b"\n")

    monkeypatch.setattr(day_module.Day, "_read", appending)
    r = ingest_day(landed, DAY, hw.platforms)
    q = r.quarantine.filter(pl.col("source") == "producer")
    assert q.select("row_number", "reason_code").rows() == [(0, "file_unstable")]
    assert "still writing" in q["message"][0]
    assert reconciliation(r.ingest_ledger).height == 0


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_column_with_an_empty_name_is_an_extra_column_and_every_row_is_read(home, hw, small_day, fmt):
    # A CSV whose lines end with a comma has a column named "" (polars renames such a column, and the file
    # was unreadable: every good row rejected); a Parquet file may carry one too.
    write_day(small_day, home.landing, source="producer", fmt=fmt)
    path = home.landing / "producer" / DAY / f"utilisation_samples.{fmt}"
    if fmt == "csv":
        path.write_text("".join(f"{line}," + "\n" for line in path.read_text().splitlines()))
    else:
        t = pq.read_table(path)
        pq.write_table(t.append_column("", pa.array(["left over"] * t.num_rows)), path)
    r = ingest_day(home, DAY, hw.platforms)
    led = r.ingest_ledger.filter(pl.col("source_file").str.ends_with(path.name))
    rows = small_day.samples.height
    assert led.select("rows_in", "rows_accepted", "file_status").rows() == [(rows, rows, "accepted")]
    assert r.utilisation_samples.height == rows
    extras = r.extra_fields.filter(pl.col("source_file").str.ends_with(path.name))["fields"].unique()
    # an unquoted empty CSV field is no value (nothing to keep); the Parquet column's values are kept
    assert extras.to_list() == ([] if fmt == "csv" else ['{"":"left over"}'])


def test_a_json_member_sent_twice_is_quarantined_naming_it_in_every_tier(home, hw, small_day, monkeypatch):
    # {"role": "trainer", ..., "role": "sparse_ps"}: DuckDB keeps the first value, most parsers the last
    write_day(small_day, home.landing, source="producer", fmt="jsonl")
    path = home.landing / "producer" / DAY / "utilisation_samples.jsonl"
    lines = path.read_text().splitlines()
    lines[6] = lines[6][:-1] + ', "role": "sparse_ps"}'
    path.write_text("\n".join(lines) + "\n")
    rows = small_day.samples.height
    for tiers in (("duckdb", "precise"), ("pyarrow", "precise"), ("precise",)):
        monkeypatch.setattr(jsonl, "TIERS", tiers)
        r = ingest_day(home, DAY, hw.platforms)
        q = r.quarantine
        assert q.select("row_number", "reason_code", "field").rows() == [(7, "bad_json", "role")], tiers
        assert q["message"][0].startswith("member 'role' appears more than once in the object")
        assert q["raw_record"][0] == lines[6]
        led = r.ingest_ledger.filter(pl.col("source_file") == q["source_file"][0])
        assert led.select("rows_in", "rows_accepted", "rows_quarantined").rows() == [(rows, rows - 1, 1)]
        r.discard()


def test_parquet_columns_no_contract_knows_are_kept_whatever_their_type(home, hw, small_day):
    # a nested, a binary and a duration column beside the contract's: every row read, the values kept in
    # extra_fields as their JSON text (a string unquoted, as JSON Lines keeps them)
    write_day(small_day, home.landing, source="producer", fmt="parquet")
    path = home.landing / "producer" / DAY / "utilisation_samples.parquet"
    t = pq.read_table(path)
    n = t.num_rows
    t = t.append_column("labels", pa.array([{"rack": "r1", "gpus": [0, 1]}] + [None] * (n - 1)))
    t = t.append_column("blob", pa.array([None, b"\x00\xff"] + [None] * (n - 2)))
    t = t.append_column("wait", pa.array([None, None, 5_000_000] + [None] * (n - 3), pa.duration("us")))
    pq.write_table(t, path)
    r = ingest_day(home, DAY, hw.platforms)
    led = r.ingest_ledger.filter(pl.col("source_file").str.ends_with(path.name))
    assert led.select("rows_in", "rows_accepted", "file_status").rows() == [(n, n, "accepted")]
    extras = r.extra_fields.filter(pl.col("source_file").str.ends_with(path.name)).sort("row_number")
    assert extras.select("row_number", "fields").rows() == [
        (1, '{"labels":"{\\"rack\\":\\"r1\\",\\"gpus\\":[0,1]}"}'),
        (2, '{"blob":"\\\\x00\\\\xFF"}'),
        (3, '{"wait":"00:00:05"}'),
    ]
    # a column the contract knows, of a type ingest cannot read, still refuses the file, naming it
    pq.write_table(t.set_column(t.schema.get_field_index("role"), "role", t["labels"]), path)
    q = ingest_day(home, DAY, hw.platforms).quarantine.filter(pl.col("source_file").str.ends_with(path.name))
    assert q["reason_code"].to_list() == ["file_unreadable"] and "['role']" in q["message"][0]
