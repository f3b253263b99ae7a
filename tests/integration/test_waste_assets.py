"""The waste assets in the real Dagster graph (temporary instance and data home): per-day metadata with the
servers and kW recoverable, fleet totals merged from the days, and targets overridden by run config."""

import dagster as dg
import polars as pl
import pytest

from pipelines.defs.partitions import add_days
from pipelines.defs.resources import FleetHome
from pipelines.lib.storage import lake
from tests.support.homes import DAY


def _metadata(result, key: str) -> dict:
    (event,) = [m for m in result.get_asset_materialization_events() if m.asset_key.to_user_string() == key]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_waste_assets_report_per_day_and_merged_totals(materialized_home, materialized_copy, definitions):
    _, daily, merged = materialized_home
    home = materialized_copy  # the stricter target below rewrites run_efficiency
    eff = lake.read_partition(home, "run_efficiency", DAY)
    found = lake.read_partition(home, "server_outliers", DAY)
    meta = _metadata(daily, "run_efficiency")
    assert meta["servers_recoverable"] == eff["servers_recoverable"].sum() > 0
    assert meta["provisioned_kw_recoverable"] == pytest.approx(
        eff["provisioned_w_recoverable"].sum() / 1000, abs=0.05
    )
    assert meta["servers_held"] == eff["n_servers"].sum() and meta["target_p95_util"] == 0.8
    outliers = _metadata(daily, "server_outliers")
    assert outliers["stragglers"] + outliers["hot_shards"] == found.height
    assert _metadata(daily, "server_windows")["servers"] > 0
    summary = lake.read_table(home, "waste_summary")
    totals = _metadata(merged, "waste_summary")
    assert (
        totals["servers_recoverable"]
        == summary["servers_recoverable"].sum()
        == eff["servers_recoverable"].sum()
    )
    assert summary["outlier_servers"].sum() == found.height and totals["days_merged"] == 1

    # A stricter target for one materialisation: more servers kept, recorded in the table and metadata.
    with dg.instance_for_test() as instance:
        add_days(instance, [DAY])
        res = dg.materialize(
            definitions.assets,
            selection=["run_efficiency"],
            partition_key=DAY,
            instance=instance,
            resources={"fleet": FleetHome(home=str(home.root))},
            run_config={"ops": {"day_waste": {"config": {"target_p95_util": 0.5}}}},
        )
    assert res.success
    strict = lake.read_partition(home, "run_efficiency", DAY)
    assert (
        set(strict["target_p95_util"]) == {0.5} and _metadata(res, "run_efficiency")["target_p95_util"] == 0.5
    )
    both = eff.join(strict, on=["run_id", "role"], suffix="_strict")
    assert (both["right_sized_servers_strict"] >= both["right_sized_servers"]).all()
    assert strict["servers_recoverable"].sum() < eff["servers_recoverable"].sum()
    assert set(strict["basis"]) == {"workload_model"}


def test_pai_parameter_servers_are_held_but_not_judged_without_utilisation(home, hw, models):
    """The PAI slice has roles and counts but no utilisation (its sensor table is not public in git): the
    analysis calls none of its parameter servers oversized, and says they were not judged."""
    from pipelines.lib.analysis import analytics, waste
    from pipelines.lib.ingest import adapters, ingest_partition
    from tests.support.homes import PAI_SLICE
    from workload_model.catalog import load_hardware

    days = adapters.deliver(adapters.adapt_pai(PAI_SLICE), home)
    platforms = load_hardware(home.user_catalog_dir / "hardware.yaml")
    for day in days:
        ingest_partition(home, day, platforms.platforms)
    parts = []
    for day in days:
        stats = lake.read_partition(home, "run_role_stats", day)  # no samples: never written, empty
        windows = analytics.partition_relation(home, "server_windows", day)
        runs = lake.read_partition(home, "runs", day)
        parts.append(
            waste.run_efficiency(runs, stats, windows, day, platforms, models, waste.Targets.defaults())
        )
    eff = pl.concat(parts)
    assert set(eff["basis"]) == {"no_telemetry"} and eff["servers_recoverable"].is_null().all()
    share = waste.ps_oversized_share(eff).row(0, named=True)
    held = lake.read_table(home, "runs").filter(pl.col("n_sparse_ps") > 0)
    assert held.height >= 40  # the slice's 45 PS-based jobs, less any ingest quarantined
    assert (share["source"], share["runs"], share["ps_held"]) == (
        "pai",
        held.height,
        held["n_sparse_ps"].sum(),
    )
    assert share["ps_judged"] == 0 and share["ps_not_judged"] == share["ps_held"]
    assert share["share_oversized"] is None
