"""A day larger than a slice, ingested by the Dagster asset: read in slices, one step each, merged,
published as one day, its analyses taken from the aggregates the slices left; the lake equals the one the
same day read in one pass gives."""

import dataclasses
import json
import shutil

import dagster as dg
import pytest

from pipelines.defs.partitions import add_days
from pipelines.defs.resources import FleetHome
from pipelines.lib.paths import DataHome
from pipelines.lib.settings import DEFAULT_LIMITS
from pipelines.lib.storage import lake
from synthetic_fleet.sampler import sample_day
from synthetic_fleet.writers import write_day
from tests.support.homes import DAY
from tests.support.lake_state import assert_same_lakes

pytestmark = pytest.mark.usefixtures("night")


def _ingest(definitions, home: DataHome, **limits) -> dg.ExecuteInProcessResult:
    resource = FleetHome(
        home=str(home.root),
        ingest_limits=json.dumps(dataclasses.asdict(dataclasses.replace(DEFAULT_LIMITS, **limits))),
    )
    with dg.instance_for_test() as instance:
        add_days(instance, [DAY])
        return dg.materialize(
            definitions.assets,
            selection=dg.AssetSelection.groups("raw", "core") | dg.AssetSelection.assets("util_distribution"),
            partition_key=DAY,
            instance=instance,
            resources={"fleet": resource},
        )


def test_a_day_read_in_slices_publishes_the_day_read_in_one_pass(tmp_path, definitions, hw, models):
    split = DataHome.resolve(tmp_path / "split")
    write_day(sample_day(DAY, 8, 11, hw, models), split.landing, source="alpha", fmt="jsonl")
    write_day(sample_day(DAY, 6, 23, hw, models), split.landing, source="bravo", fmt="parquet")
    write_day(sample_day(DAY, 5, 31, hw, models), split.landing, source="charlie", fmt="csv", gzip_level=1)
    whole = DataHome.resolve(tmp_path / "whole")
    shutil.copytree(split.landing, whole.landing)

    # and each exact p50/p95 query over batches of runs of about 1,000 values, in the slices and the day
    result = _ingest(definitions, split, slice_bytes=1, quantile_values=1_000)
    assert result.success and all(c.passed for c in result.get_asset_check_evaluations())
    samples = next(
        m for m in result.get_asset_materialization_events() if m.asset_key.path == ["utilisation_samples"]
    )
    slices = samples.materialization.metadata["slices"].value
    assert len(slices) >= 3 and all(s["read_by"] and s["files"] >= 1 for s in slices)
    whole_result = _ingest(definitions, whole)
    assert whole_result.success
    meta = _metadata(whole_result, "run_role_stats")
    assert (meta["parts"], meta["parts_from_slices"]) == (1, 0)
    assert_same_lakes(split, whole)
    # the day was split: one sample file per slice (at least one per source), one before
    assert len(lake.table_files(split, "utilisation_samples", DAY)) >= 3
    assert len(lake.table_files(whole, "utilisation_samples", DAY)) == 1
    assert not list(split.staging.glob("split-*"))  # the slices' staging is gone once the day is published
    # the day's analyses read each slice's file as a part, from what the slice aggregated where it ran
    n_files = len(lake.table_files(split, "utilisation_samples", DAY))
    for name in ("server_windows", "run_role_stats", "util_distribution"):
        meta = _metadata(result, name)
        assert (meta["parts"], meta["parts_from_slices"]) == (n_files, n_files), name
    kept = split.partials_cache / f"day={DAY}"
    assert len(list(kept.iterdir())) == n_files  # one entry per published part, none of a lost reading


def _metadata(result: dg.ExecuteInProcessResult, name: str) -> dict:
    event = next(m for m in result.get_asset_materialization_events() if m.asset_key.path == [name])
    return {k: v.value for k, v in event.materialization.metadata.items()}
