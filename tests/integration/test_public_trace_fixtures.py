"""The public-trace adapters on the slices shipped in tests/fixtures (they run everywhere, unlike the
full-data tests in test_public_traces.py)."""

import polars as pl

from pipelines.lib.ingest import adapters, ingest_partition
from pipelines.lib.storage import lake
from tests.support.homes import MLPERF_SLICE, PAI_SLICE
from workload_model.catalog import load_hardware


def test_pai_slice_maps_jobs_roles_and_machines():
    adapted = adapters.adapt_pai(PAI_SLICE)
    runs = pl.concat(list(adapted.runs_by_day.values()))
    assert runs.height == 85 and runs["run_id"].n_unique() == 85  # one run per job of the slice
    assert set(runs["status"].unique()) <= {"succeeded", "failed", "cancelled", "running"}
    ps = runs.filter(pl.col("n_sparse_ps") > 0)
    assert ps.height == 45 and ps["placement"].unique().to_list() == ["remote_ps"]
    assert adapted.platforms["pai_v100"]["gpus"] == 8 and adapted.platforms["pai_cpu"]["gpus"] == 0


def test_pai_slice_is_delivered_and_ingested_with_its_platforms_registered(home):
    adapted = adapters.adapt_pai(PAI_SLICE)
    days = adapters.deliver(adapted, home)
    platforms = load_hardware(home.user_catalog_dir / "hardware.yaml").platforms
    assert {"pai_v100", "pai_t4", "pai_misc"} <= set(platforms)
    for day in days:
        ingest_partition(home, day, platforms)
    runs = lake.read_table(home, "runs")
    ledger = lake.read_table(home, "ingest_ledger").filter(pl.col("table_name") == "runs")
    assert int(ledger["rows_in"].sum()) == 85  # every job accounted for: accepted or quarantined
    assert runs.height == int(ledger["rows_accepted"].sum()) > 0
    assert set(runs["platform"].unique()) <= {p for p in platforms if p.startswith("pai_")}


def test_mlperf_slice_deduplicates_reposts_and_normalises_hardware(home):
    adapted = adapters.adapt_mlperf(MLPERF_SLICE)
    assert adapted.n_runs == 165
    days = adapters.deliver(adapted, home)
    hw = load_hardware(home.user_catalog_dir / "hardware.yaml")
    for day in days:
        ingest_partition(home, day, hw.platforms)
    runs = lake.read_table(home, "runs")
    reasons = lake.read_table(home, "quarantine")["reason_code"].value_counts()
    assert runs.height == 142 and runs["run_id"].n_unique() == 142  # 23 re-posts quarantined, not dropped
    assert dict(reasons.iter_rows()) == {"duplicate_key": 23}
    mlperf = {p.name: p for p in hw.platforms.values() if p.source == "mlperf_training_dlrm"}
    dell = mlperf["mlperf_dell_dss8440x8a100_pcie_40gb"]
    assert (dell.gpus, dell.dram_gb) == (8, 768.0)  # "768GB"-style strings
    cpu_only = [p for name, p in mlperf.items() if name.startswith("mlperf_intel_")]
    assert cpu_only and all(p.gpus == 0 for p in cpu_only)
    assert not any(p.modelled for p in mlperf.values())
