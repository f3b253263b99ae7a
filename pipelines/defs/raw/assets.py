"""Raw layer: one landing day -> validated Parquet (runs, utilisation_samples; metric_samples and the runs and
samples derived from them), quarantine, ledger and extra fields."""

from pathlib import Path

import dagster as dg

from pipelines.defs.metadata import OWNERS, description, preview, spec_metadata
from pipelines.defs.partitions import LANDING_DAYS
from pipelines.defs.resources import FleetHome
from pipelines.lib.ingest import LANDING_TABLES, METRICS, advice
from pipelines.lib.ingest.promote import promote_day, settle_slices
from pipelines.lib.ingest.split import load_task, read_task
from pipelines.lib.ingest.volume import failing
from pipelines.lib.operations.monitoring import partition_row_counts, row_count_anomaly
from pipelines.lib.settings import reader_name
from pipelines.lib.storage.landing import not_read, not_read_warning

RAW_TABLES = (
    "runs",
    "utilisation_samples",
    "metric_samples",
    "quarantine",
    "ingest_ledger",
    "extra_fields",
    "sample_volume",
)
LANDING = dg.AssetKey("landing_files")
SKIPPABLE = (*LANDING_TABLES, METRICS)  # not written when the day's blocking checks fail


def _spec(table: str) -> dg.AssetSpec:
    return dg.AssetSpec(
        table,
        group_name="raw",
        kinds={"polars", "parquet"},
        owners=OWNERS,
        description=description(table),
        metadata=spec_metadata(table),
        tags={"layer": "raw"},
        skippable=table in SKIPPABLE,
    )


def _check(name: str, asset: str, text: str, blocking: bool = True) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(name, asset=asset, blocking=blocking, description=text)


CHECKS = [
    _check("reconciles", "ingest_ledger", "Every landing file: rows_in = rows_accepted + rows_quarantined."),
    _check("conforms_to_contract", "runs", "Types, nulls, bounds and enums match schemas/runs.yaml."),
    _check(
        "conforms_to_contract",
        "utilisation_samples",
        "Types, nulls, bounds and enums match schemas/utilisation_samples.yaml.",
    ),
    _check("unique_key", "runs", "No run_id twice in the partition."),
    _check("unique_key", "utilisation_samples", "No (run_id, server_id, ts) twice in the partition."),
    _check(
        "row_count_vs_trailing_week",
        "runs",
        "Warns when the day's run count is outside 0.5x..2x of the median of the previous 7 days.",
        blocking=False,
    ),
    _check(
        "volume_matches_runs",
        "utilisation_samples",
        "Fails (error, not blocking) when a source that delivers samples left runs without samples, or far "
        "fewer than their windows, servers and sampling interval imply, or far fewer than its trailing week "
        "(table sample_volume).",
        blocking=False,
    ),
    _check(
        "row_count_vs_trailing_week",
        "utilisation_samples",
        "Warns when the day's sample count is outside 0.5x..2x of the median of the previous 7 days.",
        blocking=False,
    ),
    _check(
        "every_landing_entry_read",
        "ingest_ledger",
        "Warns while entries under landing/ are read by no day (outside <source>/<YYYY-MM-DD>/, or hidden).",
        blocking=False,
    ),
]


def _written_metadata(home, result, table: str, where: str) -> dict:
    """What a raw table's materialisation shows: rows, where it is, what its landing files gave, and per
    table what to look at (the ledger and what to fix first, slices, derivation notes, rejects)."""
    meta = {
        "dagster/row_count": result.row_counts()[table],
        "lake_table": dg.MetadataValue.url(where) if "://" in where else dg.MetadataValue.path(where),
        **advice.per_table_counts(result.ingest_ledger).get(table, {}),
    }
    ledger, q = result.ingest_ledger, result.quarantine
    if table == "ingest_ledger":
        meta["ledger"] = preview(ledger.drop("blake3", "ingested_at"), rows=20)
        meta["landing_entries_not_read"] = dg.MetadataValue.json([e.relpath for e in not_read(home)[:100]])
        fix = advice.unknown_columns(ledger) + advice.missing_everywhere(ledger, q)
        meta["fix_first"] = dg.MetadataValue.json(fix)
    if table == "utilisation_samples" and result.slices:
        meta["slices"] = dg.MetadataValue.json(result.slices)
    if table == METRICS and result.notes:
        meta["derivation_notes"] = dg.MetadataValue.json(result.notes)
    if table == "quarantine":
        by_reason = q.group_by("reason_code").len().sort("len", descending=True)
        meta["by_reason"] = dg.MetadataValue.json(dict(by_reason.iter_rows()))
        if q.height:
            meta["first_rejects"] = preview(q.select("source_file", "row_number", "reason_code", "message"))
    return meta


