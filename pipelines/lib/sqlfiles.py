"""SQL statements live in sql/ files; this reads them (cached) by relative name."""

from __future__ import annotations

from functools import cache

from pipelines.lib.paths import SQL_DIR


@cache
def sql_text(name: str) -> str:
    """Text of ``sql/<name>`` (e.g. ``transforms/run_role_stats.sql``)."""
    path = (SQL_DIR / name).resolve()
    if SQL_DIR.resolve() not in path.parents:
        raise ValueError(f"SQL file {name!r} is outside {SQL_DIR}")
    return path.read_text(encoding="utf-8")


def quote_literal(value: str) -> str:
    """A SQL string literal for DDL that cannot take bound parameters (DuckDB views)."""
    return "'" + value.replace("'", "''") + "'"
