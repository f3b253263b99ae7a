"""Raw layer: one landing day -> validated Parquet (runs, utilisation_samples) + quarantine + ingest ledger.

The blocking checks run on the validated frames before anything is promoted: if one fails, the ledger and
quarantine (the explanation) are written, runs and samples are not, and downstream assets do not run.
"""

import dagster as dg
import polars as pl

from pipelines.defs.metadata import OWNERS, description, preview, spec_metadata
from pipelines.defs.partitions import DAILY
from pipelines.defs.resources import FleetHome
from pipelines.lib import lake
from pipelines.lib.contracts import conformance_violations, contract, key_duplicates
from pipelines.lib.ingest import ingest_day, reconciliation
from pipelines.lib.monitoring import partition_row_counts, row_count_anomaly

RAW_TABLES = ("runs", "utilisation_samples", "quarantine", "ingest_ledger")
LANDING = dg.AssetKey("landing_files")


def _spec(table: str) -> dg.AssetSpec:
    return dg.AssetSpec(table, group_name="raw", kinds={"polars", "parquet"}, owners=OWNERS, deps=[LANDING],
                        description=description(table), metadata=spec_metadata(table), tags={"layer": "raw"},
                        skippable=table in ("runs", "utilisation_samples"))


def _check(name: str, asset: str, text: str, blocking: bool = True) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(name, asset=asset, blocking=blocking, description=text)


CHECKS = [
    _check("reconciles", "ingest_ledger", "Every landing file: rows_in = rows_accepted + rows_quarantined."),
    _check("conforms_to_contract", "runs", "Types, nulls, bounds and enums match schemas/runs.yaml."),
    _check("conforms_to_contract", "utilisation_samples", "Types, nulls, bounds and enums match schemas/utilisation_samples.yaml."),
    _check("unique_key", "runs", "No run_id twice in the partition."),
    _check("unique_key", "utilisation_samples", "No (run_id, server_id, ts) twice in the partition."),
    _check("row_count_vs_trailing_week", "runs",
           "Warns when the day's run count is outside 0.5x..2x of the median of the previous 7 days.", blocking=False),
]


@dg.multi_asset(name="raw_ingest", specs=[_spec(t) for t in RAW_TABLES], partitions_def=DAILY, check_specs=CHECKS)
def raw_ingest(context: dg.AssetExecutionContext, fleet: FleetHome):
    """Read every landing file of the day, validate each row against its contract, write the day whole."""
    day = context.partition_key
    home = fleet.data_home()
    result = ingest_day(home, day, fleet.hardware().platforms.keys())
    ledger = result.ingest_ledger

    not_reconciled = reconciliation(ledger)
    checks = [dg.AssetCheckResult(
        asset_key="ingest_ledger", check_name="reconciles", passed=not_reconciled.height == 0,
        description=None if not_reconciled.height == 0 else f"{not_reconciled.height} file(s) do not reconcile",
        metadata={"files": ledger.height, "files_not_reconciling": not_reconciled.height,
                  "rows_in": int(ledger["rows_in"].sum()), "rows_accepted": int(ledger["rows_accepted"].sum()),
                  "rows_quarantined": int(ledger["rows_quarantined"].sum())})]
    for table in ("runs", "utilisation_samples"):
        frame = result.frames()[table]
        problems = conformance_violations(frame, contract(table))
        dups = key_duplicates(frame, contract(table))
        checks.append(dg.AssetCheckResult(asset_key=table, check_name="conforms_to_contract", passed=not problems,
                                          metadata={"violations": dg.MetadataValue.json(problems), "rows": frame.height}))
        checks.append(dg.AssetCheckResult(asset_key=table, check_name="unique_key", passed=dups == 0,
                                          metadata={"duplicated_rows": dups, "key": ", ".join(contract(table).primary_key)}))
    promote = all(c.passed for c in checks)

    history = partition_row_counts(home, "runs")
    anomaly = row_count_anomaly({d: n for d, n in history.items() if d != day}, day, result.runs.height)
    checks.append(dg.AssetCheckResult(
        asset_key="runs", check_name="row_count_vs_trailing_week", passed=anomaly.passed,
        severity=dg.AssetCheckSeverity.WARN, description=anomaly.message,
        metadata={"rows": anomaly.count, "trailing_median": anomaly.baseline, "ratio": anomaly.ratio,
                  "days_compared": anomaly.days_compared}))

    for table in RAW_TABLES:
        frame = result.frames()[table]
        if table in ("runs", "utilisation_samples") and not promote:
            context.log.error(f"{table} for {day} not promoted: a blocking check failed; the last good partition stays")
            continue
        path = lake.write_partition(home, table, day, frame)
        meta = {"dagster/row_count": frame.height, "path": dg.MetadataValue.path(str(path))}
        if table == "ingest_ledger":
            meta["ledger"] = preview(frame.drop("sha256", "ingested_at"), rows=20)
        if table == "quarantine":
            meta["by_reason"] = dg.MetadataValue.json(
                {r: n for r, n in frame.group_by("reason_code").len().sort("len", descending=True).iter_rows()})
            if frame.height:
                meta["first_rejects"] = preview(frame.select("source_file", "row_number", "reason_code", "message"))
        yield dg.MaterializeResult(asset_key=table, metadata=meta)
    yield from checks


def raw_frames(home, day: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(runs, utilisation_samples) of one day, read back from the lake."""
    return lake.read_partition(home, "runs", day), lake.read_partition(home, "utilisation_samples", day)
