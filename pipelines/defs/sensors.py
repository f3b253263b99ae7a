"""Landing sensor: a new, changed or removed landing file requests the nightly job for its day, once.
Dead-run sensor: runs left behind by a killed process are marked failed, so the run queue never blocks."""

import json

import dagster as dg

from pipelines.defs.jobs import nightly
from pipelines.defs.resources import FleetHome
from pipelines.lib.monitoring import Signature, changed_days, landing_inventory, waiting_days_reason
from pipelines.runs import day_handled_since, fail_dead_runs


def _partition_keys(context: dg.SensorEvaluationContext) -> list[str]:
    """The nightly job's partitions as loaded (their start is set when the code location loads)."""
    return context.repository_def.get_job(nightly.name).partitions_def.get_partition_keys()


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
    "requested again. A tick without runs says why (a day before the first partition needs a reload).",
)
def landing_sensor(context: dg.SensorEvaluationContext, fleet: FleetHome):
    current = landing_inventory(fleet.data_home())
    if context.cursor is None:
        previous = _seed(context.instance, current)
    else:
        previous = {k: tuple(v) for k, v in json.loads(context.cursor).items()}
    keys = _partition_keys(context)
    valid = set(keys)
    requests, skipped, handled = [], [], []
    for change in changed_days(previous, current):
        if change.day not in valid:
            skipped.append(change.day)
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
    waiting = waiting_days_reason(skipped, keys[0] if keys else None, keys[-1] if keys else None)
    if skipped:
        # Not a partition (yet): leave these out of the cursor so they are requested once their day exists
        # (or the code location is reloaded); every tick without runs says so in its skip reason.
        context.log.warning(waiting)
        for rel in [r for r in cursor if r.split("/")[1] in skipped]:
            if rel in previous:
                cursor[rel] = previous[rel]
            else:
                del cursor[rel]
    if not requests:
        reason = "no new or changed landing files" + (
            f" (already queued or ingested: {', '.join(handled)})" if handled else ""
        )
        if waiting:
            reason = f"{waiting}. Otherwise {reason}"
        return dg.SensorResult(skip_reason=dg.SkipReason(reason), cursor=json.dumps(cursor))
    return dg.SensorResult(run_requests=requests, cursor=json.dumps(cursor))


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
