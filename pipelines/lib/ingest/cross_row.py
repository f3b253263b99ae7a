"""Rules across rows: one run per run id (the first delivery wins, across files and days), and samples
that belong to an accepted run of the day and fall inside its time."""

from __future__ import annotations

import polars as pl

from pipelines.lib.contracts import contract
from pipelines.lib.ingest.entries import TS_OUT, row_rejects
from pipelines.lib.ingest.readers.base import LISTED_REJECT_SCHEMA, ROW

SAMPLE_KEY = ("run_id", "server_id", "ts")


def sample_key_hash() -> pl.Expr:
    """One 64-bit hash of a sample's key (clashes are compared exactly later): each column hashed with its
    own seed, combined; 2.5x cheaper than hashing the key as a struct."""
    out = pl.col(SAMPLE_KEY[0]).hash(seed=1)
    for i, name in enumerate(SAMPLE_KEY[1:], start=2):
        out = out ^ pl.col(name).hash(seed=i)
    return out.alias("h")


ORDER = "__fleet_order"  # delivery order of the file a row came from
FILE = "__fleet_file"


def settle_runs(
    runs: pl.DataFrame, prior_runs: dict[str, str], from_lines: set[int]
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, str]]:
    """(runs kept, rejects with their file's order, run ids already accepted on another day).

    A run id delivered twice today keeps its first delivery (files in delivery order, rows in file order);
    one accepted on another day is rejected here. ``from_lines``: orders of files whose raw records are
    their lines (read back later)."""
    run_cols = [x.name for x in contract("runs").landing_columns]
    runs = runs.sort(ORDER, ROW)
    first = runs.with_columns(pl.col(FILE).first().over("run_id").alias("__kept_in"))
    again = ~first["run_id"].is_first_distinct()
    prior_day = first["run_id"].replace_strict(prior_runs, default=None, return_dtype=pl.String)
    elsewhere = prior_day.is_not_null() & ~again
    parts = [
        (
            first.filter(again),
            pl.format(
                "run_id {} was already delivered in {}; the first delivery is kept", "run_id", "__kept_in"
            ),
        ),
        (
            first.filter(elsewhere).with_columns(prior_day.filter(elsewhere).alias("__prior")),
            pl.format(
                "run_id {} was already accepted on {}; the first delivery is kept", "run_id", "__prior"
            ),
        ),
    ]
    rejects = []
    for rows, message in parts:
        if rows.height:
            lines = rows.filter(pl.col(ORDER).is_in(sorted(from_lines)))
            typed = rows.filter(~pl.col(ORDER).is_in(sorted(from_lines)))
            for sub, flag in ((lines, True), (typed, False)):
                if sub.height:
                    rejects.append(
                        row_rejects(
                            sub, "duplicate_key", "run_id", message, run_cols, from_lines=flag
                        ).with_columns(sub[ORDER])
                    )
    dup_runs = dict(zip(first.filter(elsewhere)["run_id"], prior_day.filter(elsewhere), strict=True))
    out = pl.concat(rejects) if rejects else pl.DataFrame(schema={**LISTED_REJECT_SCHEMA, ORDER: pl.Int32})
    return runs.filter(~(again | elsewhere)), out, dup_runs


def windows(runs: pl.DataFrame) -> pl.DataFrame:
    """Each accepted run's time window."""
    return runs.select(
        "run_id",
        pl.col("start_ts").alias("__start"),
        pl.col("end_ts").alias("__end"),
        pl.lit(True).alias("__known"),
    )


def suspects(acc: pl.DataFrame, runs: pl.DataFrame) -> pl.Series | None:
    """Rows that may break a cross-row rule (None when none can): of an unknown run, or of a run some of
    whose samples in this batch fall outside its time. Decided per run from its first and last sample in
    the batch, so a clean batch costs one group-by, not a test per row."""
    span = (
        acc.group_by("run_id")
        .agg(pl.col("ts").min().alias("__lo"), pl.col("ts").max().alias("__hi"))
        .join(runs, on="run_id", how="left")
    )
    off = span.filter(
        pl.col("__known").is_null()
        | ((pl.col("__lo") < pl.col("__start")) | (pl.col("__hi") > pl.col("__end"))).fill_null(False)
    )
    if not off.height:
        return None
    return acc["run_id"].is_in(off["run_id"].implode(), nulls_equal=True)


def sample_rejects(
    rows: pl.DataFrame,
    runs: pl.DataFrame,
    dup_runs: dict[str, str],
    prior_hashes: set[int],
    *,
    from_lines: bool,
) -> pl.DataFrame:
    """Rejects among suspect samples: of a run accepted on another day (a duplicate
    of a sample it holds, else a sample without its run), of no accepted run, or outside its run's time."""
    cols = [x.name for x in contract("utilisation_samples").landing_columns]
    joined = rows.join(runs, on="run_id", how="left", maintain_order="left")
    out = []
    unknown = joined["__known"].is_null()
    if unknown.any():
        bad = joined.filter(unknown)
        keys = bad.select(sample_key_hash())["h"]
        elsewhere = bad["run_id"].is_in(list(dup_runs)) & keys.is_in(list(prior_hashes))
        other_day = pl.col("run_id").replace_strict(dup_runs, default=None)
        shown = pl.col("ts").dt.to_string(TS_OUT)
        message = pl.format(
            "sample ({}, {}, {}) was already accepted on {}; the first delivery is kept",
            "run_id",
            "server_id",
            shown,
            other_day,
        )
        out.append(
            row_rejects(bad.filter(elsewhere), "duplicate_key", "ts", message, cols, from_lines=from_lines)
        )
        message = (
            pl.when(pl.col("run_id").is_in(list(dup_runs)))
            .then(
                pl.format(
                    "run_id {} was accepted on {}, not in this day's landing files; "
                    "deliver samples with their run",
                    "run_id",
                    other_day,
                )
            )
            .otherwise(
                pl.format("run_id {} has no accepted run record in this day's landing files", "run_id")
            )
        )
        out.append(
            row_rejects(bad.filter(~elsewhere), "unknown_run", "run_id", message, cols, from_lines=from_lines)
        )
        joined = joined.filter(~unknown)
    outside = ((joined["ts"] < joined["__start"]) | (joined["ts"] > joined["__end"])).fill_null(False)
    if outside.any():
        bad = joined.filter(outside)
        message = pl.format(
            "ts {} is outside its run ({} .. {})",
            pl.col("ts").dt.to_string(TS_OUT),
            pl.col("__start").dt.to_string(TS_OUT),
            pl.col("__end").dt.to_string(TS_OUT).fill_null("running"),
        )
        out.append(row_rejects(bad, "ts_outside_run", "ts", message, cols, from_lines=from_lines))
    return (
        pl.concat(out)
        if out
        else rows.head(0)
        .select(ROW)
        .with_columns(
            pl.lit(None, pl.String).alias(x) for x in ("reason_code", "field", "message", "raw_record")
        )
    )
