"""Metadata helpers shared by the asset modules (derived from schemas/)."""

import dagster as dg
import polars as pl

from pipelines.lib.contracts import contract

OWNERS = ["team:fleet-analytics"]


def table_schema(name: str) -> dg.TableSchema:
    """The Dagster column schema of a table, for ``dagster/column_schema`` metadata."""
    c = contract(name)
    cols = []
    for col in c.columns:
        desc = col.description + (f" [{col.unit}]" if col.unit else "")
        constraints = dg.TableColumnConstraints(
            nullable=col.nullable,
            unique=(c.primary_key == (col.name,)),
            other=[
                s
                for s in (
                    f">= {col.min}" if col.min is not None else None,
                    f"<= {col.max}" if col.max is not None else None,
                    f"in {list(col.enum)}" if col.enum else None,
                    f"matches {col.pattern}" if col.pattern else None,
                    f"references {col.references}" if col.references else None,
                )
                if s
            ],
        )
        cols.append(dg.TableColumn(name=col.name, type=col.type, description=desc, constraints=constraints))
    return dg.TableSchema(
        columns=cols, constraints=dg.TableConstraints(other=[f"primary key {list(c.primary_key)}"])
    )


def spec_metadata(table: str) -> dict:
    """Definition metadata: the column schema from the contract, visible before the first run."""
    return {"dagster/column_schema": table_schema(table), "dagster/table_name": table}


def description(table: str) -> str:
    return contract(table).description


def _text(col: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    if dtype.is_float():
        return col.round(4).cast(pl.String)
    if isinstance(dtype, pl.List | pl.Array):
        return col.cast(pl.List(pl.String)).list.join(", ")
    if isinstance(dtype, pl.Struct):
        return col.struct.json_encode()
    return col.cast(pl.String)


def preview(frame: pl.DataFrame, rows: int = 10) -> dg.MetadataValue:
    """A markdown table of the first rows (floats to 4 decimals, text cut at 120 characters).

    Built with expressions, not ``pl.Config`` + ``str(frame)``: the config sets process environment
    variables, which native threads (polars, DuckDB, the lake's runtime) may read at the same moment."""
    head = frame.head(rows)
    if not head.width:
        return dg.MetadataValue.md("")
    cells = [
        _text(pl.col(c), t).str.slice(0, 120).str.replace_all("|", "\\|", literal=True).fill_null("")
        for c, t in head.schema.items()
    ]
    lines = head.select(pl.concat_str([pl.lit("| "), pl.concat_str(cells, separator=" | "), pl.lit(" |")]))
    header = "| " + " | ".join(head.columns) + " |\n|" + "---|" * head.width
    return dg.MetadataValue.md("\n".join([header, *lines.to_series().to_list()]))
