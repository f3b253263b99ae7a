"""`fleet run` over awkward days: a day not over yet is reported and skipped, the days it runs become
partitions, and the rest of the run proceeds and publishes (issue: unknown partitions used to crash the
whole run)."""

import datetime as dt
import shutil

import dagster as dg
import pytest

from pipelines.lib import lake
from pipelines.orchestrate import run_pipeline
from tests.support.homes import DAY

pytestmark = pytest.mark.usefixtures("night")  # whole nights, in-process


def test_future_days_are_skipped_and_the_days_run_become_partitions(landed):
    tomorrow = (dt.datetime.now(dt.UTC).date() + dt.timedelta(days=1)).isoformat()
    shutil.copytree(landed.landing / "synthetic" / DAY, landed.landing / "synthetic" / tomorrow)
    notes: list[str] = []
    with dg.instance_for_test() as instance:
        result = run_pipeline(landed, [DAY, tomorrow], instance=instance, progress=notes.append)
        runs = [instance.get_run_by_id(r) for r in result.run_ids]
        assert instance.get_dynamic_partitions("landing_days") == [DAY]
    assert result.days == [DAY]
    assert any(f"added 1 landed day(s) as partitions ({DAY} .. {DAY})" in n for n in notes)
    assert any(tomorrow in n and "skipped" in n for n in notes)
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
    assert lake.table_files(landed, "runs", DAY)
    assert not lake.table_files(landed, "runs", tomorrow)
    assert landed.catalog_path.exists() and landed.report_path.exists()


def test_unchanged_days_are_skipped_and_named_and_force_redoes_them(landed):
    """`fleet run` after another source's delivery: the days whose landing files, code and catalogs did not
    change since a successful run of theirs are skipped (each said so), the merge only when nothing changed;
    a changed file redoes its day; ``force`` redoes every day."""
    second = "2026-11-21"
    shutil.copytree(landed.landing / "synthetic" / DAY, landed.landing / "other" / second)
    days = [DAY, second]
    with dg.instance_for_test() as instance:

        def run(force: bool = False) -> tuple:
            notes: list[str] = []
            return run_pipeline(landed, days, instance=instance, progress=notes.append, force=force), notes

        first, _ = run()
        assert first.days == days and first.unchanged == {} and first.merged

        again, notes = run()
        assert again.days == [] and set(again.unchanged) == set(days) and not again.merged
        for day in days:
            said = [n for n in notes if day in n and "unchanged" in n]
            assert said and "skipped (--force redoes it)" in said[0]
            assert again.unchanged[day][:8] in said[0]  # names the run that did it
        assert any("nothing changed since run" in n for n in notes)

        f = next((landed.landing / "other" / second).iterdir())  # a re-delivered file: a new mtime
        f.touch()
        changed, _ = run()
        assert changed.days == [second] and list(changed.unchanged) == [DAY] and changed.merged

        forced, _ = run(force=True)
        assert forced.days == days and forced.unchanged == {} and forced.merged
        statuses = {instance.get_run_by_id(r).status for r in forced.run_ids}
    assert statuses == {dg.DagsterRunStatus.SUCCESS}
