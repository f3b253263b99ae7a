"""The uniqueness of samples over the whole day: a sample key delivered again (in the same part or in
another slice's) is quarantined as ``duplicate_key`` under the later delivery; the first is kept."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipelines.lib.ingest import dedupe
from pipelines.lib.ingest.cross_row import SAMPLE_KEY
from pipelines.lib.ingest.day_staging import DayStaging
from pipelines.lib.ingest.day_state import METRICS, FileState
from pipelines.lib.ingest.entries import TS_OUT, reject_frame
from pipelines.lib.ingest.line_texts import Allowed, finish_all_texts
from pipelines.lib.ingest.readers.base import ROW


def settle_samples(staged: DayStaging, files: list[FileState], allowed: Allowed, raw_max_bytes: int) -> int:
    """Reject repeated sample keys (first delivery wins, whichever part holds them); returns rows whose
    key still repeats in what will be written (the unique_key check: 0 unless ingest has a bug)."""
    staged.seal()
    if not staged.parts:
        staged.rewrite_extras({})
        return 0
    sizes = [n for p in staged.parts for n in p.group_sizes]
    starts = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    clash = dedupe.key_clashes([p.hashes for p in staged.parts], staged.dead_samples)
    drop: dict[int, list[int]] = {}
    dropped_rows: dict[str, list[int]] = {}
    remaining = 0
    if clash.height:
        exact = dedupe.exact_duplicates(staged.groups(), _owned(clash, starts, files))
        touched = []
        by_order = {f.order: f for f in files}
        names = {g.order: g.lf.relpath for g in files}
        for (order,), part in exact.filter(pl.col("repeat")).group_by("ord"):
            f = by_order[order]
            q = part.select(
                pl.col("row").alias(ROW),
                pl.lit("duplicate_key").alias("reason_code"),
                pl.lit("ts").alias("field"),
                pl.format(
                    "sample ({}, {}, {}) was already delivered in {}; the first delivery is kept",
                    "run_id",
                    "server_id",
                    pl.col("ts").dt.to_string(TS_OUT),
                    pl.col("kept_in_order").replace_strict(names, return_dtype=pl.String),
                ).alias("message"),
                pl.lit(None, pl.String).alias("raw_record") if f.from_lines else pl.col("raw_record"),
            )
            f.rejects.add(reject_frame(q, fill=f.from_lines))
            f.accepted -= q.height
            touched.append(f)
            dropped_rows[f.lf.relpath] = q[ROW].to_list()
            for rg, off in part.select("rg", "off").iter_rows():
                drop.setdefault(rg, []).append(off)
        kept = exact.filter(~pl.col("repeat"))
        remaining = kept.height - kept.select(pl.struct(SAMPLE_KEY).n_unique()).item()
        finish_all_texts(sorted(touched, key=lambda f: f.order), allowed, raw_max_bytes)
    if staged.dead_samples or drop:
        staged.rewrite_samples(drop)
    staged.rewrite_extras(dropped_rows)
    return remaining


def _owned(clash: pl.DataFrame, starts: np.ndarray, files: list[FileState]) -> pl.DataFrame:
    """The clashing positions with their row group, offset there, and the file that staged them."""
    group = np.searchsorted(starts, clash["pos"].to_numpy(), side="right") - 1
    # (a Prometheus file's row groups are the staged metric samples': not these)
    owner = {g: f for f in files if f.table != METRICS for g in f.row_groups}
    owners = [owner[g] for g in group.tolist()]
    # delivery order: the samples derived from Prometheus first, then the files in landing order
    return clash.with_columns(
        pl.Series("rg", group, dtype=pl.Int64),
        pl.Series("off", clash["pos"].to_numpy() - starts[group], dtype=pl.Int64),
        pl.Series("ord", [f.order for f in owners], dtype=pl.Int32),
        pl.Series("rank", [-1 if f.derived_from else f.order for f in owners], dtype=pl.Int32),
    )
