"""Landing sensor: a new, changed or removed landing file requests the nightly job for its day, once."""

import json

import dagster as dg

from pipelines.defs.jobs import nightly
from pipelines.defs.partitions import DAILY
from pipelines.defs.resources import FleetHome
from pipelines.lib.monitoring import changed_days, landing_inventory


@dg.sensor(
    job=nightly,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Watches <data home>/landing; one run per changed day (cursor = file signatures, run key = change).",
)
def landing_sensor(context: dg.SensorEvaluationContext, fleet: FleetHome):
    previous = {k: tuple(v) for k, v in json.loads(context.cursor or "{}").items()}
    current = landing_inventory(fleet.data_home())
    valid = set(DAILY.get_partition_keys())
    requests, skipped = [], []
    for change in changed_days(previous, current):
        if change.day not in valid:
            skipped.append(change.day)
            continue
        requests.append(
            dg.RunRequest(
                run_key=change.run_key,
                partition_key=change.day,
                tags={"fleet/trigger": "landing_sensor", "fleet/changed_files": str(len(change.files))},
            )
        )
    cursor = dict(current)
    if skipped:
        # Not yet a partition (today, or a bad folder name): leave these out of the cursor so they are
        # requested once their day exists; the nightly schedule covers today's files as well.
        context.log.warning(f"landing days not (yet) in the partition range: {', '.join(skipped)}")
        for rel in [r for r in cursor if r.split("/")[1] in skipped]:
            if rel in previous:
                cursor[rel] = previous[rel]
            else:
                del cursor[rel]
    if not requests:
        return dg.SensorResult(
            skip_reason=dg.SkipReason("no new or changed landing files"), cursor=json.dumps(cursor)
        )
    return dg.SensorResult(run_requests=requests, cursor=json.dumps(cursor))
