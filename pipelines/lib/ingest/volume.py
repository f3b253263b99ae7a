"""Did the samples arrive? A day's runs imply samples (declared servers x window / sampling interval); the
samples that arrived are compared with that, per source, and with the source's trailing week.

A source that delivers samples (that day, or on any of the TRAILING_DAYS before) is expected to deliver
them for every run; a source that never does (a public trace of runs only) is not judged.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import polars as pl

from pipelines.lib.contracts import contract
from pipelines.lib.paths import DataHome
from pipelines.lib.query.sqlfiles import sql_text
from pipelines.lib.storage import lake
from workload_model.scalars import as_float

LOW_COVERAGE = 0.5  # samples below this share of what the runs imply: "low"
LOW_VS_TRAILING = 0.5  # ... or below this share of the source's trailing median
TRAILING_DAYS = 7
MIN_TRAILING_DAYS = 3
SHOWN_RUNS = 5  # runs named in a message


def run_samples(runs: pl.DataFrame, samples: list[Path]) -> pl.DataFrame:
    """Per run: source, declared servers, window, samples that arrived, servers seen, sampling interval."""
    runs_in = runs.select(
        "run_id",
        "source",
        "start_ts",
        "end_ts",
        pl.sum_horizontal("n_trainers", "n_sparse_ps", "n_dense_ps", "n_readers")
        .cast(pl.Int64)
        .alias("declared_servers"),
    )
    if not samples:
        return runs_in.select(
            "run_id",
            "source",
            "declared_servers",
            ((pl.col("end_ts") - pl.col("start_ts")).dt.total_seconds(fractional=True)).alias("window_s"),
            pl.lit(0, pl.Int64).alias("samples"),
            pl.lit(0, pl.Int64).alias("servers_seen"),
            pl.lit(None, pl.Float64).alias("interval_s"),
        )
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        con.register("runs", runs_in)
        return con.sql(
            sql_text("transforms/sample_volume.sql"), params={"samples": [str(p) for p in samples]}
        ).pl()
    finally:
        con.close()


def trailing_samples(home: DataHome, day: str) -> dict[str, list[int]]:
    """Samples per source on each of the TRAILING_DAYS before ``day`` that have a sample_volume partition."""
    d = dt.date.fromisoformat(day)
    out: dict[str, list[int]] = {}
    for i in range(1, TRAILING_DAYS + 1):
        earlier = lake.read_partition(home, "sample_volume", str(d - dt.timedelta(days=i)))
        for source, samples in earlier.select("source", "samples").iter_rows():
            out.setdefault(source, []).append(int(samples))
    return out


def _names(frame: pl.DataFrame) -> str:
    ids = frame["run_id"].head(SHOWN_RUNS).to_list()
    more = frame.height - len(ids)
    return ", ".join(ids) + (f" and {more} more" if more > 0 else "")


def day_volume(day: str, per_run: pl.DataFrame, trailing: dict[str, list[int]]) -> pl.DataFrame:
    """The sample_volume rows of a day: one per source with runs."""
    rows = []
    for (source,), runs in per_run.sort("run_id").group_by("source", maintain_order=True):
        samples = int(runs["samples"].sum())
        history = trailing.get(source, [])
        judged = samples > 0 or any(n > 0 for n in history)
        base = [n for n in history if n > 0]
        median = as_float(pl.Series(base).median()) if len(base) >= MIN_TRAILING_DAYS else None
        row = {"day": dt.date.fromisoformat(day), "source": source, "runs": runs.height, "samples": samples}
        if not judged:
            rows.append(
                {
                    **row,
                    "runs_without_samples": 0,
                    "runs_under_covered": 0,
                    "expected_samples": None,
                    "coverage": None,
                    "trailing_median_samples": None,
                    "status": "not_judged",
                    "message": f"{source} delivered no samples that day nor in the {TRAILING_DAYS} days "
                    "before: runs only, not judged",
                }
            )
            continue
        interval = runs["interval_s"].median()
        judged_runs = runs.with_columns(
            pl.col("interval_s").fill_null(pl.lit(interval, pl.Float64))
        ).with_columns(
            (pl.col("declared_servers") * (pl.col("window_s") / pl.col("interval_s") + 1)).alias("expected")
        )
        without = judged_runs.filter(pl.col("samples") == 0)
        under = judged_runs.filter(
            (pl.col("samples") > 0) & (pl.col("samples") < LOW_COVERAGE * pl.col("expected"))
        )
        expected = judged_runs["expected"].drop_nulls().drop_nans()
        expected_total = int(round(expected.sum())) if expected.len() else None
        coverage = samples / expected_total if expected_total else None
        problems = []
        if without.height:
            problems.append(f"{without.height} of {runs.height} runs have no samples ({_names(without)})")
        if coverage is not None and coverage < LOW_COVERAGE:
            problems.append(f"{samples:,} samples where the runs imply {expected_total:,} ({coverage:.0%})")
        if median is not None and samples < LOW_VS_TRAILING * median:
            problems.append(f"{samples:,} samples vs a trailing median of {median:,.0f}")
        if under.height:
            problems.append(f"{under.height} runs below half their samples ({_names(under)})")
        status = "missing" if without.height else "low" if problems else "ok"
        message = (
            f"{source}: " + "; ".join(problems)
            if problems
            else f"{source}: {samples:,} samples for {runs.height} runs"
            + (f" ({coverage:.0%} of what they imply)" if coverage is not None else "")
        )
        rows.append(
            {
                **row,
                "runs_without_samples": without.height,
                "runs_under_covered": under.height,
                "expected_samples": expected_total,
                "coverage": coverage,
                "trailing_median_samples": median,
                "status": status,
                "message": message,
            }
        )
    c = contract("sample_volume")
    if not rows:
        return c.empty_frame()
    return c.conform(pl.DataFrame(rows, schema=c.polars_schema()))


def failing(volume: pl.DataFrame) -> pl.DataFrame:
    """Sources whose samples did not (all) arrive."""
    return volume.filter(pl.col("status").is_in(["missing", "low"]))
