"""SQL statements live in sql/ files; this reads them (cached) by relative name.

A file may hold ``<<resources: TEMPLATE>>``: it expands to TEMPLATE once per resource of the contract
(``contracts.resources()``), joined by ", ", with ``{col}`` the resource's column (``cpu_util``) and
``{res}`` its name (``cpu``). Resource lists in SQL therefore come from the contract alone; they are
identifiers the contract declares (checked here), never data, and every value stays a bound parameter.
"""

from __future__ import annotations

import re
from functools import cache

from pipelines.lib.contracts import resources
from pipelines.lib.paths import SQL_DIR

RESOURCE_LIST = re.compile(r"<<resources:\s*(.*?)>>", re.S)
IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")


@cache
def _raw(name: str) -> str:
    path = (SQL_DIR / name).resolve()
    if SQL_DIR.resolve() not in path.parents:
        raise ValueError(f"SQL file {name!r} is outside {SQL_DIR}")
    return path.read_text(encoding="utf-8")


def expand_resources(text: str) -> str:
    """``text`` with every ``<<resources: TEMPLATE>>`` expanded over the contract's resources."""
    names = resources()
    bad = [r for r in names if not IDENTIFIER.match(r)]
    if bad:
        raise ValueError(f"resource names {bad} are not plain SQL identifiers")
    return RESOURCE_LIST.sub(
        lambda m: ", ".join(m.group(1).strip().format(col=f"{r}_util", res=r) for r in names), text
    )


def sql_text(name: str) -> str:
    """Text of ``sql/<name>`` (e.g. ``transforms/run_role_stats.sql``), resource lists expanded."""
    return expand_resources(_raw(name))


def quote_literal(value: str) -> str:
    """A SQL string literal for DDL that cannot take bound parameters (DuckDB views)."""
    return "'" + value.replace("'", "''") + "'"
