"""docs/data-dictionary.md: every table of the lake (a view of the same name in the analyst catalog) as its
contract in schemas/ declares it. ``python -m pipelines.lib.data_dictionary`` rewrites the file; a test fails
when it differs from what the contracts say, so the page never drifts from them."""

from __future__ import annotations

import datetime as dt
import json

from pipelines.lib.contracts import Column, Contract, contracts
from pipelines.lib.paths import PROJECT_ROOT
from pipelines.lib.warehouse import DUCKDB_TYPES

DOC = PROJECT_ROOT / "docs" / "data-dictionary.md"
LAYERS = {
    "raw": "as ingested from the landing files, with what ingest records about them",
    "core": "per run and server, from one day's samples",
    "out": "the analyses: per day, or merged over every day",
}
HEADER = """\
# Data dictionary

Every table of the lake, each also a view of the same name in the analyst catalog
(`<data home>/warehouse/fleet.duckdb`, whose view and column comments carry the same descriptions), as its
contract in `schemas/` declares it: the columns in order, their type (the contract's, then DuckDB's in the
catalog), whether they may be null, their unit, the values they may take, and what they mean.
Generated from the contracts by `python -m pipelines.lib.data_dictionary`; a test fails when this page is out
of date, so edit the contracts, not this page.
"""
COLUMNS_HEADER = (
    "| column | type | null | unit | values | description |\n| --- | --- | --- | --- | --- | --- |"
)


def _cell(text: str) -> str:
    """``text`` on one line, safe inside a markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _number(v: float | dt.datetime) -> str:
    if isinstance(v, dt.datetime):
        return v.isoformat().replace("+00:00", "Z")
    return f"{int(v):,}" if float(v).is_integer() else f"{v:g}"


def _values(col: Column) -> str:
    """Bounds, allowed values, pattern, reference and origin of one column, as one cell."""
    out = []
    if col.min is not None and col.max is not None:
        out.append(f"{_number(col.min)} .. {_number(col.max)}")
    elif col.min is not None:
        out.append(f">= {_number(col.min)}")
    elif col.max is not None:
        out.append(f"<= {_number(col.max)}")
    if col.enum:
        out.append("one of " + ", ".join(f"`{v}`" for v in col.enum))
    if col.pattern:
        out.append(f"matches `{col.pattern}`")
    if col.references:
        out.append(f"a key of `{col.references}`")
    if col.type == "float64" and not col.finite:
        out.append("NaN and infinities kept")
    if col.origin != "landing":
        out.append(f"set by {col.origin}")
    return _cell("; ".join(out))


def _column(col: Column) -> str:
    return (
        f"| `{col.name}` | {col.type} ({DUCKDB_TYPES[col.type]}) | {'yes' if col.nullable else 'no'} "
        f"| {_cell(col.unit or '')} | {_values(col)} | {_cell(col.description)} |"
    )


def _table(c: Contract) -> str:
    facts = [f"layer `{c.layer}`"]
    facts.append(
        f"one partition per `{c.partitioned_by}`" if c.partitioned_by else "one table, not partitioned"
    )
    facts.append("key " + ", ".join(f"`{k}`" for k in c.primary_key))
    facts += [f"parameter `{k}` = `{json.dumps(v)}`" for k, v in c.parameters.items()]
    lines = [f"## `{c.name}`", "", c.description, "", "; ".join(facts) + ".", "", COLUMNS_HEADER]
    lines += [_column(col) for col in c.columns]
    if c.row_rules:
        lines += ["", "Rules across fields (a row that breaks one is quarantined):", ""]
        lines += [f"- `{r.id}` (`{r.reason}`): {r.message}" for r in c.row_rules]
    return "\n".join(lines) + "\n"


def markdown() -> str:
    """The whole page: an index of the tables by layer, then every table's columns."""
    ordered = sorted(contracts().values(), key=lambda c: (list(LAYERS).index(c.layer), c.name))
    index = [f"- **{layer}** ({why}): " for layer, why in LAYERS.items()]
    for i, layer in enumerate(LAYERS):
        index[i] += ", ".join(f"[`{c.name}`](#{c.name})" for c in ordered if c.layer == layer)
    return "\n".join([HEADER, *index, "", *(_table(c) for c in ordered)]).rstrip("\n") + "\n"


if __name__ == "__main__":
    DOC.write_text(markdown(), encoding="utf-8")
    print(DOC)
