"""Operating in Dagster: landing sensor, nightly schedule, blocking checks that stop downstream assets."""

import os

import dagster as dg
import polars as pl

import pipelines.lib.ingest as ingest_module
from pipelines.defs.resources import FleetHome
from pipelines.lib import lake
from tests.conftest import DAY


def _sensor(d, instance, home, cursor=None):
    sensor = d.resolve_sensor_def("landing_sensor")
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, definitions=d, resources={"fleet": FleetHome(home=str(home.root))}
    ) as ctx:
        return sensor.evaluate_tick(ctx)


def test_landing_sensor_requests_each_change_once(landed, definitions):
    with dg.instance_for_test() as instance:
        first = _sensor(definitions, instance, landed)
        assert [r.partition_key for r in first.run_requests] == [DAY]
        assert definitions.resolve_sensor_def("landing_sensor").job_name == "nightly"
        second = _sensor(definitions, instance, landed, first.cursor)
        assert second.run_requests == [] and "no new or changed" in second.skip_message
        # A re-delivered file (new mtime) and a file for a new day: one request each.
        f = next((landed.landing / "synthetic" / DAY).iterdir())
        os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
        new_day = landed.landing / "late" / "2026-11-21" / "runs.jsonl"
        new_day.parent.mkdir(parents=True)
        new_day.write_text('{"run_id": "x"}\n')
        third = _sensor(definitions, instance, landed, second.cursor)
        assert sorted(r.partition_key for r in third.run_requests) == [DAY, "2026-11-21"]
        assert len({r.run_key for r in third.run_requests}) == 2
        assert _sensor(definitions, instance, landed, third.cursor).run_requests == []


def test_landing_sensor_waits_for_days_that_are_not_partitions_yet(landed, definitions):
    future = landed.landing / "synthetic" / "2999-01-01" / "runs.jsonl"
    future.parent.mkdir(parents=True)
    future.write_text("{}\n")
    with dg.instance_for_test() as instance:
        tick = _sensor(definitions, instance, landed)
        assert [r.partition_key for r in tick.run_requests] == [DAY]
        assert "2999-01-01" not in tick.cursor  # requested later, once the day exists


def test_nightly_schedule_runs_the_previous_day_at_two(definitions):
    import datetime as dt

    schedule = definitions.resolve_schedule_def("nightly_schedule")
    with dg.instance_for_test() as instance:
        ctx = dg.build_schedule_context(
            instance=instance,
            scheduled_execution_time=dt.datetime(2026, 11, 21, 2, 0, tzinfo=dt.UTC),
        )
        data = schedule.evaluate_tick(ctx)
    assert [r.partition_key for r in data.run_requests] == ["2026-11-20"]


def test_failing_blocking_check_stops_downstream_and_keeps_bad_rows_out(landed, monkeypatch, definitions):
    real = ingest_module.ingest_day

    def with_duplicated_run(*args, **kwargs):  # simulates an ingest bug that lets a duplicate through
        result = real(*args, **kwargs)
        result.runs = pl.concat([result.runs, result.runs.head(1)])
        return result

    monkeypatch.setattr(ingest_module, "ingest_day", with_duplicated_run)
    d = definitions
    graph = d.resolve_asset_graph()
    daily = [
        k
        for k in graph.get_all_asset_keys()
        if graph.get(k).is_materializable and graph.get(k).partitions_def
    ]
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            d.assets,
            selection=daily,
            partition_key=DAY,
            instance=instance,
            resources={"fleet": FleetHome(home=str(landed.root))},
            raise_on_error=False,
        )
        assert not result.success
        failed = [c for c in result.get_asset_check_evaluations() if not c.passed]
        done = {m.asset_key.to_user_string() for m in result.get_asset_materialization_events()}
    assert [(c.asset_key.to_user_string(), c.check_name) for c in failed] == [("runs", "unique_key")]
    assert failed[0].metadata["duplicated_rows"].value == 2
    assert done == {
        "ingest_ledger",
        "quarantine",
        "extra_fields",
    }  # the explanation is written; nothing downstream ran
    assert not lake.partition_path(landed, "runs", DAY).exists()
    assert not lake.partition_path(landed, "run_role_stats", DAY).exists()
