"""reference/tables.md: every table of the lake (a view of the same name in the analyst catalog) as its
contract in schemas/ declares it: columns in order with type, nullability, unit, allowed values and meaning,
and each table's description, layer, partitioning and key."""

from __future__ import annotations

import datetime as dt
import json

from pipelines.lib.contracts import Column, Contract, contracts
from pipelines.lib.query.warehouse import DUCKDB_TYPES
from pipelines.reference.md import cell, code, page, prose, table

LAYERS = {
    "raw": "as ingested from the landing files, with what ingest records about them",
    "core": "per run and server, from one day's samples",
    "out": "the analyses: per day, or merged over every day",
}
INTRO = """\
Every table of the lake, each also a view of the same name in the analyst catalog
(`<data home>/warehouse/fleet.duckdb`, whose view and column comments carry the same descriptions; see
[Views](views.md)), as its contract in `schemas/` declares it: the columns in order, their type (the
contract's, then DuckDB's in the catalog), whether they may be null, their unit, the values they may take,
and what they mean. Generated from the contracts when the site is built (`pipelines/reference/tables.py`):
edit the contracts, not this page."""
COLUMNS = ("column", "type", "null", "unit", "values", "description")


def _number(v: float | dt.datetime) -> str:
    if isinstance(v, dt.datetime):
        return v.isoformat().replace("+00:00", "Z")
    return f"{int(v):,}" if float(v).is_integer() else f"{v:g}"


def _bounds(col: Column) -> list[str]:
    if col.min is not None and col.max is not None:
        return [f"{_number(col.min)} .. {_number(col.max)}"]
    if col.min is not None:
        return [f">= {_number(col.min)}"]
    if col.max is not None:
        return [f"<= {_number(col.max)}"]
    return []


def values(col: Column) -> str:
    """Bounds, allowed values, pattern, reference and origin of one column, as one cell."""
    out = _bounds(col)
    if col.enum:
        out.append("one of " + ", ".join(code(v) for v in col.enum))
    if col.pattern:
        out.append(f"matches {code(col.pattern)}")
    if col.references:
        out.append(f"a key of {code(col.references)}")
    if col.type == "float64" and not col.finite:
        out.append("NaN and infinities kept")
    if col.origin != "landing":
        out.append(f"set by {col.origin}")
    return cell("; ".join(out))


def _row(col: Column) -> list[str]:
    return [
        code(col.name),
        f"{col.type} ({DUCKDB_TYPES[col.type]})",
        "yes" if col.nullable else "no",
        cell(col.unit or ""),
        values(col),
        cell(col.description),
    ]


def _facts(c: Contract) -> str:
    facts = [f"layer {code(c.layer)}"]
    facts.append(
        f"one partition per {code(c.partitioned_by)}" if c.partitioned_by else "one table, not partitioned"
    )
    facts.append("key " + ", ".join(code(k) for k in c.primary_key))
    facts += [f"parameter {code(k)} = {code(json.dumps(v))}" for k, v in c.parameters.items()]
    return "; ".join(facts) + "."


def _meanings(c: Contract) -> list[str]:
    """What each allowed value means, for the columns whose contract says it."""
    lines = []
    for col in c.columns:
        if col.described_values:
            lines += ["", f"Values of {code(col.name)}:", ""]
            lines += [f"- {code(v)}: {prose(m)}" for v, m in col.described_values.items()]
    return lines


def section(c: Contract) -> str:
    """One table: its description, facts, columns, value meanings and cross-field rules."""
    lines = [
        f"## `{c.name}`",
        "",
        prose(c.description),
        "",
        _facts(c),
        "",
        table(COLUMNS, map(_row, c.columns)),
    ]
    lines += _meanings(c)
    if c.row_rules:
        lines += ["", "Rules across fields (a row that breaks one is quarantined):", ""]
        lines += [f"- {code(r.id)} ({code(r.reason)}): {prose(r.message)}" for r in c.row_rules]
    return "\n".join(lines)


def markdown() -> str:
    """The whole page: an index of the tables by layer, then every table's columns."""
    ordered = sorted(contracts().values(), key=lambda c: (list(LAYERS).index(c.layer), c.name))
    index = [
        f"- **{layer}** ({why}): "
        + ", ".join(f"[`{c.name}`](#{c.name})" for c in ordered if c.layer == layer)
        for layer, why in LAYERS.items()
    ]
    return page("Tables", INTRO, "\n".join(index), *(section(c) for c in ordered))
