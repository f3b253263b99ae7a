"""`fleet run` over awkward days: a day not over yet is reported and skipped, a day before the configured
partitions' start is still covered, and the rest of the run proceeds and publishes (issue: unknown
partitions used to crash the whole run)."""

import datetime as dt
import shutil

import dagster as dg

from pipelines.lib import lake
from pipelines.orchestrate import run_pipeline
from tests.conftest import DAY


def test_future_days_are_skipped_and_days_before_the_start_are_covered(landed, monkeypatch):
    tomorrow = (dt.datetime.now(dt.UTC).date() + dt.timedelta(days=1)).isoformat()
    shutil.copytree(landed.landing / "synthetic" / DAY, landed.landing / "synthetic" / tomorrow)
    monkeypatch.setenv("FLEET_PARTITIONS_START", "2026-11-25")  # after DAY: DAY is before the start
    notes: list[str] = []
    with dg.instance_for_test() as instance:
        result = run_pipeline(landed, [DAY, tomorrow], instance=instance, progress=notes.append)
        runs = [instance.get_run_by_id(r) for r in result.run_ids]
    assert result.days == [DAY]
    assert any(tomorrow in n and "skipped" in n for n in notes)
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
    assert lake.table_files(landed, "runs", DAY)
    assert not lake.table_files(landed, "runs", tomorrow)
    assert landed.catalog_path.exists() and landed.report_path.exists()
