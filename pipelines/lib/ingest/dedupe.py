"""Nothing twice: what other days already accepted (file hashes, run ids, sample keys) and the samples
whose key repeats within the day, decided in passes of bounded size over one 64-bit hash per staged sample."""

from __future__ import annotations

import collections
import datetime as dt
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.lib.contracts import contract
from pipelines.lib.frames import arrow_frame
from pipelines.lib.ingest.cross_row import SAMPLE_KEY, sample_key_hash
from pipelines.lib.ingest.entries import typed_json
from pipelines.lib.paths import DataHome
from pipelines.lib.query.sqlfiles import sql_text
from pipelines.lib.settings import DUCKDB_MEMORY
from pipelines.lib.storage import lake

# One 64-bit hash of each staged sample's key and its row number in its file, in the staged file's order.
CLASH_PASS_ROWS = 4_000_000  # hashes compared at once, about (~0.2 GB with polars' group table)
SCAN_PASSES = 4  # up to this many passes rescan the hashes (cheaper than writing them out once more)
HASH_SCHEMA = pa.schema([("h", pa.uint64()), ("row", pa.int64())])


def key_hashes(frame: pl.DataFrame, row: str) -> pa.Table:
    return frame.select(sample_key_hash(), pl.col(row).alias("row")).to_arrow().cast(HASH_SCHEMA)


@dataclass
class Prior:
    """What other days' partitions already accepted: file hashes and run ids (one row per file/run)."""

    files: dict[str, tuple[str, str]]  # BLAKE3 -> (day, source_file)
    sizes: set[int]
    runs: dict[str, str]  # run_id -> day


def read_prior(home: DataHome, day: str) -> Prior:
    store = lake.store(home)
    led = store.read("ingest_ledger", columns=["day", "blake3", "source_file", "size_bytes", "rows_accepted"])
    led = led.filter((pl.col("day") != dt.date.fromisoformat(day)) & (pl.col("rows_accepted") > 0))
    first = led.sort("day", "source_file").unique("blake3", keep="first", maintain_order=True)
    files = {
        digest: (d.isoformat(), src)
        for digest, d, src in first.select("blake3", "day", "source_file").iter_rows()
    }
    runs_ = store.read("runs", columns=["day", "run_id"]).filter(pl.col("day") != dt.date.fromisoformat(day))
    first_runs = runs_.sort("day").unique("run_id", keep="first", maintain_order=True)
    runs = {rid: d.isoformat() for rid, d in first_runs.select("run_id", "day").iter_rows()}
    return Prior(files, set(led["size_bytes"].to_list()), runs)


# What a day's quarantine says of a file, run or sample it did not keep because another day holds it
# (cross_row's and day's messages): the day its decision depended on.
ACCEPTED_ON = r"already accepted on (\d{4}-\d{2}-\d{2})"


def dependent_days(home: DataHome, changed: Iterable[str]) -> dict[str, list[str]]:
    """The other days whose quarantine holds deliveries "already accepted on" one of ``changed``, each with
    the changed days it refers to: once those are read again, what they hold may differ (a corrected
    delivery removed a run), so these days must be read again after them."""
    changed = sorted(set(changed))
    if not changed:
        return {}
    q = lake.store(home).read("quarantine", columns=["day", "reason_code", "message"])
    refs = (
        q.filter(pl.col("reason_code").is_in(["duplicate_key", "file_duplicate"]))
        .select(pl.col("day").cast(pl.String), pl.col("message").str.extract(ACCEPTED_ON, 1).alias("on"))
        .filter(pl.col("on").is_in(changed) & ~pl.col("day").is_in(changed))
        .unique()
        .sort("day", "on")
    )
    return {d: list(ons) for d, ons in refs.group_by("day", maintain_order=True).agg("on").iter_rows()}


def dependent_note(on: list[str]) -> str:
    """Why a day is read again after ``on``, the days its quarantine refers to."""
    one = len(on) == 1
    return (
        f"it kept out deliveries as already accepted on {', '.join(on)}, which {'is' if one else 'are'} read "
        f"again: read again after {'it' if one else 'them'}"
    )


def prior_sample_hashes(home: DataHome, dup_runs: dict[str, str]) -> set[int]:
    """Key hashes of the samples other days hold for runs delivered again today (rare, small)."""
    out: set[int] = set()
    by_day: dict[str, list[str]] = collections.defaultdict(list)
    for rid, d in dup_runs.items():
        by_day[d].append(rid)
    store = lake.store(home)
    for d, rids in by_day.items():
        files = store.files("utilisation_samples", d)
        if files:
            keys = (
                pl.scan_parquet(files, storage_options=store.options)
                .filter(pl.col("run_id").is_in(rids))
                .select(SAMPLE_KEY)
                .collect()
            )
            out.update(keys.select(sample_key_hash())["h"].to_list())
    return out


