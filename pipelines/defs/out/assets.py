"""Out layer: mergeable per-day partials (histograms, server counts, fit) and the merged analyses."""

from datetime import timedelta

import dagster as dg

from pipelines.defs.metadata import OWNERS, description, preview, spec_metadata
from pipelines.defs.partitions import LANDING_DAYS
from pipelines.defs.resources import FleetHome
from pipelines.lib.analysis import analytics
from pipelines.lib.storage import lake

# The nightly run refreshes the out layer by ~03:00 UTC; warn after 26 h, fail after 30 h without one.
FRESHNESS = dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=30), warn_window=timedelta(hours=26))


def out_attrs(name: str, kinds: set[str]) -> dict:
    """What every out-layer asset declares: its group, kinds, owners, and the description, column metadata
    and freshness its contract gives."""
    return {
        "group_name": "out",
        "kinds": kinds,
        "owners": OWNERS,
        "description": description(name),
        "metadata": spec_metadata(name),
        "tags": {"layer": "out"},
        "freshness_policy": FRESHNESS,
    }


def _daily(name: str, deps: list[str], kinds: set[str]):
    return dg.asset(name=name, partitions_def=LANDING_DAYS, deps=deps, **out_attrs(name, kinds))


def _written(path, frame, asset_key: str | None = None, **extra) -> dg.MaterializeResult:
    return dg.MaterializeResult(
        asset_key=asset_key,
        metadata={"dagster/row_count": frame.height, "path": dg.MetadataValue.path(str(path)), **extra},
    )


@_daily("util_distribution", ["runs", "utilisation_samples", "run_role_stats"], {"duckdb", "parquet"})
def util_distribution(context: dg.AssetExecutionContext, fleet: FleetHome) -> dg.MaterializeResult:
    """Fixed-bin (1000) utilisation histograms of the day, per sample and per run mean."""
    day = context.partition_key
    home = fleet.data_home()
    runs, samples = analytics.day_inputs(home, day)
    stats = lake.read_partition(home, "run_role_stats", day)
    kept = analytics.partial_cache(home, day)
    dist = analytics.util_distribution(runs, samples, stats, day, kept)
    analytics.prune_partials(samples, kept)  # the last of the day's three analyses to take them
    return _written(
        lake.write_partition(home, "util_distribution", day, dist),
        dist,
        samples_binned=int(dist.filter(dist["statistic"] == "sample")["n"].sum()),
        **analytics.parts_metadata(samples, kept),
    )


@_daily("server_count_hist", ["runs"], {"duckdb", "parquet"})
def server_count_hist(context: dg.AssetExecutionContext, fleet: FleetHome) -> dg.MaterializeResult:
    """Runs per server count of each role, per platform and model."""
    day = context.partition_key
    home = fleet.data_home()
    hist = analytics.server_count_hist(lake.read_partition(home, "runs", day), day)
    return _written(lake.write_partition(home, "server_count_hist", day, hist), hist, preview=preview(hist))


@_daily("hardware_fit", ["runs"], {"polars", "parquet"})
def hardware_fit(context: dg.AssetExecutionContext, fleet: FleetHome) -> dg.MaterializeResult:
    """Fit check of every workload of the day against every platform x placement."""
    day = context.partition_key
    home = fleet.data_home()
    fit = analytics.hardware_fit(lake.read_partition(home, "runs", day), day, fleet.hardware())
    return _written(
        lake.write_partition(home, "hardware_fit", day, fit),
        fit,
        options_that_fit=int(fit["fits"].sum()),
        options_short=int((~fit["fits"]).sum()),
    )


@dg.multi_asset(
    name="merged_utilisation",
    specs=[
        dg.AssetSpec(t, deps=["util_distribution"], **out_attrs(t, {"duckdb", "parquet"}))
        for t in ("util_summary", "trainer_vs_ps")
    ],
)
def merged_utilisation(fleet: FleetHome):
    """Summaries and trainer-vs-PS comparison merged from every day's histograms."""
    home = fleet.data_home()
    summary, tvp = analytics.merged_summaries(analytics.table_relation(home, "util_distribution"))
    path = lake.write_table(home, "util_summary", summary)
    yield dg.MaterializeResult(
        asset_key="util_summary",
        metadata={
            "dagster/row_count": summary.height,
            "days_merged": len(lake.store(home).days("util_distribution")),
            "path": dg.MetadataValue.path(str(path)),
        },
    )
    overall = tvp.filter((tvp["model_name"] == "*") & (tvp["ps_role"] == "sparse_ps"))
    path = lake.write_table(home, "trainer_vs_ps", tvp)
    yield dg.MaterializeResult(
        asset_key="trainer_vs_ps",
        metadata={
            "dagster/row_count": tvp.height,
            "path": dg.MetadataValue.path(str(path)),
            "trainer_vs_sparse_ps": preview(overall.drop("ps_role", "model_name", "platform", "placement")),
            "paper_pattern_share": float(tvp["paper_pattern"].mean()) if tvp.height else 0.0,
        },
    )


@dg.asset(
    name="recommendations",
    deps=["runs", "hardware_fit"],
    **out_attrs("recommendations", {"scikitlearn", "parquet"}),
)
def recommendations(fleet: FleetHome) -> dg.MaterializeResult:
    """Per model family and objective: every platform x placement, ranked, with bands and explanations."""
    from pipelines.lib.analysis.recommend_fleet import fleet_recommendations_cached

    home = fleet.data_home()
    recs, correction, reused = fleet_recommendations_cached(home, fleet.hardware())
    top = recs.filter(recs["recommended"]).select(
        "model_name", "objective", "platform", "placement", "defaulted_inputs", "stack_flips", "explanation"
    )
    return _written(
        lake.write_table(home, "recommendations", recs),
        recs,
        top_recommendations=preview(top, rows=20),
        # answers resting on a platform's default software stack, and those it would change
        recommended_on_defaulted_stack=int((top["defaulted_inputs"] != "").sum()),
        recommendations_a_stack_would_change=int(top["stack_flips"].is_not_null().sum()),
        correction=dg.MetadataValue.text(correction["note"]),
        cv_mdape_corrected=correction["cv_mdape_corrected"],
        cv_mdape_analytical=correction["cv_mdape_analytical"],
        cv_band_coverage=correction["cv_band_coverage"],
        fleet_runs_used=correction["n_runs"],
        refitted=not reused,
    )
