"""Operating in Dagster: landing sensor, nightly schedule, blocking checks that stop downstream assets."""

import datetime as dt
import json
import os
import shutil
import time
import uuid

import dagster as dg
import polars as pl

import pipelines.lib.ingest.promote as ingest_module
from pipelines.defs.partitions import add_days
from pipelines.defs.resources import FleetHome
from pipelines.lib.operations.monitoring import landing_inventory
from pipelines.lib.storage import lake
from tests.support.deadruns import instance_at
from tests.support.homes import DAY


def _sensor(d, instance, home, cursor=None):
    sensor = d.resolve_sensor_def("landing_sensor")
    with dg.build_sensor_context(
        instance=instance,
        instance_ref=instance.get_ref(),  # as the daemon's: run requests' day partitions resolve through it
        cursor=cursor,
        definitions=d,
        resources={"fleet": FleetHome(home=str(home.root))},
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


def test_landing_sensor_tick_says_why_a_day_is_not_requested(home, definitions):
    """The tick's skip reason (what the UI shows for a tick with no runs) names a day not over yet, and a
    later tick says it again."""
    f = home.landing / "synthetic" / "2999-01-01" / "runs.jsonl"
    f.parent.mkdir(parents=True)
    f.write_text("{}\n")
    with dg.instance_for_test() as instance:
        tick = _sensor(definitions, instance, home)
        assert tick.run_requests == [] and not tick.dynamic_partitions_requests
        assert "2999-01-01 not over yet (UTC)" in tick.skip_message
        assert "no new or changed landing files" in tick.skip_message
        again = _sensor(definitions, instance, home, tick.cursor)
        assert again.run_requests == [] and "2999-01-01 not over yet" in again.skip_message


def _schedule(d, instance, home):
    schedule = d.resolve_schedule_def("nightly_schedule")
    with dg.build_schedule_context(
        instance=instance,
        scheduled_execution_time=dt.datetime(2026, 11, 21, 2, 0, tzinfo=dt.UTC),
        resources={"fleet": FleetHome(home=str(home.root))},
        repository_def=d.get_repository_def(),
    ) as ctx:
        return schedule.evaluate_tick(ctx)


def test_nightly_schedule_runs_the_previous_day_at_two(landed, definitions):
    with dg.instance_for_test() as instance:
        data = _schedule(definitions, instance, landed)
    assert [r.partition_key for r in data.run_requests] == ["2026-11-20"]
    assert definitions.resolve_schedule_def("nightly_schedule").cron_schedule == "0 2 * * *"


def _queued(instance, day: str, trigger: str) -> None:
    instance.add_run(
        dg.DagsterRun(
            job_name="nightly",
            run_id=str(uuid.uuid4()),
            status=dg.DagsterRunStatus.NOT_STARTED,  # submitted, not yet picked up
            tags={"dagster/partition": day, "fleet/trigger": trigger},
        )
    )


def test_sensor_and_schedule_never_queue_the_same_day_twice(landed, definitions):
    with dg.instance_for_test() as instance:
        _queued(instance, DAY, "landing_sensor")  # the sensor queued the day after its files landed
        tick = _schedule(definitions, instance, landed)
        assert tick.run_requests == [] and "already queued or ingested" in tick.skip_message
    with dg.instance_for_test() as instance:
        _queued(instance, DAY, "schedule")  # the schedule queued it: the sensor does not add another
        first = _sensor(definitions, instance, landed, cursor="{}")
        assert first.run_requests == [] and DAY in first.skip_message
        # A file delivered after that run was queued is new work: requested.
        f = next((landed.landing / "synthetic" / DAY).iterdir())
        later = time.time_ns() + 10**9
        os.utime(f, ns=(later, later))
        assert [
            r.partition_key for r in _sensor(definitions, instance, landed, first.cursor).run_requests
        ] == [DAY]


def test_partitions_follow_what_landed(home, definitions):
    """A public trace from 2020 makes its own days partitions and nothing in between (not the ~2,460 daily
    partitions from its first day to today); the sensor adds them in the tick that requests them, the
    schedule the day it targets, and no reload of the code location is needed."""
    trace_days = ["2020-02-20", "2020-03-12"]
    for day in trace_days:
        f = home.landing / "pai" / day / "runs.jsonl"
        f.parent.mkdir(parents=True)
        f.write_text("{}\n")
    job = definitions.resolve_job_def("nightly")
    with dg.instance_for_test() as instance:
        assert job.partitions_def.get_partition_keys(dynamic_partitions_store=instance) == []
        tick = _sensor(definitions, instance, home)
        assert sorted(r.partition_key for r in tick.run_requests) == trace_days
        (request,) = tick.dynamic_partitions_requests
        assert (request.partitions_def_name, sorted(request.partition_keys)) == ("landing_days", trace_days)
        instance.add_dynamic_partitions(request.partitions_def_name, request.partition_keys)
        assert job.partitions_def.get_partition_keys(dynamic_partitions_store=instance) == trace_days
        # Days already partitions are not added again.
        f = home.landing / "pai" / trace_days[0] / "runs.jsonl"
        os.utime(f, ns=(time.time_ns(), time.time_ns() + 10**9))
        later = _sensor(definitions, instance, home, tick.cursor)
        assert [r.partition_key for r in later.run_requests] == trace_days[:1]
        assert not later.dynamic_partitions_requests
        # The schedule's day becomes a partition when it requests it (the sensor may be stopped).
        f = home.landing / "acme" / DAY / "runs.jsonl"  # the schedule's tick at 02:00 the day after
        f.parent.mkdir(parents=True)
        f.write_text("{}\n")
        run = _schedule(definitions, instance, home)
        assert [r.partition_key for r in run.run_requests] == [DAY]
        assert job.partitions_def.get_partition_keys(dynamic_partitions_store=instance) == [*trace_days, DAY]


def test_fleet_demo_runs_are_nightly_runs_and_the_sensor_then_has_nothing_to_do(demo_home, tmp_path):
    from pipelines.definitions import build_defs
    from pipelines.lib.paths import DataHome

    home, _ = demo_home
    instance = instance_at(home.root / "dagster_home")
    try:
        runs = instance.get_runs()
        days = sorted(p.name for p in (home.landing / "synthetic").iterdir())
        assert {r.job_name for r in runs} == {"nightly"}  # not __ephemeral_asset_job__
        assert sorted(r.tags["dagster/partition"] for r in runs) == sorted([*days, days[-1]])
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        # `fleet ui` right after the demo: the sensor's first tick re-processes nothing.
        assert instance.get_dynamic_partitions("landing_days") == days
        d = build_defs()
        first = _sensor(d, instance, home)
        assert first.run_requests == [] and set(json.loads(first.cursor)) == set(landing_inventory(home))
        # A re-delivered file afterwards is still noticed (in a copy of the landing: the demo stays as run).
        copy = DataHome.resolve(tmp_path / "home")
        shutil.copytree(home.landing, copy.landing)  # copy2: sizes and mtimes kept
        f = next((copy.landing / "synthetic" / days[0]).iterdir())
        os.utime(f, ns=(time.time_ns(), time.time_ns()))
        assert [r.partition_key for r in _sensor(d, instance, copy, first.cursor).run_requests] == [days[0]]
    finally:
        instance.dispose()


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
        add_days(instance, [DAY])
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
        "sample_volume",
    }  # the explanation is written; nothing downstream ran
    assert not lake.table_files(landed, "runs", DAY)
    assert not lake.table_files(landed, "run_role_stats", DAY)
