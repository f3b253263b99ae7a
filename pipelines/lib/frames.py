"""Arrow data as polars frames, typed (``pl.from_arrow`` is typed ``DataFrame | Series`` whatever it gets)."""

from __future__ import annotations

import polars as pl
import pyarrow as pa


def arrow_frame(data: pa.Table | pa.RecordBatch) -> pl.DataFrame:
    """A table or record batch as a DataFrame (zero-copy where Arrow allows, as ``pl.from_arrow``)."""
    frame = pl.from_arrow(data)
    if not isinstance(frame, pl.DataFrame):
        raise TypeError(f"expected a frame from {type(data).__name__}, got {type(frame).__name__}")
    return frame


def arrow_series(data: pa.Array | pa.ChunkedArray) -> pl.Series:
    """An array as a Series."""
    series = pl.from_arrow(data)
    if not isinstance(series, pl.Series):
        raise TypeError(f"expected a series from {type(data).__name__}, got {type(series).__name__}")
    return series
