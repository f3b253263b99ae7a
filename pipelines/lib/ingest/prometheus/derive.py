"""A day's Prometheus samples (metric_samples) -> runs and utilisation samples, through the mapping.

Plain functions over one staged Parquet file of the day's samples; every step is SQL in
sql/transforms/prom_*.sql, run by DuckDB out of core (memory capped, spilling to the staging folder), so a
day of any size costs a bounded amount of memory. The steps: the training pods of the day's jobs
(kube_pod_labels), where each pod ran per interval (kube_pod_info, phases), the series of the exporters
with their host or pod, one point per sample (counter increases across resets, gaps left as gaps), one
utilisation sample per pod and interval, one run per job. Each derived row carries the landing file and
row of the sample it was derived from (its anchor: the job's first kube_pod_labels sample for a run, the
pod's first kube_pod_info sample of the interval for a utilisation sample), so a derived row that a
contract rejects is quarantined where its evidence is.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import polars as pl

from pipelines.lib.contracts import contract
from pipelines.lib.ingest.prometheus.mapping import PromMapping, ksm_label
from pipelines.lib.query.sqlfiles import sql_text
from pipelines.lib.settings import DUCKDB_MEMORY
from workload_model.catalog import HardwareCatalog

GB = 1e9
STEPS = ("prom_clip", "prom_pods", "prom_phases", "prom_pod_nodes", "prom_series", "prom_obs", "prom_points")
ANCHOR = ("anchor_file", "anchor_row")
DERIVED_ROW_GROUP = 200_000  # rows per row group of the derived samples (the batch they are validated in)


@dataclass
class Derived:
    """The day's derived runs (landing columns + anchor), its samples (a Parquet file of landing columns +
    anchor, or None), the readings no sample could use (a Parquet file of quarantine entries: source_file,
    row_number, reason_code, field, message, raw_record; or None) and notes on what the derivation left
    out."""

    runs: pl.DataFrame
    samples_path: Path | None
    bad_readings_path: Path | None = None
    notes: list[str] = field(default_factory=list)


def _params(sql: str, values: dict) -> dict:
    """The parameters a statement uses (DuckDB refuses unused ones)."""
    used = set(re.findall(r"\$([a-z_]+)", sql))
    return {k: v for k, v in values.items() if k in used}


def _relations(mapping: PromMapping, hw: HardwareCatalog) -> dict[str, pl.DataFrame]:
    kinds = pl.DataFrame(
        {"kind": list(mapping.metrics), "metric": list(mapping.metrics.values())},
    ).filter(~pl.col("kind").str.starts_with("pod_") & (pl.col("kind") != "node_labels"))
    node_paths = [f'$."{k}"' for k in mapping.node_labels] + ['$."Hostname"']
    platform_map = {**{p: p for p in hw.platforms}, **mapping.platforms}
    return {
        "metric_kinds": kinds,
        "node_paths": pl.DataFrame({"i": list(range(len(node_paths))), "path": node_paths}),
        "role_map": pl.DataFrame(
            {"replica": list(mapping.roles), "role": list(mapping.roles.values())},
            schema={"replica": pl.String, "role": pl.String},
        ),
        "platform_map": pl.DataFrame(
            {"value": list(platform_map), "platform": list(platform_map.values())},
            schema={"value": pl.String, "platform": pl.String},
        ),
        "capacity": pl.DataFrame(
            [
                {
                    "platform": name,
                    "nic_bps": (p.nic_gb_per_s or 0) * GB or None,
                    "dram_bps": (p.dram_bw_gb_per_s or 0) * GB or None,
                    "pcie_bps": (p.pcie_gb_per_s or 0) * GB or None,
                    "nvlink_bps": (p.gpu_link_gb_per_s or 0) * GB or None,
                }
                for name, p in hw.platforms.items()
            ],
            schema={
                "platform": pl.String,
                "nic_bps": pl.Float64,
                "dram_bps": pl.Float64,
                "pcie_bps": pl.Float64,
                "nvlink_bps": pl.Float64,
            },
        ),
    }


def _values(mapping: PromMapping, day: str) -> dict:
    start = dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC)
    m = mapping.metrics
    return {
        "day_start": start,
        "day_end": start + dt.timedelta(days=1),
        "step_us": mapping.interval_s * 1_000_000,
        "max_gap_s": mapping.max_gap_s,
        "stale_s": mapping.stale_after_s,
        "tol": mapping.clip_tolerance,
        "job_paths": mapping.json_paths(mapping.job_labels),
        "role_paths": mapping.json_paths(mapping.role_labels),
        "model_paths": mapping.json_paths(mapping.model_labels) or ['$."__fleet_no_model"'],
        "platform_path": f'$."{ksm_label(mapping.platform_label)}"',
        "nic_exclude": mapping.nic_exclude,
        "nic_bps": mapping.nic_bytes_per_s,
        "dram_bps": mapping.dram_bytes_per_s,
        "default_platform": mapping.default_platform,
        "run_id": mapping.run_id,
        "status_without_phase": mapping.status_without_phase,
        "ignore_roles": list(mapping.ignore_roles) or [""],
        "pod_labels_metric": m["pod_labels"],
        "pod_info_metric": m["pod_info"],
        "pod_phase_metric": m["pod_phase"],
        "node_labels_metric": m["node_labels"],
    }


def derive_day(
    metrics_path: Path,
    day: str,
    mapping: PromMapping,
    hw: HardwareCatalog,
    scratch: Path,
    memory_limit: str = DUCKDB_MEMORY,
) -> Derived:
    """Runs and utilisation samples of the jobs that started on ``day``, from its metric samples (DuckDB
    within ``memory_limit``, spilling to ``scratch`` past it)."""
    values = _values(mapping, day)
    samples_path = scratch / "derived_samples.parquet"
    bad_path = scratch / "bad_readings.parquet"
    con = duckdb.connect(config={"memory_limit": memory_limit, "temp_directory": str(scratch / "spill")})
    try:
        con.execute("SET enable_progress_bar = false")
        con.execute("SET TimeZone = 'UTC'")  # the quarantine's messages name times in UTC
        con.read_parquet(str(metrics_path)).create_view("m")
        for name, frame in _relations(mapping, hw).items():
            con.register(name, frame)
        for step in STEPS:
            sql = sql_text(f"transforms/{step}.sql")
            con.execute(sql, _params(sql, values))
        sql = sql_text("transforms/prom_samples.sql")
        con.sql(sql, params=_params(sql, values)).write_parquet(
            str(samples_path), row_group_size=DERIVED_ROW_GROUP
        )
        con.read_parquet(str(samples_path)).create_view("derived")
        n = con.execute("SELECT count(*) FROM derived").fetchall()[0][0]
        sql = sql_text("transforms/prom_runs.sql")
        runs = con.sql(sql, params=_params(sql, values)).pl()
        sql = sql_text("transforms/prom_notes.sql")
        counts = con.sql(sql, params=_params(sql, values)).pl().row(0, named=True)
        n_bad = con.execute("SELECT count(*) FROM obs_all WHERE fault IS NOT NULL").fetchall()[0][0]
        if n_bad:
            con.sql(sql_text("transforms/prom_bad_readings.sql")).write_parquet(
                str(bad_path), row_group_size=DERIVED_ROW_GROUP
            )
    finally:
        con.close()
    return Derived(
        runs=runs,
        samples_path=samples_path if n else None,
        bad_readings_path=bad_path if n_bad else None,
        notes=_notes(counts, runs),
    )


def _notes(counts: dict, runs: pl.DataFrame) -> list[str]:
    notes = []
    if counts["jobs_of_other_days"]:
        notes.append(
            f"{counts['jobs_of_other_days']} job(s) in these samples started on another day; each run is "
            "derived on the day it started (deliver or pull a run's samples with that day)"
        )
    if counts["unmapped_replicas"]:
        notes.append(
            f"pods of replica types {counts['unmapped_replicas']} are in no role: map them in the mapping's "
            "roles (or list them in ignore_roles)"
        )
    if counts["intervals_on_two_nodes"]:
        notes.append(
            f"{counts['intervals_on_two_nodes']} pod interval(s) saw the pod on two nodes (restarted "
            "elsewhere): no sample for those intervals"
        )
    missing = counts["pod_intervals"] - counts["samples"]
    if missing > 0:
        notes.append(
            f"{missing} of {counts['pod_intervals']} pod interval(s) had no CPU, memory or network samples "
            "of their node (a gap, a missing exporter, or a node the exporters name differently: "
            "see node_labels)"
        )
    if counts["runs_with_unknown_nic_speed"]:
        notes.append(
            f"{counts['runs_with_unknown_nic_speed']} run(s) ran on nodes of unknown NIC speed: network "
            "utilisation is against nic_bytes_per_s or the platform's NIC"
        )
    if counts["samples_without_platform"]:
        notes.append(
            f"{counts['samples_without_platform']} sample(s) are on nodes without a platform: set "
            "platform_label / platforms or default_platform in the mapping"
        )
    return notes


def landing_runs(derived: Derived) -> pl.DataFrame:
    """The derived runs in the runs contract's landing columns, plus their anchor."""
    names = [c.name for c in contract("runs").landing_columns]
    missing = [pl.lit(None).alias(n) for n in names if n not in derived.runs.columns]
    return derived.runs.with_columns(missing).select(*names, *ANCHOR)
