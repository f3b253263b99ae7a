"""Alerts: a failed nightly run, or a nightly run whose blocking or error checks failed (samples that did not
arrive), posts one message to the configured webhook. Run status sensors, so they see every run of the
nightly job (the schedule's, the landing sensor's, `fleet run`'s) while the daemon runs."""

import dagster as dg

from pipelines.defs.jobs import nightly
from pipelines.defs.resources import AlertWebhook
from pipelines.lib.operations import alerts
from pipelines.runs import failed_checks


def _partition(run: dg.DagsterRun) -> str | None:
    return run.tags.get("dagster/partition")


@dg.run_failure_sensor(
    monitored_jobs=[nightly],
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="A failed nightly run (a failed blocking check fails it) posts why to the alert webhook "
    "($FLEET_ALERT_WEBHOOK_URL).",
)
def nightly_failure_alert(context: dg.RunFailureSensorContext, alerts_webhook: AlertWebhook):
    run = context.dagster_run
    checks = alerts.alertable(failed_checks(context.instance, run.run_id))
    message = alerts.run_message(
        run.job_name,
        _partition(run),
        run.run_id,
        failed=True,
        checks=checks,
        failure=context.failure_event.message,
    )
    return dg.SkipReason(f"run {run.run_id[:8]} failed: {alerts_webhook.send(message)}")


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    monitored_jobs=[nightly],
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="A nightly run that succeeded with a failed error check (samples that did not arrive for "
    "the runs: utilisation_samples/volume_matches_runs) posts it to the alert webhook.",
)
def nightly_check_alert(context: dg.RunStatusSensorContext, alerts_webhook: AlertWebhook):
    run = context.dagster_run
    checks = alerts.alertable(failed_checks(context.instance, run.run_id))
    if not checks:
        return dg.SkipReason(f"run {run.run_id[:8]}: every blocking and error check passed")
    message = alerts.run_message(run.job_name, _partition(run), run.run_id, failed=False, checks=checks)
    return dg.SkipReason(
        f"run {run.run_id[:8]}: {len(checks)} check(s) failed; {alerts_webhook.send(message)}"
    )
