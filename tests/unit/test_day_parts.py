"""A day's statistics computed per part (each Parquet file of the day's samples) and merged equal the same
statistics computed over the day as one file: server windows, per-run statistics (exact p50 and p95, also
for runs whose samples lie in several parts) and histograms, whatever the cut."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.lib.analysis import analytics
from pipelines.lib.analysis.analytics import LakeFiles
from tests.support.hypo import examples
from tests.support.lake_state import assert_same

DAY = "2026-11-20"


@pytest.fixture(scope="module")
def typed_day(small_day):
    samples = small_day.samples
    if samples.schema["ts"] == pl.String:
        samples = samples.with_columns(pl.col("ts").str.to_datetime(time_zone="UTC"))
    samples = analytics.with_resource_columns(samples)
    # a resource with no value in some windows and parts: its means are null, its servers not counted
    samples = samples.with_columns(
        pl.when(pl.int_range(pl.len()) % 7 == 0).then(None).otherwise(pl.col("gpu_util")).alias("gpu_util")
    )
    return small_day.runs, samples


def _day(
    runs: pl.DataFrame, samples: analytics.Relation, quantile_values: int = 64_000_000
) -> dict[str, pl.DataFrame]:
    windows = analytics.server_windows(samples, DAY)
    stats = analytics.run_role_stats(runs, samples, DAY, windows, quantile_values=quantile_values)
    return {
        "server_windows": windows,
        "run_role_stats": stats,
        "util_distribution": analytics.util_distribution(runs, samples, stats, DAY),
    }


def _files(folder: Path, pieces: list[pl.DataFrame]) -> LakeFiles:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, piece in enumerate(pieces):
        path = folder / f"part-{k}.parquet"
        piece.write_parquet(path)
        paths.append(str(path))
    return LakeFiles(tuple(paths))


def _assert_same_day(got: dict, want: dict) -> None:
    for name in want:
        assert want[name].height > 0
        assert_same(got[name], want[name], name)


@pytest.fixture(scope="module")
def whole(typed_day, tmp_path_factory):
    runs, samples = typed_day
    return _day(runs, _files(tmp_path_factory.mktemp("whole"), [samples]))


@pytest.mark.parametrize("order", ["delivered", "by_time"])  # runs mostly in one part; every run in each
def test_a_day_in_parts_equals_the_day_in_one_file(typed_day, whole, tmp_path, order):
    runs, samples = typed_day
    if order == "by_time":
        samples = samples.sort("ts")
    cut = [samples.height * k // 5 for k in range(6)]
    pieces = [samples.slice(cut[k], cut[k + 1] - cut[k]) for k in range(5)]
    parts = _files(tmp_path, pieces)
    assert len(analytics.day_parts(parts)) == 5
    _assert_same_day(_day(runs, parts), whole)


@settings(
    max_examples=examples(12),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    n_parts=st.integers(1, 6),
    seed=st.integers(0, 2**31 - 1),
    empty=st.booleans(),
    batches=st.sampled_from([1, 2, 5]),
)
def test_any_cut_of_the_rows_into_parts_merges_to_the_whole_day(
    typed_day, whole, tmp_path_factory, n_parts, seed, empty, batches
):
    """Whatever the cut, and whether the exact quantiles are taken over the whole part or over batches of
    runs (about a ``batches``-th of the day's values each, in the parts and across them)."""
    runs, samples = typed_day
    label = pl.Series("part", pl.int_range(samples.height, eager=True).shuffle(seed) % n_parts)
    pieces = [samples.filter(label == k) for k in range(n_parts)]
    if empty:
        pieces.append(samples.clear())  # a part with no rows at all
    parts = _files(tmp_path_factory.mktemp("cut"), pieces)
    values = sum(samples[c].count() for c in samples.columns if c.endswith("_util"))
    budget = 64_000_000 if batches == 1 else values // batches
    _assert_same_day(_day(runs, parts, budget), whole)


@pytest.mark.parametrize("n_parts", [1, 3])
def test_quantiles_over_batches_of_runs_equal_them_over_the_whole_day(typed_day, whole, tmp_path, n_parts):
    """The smallest budget (every run a batch of its own): the same statistics, exactly."""
    runs, samples = typed_day
    sorted_by_time = samples.sort("ts")  # every run in every part: its quantiles are taken again
    cut = [samples.height * k // n_parts for k in range(n_parts + 1)]
    parts = _files(tmp_path, [sorted_by_time.slice(cut[k], cut[k + 1] - cut[k]) for k in range(n_parts)])
    assert samples["run_id"].n_unique() > 5
    _assert_same_day(_day(runs, parts, 1), whole)


@settings(max_examples=examples(200), deadline=None, derandomize=True)
@given(
    sizes=st.lists(st.integers(0, 1_000), max_size=40),
    budget=st.integers(1, 3_000),
)
def test_run_batches_cover_every_run_once_in_order_within_the_budget(sizes, budget):
    values = pl.DataFrame(
        {"run_id": [f"r{i:03d}" for i in range(len(sizes))], "n_values": sizes},
        schema={"run_id": pl.String, "n_values": pl.Int64},
    )
    batches = analytics.run_batches(values, budget)
    assert (
        pl.concat([values.clear().select("run_id"), *batches])["run_id"].to_list()
        == values["run_id"].to_list()
    )
    held = dict(zip(values["run_id"], values["n_values"], strict=True))
    for batch in batches:
        ids = batch["run_id"].to_list()
        assert ids
        assert sum(held[r] for r in ids) < budget + held[ids[-1]]


def test_a_group_in_several_parts_takes_its_quantiles_over_all_of_its_samples(typed_day, tmp_path):
    runs, samples = typed_day
    run = samples["run_id"][0]
    one = samples.filter(pl.col("run_id") == run, pl.col("role") == "trainer")
    # the low half in one part, the high half in another: each part's own median is far from the day's
    ordered = one.sort("cpu_util")
    half = ordered.height // 2
    parts = _files(tmp_path, [ordered.head(half), ordered.tail(ordered.height - half)])
    windows = analytics.server_windows(parts, DAY)
    got = analytics.run_role_stats(runs, parts, DAY, windows).filter(pl.col("resource") == "cpu")
    values = one["cpu_util"]
    assert got["p50_util"].item() == pytest.approx(values.quantile(0.5, "linear"), rel=1e-12)
    assert got["p95_util"].item() == pytest.approx(values.quantile(0.95, "linear"), rel=1e-12)
    assert got["n_samples"].item() == one.height
    assert got["max_util"].item() == values.max()
