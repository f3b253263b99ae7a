"""Adapters for public traces: turn them into ordinary landing files (runs) plus catalog entries for their
hardware, so they go through the same validation, quarantine and ledger as any producer's files.

- Alibaba PAI GPU trace v2020 (instance table + machine table): one run per job, servers counted per role.
- MLPerf Training DLRM results (the derived runs table and/or raw result logs): one run per log, with the
  system description normalised (capacities such as "2.0 TB" or "143771 MiB" -> GB).

Nothing is dropped here: re-posted MLPerf runs keep their canonical run_id, so ingest quarantines them as
duplicate keys naming the first delivery.
"""

from __future__ import annotations

import datetime as dt
import io
import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipelines.lib import fileio
from pipelines.lib.paths import DataHome
from workload_model.catalog import with_platforms

PAI_EPOCH = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)  # the trace's times are shifted seconds; 2020 = trace year
# "worker-like" task names are trainers; `tensorflow` is a single-task TF training job. PAI has no reader
# role;
# evaluators, chiefs, notebooks and other side-cars are not counted in any role.
PAI_TRAINER = re.compile(r"(?i)worker|^tensorflow$")
UNIT_GB = {
    "": 1.0,
    "G": 1.0,
    "GB": 1.0,
    "T": 1000.0,
    "TB": 1000.0,
    "M": 1e-3,
    "MB": 1e-3,
    "GIB": 1.073741824,
    "TIB": 1099.511627776,
    "MIB": 0.001048576,
}


@dataclass
class Adapted:
    """Landing frames by day, and the catalog entries of the hardware they ran on."""

    source: str
    runs_by_day: dict[str, pl.DataFrame]
    platforms: dict[str, dict]
    notes: list[str]

    @property
    def n_runs(self) -> int:
        return sum(f.height for f in self.runs_by_day.values())


def capacity_gb(text: pl.Expr) -> pl.Expr:
    """A free-form capacity ("2.0 TB", "143771 MiB", "141G", "2TiB") in GB (10^9 bytes); null if
    unreadable."""
    parts = text.str.strip_chars().str.extract_groups(r"^(?i)([0-9]*\.?[0-9]+)\s*([KMGT]i?B?)?(?:\b|$)")
    unit = parts.struct.field("2").fill_null("").str.to_uppercase()
    factor = unit.replace_strict(UNIT_GB, default=None, return_dtype=pl.Float64)
    return parts.struct.field("1").cast(pl.Float64, strict=False) * factor


def _slug(expr: pl.Expr) -> pl.Expr:
    return expr.str.to_lowercase().str.replace_all(r"[^a-z0-9]+", "_").str.strip_chars("_")


# ------------------------------------------------------------------------------------------------ PAI


def adapt_pai(folder: Path) -> Adapted:
    """Alibaba PAI v2020: the recovered instance-table tail + the machine table -> one run per job."""
    inst_path = next(
        (
            p
            for p in (folder / "pai_instance_table_tail_recovered.csv.gz", folder / "pai_instance_table.csv")
            if p.exists()
        ),
        None,
    )
    spec_path = folder / "pai_machine_spec.csv"
    if inst_path is None or not spec_path.exists():
        raise FileNotFoundError(
            f"{folder}: expected pai_instance_table_tail_recovered.csv.gz (or pai_instance_table.csv) "
            "and pai_machine_spec.csv"
        )
    inst = pl.read_csv(inst_path, infer_schema=False)
    spec = pl.read_csv(
        spec_path, schema_overrides={"cap_cpu": pl.Float64, "cap_mem": pl.Float64, "cap_gpu": pl.Float64}
    )
    inst = inst.join(spec.select("machine", "gpu_type"), on="machine", how="left").with_columns(
        pl.col("task_name").str.contains(PAI_TRAINER.pattern).alias("is_trainer"),
        (pl.col("task_name") == "ps").alias("is_ps"),
        pl.col("start_time").cast(pl.Float64, strict=False),
        pl.col("end_time").cast(pl.Float64, strict=False),
    )
    jobs = _pai_jobs(inst)
    trace_end = float(
        inst.select(pl.max_horizontal(pl.col("start_time").max(), pl.col("end_time").max())).item()
    )
    return Adapted(
        "pai",
        _by_day(_pai_runs(jobs, trace_end)),
        _pai_platforms(spec),
        [
            f"{inst.height:,} instance rows of {jobs.height:,} jobs from {inst_path.name}",
            "times are the trace's shifted seconds counted from 2020-01-01T00:00Z",
        ],
    )


