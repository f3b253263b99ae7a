"""Where the fleet wastes machines: right-sizing per run and role, stragglers and hot shards, fleet totals.

Everything is computed per day from that day's aggregates (runs, run_role_stats, server_windows), never
from raw samples, so a day costs what its aggregates cost and any day range merges by summing.

Right-sizing (``run_efficiency``) is pipelines/lib/analysis/rightsizing.py.

Outliers (``server_outliers``) are found in SQL (sql/transforms/server_outliers.sql) from server_windows.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import polars as pl

from pipelines.lib.analysis import analytics
from pipelines.lib.analysis.rightsizing import Targets, run_efficiency
from pipelines.lib.contracts import contract
from pipelines.lib.paths import DataHome
from pipelines.lib.query.sqlfiles import sql_text
from pipelines.lib.storage import lake
from workload_model.catalog import HardwareCatalog, ModelSpec

# ------------------------------------------------------------------------------------------ outliers


def server_outliers(
    runs: pl.DataFrame, windows: analytics.Relation, day: str, targets: Targets
) -> pl.DataFrame:
    """One day's stragglers and hot shards with their evidence (which server, how long, how far off)."""
    params = {
        "day": day,
        "straggler_ratio": targets.straggler_ratio,
        "hot_shard_ratio": targets.hot_shard_ratio,
        "sustained_share": targets.sustained_share,
    }
    with analytics.connection(runs=runs, server_windows=windows) as con:
        out = con.sql(sql_text("transforms/server_outliers.sql"), params=params).pl()
    return contract("server_outliers").conform(out)


# -------------------------------------------------------------------------------------------- a day

WASTE_TABLES = ("run_efficiency", "server_outliers")


def day_waste(
    runs: pl.DataFrame,
    stats: pl.DataFrame | None,
    windows: analytics.Relation,
    day: str,
    hw: HardwareCatalog,
    models: dict[str, ModelSpec],
    targets: Targets,
    tables: Sequence[str] | set[str] = WASTE_TABLES,
) -> dict[str, pl.DataFrame]:
    """The day's waste tables named in ``tables`` (``stats``, run_role_stats, is needed for run_efficiency
    only). The outliers' SQL runs in a thread beside the right-sizing, which is mostly one core of polars
    (DuckDB frees the GIL)."""
    out: dict[str, pl.DataFrame] = {}
    with ThreadPoolExecutor(1) as beside:
        outliers = (
            beside.submit(server_outliers, runs, windows, day, targets)
            if "server_outliers" in tables
            else None
        )
        if "run_efficiency" in tables:
            if stats is None:
                raise ValueError("run_efficiency needs the day's run_role_stats")
            out["run_efficiency"] = run_efficiency(runs, stats, windows, day, hw, models, targets)
        if outliers is not None:
            out["server_outliers"] = outliers.result()
    return out


# -------------------------------------------------------------------------------------- fleet totals


def waste_summary(efficiency: analytics.Relation, outliers: analytics.Relation) -> pl.DataFrame:
    """Fleet totals per day, source, model, platform and role from every day's run_efficiency and
    server_outliers (sums: any day range merges by summing)."""
    with analytics.connection(run_efficiency=efficiency, server_outliers=outliers) as con:
        out = con.sql(sql_text("transforms/waste_summary.sql")).pl()
    return contract("waste_summary").conform(out)


def _worst_runs(judged: pl.DataFrame) -> pl.DataFrame:
    """Per judged run: its recoverable servers and power, and each role's right-sizing in one line."""
    return (
        judged.sort("servers_recoverable", descending=True)
        .group_by("run_id", maintain_order=True)
        .agg(
            pl.col("day", "model_name", "platform", "source").first(),
            pl.col("servers_recoverable").sum(),
            (pl.col("provisioned_w_recoverable").sum() / 1000).alias("provisioned_kw_recoverable"),
            pl.format(
                "{} {} -> {} ({} p95 {} -> {}, {})",
                "role",
                "n_servers",
                "right_sized_servers",
                "binding_resource",
                pl.col("binding_p95_util").round(2),
                pl.col("p95_after_util").round(2),
                "basis",
            )
            .filter(pl.col("servers_recoverable") > 0)
            .str.join("; ")
            .alias("right_sizing"),
        )
    )


def _outlier_evidence(outliers: pl.DataFrame) -> pl.DataFrame:
    """Per run: each kind of outlier, how many, and the worst one, in one line."""
    offness = pl.when(pl.col("kind") == "hot_shard").then(pl.col("ratio")).otherwise(1 / pl.col("ratio"))
    return (
        outliers.sort(offness, descending=True)
        .group_by("run_id", "kind", maintain_order=True)
        .agg(pl.len().alias("n"), pl.all().first())
        .group_by("run_id", maintain_order=True)
        .agg(
            pl.format(
                "{} x{}, worst {} {} {}x for {} min",
                "kind",
                "n",
                "server_id",
                "resource",
                pl.col("ratio").round(2),
                (pl.col("flagged_s") / 60).round(0).cast(pl.Int64),
            )
            .str.join("; ")
            .alias("outliers")
        )
    )


