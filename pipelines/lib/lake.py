"""The Parquet lake: lake/<table>/day=YYYY-MM-DD/part-0.parquet, written atomically with the contract's
schema."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa

from pipelines.lib import fileio
from pipelines.lib.contracts import contract
from pipelines.lib.paths import DataHome

PART_FILE = "part-0.parquet"
WHOLE_TABLE_FILE = "data.parquet"


def _write_atomic(table: pa.Table, target: Path) -> None:
    fileio.write_parquet(target, table)


def to_arrow(frame: pl.DataFrame, table: str) -> pa.Table:
    """The frame as an Arrow table with exactly the contract's schema (order, types, nullability); raises
    ``pyarrow.ArrowInvalid`` on text that is not UTF-8."""
    c = contract(table)
    out = c.conform(frame).to_arrow().cast(c.arrow_schema())
    out.validate(full=True)  # the lake never holds text that is not UTF-8
    return out


def write_partition(home: DataHome, table: str, day: str, frame: pl.DataFrame) -> Path:
    """Replace one day of a table whole; readers see the old or the new file, never a mix."""
    target = home.partition_dir(table, day) / PART_FILE
    _write_atomic(to_arrow(frame, table), target)
    return target


def promote_partition(home: DataHome, table: str, day: str, staged: Path | None) -> Path:
    """Move a staged Parquet file (already in the contract's schema) into place as one day of a table;
    with nothing staged, the day becomes an empty partition."""
    target = home.partition_dir(table, day) / PART_FILE
    if staged is None:
        return write_partition(home, table, day, contract(table).empty_frame())
    target.parent.mkdir(parents=True, exist_ok=True)
    fileio.publish(staged, target)
    return target


def write_table(home: DataHome, table: str, frame: pl.DataFrame) -> Path:
    """Replace an unpartitioned table whole."""
    target = home.table_dir(table) / WHOLE_TABLE_FILE
    _write_atomic(to_arrow(frame, table), target)
    return target


def partition_path(home: DataHome, table: str, day: str) -> Path:
    return home.partition_dir(table, day) / PART_FILE


def read_partition(home: DataHome, table: str, day: str) -> pl.DataFrame:
    """One day of a table; an empty frame with the contract's columns if that day was never written."""
    path = partition_path(home, table, day)
    if not path.exists():
        return contract(table).empty_frame()
    return pl.read_parquet(path)


def read_table(home: DataHome, table: str) -> pl.DataFrame:
    """A whole table (every partition, or the unpartitioned file)."""
    files = table_files(home, table)
    if not files:
        return contract(table).empty_frame()
    return pl.read_parquet(files)


def table_files(home: DataHome, table: str) -> list[Path]:
    d = home.table_dir(table)
    if not d.exists():
        return []
    if contract(table).partitioned_by:
        return sorted(d.glob(f"day=*/{PART_FILE}"))
    f = d / WHOLE_TABLE_FILE
    return [f] if f.exists() else []


def table_glob(home: DataHome, table: str) -> str:
    """Absolute glob of a table's Parquet files (for DuckDB views and queries)."""
    if contract(table).partitioned_by:
        return str(home.table_dir(table) / "day=*" / PART_FILE)
    return str(home.table_dir(table) / WHOLE_TABLE_FILE)
