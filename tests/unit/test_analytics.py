"""The day's statistics in SQL (sql/transforms) against the same statistics computed directly in polars."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from pipelines.lib.analysis import analytics
from pipelines.lib.contracts import resources

UTIL = [f"{r}_util" for r in resources()]  # every resource of the contract
SYSTEM = ["model_name", "platform", "placement"]


def _typed(day) -> tuple[pl.DataFrame, pl.DataFrame]:
    ts = pl.col("ts")
    samples = day.samples.with_columns(
        ts.str.to_datetime(time_zone="UTC") if day.samples.schema["ts"] == pl.String else ts
    )
    return day.runs, samples


def _with_mixed_gpu_servers(runs: pl.DataFrame, samples: pl.DataFrame) -> pl.DataFrame:
    """One server of a role with GPU values and one without: a resource counts only servers that have it."""
    rid = runs["run_id"][0]
    t0 = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
    extra = pl.DataFrame(
        {
            "run_id": [rid] * 4,
            "server_id": ["g1", "g1", "n1", "n1"],
            "role": ["reader"] * 4,
            "ts": [t0, t0 + dt.timedelta(minutes=5)] * 2,
            **{c: [0.1, 0.9, 0.3, 0.5] for c in UTIL[:4]},
            "gpu_util": [0.2, 0.4, None, None],
            "gpu_mem_util": [0.7, None, None, None],
        }
    )
    both = pl.concat([samples.select(extra.columns), extra.cast(samples.select(extra.columns).schema)])
    return analytics.with_resource_columns(both)


def _long(runs: pl.DataFrame, samples: pl.DataFrame) -> pl.DataFrame:
    return (
        samples.unpivot(
            UTIL, index=["run_id", "server_id", "role"], variable_name="resource", value_name="util"
        )
        .drop_nulls("util")
        .with_columns(pl.col("resource").str.strip_suffix("_util"))
        .join(runs.select("run_id", *SYSTEM), on="run_id")
    )


@pytest.fixture
def day_frames(small_day):
    runs, samples = _typed(small_day)
    return runs, _with_mixed_gpu_servers(runs, samples)


def test_run_role_stats_match_a_direct_computation(day_frames):
    runs, samples = day_frames
    got = analytics.run_role_stats(
        runs, samples, "2026-11-20", analytics.server_windows(samples, "2026-11-20")
    )
    want = (
        _long(runs, samples)
        .group_by("run_id", *SYSTEM, "role", "resource")
        .agg(
            pl.col("server_id").n_unique().cast(pl.Int32).alias("n_servers"),
            pl.len().alias("n_samples"),
            pl.col("util").mean().alias("mean_util"),
            pl.col("util").quantile(0.5, "linear").alias("p50_util"),
            pl.col("util").quantile(0.95, "linear").alias("p95_util"),
            pl.col("util").max().alias("max_util"),
        )
    )
    keys = ["run_id", "role", "resource"]
    joined = got.join(want, on=keys, how="full", suffix="_want", coalesce=True)
    assert got.height == want.height == joined.height
    assert (joined["n_servers"] == joined["n_servers_want"]).all()
    assert (joined["n_samples"] == joined["n_samples_want"].cast(joined["n_samples"].dtype)).all()
    for c in ["mean_util", "p50_util", "p95_util", "max_util"]:
        assert (joined[c] - joined[f"{c}_want"]).abs().max() < 1e-12, c
    for c in SYSTEM:
        assert (joined[c] == joined[f"{c}_want"]).all()
    readers = got.filter(pl.col("run_id") == runs["run_id"][0], pl.col("role") == "reader")
    counts = dict(zip(readers["resource"], readers["n_servers"], strict=True))
    assert counts["gpu"] < counts["cpu"] and counts["gpu_mem"] <= counts["gpu"]


def test_sample_histograms_match_a_direct_computation(day_frames):
    runs, samples = day_frames
    stats = analytics.run_role_stats(
        runs, samples, "2026-11-20", analytics.server_windows(samples, "2026-11-20")
    )
    got = analytics.util_distribution(runs, samples, stats, "2026-11-20").filter(
        pl.col("statistic") == "sample"
    )
    n = analytics.n_bins()
    want = (
        _long(runs, samples)
        .with_columns(((pl.col("util") * n).floor().cast(pl.Int64).clip(upper_bound=n - 1)).alias("bin"))
        .group_by("role", "resource", *SYSTEM, "bin")
        .len("n_want")
    )
    keys = ["role", "resource", *SYSTEM, "bin"]
    joined = got.with_columns(pl.col("bin").cast(pl.Int64)).join(want, on=keys, how="full", coalesce=True)
    assert got.height == want.height == joined.height
    assert (joined["n"] == joined["n_want"].cast(joined["n"].dtype)).all()
    assert got["n"].sum() == samples.select(pl.sum_horizontal(pl.col(UTIL).is_not_null())).sum().item()


def test_server_windows_match_a_direct_computation(day_frames):
    _, samples = day_frames
    got = analytics.server_windows(samples, "2026-11-20")
    hour = pl.col("ts").dt.truncate("1h").alias("window_start")
    want = samples.group_by("run_id", "server_id", "role", hour).agg(
        pl.len().alias("n_samples"),
        pl.col("ts").min().alias("first_ts"),
        pl.col("ts").max().alias("last_ts"),
        *[pl.col(c).mean() for c in UTIL],
    )
    keys = ["run_id", "server_id", "window_start"]
    joined = got.join(want, on=keys, how="full", suffix="_want", coalesce=True)
    assert got.height == want.height == joined.height
    assert analytics.window_s() == 3600
    for c in ["role", "n_samples", "first_ts", "last_ts"]:
        assert (joined[c] == joined[f"{c}_want"].cast(joined[c].dtype)).all(), c
    for c in UTIL:
        assert ((joined[c] - joined[f"{c}_want"]).abs().fill_null(0).max() or 0) < 1e-12, c
        assert (joined[c].is_null() == joined[f"{c}_want"].is_null()).all(), c