def fleet_view(efficiency: pl.DataFrame, outliers: pl.DataFrame, top: int = 10) -> dict[str, Any]:
    """What a planner reads first, from run_efficiency and server_outliers rows of any day range: totals,
    by role, by model and platform, by day, the top runs by recoverable servers with their evidence, and
    the outliers."""
    judged = efficiency.filter(pl.col("right_sized_servers").is_not_null())
    sums = [
        pl.len().alias("rows"),
        pl.col("run_id").n_unique().alias("runs"),
        pl.col("n_servers").sum().alias("n_servers"),
        pl.col("n_servers").filter(pl.col("right_sized_servers").is_not_null()).sum().alias("servers_judged"),
        pl.col("right_sized_servers").sum().alias("right_sized_servers"),
        pl.col("servers_recoverable").sum().alias("servers_recoverable"),
        (pl.col("provisioned_w_recoverable").sum() / 1000).alias("provisioned_kw_recoverable"),
    ]
    totals = efficiency.select(sums).drop("rows").row(0, named=True)
    days = efficiency["day"].drop_nulls()
    totals |= {
        "first_day": str(days.min()) if days.len() else None,
        "last_day": str(days.max()) if days.len() else None,
        "days": days.n_unique(),
        "stragglers": int((outliers["kind"] == "straggler").sum()),
        "hot_shards": int((outliers["kind"] == "hot_shard").sum()),
        "runs_with_stragglers": outliers.filter(pl.col("kind") == "straggler")["run_id"].n_unique(),
        "runs_with_hot_shards": outliers.filter(pl.col("kind") == "hot_shard")["run_id"].n_unique(),
        "basis": dict(efficiency.group_by("basis").agg(pl.col("n_servers").sum()).sort("basis").iter_rows()),
    }
    worst, evidence = _worst_runs(judged), _outlier_evidence(outliers)
    top_runs = (
        worst.filter(pl.col("servers_recoverable") > 0)
        .sort("servers_recoverable", "provisioned_kw_recoverable", descending=True, nulls_last=True)
        .head(top)
        .join(evidence, on="run_id", how="left")
    )
    return {
        "totals": totals,
        "by_role": efficiency.group_by("role").agg(sums).drop("rows").sort("role"),
        "by_model_platform": efficiency.group_by("model_name", "platform")
        .agg(sums)
        .drop("rows")
        .sort("model_name", "platform"),
        "by_day": efficiency.group_by("day").agg(sums).drop("rows").sort("day"),
        "top_runs": top_runs,
        "outliers": outliers.sort("kind", "ratio"),
    }


# ---------------------------------------------------------------------------------- any day range


def lake_days(home: DataHome, table: str, first: str | None = None, last: str | None = None) -> list[str]:
    """The days of a partitioned table in the lake, within [first, last] where given."""
    days = lake.store(home).days(table)
    return [d for d in days if (first is None or d >= first) and (last is None or d <= last)]


def read_days(home: DataHome, table: str, days: Sequence[str]) -> pl.DataFrame:
    """Those days of a partitioned table, concatenated (one day's aggregates at a time in the lake)."""
    store = lake.store(home)
    files = [f for d in days for f in store.files(table, d)]
    return store.read_files(table, files)


def answer(
    home: DataHome,
    first: str | None = None,
    last: str | None = None,
    target_p95_util: float | None = None,
    top: int = 10,
) -> dict[str, Any] | None:
    """``fleet_view`` of the lake's days in [first, last] (None when none has been right-sized). With
    ``target_p95_util``, right-sizing is recomputed against it day by day from the stored aggregates
    (runs, run_role_stats, server_windows), never from raw samples; outliers are as stored."""
    days = lake_days(home, "run_efficiency", first, last)
    if not days:
        return None
    outliers = read_days(home, "server_outliers", lake_days(home, "server_outliers", first, last))
    if target_p95_util is None:
        efficiency = read_days(home, "run_efficiency", days)
    else:
        from workload_model.catalog import load_hardware, load_models

        hw = load_hardware(home.user_catalog_dir / "hardware.yaml")
        models = load_models(home.user_catalog_dir / "models.yaml")
        targets = Targets.defaults(target_p95_util=target_p95_util)
        efficiency = pl.concat(
            [
                run_efficiency(
                    lake.read_partition(home, "runs", d),
                    lake.read_partition(home, "run_role_stats", d),
                    analytics.partition_relation(home, "server_windows", d),
                    d,
                    hw,
                    models,
                    targets,
                )
                for d in days
            ]
        )
    view = fleet_view(efficiency, outliers, top)
    view["totals"]["target_p95_util"] = efficiency["target_p95_util"].unique().sort().to_list()
    return view


def ps_oversized_share(efficiency: pl.DataFrame) -> pl.DataFrame:
    """Per source: sparse parameter servers held, judged (runs with telemetry), called oversized (beyond
    the right-sized count) and their share of the judged; the canned query's SQL over these rows."""
    with analytics.connection(run_efficiency=efficiency) as con:
        return con.sql(sql_text("queries/ps_oversized_share.sql")).pl()
