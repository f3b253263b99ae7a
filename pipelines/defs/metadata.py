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


def preview(frame: pl.DataFrame, rows: int = 10) -> dg.MetadataValue:
    """A markdown preview of the first rows."""
    with pl.Config(
        tbl_formatting="MARKDOWN",
        tbl_hide_column_data_types=True,
        tbl_hide_dataframe_shape=True,
        tbl_rows=rows,
        tbl_cols=-1,
        fmt_str_lengths=120,
        float_precision=4,
    ):
        return dg.MetadataValue.md(str(frame.head(rows)))
