"""Resources: the data home (lake, landing, warehouse, reports) and the catalogs, the alert webhook."""

import json
import os

import dagster as dg

from pipelines.lib.operations import alerts
from pipelines.lib.paths import DataHome
from pipelines.lib.procs import this_worker
from pipelines.lib.settings import IngestLimits
from pipelines.runs import WORKER_TAG
from workload_model.catalog import HardwareCatalog, ModelSpec, load_hardware, load_models


class FleetHome(dg.ConfigurableResource):
    """The data home and its lake, and the ingest limits. Empty ``home`` means ``$FLEET_HOME`` or
    ``./data``; empty ``lake`` means ``$FLEET_LAKE`` or the home's lake/ folder (``s3://bucket/prefix`` for
    object storage); empty ``ingest_limits`` means the ``$FLEET_<LIMIT>`` variables of the process that
    runs the step (else JSON of ``IngestLimits`` fields). Resolved when a step runs; `fleet run` sets all
    three in the run's configuration, so a day on a worker keeps the caller's."""

    home: str = ""
    lake: str = ""
    ingest_limits: str = ""

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        # Name the process that executes the run, so a run it leaves behind when killed is marked failed.
        run = context.run
        if run is not None and context.instance is not None and WORKER_TAG not in run.tags:
            context.instance.add_run_tags(run.run_id, {WORKER_TAG: this_worker()})

    def limits(self) -> IngestLimits:
        """The ingest limits this run was given, else those of this process's environment."""
        if self.ingest_limits:
            return IngestLimits(**json.loads(self.ingest_limits))
        return IngestLimits.resolve(os.environ)

    def data_home(self) -> DataHome:
        return DataHome.resolve(self.home or None, self.lake or None)

    def hardware(self) -> HardwareCatalog:
        """Built-in hardware catalog plus the user's machines in <home>/catalog/hardware.yaml."""
        return load_hardware(self.data_home().user_catalog_dir / "hardware.yaml")

    def models(self) -> dict[str, ModelSpec]:
        """Built-in model catalog plus the user's models in <home>/catalog/models.yaml."""
        return load_models(self.data_home().user_catalog_dir / "models.yaml")


class AlertWebhook(dg.ConfigurableResource):
    """A Slack-compatible incoming webhook. Its URL is read from the environment variable named here when an
    alert is sent (unset: alerts are off), so neither the UI nor a log ever shows it."""

    url_env: str = alerts.URL_ENV
    timeout_s: float = alerts.TIMEOUT_S

    def send(self, message: dict[str, str]) -> str:
        """Post ``message``; what happened, for the tick (``AlertNotSent`` when the webhook refused it)."""
        url = alerts.webhook_url(self.url_env)
        if url is None:
            return f"alert not sent: no webhook configured (set ${self.url_env})"
        alerts.post(url, message, self.timeout_s)
        return "alert sent to the webhook"


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources={"fleet": FleetHome(), "alerts_webhook": AlertWebhook()})