def _pai_jobs(inst: pl.DataFrame) -> pl.DataFrame:
    """One row per job: its trainers and PS, its time span, how it ended and its platform (the GPU type of
    most of its trainers' instances)."""
    platform_of_job = (
        inst.filter(pl.col("gpu_type").is_not_null())
        .with_columns(pl.col("is_trainer").cast(pl.Int8).alias("w"))
        .group_by("job_name", "gpu_type")
        .agg(pl.len().alias("n"), pl.col("w").max())
        .sort(["job_name", "w", "n", "gpu_type"], descending=[False, True, True, False])
        .group_by("job_name", maintain_order=True)
        .first()
        .select("job_name", (pl.lit("pai_") + _slug(pl.col("gpu_type"))).alias("platform"))
    )
    return (
        inst.group_by("job_name")
        .agg(
            pl.col("inst_name").filter(pl.col("is_trainer")).n_unique().alias("n_trainers"),
            pl.col("inst_name").filter(pl.col("is_ps")).n_unique().alias("n_sparse_ps"),
            pl.col("start_time").min().alias("start_s"),
            pl.col("end_time").max().alias("end_s"),
            pl.col("status").is_in(["Running", "Waiting"]).any().alias("live"),
            (pl.col("status") == "Failed").any().alias("failed"),
            (pl.col("status") == "Interrupted").any().alias("interrupted"),
        )
        .join(platform_of_job, on="job_name", how="left")
    )


def _pai_seconds(c: pl.Expr) -> pl.Expr:
    """The trace's shifted seconds as a timestamp."""
    return pl.lit(PAI_EPOCH) + pl.duration(milliseconds=(c * 1000).round(0).cast(pl.Int64))


def _pai_runs(jobs: pl.DataFrame, trace_end: float) -> pl.DataFrame:
    """The jobs as runs of the runs contract, with the day each lands on (``_day``)."""
    secs = _pai_seconds
    return jobs.select(
        pl.col("job_name").alias("run_id"),
        secs(pl.col("start_s")).alias("start_ts"),
        pl.when(pl.col("live")).then(None).otherwise(secs(pl.col("end_s"))).alias("end_ts"),
        pl.when(pl.col("live"))
        .then(pl.lit("running"))
        .when(pl.col("failed"))
        .then(pl.lit("failed"))
        .when(pl.col("interrupted"))
        .then(pl.lit("cancelled"))
        .otherwise(pl.lit("succeeded"))
        .alias("status"),
        pl.col("platform"),
        pl.when(pl.col("n_sparse_ps") > 0).then(pl.lit("remote_ps")).otherwise(None).alias("placement"),
        pl.col("n_trainers").cast(pl.Int32),
        pl.col("n_sparse_ps").cast(pl.Int32),
        pl.lit(0, pl.Int32).alias("n_dense_ps"),
        pl.lit(0, pl.Int32).alias("n_readers"),
        # A job that never started (all instances waiting) has no time: it lands on the trace's last day.
        secs(pl.col("start_s").fill_null(trace_end)).dt.date().cast(pl.String).alias("_day"),
    )


