"""Parquet: read batch by batch in its own types (validated as typed values, no text round trip); a row's
number is its 1-based position in the file.

Parquet compresses and dictionary-encodes, so a small file can stand for a huge one. The same limits as
for gzip apply: the pages' uncompressed size (from the file's metadata) and the decoded size of every
batch count against the expansion limits (64 GiB and 200x the file's size by default); a value above the
record limit is refused like an oversized record; text columns are read dictionary-encoded and decoded a
bounded slice at a time.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines.lib.contracts import Contract
from pipelines.lib.frames import arrow_frame
from pipelines.lib.ingest.readers.base import (
    ROW,
    FileInfo,
    FileProblem,
    RawBatch,
    Source,
    expansion_problem,
    extra_names,
    extras_json,
    limits_exceeded,
    numbered,
    oversized,
    refuse_reserved,
)

DECODED_BATCH_BYTES = 128 << 20  # text decoded at once, at most (a batch is cut into slices below it)

_READABLE = (
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_string_view,
    pa.types.is_integer,
    pa.types.is_floating,
    pa.types.is_boolean,
    pa.types.is_timestamp,
    pa.types.is_date,
    pa.types.is_null,
)
_TEXT = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)


def _readable(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):  # categorical / enum text
        return any(k(t.value_type) for k in _TEXT)
    return any(k(t) for k in _READABLE)


def _unreadable(rel: str, exc: Exception) -> FileProblem:
    return FileProblem("file_unreadable", f"{rel}: not a readable Parquet file ({str(exc).splitlines()[0]})")


def _open(src: Source) -> tuple[pq.ParquetFile, int]:
    path = src.engine_path()
    try:
        schema = pq.read_schema(path)
        text = [f.name for f in schema if any(k(f.type) for k in _TEXT) or pa.types.is_dictionary(f.type)]
        pf = pq.ParquetFile(path, pre_buffer=False, read_dictionary=text)
        meta = pf.metadata
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise _unreadable(src.rel, exc) from exc
    stored = os.path.getsize(path)
    expanded = sum(
        meta.row_group(i).column(j).total_uncompressed_size
        for i in range(meta.num_row_groups)
        for j in range(meta.num_columns)
    )
    if limits_exceeded(expanded, stored, src.limits):
        raise expansion_problem(src.rel, expanded, stored, "the Parquet pages", src.limits)
    return pf, stored


def _as_text(con: duckdb.DuckDBPyConnection, col: pa.Array) -> pa.Array:
    """A column of a type ingest does not read (nested, binary, duration, ...) as each value's JSON text,
    a string's unquoted (as JSON Lines keeps a field no contract knows)."""
    con.register("odd", pa.table({"v": col}))
    try:
        out = con.sql(
            "SELECT CASE WHEN json_type(j) = 'VARCHAR' THEN j ->> '$' ELSE CAST(j AS VARCHAR) END AS v "
            "FROM (SELECT to_json(v) AS j FROM odd)"
        ).to_arrow_table()
    finally:
        con.unregister("odd")
    return out["v"].combine_chunks().cast(pa.large_string())


def _value_bytes(col: pa.Array) -> np.ndarray | None:
    """Bytes of each text value of a dictionary column (None for other columns)."""
    if not pa.types.is_dictionary(col.type):
        return None
    lengths = pc.call_function("binary_length", [col.dictionary]).fill_null(0).to_numpy(zero_copy_only=False)
    idx = col.indices.fill_null(0).to_numpy(zero_copy_only=False)
    return lengths[idx] if len(lengths) else np.zeros(len(col), dtype=np.int64)


def _plain(col: pa.Array) -> pa.Array:
    """A column as ingest reads it: text decoded, timestamps with a zone in UTC."""
    if pa.types.is_dictionary(col.type):
        return col.cast(pa.large_string())
    if pa.types.is_timestamp(col.type) and col.type.tz is not None:
        return col.cast(pa.timestamp(col.type.unit, "UTC"))
    return col


def _slices(
    rb: pa.RecordBatch, rel: str, first_row: int, max_value: int
) -> tuple[list[tuple[int, int]], int]:
    """Row ranges of ``rb`` whose decoded text stays under DECODED_BATCH_BYTES, and the decoded bytes; a
    text value above ``max_value`` bytes refuses the file."""
    per_row = np.zeros(rb.num_rows, dtype=np.int64)
    for name, col in zip(rb.schema.names, rb.columns, strict=True):
        sizes = _value_bytes(col)
        if sizes is None:
            continue
        if len(sizes) and sizes.max() > max_value:
            i = int(sizes.argmax())
            raise oversized(
                rel, first_row + i, int(sizes[i]), max_value, what=f"the value of '{name}' in row"
            )
        per_row += sizes
    total = int(per_row.sum())
    if total <= DECODED_BATCH_BYTES:
        return [(0, rb.num_rows)], total
    cuts = np.searchsorted(np.cumsum(per_row), np.arange(DECODED_BATCH_BYTES, total, DECODED_BATCH_BYTES))
    bounds = [0, *sorted({int(x) for x in cuts if 0 < x < rb.num_rows}), rb.num_rows]
    return list(zip(bounds[:-1], bounds[1:], strict=True)), total


