"""A lake's content for comparisons between two ways of producing it (object storage or local, workers or
in-process): every contract table, without when things happened."""

from __future__ import annotations

import polars as pl

from pipelines.lib.contracts import contracts
from pipelines.lib.paths import DataHome
from pipelines.lib.storage import lake

VOLATILE = {"ingested_at"}  # when a run happened, not what it found


def state(home: DataHome) -> dict[str, pl.DataFrame]:
    """Every contract table of ``home``'s lake, sorted, without volatile columns."""
    out = {}
    for t in sorted(contracts()):
        frame = lake.read_table(home, t)
        frame = frame.drop([c for c in frame.columns if c in VOLATILE])
        out[t] = frame.sort(frame.columns, nulls_last=True)
    return out


def assert_same(got: pl.DataFrame, want: pl.DataFrame, table: str) -> None:
    """Equal, floats to 1e-9 relative: DuckDB's parallel sums differ in the last bits between any two
    runs."""
    floats = [c for c, t in want.schema.items() if t.is_float()]
    exact = [c for c in want.columns if c not in floats]
    got, want = got.sort(exact, nulls_last=True), want.sort(exact, nulls_last=True)
    assert got.select(exact).equals(want.select(exact)), f"{table}: the two lakes differ"
    for c in floats:
        diff = (got[c] - want[c]).abs() <= 1e-9 * want[c].abs().clip(lower_bound=1.0)
        assert diff.fill_null(True).all() and (got[c].is_null() == want[c].is_null()).all(), (table, c)


# A day's trailing-week sample median reads the earlier days the lake held when the day ran: days that
# run at once (a backfill on workers or local processes) see some of them or none, in any order.
RUN_ORDER = {"sample_volume": ["trailing_median_samples"]}


def assert_same_lakes(got: DataHome, want: DataHome, ignore: dict[str, list[str]] | None = None) -> None:
    """Every contract table of ``got`` equals ``want``'s but the ``ignore``d columns, and neither is
    empty."""
    a, b = state(got), state(want)
    assert b["runs"].height > 0 and b["utilisation_samples"].height > 0
    for t in b:
        drop = (ignore or {}).get(t, [])
        assert_same(a[t].drop(drop), b[t].drop(drop), t)
