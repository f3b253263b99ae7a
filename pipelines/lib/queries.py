"""Canned analyst queries: sql/queries/<name>.sql, each opening with a one-line description and its
default parameters (`-- params: {json}`), run read-only against the analyst catalog with bound values."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from pipelines.lib.paths import SQL_DIR

QUERIES_DIR = SQL_DIR / "queries"


@dataclass(frozen=True)
class CannedQuery:
    name: str
    description: str
    defaults: dict[str, Any]
    sql: str


def load(path: Path) -> CannedQuery:
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) < 2 or not lines[0].startswith("-- ") or not lines[1].startswith("-- params:"):
        raise ValueError(f"{path}: a canned query starts with '-- <description>' and '-- params: {{json}}'")
    return CannedQuery(
        path.stem, lines[0][3:].strip(), json.loads(lines[1].split(":", 1)[1]), "\n".join(lines)
    )


def canned() -> dict[str, CannedQuery]:
    return {p.stem: load(p) for p in sorted(QUERIES_DIR.glob("*.sql"))}


def run(catalog: Path, name: str, params: dict[str, Any] | None = None) -> pl.DataFrame:
    """Run one canned query read-only; ``params`` override its defaults (unknown names are refused)."""
    queries = canned()
    if name not in queries:
        raise KeyError(f"unknown query {name!r}; known: {', '.join(queries)}")
    q = queries[name]
    unknown = set(params or {}) - set(q.defaults)
    if unknown:
        raise KeyError(f"{name} takes {sorted(q.defaults) or 'no parameters'}, not {sorted(unknown)}")
    con = duckdb.connect(str(catalog), read_only=True)
    try:
        return con.sql(q.sql, params={**q.defaults, **(params or {})} or None).pl()
    finally:
        con.close()
