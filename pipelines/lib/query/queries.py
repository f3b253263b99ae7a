"""Canned analyst queries: sql/queries/<name>.sql, each opening with a one-line description and its
default parameters (`-- params: {json}`), run read-only against the analyst catalog with bound values.

A query may also bind constants that are properties of the stored data, not choices (`-- constants:
{"n_bins": "util_distribution.n_bins"}`: the parameter n_bins of the contract util_distribution); they
cannot be set, so a parameter never changes what a column means."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from pipelines.lib.contracts import contract
from pipelines.lib.paths import SQL_DIR
from pipelines.lib.storage.lake import Lake

QUERIES_DIR = SQL_DIR / "queries"


@dataclass(frozen=True)
class CannedQuery:
    name: str
    description: str
    defaults: dict[str, Any]
    sql: str
    constants: dict[str, Any] = field(default_factory=dict)  # bound, never set by the user
    constant_sources: dict[str, str] = field(default_factory=dict)  # where each comes from


def load(path: Path) -> CannedQuery:
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) < 2 or not lines[0].startswith("-- ") or not lines[1].startswith("-- params:"):
        raise ValueError(f"{path}: a canned query starts with '-- <description>' and '-- params: {{json}}'")
    sources = (
        json.loads(lines[2].split(":", 1)[1])
        if len(lines) > 2 and lines[2].startswith("-- constants:")
        else {}
    )
    constants = {}
    for key, ref in sources.items():
        table, param = ref.split(".", 1)
        constants[key] = contract(table).parameters[param]
    return CannedQuery(
        path.stem,
        lines[0][3:].strip(),
        json.loads(lines[1].split(":", 1)[1]),
        "\n".join(lines),
        constants,
        {k: f"schemas/{v.split('.')[0]}.yaml ({v.split('.', 1)[1]})" for k, v in sources.items()},
    )


def fixed_parameter(q: CannedQuery, key: str) -> str:
    """Why ``key`` cannot be set for ``q``."""
    return (
        f"{q.name}: {key} is a property of the stored data ({q.constants[key]}, {q.constant_sources[key]}), "
        "not a choice; leave it out"
    )


def canned() -> dict[str, CannedQuery]:
    return {p.stem: load(p) for p in sorted(QUERIES_DIR.glob("*.sql"))}


def run(
    catalog: Path, name: str, params: dict[str, Any] | None = None, store: Lake | None = None
) -> pl.DataFrame:
    """Run one canned query read-only; ``params`` override its defaults (unknown names are refused).
    ``store``: the lake the catalog's views read, when it is on object storage."""
    queries = canned()
    if name not in queries:
        raise KeyError(f"unknown query {name!r}; known: {', '.join(queries)}")
    q = queries[name]
    fixed = sorted(set(params or {}) & set(q.constants))
    if fixed:
        raise KeyError(fixed_parameter(q, fixed[0]))
    unknown = set(params or {}) - set(q.defaults)
    if unknown:
        raise KeyError(f"{name} takes {sorted(q.defaults) or 'no parameters'}, not {sorted(unknown)}")
    con = duckdb.connect(str(catalog), read_only=True)
    try:
        if store is not None:
            store.duckdb(con)
        return con.sql(q.sql, params={**q.constants, **q.defaults, **(params or {})} or None).pl()
    finally:
        con.close()