def key_clashes(
    hashes_paths: list[Path], dead_groups: set[int], pass_rows: int = CLASH_PASS_ROWS
) -> pl.DataFrame:
    """Staged positions whose key hash occurs more than once outside the dead row groups: pos, h, row.
    Positions and row groups count across ``hashes_paths`` in turn (the parts of a split day).

    In passes of about ``pass_rows`` hashes (a pass keeps the hashes whose remainder modulo the number of
    passes is its own), so memory is bounded whatever the day's size. Up to SCAN_PASSES passes each scan
    the staged hashes; beyond, one streaming pass first writes each remainder's hashes to a file of its
    own, so the work grows with the day, not with its square."""
    sizes = []
    for path in hashes_paths:
        meta = pq.ParquetFile(path).metadata
        sizes += [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    passes = max(1, -(-sum(sizes) // pass_rows))
    staged = pl.scan_parquet(hashes_paths).with_row_index("pos").with_columns(pl.col("pos").cast(pl.Int64))
    if dead_groups:
        starts = pl.Series(np.cumsum([0, *sizes[:-1]]), dtype=pl.Int64)
        group = pl.lit(starts).search_sorted(pl.col("pos"), side="right") - 1
        staged = staged.filter(~group.is_in(sorted(dead_groups)))
    if passes <= SCAN_PASSES:
        found = [
            staged.filter(pl.col("h") % passes == k).filter(pl.len().over("h") > 1).collect()
            for k in range(passes)
        ]
        return pl.concat(found).select("pos", "h", "row").sort("pos")
    buckets = hashes_paths[0].parent / f"{hashes_paths[0].stem}-by-remainder"
    shutil.rmtree(buckets, ignore_errors=True)
    try:
        staged.with_columns((pl.col("h") % passes).alias("k")).sink_parquet(
            pl.PartitionBy(buckets, key="k", include_key=False), mkdir=True
        )
        found = [
            pl.scan_parquet(part / "*.parquet").filter(pl.len().over("h") > 1).collect()
            for part in (sorted(buckets.iterdir()) if buckets.exists() else [])  # none: every group dead
        ]
    finally:
        shutil.rmtree(buckets, ignore_errors=True)
    empty = pl.DataFrame(schema={"pos": pl.Int64, "h": pl.UInt64, "row": pl.Int64})
    return pl.concat([empty, *found], how="vertical_relaxed").select("pos", "h", "row").sort("pos")


def metric_repeats(
    metrics_path: Path, file_order: dict[str, int], spill: Path, memory_limit: str = DUCKDB_MEMORY
) -> pl.DataFrame:
    """Prometheus samples repeated within the day (same series, same ts), every copy after the first
    delivery, with ``kept_in`` (out of core, in DuckDB within ``memory_limit``)."""
    con = duckdb.connect(config={"memory_limit": memory_limit, "temp_directory": str(spill)})
    try:
        con.execute("SET enable_progress_bar = false")
        con.register(
            "file_order",
            pl.DataFrame(
                {"source_file": list(file_order), "ord": list(file_order.values())},
                schema={"source_file": pl.String, "ord": pl.Int64},
            ),
        )
        return con.sql(
            sql_text("transforms/metric_sample_repeats.sql"), params={"path": str(metrics_path)}
        ).pl()
    finally:
        con.close()


def exact_duplicates(groups: list[tuple[Path, int]], clash: pl.DataFrame) -> pl.DataFrame:
    """The rows whose key hashes clash (``clash``: rg, off, pos, ord, rank, row), read back from their row
    group (``groups[rg]``: its file and its index there) and compared exactly: ``repeat`` marks every row
    that repeats an earlier delivery's key (delivery order: by ``rank``, then staged position),
    ``kept_in_order`` the file kept."""
    files: dict[Path, pq.ParquetFile] = {}
    parts = []
    for (rg,), part in clash.group_by("rg"):
        path, index = groups[rg]
        pf = files.setdefault(path, pq.ParquetFile(path))
        t = (
            arrow_frame(pf.read_row_group(index))
            .with_row_index("off")
            .with_columns(pl.col("off").cast(pl.Int64))
        )
        parts.append(part.join(t, on="off"))
    rows = pl.concat(parts).sort("rank", "pos")
    cols = [x.name for x in contract("utilisation_samples").landing_columns]
    return rows.with_columns(
        pl.col("ord").first().over(list(SAMPLE_KEY)).alias("kept_in_order"),
        pl.struct(SAMPLE_KEY).is_first_distinct().not_().alias("repeat"),
        typed_json(rows, cols).alias("raw_record"),
    )
