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
from pipelines.lib.contracts import Column, contract, contracts
from pipelines.lib.paths import DataHome
from pipelines.lib.query.sqlfiles import quote_literal, sql_text
from pipelines.lib.storage import lake

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


def view_sql(table: str, files: list[str]) -> str:
    """CREATE VIEW statement for one table: over ``files``, its current snapshot's files (absolute paths or
    s3:// URIs), or typed and empty if none."""
    if files:
        listed = "[" + ", ".join(quote_literal(f) for f in files) + "]"
        return sql_text("views/lake_table.sql").format(view=_ident(table), files=listed)
    nulls = ", ".join(
        f"CAST(NULL AS {DUCKDB_TYPES[c.type]}) AS {_ident(c.name)}" for c in contract(table).columns
    )
    return sql_text("views/empty_table.sql").format(view=_ident(table), typed_nulls=nulls)


def catalog_tables() -> list[str]:
    """The tables the analyst catalog has a view of, named like them: every contract's."""
    return sorted(contracts())


def column_comment(col: Column) -> str:
    """A view column's comment: the contract's description, with the unit when it has one."""
    return col.description + (f" [{col.unit}]" if col.unit else "")


def define_views(con: duckdb.DuckDBPyConnection, files: dict[str, list[str]]) -> None:
    """Every view of the catalog on ``con``: one per table of ``files`` (table -> its Parquet files; none
    makes it typed and empty), with the contract's descriptions as view and column comments. The docs
    site's views page lists what this defines on an empty catalog."""
    for table, table_files in files.items():
        c = contract(table)
        con.execute(view_sql(table, table_files))
        con.execute(
            sql_text("views/comment_view.sql").format(view=_ident(table), text=quote_literal(c.description))
        )
        for col in c.columns:
            con.execute(
                sql_text("views/comment_column.sql").format(
                    view=_ident(table), column=_ident(col.name), text=quote_literal(column_comment(col))
                )
            )


def publish_catalog(home: DataHome, tables: list[str] | None = None) -> dict[str, int]:
    """Rebuild the catalog with one view per table (the contract's docs as comments), then vacuum the
    lake; returns row counts.

    Vacuum policy: a file a commit removed is deleted only once it was removed more than
    ``lake.VACUUM_RETENTION_HOURS`` ago (an analyst's session on the previous catalog keeps reading) and
    only if the catalog just published does not read it (its tables' versions are kept)."""
    tables = tables or catalog_tables()
    home.warehouse.mkdir(parents=True, exist_ok=True)
    target = home.catalog_path
    # One publisher at a time (Dagster runs and the CLI alike); under the lock, any half-built file is stale.
    with FileLock(str(target) + ".lock", timeout=600):
        for stale in target.parent.glob(target.name + ".building-*"):
            stale.unlink(missing_ok=True)
        building = target.with_name(target.name + f".building-{os.getpid()}")
        store = lake.store(home)
        snapshots = {t: store.snapshot(t) for t in tables}
        counts = _build_and_swap(store, {t: files for t, (_, files) in snapshots.items()}, target, building)
        for table, (version, _) in snapshots.items():
            if version is not None:
                store.vacuum(table, keep_version=version)
        return counts


def _build_and_swap(
    store: lake.Lake, files: dict[str, list[str]], target: Path, building: Path
) -> dict[str, int]:
    counts: dict[str, int] = {}
    try:
        con = duckdb.connect(str(building))
        try:
            store.duckdb(con)
            define_views(con, files)
            for table in files:
                row = con.execute(f"SELECT count(*) FROM {_ident(table)}").fetchone()
                counts[table] = row[0] if row else 0  # count(*) always has its row
            con.execute("CHECKPOINT")
        finally:
            con.close()
        fileio.publish(building, target)
    finally:
        building.unlink(missing_ok=True)
        Path(str(building) + ".wal").unlink(missing_ok=True)
    return counts
