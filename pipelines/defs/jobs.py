"""The nightly job over the whole graph and its schedule (02:00 UTC, previous day's partition)."""

import dagster as dg

nightly = dg.define_asset_job(
    "nightly",
    selection=dg.AssetSelection.all(),
    description="Ingest the previous UTC day, recompute its partials, merge, republish the catalog and the report.",
)

nightly_schedule = dg.build_schedule_from_partitioned_job(
    nightly,
    hour_of_day=2,
    minute_of_hour=0,
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
