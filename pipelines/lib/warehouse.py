"""The analyst catalog: a DuckDB file of views only over the lake, rebuilt aside and swapped in atomically.

Analysts holding the old file open keep reading it (POSIX rename keeps their inode); new sessions see the
new file. The pipeline therefore never holds a lock on the file analysts open.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
from filelock import FileLock

from pipelines.lib import fileio
from pipelines.lib.contracts import contract, contracts
from pipelines.lib.lake import table_files, table_glob
from pipelines.lib.paths import DataHome
from pipelines.lib.sqlfiles import quote_literal, sql_text

DUCKDB_TYPES = {
    "string": "VARCHAR",
    "int16": "SMALLINT",
    "int32": "INTEGER",
    "int64": "BIGINT",
    "float64": "DOUBLE",
    "bool": "BOOLEAN",
    "date": "DATE",
    "timestamp": "TIMESTAMPTZ",
}


def _ident(name: str) -> str:
    if not name.isidentifier():
        raise ValueError(f"{name!r} is not a valid view name")
    return '"' + name + '"'


def view_sql(home: DataHome, table: str) -> str:
    """CREATE VIEW statement for one table: over its absolute Parquet glob, or typed and empty if no data."""
    if table_files(home, table):
        return sql_text("views/lake_table.sql").format(
            view=_ident(table), files=quote_literal(table_glob(home, table))
        )
    nulls = ", ".join(
        f"CAST(NULL AS {DUCKDB_TYPES[c.type]}) AS {_ident(c.name)}" for c in contract(table).columns
    )
    return sql_text("views/empty_table.sql").format(view=_ident(table), typed_nulls=nulls)


def publish_catalog(home: DataHome, tables: list[str] | None = None) -> dict[str, int]:
    """Rebuild the catalog with one view per table (the contract's docs as comments); returns row counts."""
    tables = tables or sorted(contracts())
    home.warehouse.mkdir(parents=True, exist_ok=True)
    target = home.catalog_path
    # One publisher at a time (Dagster runs and the CLI alike); under the lock, any half-built file is stale.
    with FileLock(str(target) + ".lock", timeout=600):
        for stale in target.parent.glob(target.name + ".building-*"):
            stale.unlink(missing_ok=True)
        return _build_and_swap(
            home, tables, target, target.with_name(target.name + f".building-{os.getpid()}")
        )


def _build_and_swap(home: DataHome, tables: list[str], target: Path, building: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    try:
        con = duckdb.connect(str(building))
        try:
            for table in tables:
                c = contract(table)
                con.execute(view_sql(home, table))
                con.execute(
                    sql_text("views/comment_view.sql").format(
                        view=_ident(table), text=quote_literal(c.description)
                    )
                )
                for col in c.columns:
                    doc = col.description + (f" [{col.unit}]" if col.unit else "")
                    con.execute(
                        sql_text("views/comment_column.sql").format(
                            view=_ident(table), column=_ident(col.name), text=quote_literal(doc)
                        )
                    )
                counts[table] = con.execute(f"SELECT count(*) FROM {_ident(table)}").fetchone()[0]
            con.execute("CHECKPOINT")
        finally:
            con.close()
        fileio.publish(building, target)
    finally:
        building.unlink(missing_ok=True)
        Path(str(building) + ".wal").unlink(missing_ok=True)
    return counts