def _batch(table: pa.Table, rel: str, row: int, internal: dict[str, str], extras: list[str]) -> RawBatch:
    """A gathered table as a batch: text checked, rows numbered from ``row``, extra columns as JSON."""
    _check_text(table, rel)
    # renamed before polars sees them: it names an empty column name "column_<i>"
    table = table.rename_columns([internal.get(n, n) for n in table.schema.names])
    frame = numbered(arrow_frame(table), row)
    shown = frame.select(
        ROW,
        *[
            pl.col(x).dt.to_string("%Y-%m-%dT%H:%M:%S%.6f") if frame.schema[x].is_temporal() else pl.col(x)
            for x in internal.values()
        ],
    )
    return RawBatch(frame=frame.drop(internal.values()), extras=extras_json(shown, extras))


def _check_text(table: pa.Table, rel: str) -> None:
    """Text must be UTF-8 (the Parquet reader does not check it)."""
    for name, col in zip(table.column_names, table.columns, strict=True):
        if any(k(col.type) for k in _TEXT):
            try:
                col.validate(full=True)
            except pa.ArrowInvalid as exc:
                raise FileProblem(
                    "file_bad_encoding",
                    f"{rel}: column '{name}' holds text that is not UTF-8; re-export it as UTF-8",
                ) from exc


def read(src: Source, c: Contract, info: FileInfo) -> Iterator[RawBatch]:
    """Parquet batch by batch in its own types, within the expansion limits."""
    pf, stored = _open(src)
    schema = pf.schema_arrow
    refuse_reserved(schema.names, src.rel)
    names = [col.name for col in c.landing_columns]
    odd = [f.name for f in schema if not _readable(f.type)]
    if odd_known := [n for n in odd if n in names]:
        raise FileProblem(
            "file_unreadable",
            f"{src.rel}: column(s) {odd_known} have types ingest cannot read (nested, duration, binary, ...)",
        )
    # a column no contract knows is kept in extra_fields whatever its type: as its values' JSON text
    as_text = [schema.get_field_index(n) for n in odd]
    con = duckdb.connect() if as_text else None
    extras = [n for n in schema.names if n not in names]
    info.extra_columns = extras
    internal = dict(zip(extras, extra_names(extras), strict=True))
    row = 1
    decoded = pf.metadata.serialized_size
    # Row groups are often smaller than a batch: slices are gathered up to batch_rows rows (or the decoded
    # size limit), since every batch costs a validation and a row group of the staged file.
    held: list[pa.Table] = []
    held_rows = held_bytes = 0
    limits = src.limits
    try:
        for rb in pf.iter_batches(batch_size=limits.batch_rows):
            ranges, size = _slices(rb, src.rel, row + held_rows, limits.max_record_bytes)
            decoded += size + sum(b.size for col in rb.columns for b in col.buffers() if b is not None)
            if limits_exceeded(decoded, stored, limits):
                raise expansion_problem(src.rel, decoded, stored, "the Parquet file, decoded,", limits)
            for lo, hi in ranges:
                part = rb.slice(lo, hi - lo)
                plain = [_plain(col) for col in part.columns]
                if con is not None:  # open whenever as_text has columns
                    for i in as_text:
                        plain[i] = _as_text(con, plain[i])
                        _check_values(
                            plain[i], part.schema.names[i], src.rel, row + held_rows, limits.max_record_bytes
                        )
                held.append(pa.Table.from_arrays(plain, names=part.schema.names))
                held_rows += hi - lo
                held_bytes += size * (hi - lo) // max(rb.num_rows, 1)
                if held_rows >= limits.batch_rows or held_bytes >= DECODED_BATCH_BYTES:
                    yield _batch(pa.concat_tables(held), src.rel, row, internal, extras)
                    row += held_rows
                    held, held_rows, held_bytes = [], 0, 0
        if held:
            yield _batch(pa.concat_tables(held), src.rel, row, internal, extras)
    except FileProblem:
        raise
    except Exception as exc:
        raise _unreadable(src.rel, exc) from exc
    finally:
        if con is not None:
            con.close()


def _check_values(col: pa.Array, name: str, rel: str, first_row: int, max_value: int) -> None:
    """A text value above ``max_value`` bytes refuses the file."""
    sizes = pc.call_function("binary_length", [col]).fill_null(0).to_numpy(zero_copy_only=False)
    if len(sizes) and sizes.max() > max_value:
        i = int(sizes.argmax())
        raise oversized(rel, first_row + i, int(sizes[i]), max_value, what=f"the value of '{name}' in row")