def _pai_platforms(spec: pl.DataFrame) -> dict[str, dict]:
    """One catalog platform per GPU type: the median machine of that type."""
    machines = (
        spec.group_by("gpu_type")
        .agg(
            pl.len().alias("n"),
            pl.col("cap_cpu").median(),
            pl.col("cap_mem").median(),
            pl.col("cap_gpu").median(),
        )
        .with_columns((pl.lit("pai_") + _slug(pl.col("gpu_type"))).alias("platform"))
    )
    return {
        r["platform"]: {
            "description": f"Alibaba PAI machines of gpu_type {r['gpu_type']} (median of {r['n']} machines)",
            "source": "alibaba_pai_gpu_v2020",
            "cores": int(r["cap_cpu"]),
            "dram_gb": float(r["cap_mem"]),
            "gpus": int(r["cap_gpu"]),
        }
        for r in machines.iter_rows(named=True)  # one row per GPU type (a handful)
    }


# --------------------------------------------------------------------------------------------- MLPerf

MLPERF_COLUMNS = [
    "run_id",
    "mlperf_version",
    "benchmark",
    "run_status",
    "run_start_ms",
    "run_stop_ms",
    "global_batch_size",
    "tracked_throughput_samples_per_s",
    "duplicate_of",
    "same_run_timestamps_as",
    "system_json_path",
    "sys_system_name",
    "sys_number_of_nodes",
    "sys_host_processors_per_node",
    "sys_host_processor_core_count",
    "sys_host_memory_capacity",
    "sys_accelerators_per_node",
    "sys_accelerator_model_name",
    "sys_accelerator_memory_capacity",
]


def _canonical(frame: pl.DataFrame) -> pl.DataFrame:
    """Follow duplicate_of / same_run_timestamps_as to the first posting of each run."""
    links = frame.select(
        "run_id", pl.coalesce("duplicate_of", "same_run_timestamps_as").alias("first")
    ).unique("run_id", keep="first")
    canon = links.with_columns(pl.coalesce("first", "run_id").alias("canonical"))
    for _ in range(8):  # re-posts of re-posts: chains are short
        step = canon.join(links.rename({"run_id": "canonical", "first": "next"}), on="canonical", how="left")
        nxt = step.with_columns(pl.coalesce("next", "canonical").alias("canonical")).drop("next")
        if nxt.get_column("canonical").equals(canon.get_column("canonical")):
            break
        canon = nxt
    return frame.join(canon.select("run_id", "canonical"), on="run_id", how="left", validate="m:1")


def _mlperf_logs(folder: Path) -> pl.DataFrame:
    """One row per raw result log under <folder>/logs/<round>/...: the run keys the runs table also has."""
    frames = []
    for log in sorted((folder / "logs").glob("*/**/result_*.txt")) if (folder / "logs").is_dir() else []:
        rel = log.relative_to(folder / "logs")
        lines = pl.DataFrame(
            {"line": log.read_text(encoding="utf-8", errors="replace").splitlines()},
            schema={"line": pl.String},
        )
        # Ranks prefix their lines ("[0] ", "0: "): the event is the JSON after the marker.
        ev = (
            lines.select(pl.col("line").str.extract(r":::MLLOG (\{.*\})\s*$").alias("j"))
            .drop_nulls()
            .select(
                pl.col("j").str.json_path_match("$.key").alias("key"),
                pl.col("j").str.json_path_match("$.time_ms").alias("time_ms"),
                pl.col("j").str.json_path_match("$.value").alias("value"),
                pl.col("j").str.json_path_match("$.value.throughput").alias("throughput"),
                pl.col("j").str.json_path_match("$.metadata.status").alias("status"),
            )
        )

        def pick(key: str, col: str, ev: pl.DataFrame = ev):
            return ev.filter(pl.col("key") == key).select(pl.col(col).first()).item() if ev.height else None

        frames.append(
            pl.DataFrame(
                {
                    "run_id": str(rel),
                    "mlperf_version": rel.parts[0],
                    "benchmark": rel.parts[-2],
                    "run_status": pick("run_stop", "status"),
                    "run_start_ms": pick("run_start", "time_ms"),
                    "run_stop_ms": pick("run_stop", "time_ms"),
                    "global_batch_size": pick("global_batch_size", "value"),
                    "tracked_throughput_samples_per_s": ev.filter(pl.col("key") == "tracked_stats")
                    .select(pl.col("throughput").last())
                    .item()
                    if ev.height
                    else None,
                    "system_json_path": f"{rel.parts[1]}/systems/{rel.parts[3]}.json"
                    if len(rel.parts) > 4
                    else None,
                },
                schema=dict.fromkeys(
                    (
                        "run_id",
                        "mlperf_version",
                        "benchmark",
                        "run_status",
                        "run_start_ms",
                        "run_stop_ms",
                        "global_batch_size",
                        "tracked_throughput_samples_per_s",
                        "system_json_path",
                    ),
                    pl.String,
                ),
            )
        )
    return pl.concat(frames) if frames else pl.DataFrame()


