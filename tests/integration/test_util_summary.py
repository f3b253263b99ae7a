"""util_summary has a row for every combination of model, platform and placement, '*' standing for every value
of a key (issue #44): the '*' rows reconcile with the per-system rows, and their quantiles are the pooled
histogram's (p90 included), not an average of the groups' quantiles. run_role_stats has an exact p90."""

from itertools import combinations

import duckdb
import numpy as np
import polars as pl
import pytest

from pipelines.lib.analysis import analytics

KEYS = ("model_name", "platform", "placement")
BASE = ("statistic", "role", "resource")
QUANTILES = {"p5_util": 0.05, "p25_util": 0.25, "p50_util": 0.5, "p75_util": 0.75, "p90_util": 0.9}
QUANTILES |= {"p95_util": 0.95, "p99_util": 0.99}
ROLLED = [set(s) for k in range(len(KEYS) + 1) for s in combinations(KEYS, k)]


@pytest.fixture(scope="module")
def views(catalog) -> dict[str, pl.DataFrame]:
    with duckdb.connect(str(catalog), read_only=True) as con:
        return {
            t: con.sql(f"FROM {t}").pl()
            for t in ("util_summary", "util_distribution", "run_role_stats", "utilisation_samples", "runs")
        }


def _rows(summary: pl.DataFrame, rolled: set[str]) -> pl.DataFrame:
    """The rows with '*' in exactly the keys of ``rolled``."""
    return summary.filter(*[(pl.col(k) == "*") == (k in rolled) for k in KEYS])


def test_every_combination_of_star_keys_has_its_rows_and_they_reconcile(views):
    summary = views["util_summary"]
    systems = _rows(summary, set())
    assert systems.height and summary.height == summary.unique([*BASE, *KEYS]).height
    for rolled in ROLLED:
        kept = [*BASE, *(k for k in KEYS if k not in rolled)]
        want = systems.group_by(kept).agg(
            pl.col("n").sum(), pl.col("first_day").min(), pl.col("last_day").max()
        )
        got = _rows(summary, rolled).select(*kept, "n", "first_day", "last_day")
        assert got.height == want.height > 0, rolled
        assert got.sort(kept).equals(want.sort(kept)), rolled
    models = summary.filter(pl.col("model_name") != "*")["model_name"].n_unique()
    assert models > 1  # so the fleet-wide rows sum several groups


def test_star_rows_quantiles_are_the_pooled_histograms(views):
    """Every row's quantiles (the '*' rows' included) from util_distribution's bins summed over its groups."""
    dist, summary = views["util_distribution"], views["util_summary"]
    n_bins = analytics.n_bins()
    for rolled in ROLLED:
        kept = [*BASE, *(k for k in KEYS if k not in rolled)]
        hist = (
            dist.group_by(*kept, "bin")
            .agg(pl.col("n").sum())
            .sort("bin")
            .with_columns(
                pl.col("n").cum_sum().over(kept).alias("cum"),
                pl.col("n").sum().over(kept).alias("total"),
                ((pl.col("bin") + 0.5) / n_bins).alias("mid"),
            )
        )
        want = hist.group_by(kept).agg(
            pl.col("mid").filter(pl.col("cum") >= q * pl.col("total")).min().alias(c)
            for c, q in QUANTILES.items()
        )
        got = _rows(summary, rolled).select(*kept, *QUANTILES)
        joined = got.join(want, on=kept, suffix="_want")
        assert joined.height == got.height > 0, rolled
        for c in QUANTILES:
            assert (joined[c] - joined[f"{c}_want"]).abs().max() < 1e-12, (rolled, c)


def test_a_star_row_is_within_one_bin_of_the_pooled_samples(views):
    """Trainers' CPU over every platform with remote PS (model and platform '*'): the exact quantiles of the
    pooled samples, to within one bin, where a mean of the platforms' quantiles is not."""
    runs = views["runs"].filter(pl.col("placement") == "remote_ps").select("run_id", "platform")
    samples = views["utilisation_samples"].filter(pl.col("role") == "trainer").join(runs, on="run_id")
    assert samples["platform"].n_unique() > 1
    row = views["util_summary"].filter(
        statistic="sample",
        role="trainer",
        resource="cpu",
        model_name="*",
        platform="*",
        placement="remote_ps",
    )
    values = samples["cpu_util"].drop_nulls().to_numpy()
    assert row["n"].item() == values.size
    width = 1 / analytics.n_bins()
    for c, q in QUANTILES.items():
        assert abs(row[c].item() - np.quantile(values, q, method="inverted_cdf")) <= width + 1e-12, c
    per_platform = views["util_summary"].filter(
        statistic="sample", role="trainer", resource="cpu", model_name="*", placement="remote_ps"
    )
    assert per_platform.filter(pl.col("platform") != "*")["n"].sum() == row["n"].item()


def test_run_role_stats_p90_is_the_runs_exact_p90(views):
    stats = views["run_role_stats"].filter(resource="cpu")
    exact = (
        views["utilisation_samples"]
        .group_by("run_id", "role")
        .agg(pl.col("cpu_util").quantile(0.9, "linear").alias("exact"))
    )
    joined = stats.join(exact, on=["run_id", "role"])
    assert joined.height == stats.height > 0
    assert (joined["p90_util"] - joined["exact"]).abs().max() < 1e-9
    assert ((stats["p50_util"] <= stats["p90_util"]) & (stats["p90_util"] <= stats["p95_util"])).all()
