"""Core layer: per server and hour window, and per run, role and resource statistics."""

import dagster as dg

from pipelines.defs.metadata import OWNERS, description, preview, spec_metadata
from pipelines.defs.partitions import LANDING_DAYS
from pipelines.defs.resources import FleetHome
from pipelines.lib.analysis import analytics
from pipelines.lib.storage import lake


@dg.asset(
    name="server_windows",
    group_name="core",
    partitions_def=LANDING_DAYS,
    deps=["utilisation_samples"],
    kinds={"duckdb", "parquet"},
    owners=OWNERS,
    description=description("server_windows"),
    metadata=spec_metadata("server_windows"),
    tags={"layer": "core"},
)
def server_windows(context: dg.AssetExecutionContext, fleet: FleetHome) -> dg.MaterializeResult:
    """Samples and mean utilisation per run x server x hour window: the day's one scan per server."""
    day = context.partition_key
    home = fleet.data_home()
    _, samples = analytics.day_inputs(home, day)
    kept = analytics.partial_cache(home, day)
    windows = analytics.server_windows(samples, day, kept)
    path = lake.write_partition(home, "server_windows", day, windows)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": windows.height,
            "path": dg.MetadataValue.path(str(path)),
            "servers": windows.select("run_id", "server_id").n_unique(),
            **analytics.parts_metadata(samples, kept),
        }
    )


@dg.asset(
    name="run_role_stats",
    group_name="core",
    partitions_def=LANDING_DAYS,
    deps=["runs", "utilisation_samples", "server_windows"],
    kinds={"duckdb", "parquet"},
    owners=OWNERS,
    description=description("run_role_stats"),
    metadata=spec_metadata("run_role_stats"),
    tags={"layer": "core"},
)
def run_role_stats(context: dg.AssetExecutionContext, fleet: FleetHome) -> dg.MaterializeResult:
    """Mean, p50, p95 and max utilisation per run x role x resource, from every sample of the day."""
    day = context.partition_key
    home = fleet.data_home()
    runs, samples = analytics.day_inputs(home, day)
    windows = analytics.partition_relation(home, "server_windows", day)
    kept = analytics.partial_cache(home, day)
    budget = fleet.limits().quantile_values
    stats = analytics.run_role_stats(runs, samples, day, windows, kept, budget)
    path = lake.write_partition(home, "run_role_stats", day, stats)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": stats.height,
            "path": dg.MetadataValue.path(str(path)),
            "preview": preview(stats),
            **analytics.parts_metadata(samples, kept),
        }
    )
