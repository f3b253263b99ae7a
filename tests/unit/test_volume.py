"""Green means the data arrived: a day's samples against what its runs imply and against the trailing week,
per source; the ledger reconciles with every file of the day; the schedule launches no empty day."""

from __future__ import annotations

import datetime as dt
import json

import dagster as dg
import polars as pl

from pipelines.lib.ingest import day as day_module
from pipelines.lib.ingest import ingest_day, ingest_partition
from pipelines.lib.ingest.volume import day_volume, failing
from pipelines.lib.storage import lake
from tests.support.homes import DAY


def _runs(n: int, source: str = "acme", samples: int = 100, interval: float | None = 60.0) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "run_id": [f"{source}-{i}" for i in range(n)],
            "source": source,
            "declared_servers": pl.Series([2] * n, dtype=pl.Int64),
            "window_s": [60.0 * 49] * n,  # 50 samples per server at one a minute
            "samples": pl.Series([samples] * n, dtype=pl.Int64),
            "servers_seen": pl.Series([2 if samples else 0] * n, dtype=pl.Int64),
            "interval_s": [interval if samples else None] * n,
        }
    )


def test_runs_with_every_sample_pass():
    v = day_volume(DAY, _runs(3), {})
    assert v.select("status", "runs", "samples", "expected_samples", "coverage").rows() == [
        ("ok", 3, 300, 300, 1.0)
    ]


def test_a_run_without_samples_from_a_source_that_delivers_them_is_missing():
    runs = pl.concat([_runs(3), _runs(1, samples=0).with_columns(pl.lit("acme-9").alias("run_id"))])
    v = day_volume(DAY, runs, {})
    row = v.row(0, named=True)
    assert row["status"] == "missing" and row["runs_without_samples"] == 1
    assert "1 of 4 runs have no samples (acme-9)" in row["message"]
    assert failing(v).height == 1


def test_far_fewer_samples_than_the_runs_imply_is_low():
    v = day_volume(DAY, _runs(4, samples=30), {})  # 30 of 100 each
    row = v.row(0, named=True)
    assert row["status"] == "low" and row["runs_under_covered"] == 4
    assert abs(row["coverage"] - 0.3) < 1e-9
    assert "120 samples where the runs imply 400 (30%)" in row["message"]


def test_far_fewer_samples_than_the_trailing_week_is_low():
    v = day_volume(DAY, _runs(2), {"acme": [1000, 1100, 900, 1000]})
    row = v.row(0, named=True)
    assert row["status"] == "low" and row["trailing_median_samples"] == 1000.0
    assert "200 samples vs a trailing median of 1,000" in row["message"]


def test_a_source_that_never_delivers_samples_is_not_judged_but_one_that_stopped_is():
    runs_only = _runs(3, source="pai", samples=0)
    assert day_volume(DAY, runs_only, {}).row(0, named=True)["status"] == "not_judged"
    assert day_volume(DAY, runs_only, {"pai": [0, 0, 0]}).row(0, named=True)["status"] == "not_judged"
    stopped = day_volume(DAY, runs_only, {"pai": [0, 500, 0]}).row(0, named=True)
    assert stopped["status"] == "missing" and stopped["runs_without_samples"] == 3


