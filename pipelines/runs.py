"""Dagster runs seen from operations: which process executes a run (so a run left by a killed process is
marked failed and holds neither a slot of the run queue nor one of a pool), and whether a landing day is
already handled (so the landing sensor and the nightly schedule never queue the same day twice)."""

from __future__ import annotations

import datetime as dt

import dagster as dg

from pipelines.lib.operations.alerts import FailedCheck
from pipelines.lib.procs import worker_alive

WORKER_TAG = "fleet/worker"
WAREHOUSE_POOL = "warehouse"  # the analyst-catalog writer's pool (one at a time)
# Runs that hold a slot of the run queue; a QUEUED run has no process yet and is left alone.
UNFINISHED = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, *UNFINISHED]
FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
HANDLED_BY = "ingest_ledger"  # written for a day whenever its landing files were read


def fail_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark failed every unfinished run whose process (``fleet/worker`` tag) is gone and free the pool
    slots of every run that is over; returns the ids of the runs marked failed."""
    failed = []
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=UNFINISHED)):
        worker = run.tags.get(WORKER_TAG)
        if worker and worker_alive(worker) is False:
            instance.report_run_failed(
                run,
                message=f"the process that executed this run ({worker}) is gone (killed?); "
                "marked failed so the run queue moves on. Re-run the day to redo it.",
            )
            failed.append(run.run_id)
    free_slots_of_finished_runs(instance)
    return failed


def free_slots_of_finished_runs(instance: dg.DagsterInstance) -> list[str]:
    """Give back the pool slots (and queued claims) of runs that are over: a run killed while it held the
    warehouse slot would otherwise keep it, and every later catalog writer would wait forever."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return []
    holders = storage.get_concurrency_run_ids()
    if not holders:
        return []
    over = [
        r.run_id
        for r in instance.get_runs(filters=dg.RunsFilter(run_ids=list(holders), statuses=list(FINISHED)))
    ]
    for run_id in over:
        storage.free_concurrency_slots_for_run(run_id)
    return over


def pool_holders(instance: dg.DagsterInstance, pool: str) -> list[str] | None:
    """Runs holding every slot of ``pool`` (None when a slot is free)."""
    info = instance.event_log_storage.get_concurrency_info(pool)
    if not info.slot_count or len(info.claimed_slots) < info.slot_count:
        return None
    return [c.run_id for c in info.claimed_slots]


def pending_in_pool(instance: dg.DagsterInstance, pool: str, run_id: str) -> bool:
    """Whether ``run_id`` waits for a slot of ``pool``."""
    info = instance.event_log_storage.get_concurrency_info(pool)
    return any(p.run_id == run_id and p.assigned_timestamp is None for p in info.pending_steps)


def day_handled_since(instance: dg.DagsterInstance, job_name: str, day: str, since_ns: int) -> bool:
    """True when ``day`` was ingested at or after ``since_ns`` (epoch ns: its last landing change), or a
    run of ``job_name`` for it was created since and is queued or running: nothing new to request."""
    since = since_ns / 1e9
    done = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(HANDLED_BY), asset_partitions=[day]), limit=1
    ).records
    if done and done[0].timestamp >= since:
        return True
    pending = instance.get_runs_count(
        filters=dg.RunsFilter(
            job_name=job_name,
            tags={"dagster/partition": day},
            statuses=IN_FLIGHT,
            created_after=dt.datetime.fromtimestamp(since, dt.UTC),
        )
    )
    return pending > 0


def failed_checks(instance: dg.DagsterInstance, run_id: str) -> list[FailedCheck]:
    """The asset checks that did not pass in a run, from its event log."""
    out = []
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        e = record.dagster_event.event_specific_data
        if not e.passed:
            out.append(
                FailedCheck(
                    e.asset_key.to_user_string(),
                    e.check_name,
                    e.severity.value.lower(),
                    bool(e.blocking),
                    e.description or "",
                )
            )
    return out