def adapt_mlperf(folder: Path) -> Adapted:
    """MLPerf DLRM: mlperf_dlrm_runs.csv (all rounds) and any raw logs under logs/ -> one run per log."""
    raw, notes = _mlperf_rows(folder)
    reposts = raw.filter(pl.col("canonical") != pl.col("run_id")).height
    notes.append(
        f"{reposts} re-posted runs keep their first posting's run_id (quarantined as duplicates on ingest)"
    )
    return Adapted(
        "mlperf",
        _by_day(_mlperf_runs(raw).with_columns(pl.col("batch_size").cast(pl.Int32, strict=False))),
        _mlperf_platforms(raw),
        notes,
    )


def _mlperf_rows(folder: Path) -> tuple[pl.DataFrame, list[str]]:
    """The table's rows and the raw logs' (table rows first), each with its canonical run id, and notes."""
    table_path = folder / "mlperf_dlrm_runs.csv"
    parts, notes = [], []
    if table_path.exists():
        table = (
            pl.read_csv(table_path, infer_schema=False)
            .select(MLPERF_COLUMNS)
            .with_columns(pl.lit(0).alias("_order"))
        )
        parts.append(table)
        notes.append(f"{table.height:,} rows from {table_path.name}")
    logs = _mlperf_logs(folder)
    if logs.height:
        # Raw logs repeat runs of the table; their system description comes from the table where it has
        # the run.
        sys_cols = [c for c in MLPERF_COLUMNS if c.startswith("sys_")] + [
            "duplicate_of",
            "same_run_timestamps_as",
        ]
        known = (
            parts[0].select(["run_id", *sys_cols])
            if parts
            else pl.DataFrame(schema=dict.fromkeys(["run_id", *sys_cols], pl.String))
        )
        logs = logs.drop([c for c in sys_cols if c in logs.columns]).join(known, on="run_id", how="left")
        parts.append(logs.select(MLPERF_COLUMNS).with_columns(pl.lit(1).alias("_order")))
        notes.append(f"{logs.height} raw result logs under logs/")
    if not parts:
        raise FileNotFoundError(
            f"{folder}: expected mlperf_dlrm_runs.csv and/or logs/<round>/.../result_*.txt"
        )
    return _canonical(pl.concat(parts, how="vertical_relaxed")), notes


def _mlperf_time(c: str) -> pl.Expr:
    """MLLOG times are epoch milliseconds, but some logs give seconds (1.59e9 read as ms is 1970-01-19):
    a value below 1e11 cannot be milliseconds of this century, so it is seconds."""
    v = pl.col(c).cast(pl.Float64, strict=False)
    micros = pl.when(v < 1e11).then(v * 1e6).otherwise(v * 1e3).cast(pl.Int64)
    return pl.from_epoch(micros, time_unit="us").dt.replace_time_zone("UTC")