@dg.op(ins={"landing": dg.In(dg.Nothing)}, out=dg.DynamicOut(str))
def settle_day_slices(context: dg.OpExecutionContext, fleet: FleetHome):
    """The day's runs settled and one output per slice (its task file); none when the day fits one pass."""
    home = fleet.data_home()
    for task in settle_slices(home, context.partition_key, fleet.hardware().platforms.keys(), fleet.limits()):
        yield dg.DynamicOutput(str(task), mapping_key=load_task(task)[1].key)


@dg.op(retry_policy=dg.RetryPolicy(max_retries=1))  # a lost mount may come back; bad rows never fail
def read_slice(task: str) -> str:
    """One slice of the day read against its settled runs: the path of its sealed state."""
    return str(read_task(Path(task), reader_name()))


@dg.op(
    out={
        **{t: dg.Out(is_required=t not in SKIPPABLE) for t in RAW_TABLES},
        **{c.get_python_identifier(): dg.Out(dg.Nothing, is_required=False) for c in CHECKS},
    }
)
def promote_raw_day(context: dg.OpExecutionContext, fleet: FleetHome, parts: list[str]):
    """The day merged from its slices (or read in one pass), checked and promoted."""
    day = context.partition_key
    home = fleet.data_home()
    outcome = promote_day(
        home, day, fleet.hardware().platforms.keys(), fleet.limits(), [Path(p) for p in parts]
    )
    result = outcome.result
    if not outcome.promoted:
        failed = ", ".join(f"{c.table}/{c.name}" for c in outcome.checks if not c.passed)
        context.log.error(
            f"runs and samples for {day} not promoted ({failed} failed); the last good partition stays"
        )
    for table, where in outcome.written.items():
        yield dg.MaterializeResult(asset_key=table, metadata=_written_metadata(home, result, table, where))
    for c in outcome.checks:
        meta = {k: (dg.MetadataValue.json(v) if isinstance(v, list) else v) for k, v in c.metadata.items()}
        yield dg.AssetCheckResult(asset_key=c.table, check_name=c.name, passed=c.passed, metadata=meta)

    for table, count in (("runs", result.runs.height), ("utilisation_samples", result.samples_rows)):
        history = partition_row_counts(home, table)
        anomaly = row_count_anomaly({d: n for d, n in history.items() if d != day}, day, count)
        yield dg.AssetCheckResult(
            asset_key=table,
            check_name="row_count_vs_trailing_week",
            passed=anomaly.passed,
            severity=dg.AssetCheckSeverity.WARN,
            description=anomaly.message,
            metadata={
                "rows": anomaly.count,
                "trailing_median": anomaly.baseline,
                "ratio": anomaly.ratio,
                "days_compared": anomaly.days_compared,
            },
        )
    bad = failing(result.sample_volume)
    yield dg.AssetCheckResult(
        asset_key="utilisation_samples",
        check_name="volume_matches_runs",
        passed=bad.height == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        description="; ".join(bad["message"]) or "every source's samples arrived for its runs",
        metadata={"by_source": preview(result.sample_volume.drop("day"), rows=20)},
    )
    unread = not_read(home)
    yield dg.AssetCheckResult(
        asset_key="ingest_ledger",
        check_name="every_landing_entry_read",
        passed=not unread,
        severity=dg.AssetCheckSeverity.WARN,
        description=not_read_warning(unread) or "every entry under landing/ belongs to a day",
        metadata={"not_read": dg.MetadataValue.json({e.relpath: e.problem[1] for e in unread[:100]})},
    )


@dg.graph_multi_asset(
    name="raw_ingest",
    group_name="raw",
    outs={t: dg.AssetOut.from_spec(_spec(t), is_required=t not in SKIPPABLE) for t in RAW_TABLES},
    ins={"landing_files": dg.AssetIn(LANDING, dagster_type=dg.Nothing)},
    partitions_def=LANDING_DAYS,
    check_specs=CHECKS,
)
def raw_ingest(landing_files):
    """Read every landing file of the day, validate each row against its contract, write the day whole.

    A day larger than ``FLEET_SLICE_BYTES`` is settled, read in slices (one step each, run where the
    executor puts them) and merged; the samples' ``slices`` metadata says which process read each.

    The blocking checks run on the validated frames before anything is promoted: if one fails, the ledger,
    quarantine and extra fields (the explanation) are written, runs and samples are not (the last good
    partition stays), and downstream assets do not run.
    """
    parts = settle_day_slices(landing=landing_files).map(read_slice).collect()
    return promote_raw_day(parts)
