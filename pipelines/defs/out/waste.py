"""Out layer: where the fleet wastes machines. Per day: right-sizing per run and role, stragglers and hot
shards; merged over every day: fleet totals."""

import dagster as dg
import polars as pl

from pipelines.defs.metadata import preview
from pipelines.defs.out.assets import _written, out_attrs
from pipelines.defs.partitions import LANDING_DAYS
from pipelines.defs.resources import FleetHome
from pipelines.lib.analysis import analytics, waste
from pipelines.lib.paths import DataHome
from pipelines.lib.storage import lake


class WasteTargets(dg.Config):
    """Overrides of the targets for one materialisation (unset: the contracts' parameters,
    docs/how-to/right-sizing.md)."""

    target_p95_util: float | None = None
    straggler_ratio: float | None = None
    hot_shard_ratio: float | None = None
    sustained_share: float | None = None

    def targets(self) -> waste.Targets:
        return waste.Targets.defaults(**{k: v for k, v in self.model_dump().items() if v is not None})


def _kw(watts: pl.Series) -> float:
    return round(float(watts.sum() or 0) / 1000, 1)


@dg.multi_asset(
    name="day_waste",
    specs=[
        dg.AssetSpec(
            "run_efficiency",
            deps=["runs", "run_role_stats", "server_windows"],
            **out_attrs("run_efficiency", {"polars", "parquet"}),
        ),
        dg.AssetSpec(
            "server_outliers",
            deps=["runs", "server_windows"],
            **out_attrs("server_outliers", {"duckdb", "parquet"}),
        ),
    ],
    partitions_def=LANDING_DAYS,
    can_subset=True,
)
def day_waste(context: dg.AssetExecutionContext, fleet: FleetHome, config: WasteTargets):
    """The day's waste analyses, in one step so that the outliers' SQL runs beside the right-sizing:
    right-sizing per run and role (servers and provisioned kW recoverable), and stragglers and hot shards
    (which server, how long, how far off)."""
    day = context.partition_key
    home = fleet.data_home()
    wanted = {k.to_user_string() for k in context.selected_asset_keys}
    found = waste.day_waste(
        lake.read_partition(home, "runs", day),
        lake.read_partition(home, "run_role_stats", day) if "run_efficiency" in wanted else None,
        analytics.partition_relation(home, "server_windows", day),
        day,
        fleet.hardware(),
        fleet.models(),
        config.targets(),
        wanted,
    )
    if "run_efficiency" in found:
        yield _efficiency_result(home, day, found["run_efficiency"], config)
    if "server_outliers" in found:
        yield _outliers_result(home, day, found["server_outliers"])


def _efficiency_result(
    home: DataHome, day: str, eff: pl.DataFrame, config: WasteTargets
) -> dg.MaterializeResult:
    by_role = eff.group_by("role").agg(
        pl.col("n_servers").sum(),
        pl.col("servers_recoverable").sum(),
        (pl.col("provisioned_w_recoverable").sum() / 1000).round(1).alias("provisioned_kw_recoverable"),
    )
    top = eff.sort("servers_recoverable", descending=True, nulls_last=True).select(
        "run_id", "role", "n_servers", "right_sized_servers", "binding_resource", "binding_p95_util", "basis"
    )
    return _written(
        lake.write_partition(home, "run_efficiency", day, eff),
        eff,
        asset_key="run_efficiency",
        servers_recoverable=int(eff["servers_recoverable"].sum() or 0),
        provisioned_kw_recoverable=_kw(eff["provisioned_w_recoverable"]),
        servers_held=int(eff["n_servers"].sum() or 0),
        target_p95_util=float(config.targets().target_p95_util),
        by_role=preview(by_role.sort("role")),
        by_basis=dg.MetadataValue.json(
            dict(eff.group_by("basis").agg(pl.col("n_servers").sum()).iter_rows())
        ),
        top_runs=preview(top),
    )


def _outliers_result(home: DataHome, day: str, found: pl.DataFrame) -> dg.MaterializeResult:
    kinds = found["kind"]
    return _written(
        lake.write_partition(home, "server_outliers", day, found),
        found,
        asset_key="server_outliers",
        stragglers=int((kinds == "straggler").sum()),
        hot_shards=int((kinds == "hot_shard").sum()),
        runs_flagged=found["run_id"].n_unique(),
        preview=preview(found.select("run_id", "server_id", "kind", "resource", "ratio", "flagged_s")),
    )


@dg.asset(
    name="waste_summary",
    deps=["run_efficiency", "server_outliers"],
    **out_attrs("waste_summary", {"duckdb", "parquet"}),
)
def waste_summary(fleet: FleetHome) -> dg.MaterializeResult:
    """Fleet totals per day, model, platform and role, merged from every day's right-sizing and outliers."""
    home = fleet.data_home()
    summary = waste.waste_summary(
        analytics.table_relation(home, "run_efficiency"), analytics.table_relation(home, "server_outliers")
    )
    per_day = summary.group_by("day").agg(
        pl.col("servers_recoverable").sum(), pl.col("provisioned_kw_recoverable").sum().round(1)
    )
    return _written(
        lake.write_table(home, "waste_summary", summary),
        summary,
        days_merged=per_day.height,
        servers_recoverable=int(summary["servers_recoverable"].sum() or 0),
        provisioned_kw_recoverable=round(float(summary["provisioned_kw_recoverable"].sum() or 0), 1),
        per_day=preview(per_day.sort("day"), rows=31),
    )
