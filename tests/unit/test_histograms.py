"""Mergeable histograms: per-day partials merge exactly, and merged quantiles are within one bin of exact."""

import datetime as dt

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.lib.analysis import analytics
from pipelines.lib.paths import DataHome
from pipelines.lib.storage import lake
from tests.support.hypo import examples

UTIL = ["cpu_util", "mem_cap_util", "mem_bw_util", "net_bw_util"]
values = st.lists(st.floats(min_value=0, max_value=1, allow_nan=False), min_size=1, max_size=60)


def _day_frames(day: str, trainer: list[float], ps: list[float]) -> tuple[pl.DataFrame, pl.DataFrame]:
    start = dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC)
    runs = pl.DataFrame(
        {"run_id": [f"{day}-r"], "model_name": ["M1prod"], "platform": ["cpu"], "placement": ["remote_ps"]}
    )
    rows = [(f"{day}-r", "t0", "trainer", v, i) for i, v in enumerate(trainer)] + [
        (f"{day}-r", "p0", "sparse_ps", v, i) for i, v in enumerate(ps)
    ]
    samples = (
        pl.DataFrame(rows, schema=["run_id", "server_id", "role", "v", "i"], orient="row")
        .with_columns(
            (pl.lit(start) + pl.duration(minutes=pl.col("i") * 5)).alias("ts"),
            *[pl.col("v").alias(c) for c in UTIL],
            pl.lit(None, pl.Float64).alias("gpu_util"),
            pl.lit(None, pl.Float64).alias("gpu_mem_util"),
        )
        .drop("v", "i")
    )
    return runs, samples


def _summaries(tmp_path, days: list[tuple[list[float], list[float]]]):
    home = DataHome.resolve(tmp_path)
    for k, (trainer, ps) in enumerate(days):
        day = f"2026-01-{k + 1:02d}"
        runs, samples = _day_frames(day, trainer, ps)
        stats = analytics.run_role_stats(runs, samples, day, analytics.server_windows(samples, day))
        lake.write_partition(
            home, "util_distribution", day, analytics.util_distribution(runs, samples, stats, day)
        )
    return analytics.merged_summaries(analytics.table_relation(home, "util_distribution"))


@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(days=st.lists(st.tuples(values, values), min_size=1, max_size=4))
def test_merged_quantiles_within_one_bin_of_exact(tmp_path_factory, days):
    summary, _ = _summaries(tmp_path_factory.mktemp("h"), days)
    width = 1 / analytics.n_bins()
    for role, idx in (("trainer", 0), ("sparse_ps", 1)):
        exact = np.array([v for d in days for v in d[idx]])
        row = summary.filter(
            (pl.col("statistic") == "sample")
            & (pl.col("role") == role)
            & (pl.col("resource") == "cpu")
            & (pl.col("model_name") == "*")
        ).row(0, named=True)
        assert row["n"] == exact.size
        for q, col in (
            (0.05, "p5_util"),
            (0.25, "p25_util"),
            (0.5, "p50_util"),
            (0.75, "p75_util"),
            (0.95, "p95_util"),
            (0.99, "p99_util"),
        ):
            assert abs(row[col] - np.quantile(exact, q, method="inverted_cdf")) <= width + 1e-12
        assert abs(row["mean_util"] - exact.mean()) <= width / 2 + 1e-12
        assert row["iqr_util"] >= 0 and row["upper_tail_util"] >= 0


@settings(
    max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(days=st.lists(st.tuples(values, values), min_size=2, max_size=4))
def test_merging_days_equals_one_pooled_day(tmp_path_factory, days):
    """Splitting the same samples over days changes nothing in the merged summary (except the day range)."""
    pooled = [([v for d in days for v in d[0]], [v for d in days for v in d[1]])]
    split, _ = _summaries(tmp_path_factory.mktemp("s"), days)
    one, _ = _summaries(tmp_path_factory.mktemp("o"), pooled)
    cols = ["statistic", "role", "resource", "model_name", "n", "p5_util", "p50_util", "p95_util", "p99_util"]
    s = split.filter(pl.col("statistic") == "sample").select(cols).sort(cols[:4])
    o = one.filter(pl.col("statistic") == "sample").select(cols).sort(cols[:4])
    assert s.equals(o)


def test_trainer_vs_ps_compares_the_two_distributions(tmp_path):
    rng = np.random.default_rng(1)
    trainer = list(np.clip(rng.normal(0.6, 0.03, 400), 0, 1))
    ps = list(np.clip(rng.lognormal(np.log(0.3), 0.5, 400), 0, 1))
    _, tvp = _summaries(tmp_path, [(trainer, ps)])
    row = tvp.filter(
        (pl.col("ps_role") == "sparse_ps") & (pl.col("resource") == "cpu") & (pl.col("model_name") == "*")
    ).row(0, named=True)
    assert row["mean_diff_util"] < 0 and row["ps_iqr_util"] > row["trainer_iqr_util"]
    assert row["paper_pattern"] is True
    assert 0.8 < row["ks_statistic"] <= 1.0
