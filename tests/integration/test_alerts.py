"""Alerts where operators look: a failed nightly run (a failed blocking check fails it) and a run whose
samples did not arrive post a Slack-compatible message to the configured webhook, here an HTTP server the test
starts on 127.0.0.1. The run status sensors are evaluated through Dagster's test API on real runs of the
nightly job. The webhook URL (a secret) is never logged, printed, or put in a message or a tick."""

import http.server
import json
import logging
import threading

import dagster as dg
import polars as pl
import pytest

import pipelines.lib.ingest.promote as ingest_module
from pipelines.defs.partitions import add_days
from pipelines.defs.resources import AlertWebhook
from pipelines.lib.operations import alerts
from tests.support.homes import DAY

SECRET = "T0000-B0000-not-a-real-token"


class Hook(http.server.BaseHTTPRequestHandler):
    received: list[dict] = []
    status = 200

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append({"path": self.path, "type": self.headers["Content-Type"], "body": body})
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args):  # the server's access log would print the path, i.e. the secret
        pass


@pytest.fixture
def webhook(monkeypatch):
    """A webhook on 127.0.0.1 (an ephemeral port) whose URL, with a secret path, is the configured one."""
    Hook.received, Hook.status = [], 200
    server = http.server.HTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(alerts.URL_ENV, f"http://127.0.0.1:{server.server_port}/services/{SECRET}")
    try:
        yield Hook
    finally:
        server.shutdown()
        server.server_close()


def _nightly_day(definitions, instance):
    graph = definitions.resolve_asset_graph()
    daily = [
        k
        for k in graph.get_all_asset_keys()
        if graph.get(k).is_materializable and graph.get(k).partitions_def
    ]
    job = definitions.resolve_job_def("nightly")
    add_days(instance, [DAY])
    return job.execute_in_process(
        asset_selection=daily, partition_key=DAY, instance=instance, raise_on_error=False
    )


def _evaluate(definitions, name: str, instance, result, event):
    sensor = definitions.resolve_sensor_def(name)
    context = dg.build_run_status_sensor_context(
        sensor_name=name,
        dagster_instance=instance,
        dagster_run=result.dagster_run,
        dagster_event=event,
        resources={"alerts_webhook": AlertWebhook()},
    )
    if name == "nightly_failure_alert":
        context = context.for_run_failure()
    return sensor(context)


class Records(logging.Handler):
    """Every log record of the process, formatted."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(self.format(record))


def _no_secret(*texts: str) -> None:
    for text in texts:
        assert SECRET not in text


def test_a_failed_blocking_check_fails_the_run_and_alerts(landed, definitions, webhook, monkeypatch, capsys):
    real = ingest_module.ingest_day

    def with_duplicated_run(*args, **kwargs):  # an ingest bug that lets a duplicate through
        result = real(*args, **kwargs)
        result.runs = pl.concat([result.runs, result.runs.head(1)])
        return result

    monkeypatch.setattr(ingest_module, "ingest_day", with_duplicated_run)
    logged = Records()
    logging.getLogger().addHandler(logged)
    monkeypatch.setattr(logging.getLogger(), "level", logging.DEBUG)
    with dg.instance_for_test() as instance:
        result = _nightly_day(definitions, instance)
        assert not result.success
        tick = _evaluate(
            definitions, "nightly_failure_alert", instance, result, result.get_run_failure_event()
        )
        logs = "\n".join(str(r.dagster_event or r.user_message) for r in instance.all_logs(result.run_id))
    assert "alert sent" in tick.skip_message
    (post,) = webhook.received
    assert post["path"] == f"/services/{SECRET}" and post["type"] == "application/json"
    text = json.loads(post["body"])["text"]
    assert f"the `nightly` run for {DAY} failed" in text
    assert "runs/unique_key (blocking)" in text
    logging.getLogger().removeHandler(logged)
    captured = capsys.readouterr()
    assert logged.lines  # the run and the sensor did log
    _no_secret(tick.skip_message, text, captured.out, captured.err, "\n".join(logged.lines), logs)


def test_samples_that_did_not_arrive_alert_after_a_successful_run(
    landed, small_day, definitions, webhook, capsys
):
    samples = landed.landing / "synthetic" / DAY / "utilisation_samples.jsonl"
    kept = set(small_day.runs["run_id"].head(6).to_list())
    lines = [ln for ln in samples.read_text().splitlines() if ln.split('"run_id":"')[1].split('"')[0] in kept]
    samples.write_text("\n".join(lines) + "\n")
    with dg.instance_for_test() as instance:
        result = _nightly_day(definitions, instance)
        assert result.success  # an error check, not a blocking one
        tick = _evaluate(definitions, "nightly_check_alert", instance, result, result.get_run_success_event())
    assert "1 check(s) failed; alert sent" in tick.skip_message
    (post,) = webhook.received
    text = json.loads(post["body"])["text"]
    assert f"the `nightly` run for {DAY} succeeded, but 1 check(s) failed" in text
    assert "utilisation_samples/volume_matches_runs (error): synthetic:" in text
    _no_secret(tick.skip_message, text, *capsys.readouterr())


def test_a_clean_run_sends_nothing_and_no_webhook_means_no_alert(landed, definitions, webhook, monkeypatch):
    with dg.instance_for_test() as instance:
        result = _nightly_day(definitions, instance)
        assert result.success
        tick = _evaluate(definitions, "nightly_check_alert", instance, result, result.get_run_success_event())
        assert "every blocking and error check passed" in tick.skip_message and webhook.received == []
        monkeypatch.delenv(alerts.URL_ENV)
        message = alerts.run_message("nightly", DAY, "abcdef0123", failed=True, checks=[])
        assert (
            AlertWebhook().send(message) == f"alert not sent: no webhook configured (set ${alerts.URL_ENV})"
        )


def test_a_webhook_that_refuses_is_an_error_without_the_url(webhook):
    webhook.status = 500
    with pytest.raises(alerts.AlertNotSent) as refused:
        AlertWebhook().send({"text": "x"})
    assert str(refused.value) == f"the webhook (${alerts.URL_ENV}) answered HTTP 500"
    with pytest.raises(alerts.AlertNotSent) as bad:
        alerts.post(f"ftp-ish://{SECRET}", {"text": "x"})
    _no_secret(str(refused.value), str(bad.value), repr(bad.value.__cause__), repr(bad.value.__context__))


def test_only_blocking_and_error_checks_alert():
    checks = [
        alerts.FailedCheck("runs", "unique_key", "error", True, "2 duplicated rows"),
        alerts.FailedCheck(
            "utilisation_samples", "volume_matches_runs", "error", False, "synthetic: 6 of 12"
        ),
        alerts.FailedCheck("runs", "row_count_vs_trailing_week", "warn", False, "0.2x"),
    ]
    assert [c.check for c in alerts.alertable(checks)] == ["unique_key", "volume_matches_runs"]