def _mlperf_platform() -> pl.Expr:
    """A system's platform name, from its system description's path."""
    return pl.lit("mlperf_") + _slug(
        pl.col("system_json_path").str.replace(r"\.json$", "").str.replace("/systems/", "_")
    )


def _mlperf_runs(raw: pl.DataFrame) -> pl.DataFrame:
    """The rows as runs of the runs contract, with the day each lands on (``_day``)."""
    ms = _mlperf_time
    return raw.sort("_order", "mlperf_version", "run_id").select(
        pl.col("canonical").alias("run_id"),
        ms("run_start_ms").alias("start_ts"),
        ms("run_stop_ms").alias("end_ts"),
        pl.col("run_status")
        .replace_strict({"success": "succeeded", "aborted": "failed"}, default=None)
        .alias("status"),
        pl.col("benchmark").alias("model_name"),
        pl.col("global_batch_size").cast(pl.Int64, strict=False).alias("batch_size"),
        _mlperf_platform().alias("platform"),
        pl.col("sys_number_of_nodes").cast(pl.Int32, strict=False).alias("n_trainers"),
        pl.lit(0, pl.Int32).alias("n_sparse_ps"),
        pl.lit(0, pl.Int32).alias("n_dense_ps"),
        pl.lit(0, pl.Int32).alias("n_readers"),
        pl.col("tracked_throughput_samples_per_s").cast(pl.Float64, strict=False).alias("throughput_eps"),
        ms("run_start_ms").dt.date().cast(pl.String).alias("_day"),
    )


def _mlperf_platforms(raw: pl.DataFrame) -> dict[str, dict]:
    """One catalog platform per system description (its first posting)."""
    systems = (
        raw.filter(pl.col("system_json_path").is_not_null())
        .unique("system_json_path", keep="first")
        .with_columns(
            _mlperf_platform().alias("platform"),
            capacity_gb(pl.col("sys_host_memory_capacity")).alias("dram_gb"),
            capacity_gb(pl.col("sys_accelerator_memory_capacity")).alias("hbm_gb_per_gpu"),
            pl.col("sys_accelerators_per_node").cast(pl.Int32, strict=False).fill_null(0).alias("gpus"),
            pl.col("sys_host_processors_per_node").cast(pl.Int32, strict=False).alias("sockets"),
            pl.col("sys_host_processor_core_count").cast(pl.Int32, strict=False).alias("cores"),
        )
    )
    return {
        r["platform"]: {
            "description": f"MLPerf system {r['sys_system_name']}: {r['sys_accelerator_model_name']}",
            "source": "mlperf_training_dlrm",
            "gpus": r["gpus"],
            "sockets": r["sockets"],
            "cores": r["cores"],
            "dram_gb": r["dram_gb"],
            "hbm_gb_per_gpu": r["hbm_gb_per_gpu"] if r["gpus"] else None,
        }
        for r in systems.iter_rows(named=True)  # one row per system (~150)
    }


def _by_day(runs: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Split by run start day; a run with no start (e.g. a truncated log) lands on the latest day, where
    ingest quarantines it with the reason."""
    runs = runs.with_columns(pl.col("_day").fill_null(pl.col("_day").max()))
    return {day: part.drop("_day") for (day,), part in runs.group_by("_day", maintain_order=True)}


def deliver(adapted: Adapted, home: DataHome) -> list[str]:
    """Write the adapted runs as landing/<source>/<day>/runs.parquet and register the hardware; returns
    the days."""
    catalog = home.user_catalog_dir / "hardware.yaml"
    fileio.write_text(catalog, with_platforms(catalog, adapted.platforms))
    for day, frame in adapted.runs_by_day.items():
        buf = io.BytesIO()
        frame.write_parquet(buf)
        fileio.write_bytes(home.landing / adapted.source / day / "runs.parquet", buf.getvalue())
    return sorted(adapted.runs_by_day)
