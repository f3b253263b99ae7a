"""trainer_vs_ps on the synthetic fleet shows the paper's pattern (Fig. 5): PS lower mean, wider, longer
tail."""

import polars as pl

from pipelines.lib.analysis import analytics
from pipelines.lib.paths import DataHome
from pipelines.lib.storage import lake
from synthetic_fleet.sampler import sample_day


def test_trainer_vs_ps_shows_the_paper_pattern_per_model_on_cpu_clusters(tmp_path, hw, models):
    home = DataHome.resolve(tmp_path)
    for day in ("2026-11-01", "2026-11-02"):
        fleet = sample_day(day, 110, 2021, hw, models)
        runs = fleet.runs.with_columns(
            pl.lit(day).str.to_date().alias("day"), pl.lit("synthetic").alias("source")
        )
        stats = analytics.run_role_stats(
            runs, fleet.samples, day, analytics.server_windows(fleet.samples, day)
        )
        lake.write_partition(
            home,
            "util_distribution",
            day,
            analytics.util_distribution(runs, fleet.samples, stats, day),
        )
    _, tvp = analytics.merged_summaries(analytics.table_relation(home, "util_distribution"))
    cpu = tvp.filter((pl.col("platform") == "cpu") & (pl.col("ps_role") == "sparse_ps"))
    assert cpu.height == 3 * 4  # three models x cpu, mem_cap, mem_bw, net_bw
    assert cpu["paper_pattern"].all(), cpu.filter(~pl.col("paper_pattern"))
    assert (cpu["ks_statistic"] > 0.3).all()
