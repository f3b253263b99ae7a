"""Adapters for the real public data in shared/realdata beside the project (skipped with a message where
it is absent; tests/fixtures holds slices of it that are tested everywhere)."""

from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest

from pipelines.defs.partitions import add_days
from pipelines.defs.resources import FleetHome
from pipelines.lib.ingest import adapters, ingest_partition
from pipelines.lib.paths import PROJECT_ROOT
from pipelines.lib.query.sqlfiles import sql_text
from pipelines.lib.query.warehouse import publish_catalog
from pipelines.lib.storage import lake
from workload_model.catalog import load_hardware

REALDATA = PROJECT_ROOT.parent / "shared" / "realdata"
PAI = REALDATA / "alibaba_pai_gpu_v2020"
MLPERF = REALDATA / "mlperf_training_dlrm"


def _need(folder: Path):
    if not folder.is_dir():
        pytest.skip(f"public data not found at {folder} (it lives beside the project, in shared/realdata)")


def _ingest(adapted, home):
    days = adapters.deliver(adapted, home)
    platforms = load_hardware(home.user_catalog_dir / "hardware.yaml").platforms
    for day in days:
        ingest_partition(home, day, platforms)
    return days


@pytest.mark.usefixtures("big_input")
def test_pai_server_counts_reproduce_the_published_facts(home, definitions):
    _need(PAI)
    days = _ingest(adapters.adapt_pai(PAI), home)
    hist = next(a for a in definitions.assets if "server_count_hist" in {k.to_user_string() for k in a.keys})
    with dg.instance_for_test() as instance:
        add_days(instance, days)
        for day in days:
            assert dg.materialize(
                [hist],
                partition_key=day,
                instance=instance,
                resources={"fleet": FleetHome(home=str(home.root))},
            ).success
    publish_catalog(home)
    con = duckdb.connect(str(home.catalog_path), read_only=True)
    try:
        rows = {
            r[0]: r
            for r in con.execute(sql_text("queries/server_counts_ps_based.sql"), {"source": "pai"}).fetchall()
        }
        reasons = dict(
            con.execute("SELECT reason_code || '/' || field, count(*) FROM quarantine GROUP BY 1").fetchall()
        )
    finally:
        con.close()
    role, runs, median, mean, mx, share1, *_ = rows["sparse_ps"]
    assert (runs, median, mx, round(share1 * 100, 1), round(mean, 2)) == (
        833,
        1,
        50,
        64.5,
        2.97,
    )  # README facts
    role, runs, median, mean, mx, *_ = rows["trainer"]
    assert (runs, median, mx, round(mean, 1)) == (833, 10, 200, 16.4)
    # Jobs that are not training runs are quarantined with a reason, never dropped.
    assert reasons["out_of_bounds/n_trainers"] == 70


@pytest.mark.usefixtures("big_input")  # the whole public trace
def test_pai_adapter_maps_roles_and_hardware(home):
    _need(PAI)
    adapted = adapters.adapt_pai(PAI)
    runs = pl.concat(list(adapted.runs_by_day.values()))
    assert runs.height == 5163 and runs["run_id"].n_unique() == 5163
    assert set(runs["status"].unique()) <= {"succeeded", "failed", "cancelled", "running"}
    assert runs.filter(pl.col("n_sparse_ps") > 0)["placement"].unique().to_list() == ["remote_ps"]
    assert adapted.platforms["pai_v100"]["gpus"] == 8 and adapted.platforms["pai_cpu"]["gpus"] == 0


@pytest.mark.usefixtures("big_input")  # the whole public trace
def test_mlperf_runs_deduplicated_units_normalised_and_the_truncated_log_quarantined(home):
    _need(MLPERF)
    adapted = adapters.adapt_mlperf(MLPERF)
    _ingest(adapted, home)
    runs = lake.read_table(home, "runs")
    q = lake.read_table(home, "quarantine")
    assert runs.height == 1140 and runs["run_id"].n_unique() == 1140  # 1,141 independent runs, one truncated
    assert (
        q.filter(pl.col("reason_code") == "duplicate_key").height == 144 + 12
    )  # re-posts + raw logs of known runs
    truncated = q.filter(pl.col("reason_code") == "missing_required")
    assert truncated.height == 1 and "ESCN4A-E11" in truncated["raw_record"][0]
    hw = load_hardware(home.user_catalog_dir / "hardware.yaml")
    dgx = [
        p for p in hw.platforms.values() if p.source == "mlperf_training_dlrm" and "dgxa100_n14" in p.name
    ][0]
    assert (dgx.gpus, dgx.hbm_gb_per_gpu, dgx.dram_gb) == (
        8,
        80.0,
        2000.0,
    )  # "80GB"-style and "2 TB"-style strings
    assert not any(p.modelled for p in hw.platforms.values() if p.source == "mlperf_training_dlrm")
    # Checkable fact: dlrm time-to-train, CPU-only vs accelerated (README of the data).
    gpus = pl.DataFrame(
        [(p.name, p.gpus) for p in hw.platforms.values()], schema=["platform", "gpus"], orient="row"
    )
    ttt = (
        runs.filter((pl.col("model_name") == "dlrm") & (pl.col("status") == "succeeded"))
        .join(gpus, on="platform")
        .with_columns(
            ((pl.col("end_ts") - pl.col("start_ts")).dt.total_milliseconds() / 60000).alias("minutes")
        )
        .group_by(pl.col("gpus") == 0)
        .agg(pl.len(), pl.col("minutes").median())
        .sort("gpus")
    )
    (_, n_acc, acc), (_, n_cpu, cpu) = ttt.rows()
    assert (n_cpu, round(cpu, 1), n_acc, round(acc, 2)) == (45, 45.2, 287, 1.94)


def test_capacity_strings_are_normalised():
    got = (
        pl.DataFrame(
            {"t": ["2.0 TB", "143771 MiB", "141G", "2TiB", "512GB", "1.5TB", "24 GiB", "N/A", "TODO", None]}
        )
        .select(adapters.capacity_gb(pl.col("t")).round(2))
        .to_series()
        .to_list()
    )
    assert got == [2000.0, 150.75, 141.0, 2199.02, 512.0, 1500.0, 25.77, None, None, None]
