"""Core and out layers: per-run role statistics, mergeable histograms, server counts, hardware fit,
summaries, trainer-vs-PS and recommendations. SQL from sql/transforms/, run by short-lived in-memory
DuckDB connections over polars frames and lake files; every result conforms to its contract."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from pipelines.lib.analysis.partials import PartialCache, part_id, partial_digest, runs_digest
from pipelines.lib.contracts import contract, resources
from pipelines.lib.paths import DataHome
from pipelines.lib.query.sqlfiles import sql_text
from pipelines.lib.settings import DEFAULT_LIMITS
from pipelines.lib.storage import lake
from pipelines.lib.storage.lake.s3 import fsspec_fs
from workload_model.catalog import HardwareCatalog
from workload_model.model import fit_frame


def n_bins() -> int:
    """Fixed histogram bins over [0, 1] (util_distribution's contract parameter)."""
    return int(contract("util_distribution").parameters["n_bins"])


@dataclass(frozen=True)
class LakeFiles:
    """Parquet files of a lake table (a local lake or object storage), scanned where they lie."""

    uris: tuple[str, ...]
    remote: bool = False


Relation = pl.DataFrame | Path | LakeFiles  # a frame in memory, or Parquet DuckDB reads out of core


@dataclass(frozen=True)
class OfRuns:
    """The rows of ``relation`` whose run is one of ``run_ids`` (a frame of one column, ``run_id``): one
    batch of an exact-quantile query."""

    relation: Relation
    run_ids: pl.DataFrame


def _remote(rel: Relation | OfRuns) -> bool:
    inner = rel.relation if isinstance(rel, OfRuns) else rel
    return isinstance(inner, LakeFiles) and inner.remote


def _register(con: duckdb.DuckDBPyConnection, name: str, rel: Relation | OfRuns) -> None:
    if isinstance(rel, OfRuns):
        _register(con, f"{name}_all", rel.relation)
        con.register(f"{name}_runs", rel.run_ids)
        con.table(f"{name}_all").join(con.table(f"{name}_runs"), "run_id", how="semi").create_view(name)
    elif isinstance(rel, Path):
        con.read_parquet(str(rel)).create_view(name)
    elif isinstance(rel, LakeFiles):
        con.read_parquet(list(rel.uris)).create_view(name)
    else:
        con.register(name, rel)


@contextmanager
def connection(**relations: Relation | OfRuns) -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB connection with ``relations`` registered by name; closed on exit.

    Parquet files are scanned where they lie, so a day's samples never have to fit in memory; files in
    object storage are read through a registered filesystem."""
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        if any(_remote(r) for r in relations.values()):
            con.register_filesystem(fsspec_fs())
        for name, rel in relations.items():
            _register(con, name, rel)
        yield con
    finally:
        con.close()


def run_batches(values: pl.DataFrame, budget: int) -> list[pl.DataFrame]:
    """The runs of ``values`` (``run_id``, ``n_values``), in its order, cut into batches that each start
    below ``budget`` values into the batch: a batch holds less than ``budget`` plus its last run's values
    (a run above ``budget`` ends its batch). Each batch is a frame of one column, ``run_id``."""
    start = pl.col("n_values").cum_sum() - pl.col("n_values")
    batched = values.with_columns((start // budget).alias("batch"))
    return [b.select("run_id") for b in batched.partition_by("batch", maintain_order=True)]


def _query(con: duckdb.DuckDBPyConnection, name: str, params: dict | None = None) -> pl.DataFrame:
    return con.sql(sql_text(name), params=params or {}).pl()


def _exec(con: duckdb.DuckDBPyConnection, name: str, params: dict | None = None) -> None:
    con.execute(sql_text(name), params or {})


def partition_relation(home: DataHome, table: str, day: str) -> Relation:
    """One day of a table as its Parquet files, which DuckDB scans out of core (an empty frame if none)."""
    return _lake_files(lake.store(home), table, day)


def table_relation(home: DataHome, table: str) -> Relation:
    """A whole table (every day) as its current Parquet files (an empty frame if none)."""
    return _lake_files(lake.store(home), table, None)


def _lake_files(store: lake.Lake, table: str, day: str | None) -> Relation:
    """The current files of a table (of one day) as DuckDB reads them: local copies of an object store's
    files where the lake keeps them (``Lake.readable``)."""
    files = store.readable(store.files(table, day))
    if not files:
        return contract(table).empty_frame()
    return LakeFiles(tuple(files), any(f.startswith("s3://") for f in files))


def day_inputs(home: DataHome, day: str) -> tuple[pl.DataFrame, Relation]:
    """(runs, utilisation_samples) of one day: runs in memory (one row per run), samples as their
    Parquet file (an empty frame if the day has none)."""
    return lake.read_partition(home, "runs", day), partition_relation(home, "utilisation_samples", day)


def with_resource_columns(samples: Relation) -> Relation:
    """Samples with every resource column of the contract: a frame in the landing shape may leave out the
    nullable ones (absent = null, as at ingest); lake files always hold them all."""
    if isinstance(samples, Path | LakeFiles):
        return samples
    missing = [f"{r}_util" for r in resources() if f"{r}_util" not in samples.columns]
    return samples.with_columns(pl.lit(None, pl.Float64).alias(c) for c in missing)


def window_s() -> int:
    """Length of a server window in seconds (server_windows' contract parameter)."""
    return int(contract("server_windows").parameters["window_s"])


def day_parts(samples: Relation) -> list[Relation]:
    """The parts a day's partial aggregates are computed over: each Parquet file of the day's samples (a
    split day publishes one per slice), or the whole relation. Each part's aggregates are small and merge,
    so what one query holds is bounded by a part, not by the day."""
    if isinstance(samples, LakeFiles) and len(samples.uris) > 1:
        return [LakeFiles((uri,), samples.remote) for uri in samples.uris]
    return [samples]


PARTS = {  # each analysis's per-part aggregate
    "server_windows": "transforms/server_windows_part.sql",
    "run_role_stats": "transforms/run_role_stats_part.sql",
    "util_distribution": "transforms/util_distribution_part.sql",
}


def _part_params(name: str) -> dict:
    if name == "server_windows":
        return {"window_s": window_s()}
    return {"n_bins": n_bins()} if name == "util_distribution" else {}


def _digest(name: str, runs: pl.DataFrame | None) -> str:
    joined = None if runs is None else runs_digest(runs)
    return partial_digest(sql_text(PARTS[name]), _part_params(name), joined)


def _part(name: str, part: Relation, runs: pl.DataFrame | None, quantile_values: int) -> pl.DataFrame:
    """``name``'s aggregates of one part; run_role_stats' exact quantiles over batches of runs of about
    ``quantile_values`` values when the part holds more (each batch scans the part again)."""
    joined = {} if runs is None else {"runs": runs}
    with connection(samples=part, **joined) as con:
        values = None
        if name == "run_role_stats":
            rows = int(_query(con, "transforms/sample_rows.sql")["n"][0])
            if rows * len(resources()) > quantile_values:
                values = _query(con, "transforms/run_values.sql")
        if values is None or values["n_values"].sum() <= quantile_values:
            return _query(con, PARTS[name], _part_params(name))
    frames = []
    for batch in run_batches(values, quantile_values):
        with connection(samples=OfRuns(part, batch), **joined) as con:
            frames.append(_query(con, PARTS[name], _part_params(name)))
    return pl.concat(frames, how="vertical_relaxed")


def _partials(
    samples: Relation,
    name: str,
    runs: pl.DataFrame | None = None,
    cache: PartialCache | None = None,
    quantile_values: int = DEFAULT_LIMITS.quantile_values,
) -> pl.DataFrame:
    """``name``'s aggregates of every part of ``samples``, stacked: from ``cache`` where a slice left
    them (a part of a local lake, known by the id in its metadata), else computed, one part after the
    other."""
    frames = []
    digest = None
    for part in day_parts(with_resource_columns(samples)):
        pid = part_id(part.uris[0]) if cache and isinstance(part, LakeFiles) and not part.remote else None
        if pid is not None and cache is not None:
            digest = digest or _digest(name, runs)
            kept = cache.get(pid, name, digest)
            if kept is not None:
                frames.append(kept)
                continue
        frames.append(_part(name, part, runs, quantile_values))
    return pl.concat(frames, how="vertical_relaxed")


def store_partials(
    home: DataHome,
    day: str,
    path: Path,
    runs: pl.DataFrame,
    quantile_values: int = DEFAULT_LIMITS.quantile_values,
) -> None:
    """Compute the aggregates of one staged samples file (a slice's, where it was read) and keep them for
    the day's analyses (``PartialCache``); a file without an id is left to them, and so is every file of
    a lake on object storage without local copies (the analyses read its files where they lie, by URI)."""
    pid = part_id(path)
    store = lake.store(home)
    if pid is None or (store.remote and store.copies is None):
        return
    cache = PartialCache(home.partials_cache, day)
    for name in PARTS:
        with_runs = runs if name == "util_distribution" else None
        cache.put(pid, name, _digest(name, with_runs), _part(name, path, with_runs, quantile_values))


def partial_cache(home: DataHome, day: str) -> PartialCache:
    """The day's kept per-part aggregates."""
    return PartialCache(home.partials_cache, day)


def parts_metadata(samples: Relation, cache: PartialCache) -> dict[str, int]:
    """How many parts an analysis read the day's samples in, and how many of those the slices had
    aggregated already (for the asset's metadata)."""
    return {"parts": len(day_parts(samples)), "parts_from_slices": cache.hits}


def prune_partials(samples: Relation, cache: PartialCache) -> None:
    """Drop the kept aggregates of parts the day no longer holds."""
    local = [p for p in day_parts(samples) if isinstance(p, LakeFiles) and not p.remote]
    cache.prune({pid for p in local if (pid := part_id(p.uris[0]))})


def server_windows(samples: Relation, day: str, cache: PartialCache | None = None) -> pl.DataFrame:
    """Per run x server x hour window of one day: samples and mean utilisation of each resource, from the
    parts' sums and counts."""
    parts = _partials(samples, "server_windows", cache=cache)
    with connection(server_windows_parts=parts) as con:
        out = _query(con, "transforms/server_windows.sql", {"day": day, "window_s": window_s()})
    return contract("server_windows").conform(out)


def run_role_stats(
    runs: pl.DataFrame,
    samples: Relation,
    day: str,
    windows: Relation,
    cache: PartialCache | None = None,
    quantile_values: int = DEFAULT_LIMITS.quantile_values,
) -> pl.DataFrame:
    """Per run x role x resource statistics of one day; servers counted from the day's ``windows``. Counts,
    sums and maxima merge across the day's parts; p50 and p95 are exact: a part's own where the group lies
    in one part, else taken again over every sample of the groups that span parts. What one quantile query
    holds is bounded by batches of runs of about ``quantile_values`` values, not by the day."""
    parts = _partials(samples, "run_role_stats", cache=cache, quantile_values=quantile_values)
    keys = ["run_id", "role", "resource"]
    spanning = parts.group_by(keys).len().filter(pl.col("len") > 1).select(keys)
    values = (
        parts.join(spanning, on=keys, how="semi")
        .group_by("run_id")
        .agg(pl.col("n_samples").sum().alias("n_values"))
        .sort("run_id")
    )
    frames = [parts.clear().select(*keys, "q")]
    for batch in run_batches(values, quantile_values):
        with connection(
            samples=with_resource_columns(samples), spanning=spanning.join(batch, on="run_id", how="semi")
        ) as con:
            frames.append(_query(con, "transforms/run_role_quantiles.sql"))
    quantiles = pl.concat(frames, how="vertical_relaxed")
    with connection(
        runs=runs, run_role_stats_parts=parts, spanning_quantiles=quantiles, server_windows=windows
    ) as con:
        out = _query(con, "transforms/run_role_stats.sql", {"day": day})
    return contract("run_role_stats").conform(out)


def util_distribution(
    runs: pl.DataFrame, samples: Relation, stats: pl.DataFrame, day: str, cache: PartialCache | None = None
) -> pl.DataFrame:
    """One day's fixed-bin histograms of per-sample (the parts' counts, added) and per-run-mean
    utilisation."""
    parts = _partials(samples, "util_distribution", runs=runs, cache=cache)
    with connection(util_distribution_parts=parts, run_role_stats=stats) as con:
        out = _query(con, "transforms/util_distribution.sql", {"day": day, "n_bins": n_bins()})
    return contract("util_distribution").conform(out)


def server_count_hist(runs: pl.DataFrame, day: str) -> pl.DataFrame:
    """One day's server-count histogram per platform, model and role."""
    with connection(runs=runs) as con:
        out = _query(con, "transforms/server_count_hist.sql", {"day": day})
    return contract("server_count_hist").conform(out)


def hardware_fit(runs: pl.DataFrame, day: str, hw: HardwareCatalog) -> pl.DataFrame:
    """Every distinct workload of the day against every platform x placement of the catalog (one server)."""
    with connection(runs=runs) as con:
        workloads = _query(con, "transforms/workloads.sql")
    options = pl.DataFrame(hw.options(), schema=["platform", "placement"], orient="row")
    grid = workloads.join(options, how="cross").with_columns(
        pl.lit(1, pl.Int32).alias("n_trainers"), pl.lit(0, pl.Int32).alias("n_sparse_ps")
    )  # 0: as many PS as allowed
    fitted = fit_frame(grid, hw).with_columns(pl.lit(day).str.to_date().alias("day"))
    return contract("hardware_fit").conform(fitted.sort("workload_id", "platform", "placement"))


def merged_summaries(distribution: Relation) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(util_summary, trainer_vs_ps) from every day's histograms (util_distribution), merged."""
    if isinstance(distribution, pl.DataFrame) and distribution.is_empty():
        return contract("util_summary").empty_frame(), contract("trainer_vs_ps").empty_frame()
    with connection(util_distribution=distribution) as con:
        _exec(con, "transforms/merged_hist.sql")
        summary = contract("util_summary").conform(
            _query(con, "transforms/util_summary.sql", {"n_bins": n_bins()})
        )
        con.register("util_summary", summary)
        tvp = contract("trainer_vs_ps").conform(_query(con, "transforms/trainer_vs_ps.sql"))
    return summary, tvp
