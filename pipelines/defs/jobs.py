"""The nightly job over the whole graph and its schedule (02:00 UTC, the previous day's partition)."""

import dagster as dg

from pipelines.defs.partitions import add_days, last_complete_day
from pipelines.defs.resources import FleetHome
from pipelines.lib.operations.monitoring import landing_inventory
from pipelines.runs import day_handled_since

nightly = dg.define_asset_job(
    "nightly",
    selection=dg.AssetSelection.all(),
    description="Ingest the previous UTC day, recompute its partials, merge, republish the catalog and the "
    "report.",
)


@dg.schedule(
    job=nightly,
    cron_schedule="0 2 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="02:00 UTC: the previous day's partition (added when its files landed), unless it has no "
    "landing files or the landing sensor already queued or ingested it since its files last changed. The "
    "tick says which day it targets.",
)
def nightly_schedule(context: dg.ScheduleEvaluationContext, fleet: FleetHome):
    day = last_complete_day(context.scheduled_execution_time)
    signatures = [
        sig for rel, sig in landing_inventory(fleet.data_home()).items() if rel.split("/")[1] == day
    ]
    if not signatures:
        return dg.SkipReason(
            f"no landing files for {day}: nothing to ingest, so no run (expected data did not arrive?)"
        )
    changed_at = max(sig[0] for sig in signatures)
    if day_handled_since(context.instance, nightly.name, day, changed_at):
        return dg.SkipReason(f"{day} is already queued or ingested since its landing files last changed")
    add_days(context.instance, [day])  # schedules cannot return partition requests; the sensor may be off
    return dg.RunRequest(run_key=f"nightly:{day}", partition_key=day, tags={"fleet/trigger": "schedule"})
