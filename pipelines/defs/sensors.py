"""Landing sensor: a new, changed or removed landing file requests the nightly job for its day, once.
Dead-run sensor: runs left behind by a killed process are marked failed, so the run queue never blocks."""

import json

import dagster as dg

from pipelines.defs.jobs import nightly
from pipelines.defs.partitions import LANDING_DAYS, new_days, split_complete
from pipelines.defs.resources import FleetHome
from pipelines.lib.operations.monitoring import Signature, changed_days, landing_inventory
from pipelines.runs import day_handled_since, fail_dead_runs


def _seed(instance: dg.DagsterInstance, current: dict[str, Signature]) -> dict[str, Signature]:
    """First tick: files whose day was already ingested after they last changed (by `fleet demo`, `fleet
    run` or an earlier instance of this sensor) count as seen, so opening the UI re-processes nothing."""
    by_day: dict[str, list[str]] = {}
    for rel in current:
        by_day.setdefault(rel.split("/")[1], []).append(rel)
    seen = {}
    for day, files in by_day.items():
        if day_handled_since(instance, nightly.name, day, max(current[f][0] for f in files)):
            seen.update({f: current[f] for f in files})
    return seen


@dg.sensor(
    job=nightly,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Watches <data home>/landing; one run per changed day (cursor = file signatures, run key = "
    "change). Its first tick counts days already ingested as seen; a day already queued or running is not "
    "requested again. A landed day that is over becomes a partition in the tick that requests it; a tick "
    "without runs says why (a day not over yet waits for its end).",
)
def landing_sensor(context: dg.SensorEvaluationContext, fleet: FleetHome):
    current = landing_inventory(fleet.data_home())
    if context.cursor is None:
        previous = _seed(context.instance, current)
    else:
        previous = {k: tuple(v) for k, v in json.loads(context.cursor).items()}
    changes = changed_days(previous, current)
    over, waiting = split_complete(c.day for c in changes)
    requests, handled = [], []
    for change in changes:
        if change.day not in over:
            continue
        changed_at = max(
            (sig[0] for rel, sig in current.items() if rel.split("/")[1] == change.day), default=0
        )
        if day_handled_since(context.instance, nightly.name, change.day, changed_at):
            handled.append(change.day)  # e.g. the nightly schedule queued it after the change
            continue
        requests.append(
            dg.RunRequest(
                run_key=change.run_key,
                partition_key=change.day,
                tags={"fleet/trigger": "landing_sensor", "fleet/changed_files": str(len(change.files))},
            )
        )
    cursor = dict(current)
    if waiting:
        context.log.info(f"landing day(s) {', '.join(waiting)} not over yet (UTC): requested once ended")
        # Leave these out of the cursor so they are requested once the day has ended.
        for rel in [r for r in cursor if r.split("/")[1] in waiting]:
            if rel in previous:
                cursor[rel] = previous[rel]
            else:
                del cursor[rel]
    adding = new_days(context.instance, {r.partition_key for r in requests})
    partition_requests = [LANDING_DAYS.build_add_request(adding)] if adding else []
    if not requests:
        reason = "no new or changed landing files" + (
            f" (already queued or ingested: {', '.join(handled)})" if handled else ""
        )
        if waiting:
            reason = (
                f"landing day(s) {', '.join(waiting)} not over yet (UTC): requested once the day has ended. "
                f"Otherwise {reason}"
            )
        return dg.SensorResult(skip_reason=dg.SkipReason(reason), cursor=json.dumps(cursor))
    return dg.SensorResult(
        run_requests=requests, dynamic_partitions_requests=partition_requests, cursor=json.dumps(cursor)
    )


@dg.sensor(
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Marks failed the runs whose process is gone (a killed `fleet run`, an OOM-killed run "
    "worker): they would hold slots of the run queue (2) forever and block the sensor's and schedule's runs.",
)
def dead_run_sensor(context: dg.SensorEvaluationContext):
    failed = fail_dead_runs(context.instance)
    if failed:
        context.log.warning(f"marked {len(failed)} run(s) of dead processes failed: {', '.join(failed)}")
    return dg.SkipReason(f"{len(failed)} dead run(s) marked failed" if failed else "no dead runs")
