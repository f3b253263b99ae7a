"""Plain text and JSON renderings of query results for the terminal: aligned columns, numbers as numbers."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from typing import Any

import polars as pl


def plain_value(v: Any) -> Any:
    """A JSON-ready value: decimals become int or float, dates and times ISO strings, NaN/inf null."""
    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, list):
        return [plain_value(x) for x in v]
    if isinstance(v, dict):
        return {k: plain_value(x) for k, x in v.items()}
    return v


def _cell(v: Any) -> str:
    v = plain_value(v)
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    return str(v)


def plain_table(frame: pl.DataFrame) -> str:
    """Aligned columns under a header (numbers right-aligned), then the row count."""
    if frame.width == 0:
        return "(no columns)"
    cols = frame.columns
    cells = [[_cell(v) for v in row] for row in frame.iter_rows()]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(cols)]
    right = [frame.schema[c].is_numeric() for c in cols]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right, strict=True)
        ).rstrip()

    out = [line(cols), line(["-" * w for w in widths]), *(line(r) for r in cells)]
    out.append(f"({frame.height} row{'' if frame.height == 1 else 's'})")
    return "\n".join(out)


def json_records(frame: pl.DataFrame) -> str:
    """The rows as a JSON list of objects; counts and measures are JSON numbers."""
    return json.dumps([plain_value(r) for r in frame.to_dicts()], indent=2)