def test_ingest_writes_the_day_volume_and_finds_missing_samples(landed, hw, small_day):
    ok = ingest_partition(landed, DAY, hw.platforms).result.sample_volume
    assert ok.select("source", "status").rows() == [("synthetic", "ok")]
    assert 0.9 < ok["coverage"][0] <= 1.0
    # the next day the producer's runs arrive but half of them without samples
    nxt = str(dt.date.fromisoformat(DAY) + dt.timedelta(days=1))
    runs = small_day.runs.with_columns(
        pl.col("run_id") + "-b",
        pl.col("start_ts", "end_ts").dt.offset_by("1d").dt.to_string("%Y-%m-%dT%H:%M:%SZ"),
    )
    keep = runs["run_id"].head(runs.height // 2)
    samples = small_day.samples.with_columns(
        pl.col("run_id") + "-b", pl.col("ts").dt.offset_by("1d").dt.to_string("%Y-%m-%dT%H:%M:%SZ")
    ).filter(pl.col("run_id").is_in(keep.implode()))
    folder = landed.landing / "synthetic" / nxt
    folder.mkdir(parents=True)
    (folder / "runs.jsonl").write_text(runs.write_ndjson())
    (folder / "utilisation_samples.jsonl").write_text(samples.write_ndjson())
    out = ingest_partition(landed, nxt, hw.platforms)
    v = lake.read_partition(landed, "sample_volume", nxt)
    row = v.row(0, named=True)
    assert row["status"] == "missing" and row["runs_without_samples"] == runs.height - keep.len()
    assert out.promoted  # the data that arrived is kept; the check says what did not


def test_reconciles_counts_every_file_of_the_day(landed, hw, small_day, monkeypatch):
    """A file delivered while the day is being read is not in the ledger: the day is not promoted."""
    real = day_module.Day.settle_samples

    def late_delivery(self):
        (landed.landing / "synthetic" / DAY / "runs-late.jsonl").write_text('{"run_id": "x"}\n')
        return real(self)

    monkeypatch.setattr(day_module.Day, "settle_samples", late_delivery)
    out = ingest_partition(landed, DAY, hw.platforms)
    check = next(c for c in out.checks if c.name == "reconciles")
    assert not check.passed and not out.promoted
    assert check.metadata["landing_files_not_in_ledger"] == [f"synthetic/{DAY}/runs-late.jsonl"]
    monkeypatch.undo()
    assert ingest_partition(landed, DAY, hw.platforms).promoted  # the next run reads it


def test_the_nightly_schedule_launches_no_day_without_landing_files(landed, definitions):
    from pipelines.defs.resources import FleetHome

    schedule = definitions.resolve_schedule_def("nightly_schedule")
    with dg.instance_for_test() as instance:
        for when, target, has_files in (
            ("2026-11-21T02:00:00", DAY, True),
            ("2026-11-20T02:00:00", "2026-11-19", False),
        ):
            with dg.build_schedule_context(  # closed, or Dagster keeps a dead instance's storage current
                instance=instance,
                scheduled_execution_time=dt.datetime.fromisoformat(when).replace(tzinfo=dt.UTC),
                resources={"fleet": FleetHome(home=str(landed.root))},
                repository_def=definitions.get_repository_def(),
            ) as ctx:
                data = schedule.evaluate_tick(ctx)
            if has_files:
                assert [r.partition_key for r in data.run_requests] == [target]
            else:
                assert not data.run_requests
                assert data.skip_message.startswith(f"no landing files for {target}")
        assert instance.get_dynamic_partitions("landing_days") == [DAY]  # none for a day without files


def test_ingest_of_a_day_in_the_cli_summary_names_what_did_not_arrive(landed, hw, small_day):
    from pipelines.lib.ingest.delivery import ingest_days

    runs = small_day.runs.with_columns(pl.col("start_ts", "end_ts").dt.to_string("%Y-%m-%dT%H:%M:%SZ"))
    (landed.landing / "synthetic" / DAY / "utilisation_samples.jsonl").unlink()
    (landed.landing / "synthetic" / DAY / "runs.jsonl").write_text(runs.write_ndjson())
    (landed.landing / "acme" / DAY).mkdir(parents=True)
    (landed.landing / "acme" / DAY / "runs.jsonl").write_text(
        json.dumps({**runs.row(0, named=True), "run_id": "acme-1"}) + "\n"
    )
    s = ingest_days(landed, [DAY])
    assert s.volume_problems == []  # no source delivered samples: runs only, not judged
    assert ingest_day(landed, DAY, hw.platforms).sample_volume["status"].to_list() == ["not_judged"] * 2
