"""reference/views.md: every view of the analyst catalog, as the code that builds the catalog defines it (an
empty catalog is built in memory and read back: names, comments, columns), then every canned query."""

from __future__ import annotations

import json
from dataclasses import dataclass

import duckdb

from pipelines.lib.contracts import contracts
from pipelines.lib.query import queries, warehouse
from pipelines.reference.md import cell, code, page, prose, table

INTRO = """\
The analyst catalog, `<data home>/warehouse/fleet.duckdb`, holds views only: each reads the lake's current
Parquet files, and its comment and its columns' comments are what this page shows. Open it read-only with
`fleet sql` (`-c SQL` for one statement), or from Python with
`duckdb.connect("<data home>/warehouse/fleet.duckdb", read_only=True)`; the catalog is rebuilt aside and
swapped in, so a session never blocks the pipeline. Types are DuckDB's; bounds, allowed values and
partitioning of the lake tables are on [Tables](tables.md). Generated from `pipelines/lib/query/warehouse.py`
and `sql/queries/` when the site is built (`pipelines/reference/views.py`)."""


@dataclass(frozen=True)
class View:
    """One view of the catalog: its name, comment and columns (name, DuckDB type, comment)."""

    name: str
    comment: str
    columns: tuple[tuple[str, str, str], ...]


def catalog_views() -> list[View]:
    """Every view the catalog defines, read back from an empty catalog built by the publishing code."""
    con = duckdb.connect()
    try:
        warehouse.define_views(con, {t: [] for t in warehouse.catalog_tables()})
        views = con.sql(
            "SELECT view_name, coalesce(comment, '') FROM duckdb_views() "
            "WHERE NOT internal AND schema_name = 'main' ORDER BY view_name"
        ).fetchall()
        cols = con.sql(
            "SELECT table_name, column_name, data_type, coalesce(comment, '') FROM duckdb_columns() "
            "WHERE schema_name = 'main' ORDER BY table_name, column_index"
        ).fetchall()
    finally:
        con.close()
    return [
        View(name, comment, tuple((c, t, d) for v, c, t, d in cols if v == name)) for name, comment in views
    ]


def _view(v: View, tables: set[str]) -> str:
    source = (
        f"Reads the lake table [`{v.name}`](tables.md#{v.name})."
        if v.name in tables
        else "Not a lake table: defined over the other views."
    )
    rows = [[code(c), code(t), cell(d)] for c, t, d in v.columns]
    return "\n\n".join(
        [f"### `{v.name}`", prose(v.comment), source, table(("column", "type", "comment"), rows)]
    )


def _parameters(q: queries.CannedQuery) -> str:
    rows = [[code(k), code(json.dumps(v)), "yes"] for k, v in q.defaults.items()]
    rows += [
        [code(k), code(json.dumps(q.constants[k])), f"no: {cell(q.constant_sources[k])}"] for k in q.constants
    ]
    if not rows:
        return "No parameters."
    return table(("parameter", "default", "settable (`--param NAME=VALUE`)"), rows)


def _query(q: queries.CannedQuery) -> str:
    example = " ".join(
        ["fleet query", q.name, *(f"--param {k}={v}" for k, v in list(q.defaults.items())[:1])]
    )
    return "\n\n".join(
        [f"### `{q.name}` {{#query-{q.name}}}", prose(q.description), f"`{example}`", _parameters(q)]
    )


def markdown() -> str:
    views = catalog_views()
    tables = set(contracts())
    canned = queries.canned().values()
    index = ", ".join(f"[`{v.name}`](#{v.name})" for v in views)
    queries_intro = (
        "Each is a file of `sql/queries/`, run read-only against the catalog by `fleet query NAME` "
        "(`fleet query` lists them; `--json` prints rows as JSON). A parameter's default is used unless "
        "`--param` sets it; a constant is a property of the stored data and cannot be set."
    )
    return page(
        "Views",
        INTRO,
        f"## Views\n\n{len(views)} views: {index}.",
        *(_view(v, tables) for v in views),
        f"## Canned queries\n\n{queries_intro}",
        *(_query(q) for q in canned),
    )
