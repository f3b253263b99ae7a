"""Metadata helpers shared by the asset modules (derived from schemas/)."""

import dagster as dg
import polars as pl

from pipelines.lib.contracts import contract, table_schema

OWNERS = ["team:fleet-analytics"]


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
