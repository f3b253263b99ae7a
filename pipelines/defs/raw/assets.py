"""Raw layer: one landing day -> validated Parquet (runs, utilisation_samples) + quarantine + ingest ledger."""


import dagster as dg
import polars as pl

from pipelines.defs.metadata import OWNERS, description, preview, spec_metadata
from pipelines.defs.partitions import DAILY
from pipelines.defs.resources import FleetHome
from pipelines.lib import lake
from pipelines.lib.contracts import conformance_violations, contract
from pipelines.lib.ingest import ingest_day, reconciliation

RAW_TABLES = ("runs", "utilisation_samples", "quarantine", "ingest_ledger")


def _spec(table: str) -> dg.AssetSpec:
    return dg.AssetSpec(table, group_name="raw", kinds={"polars", "parquet"}, owners=OWNERS,
                        description=description(table), metadata=spec_metadata(table),
                        tags={"layer": "raw"})


@dg.multi_asset(
    name="raw_ingest",
    specs=[_spec(t) for t in RAW_TABLES],
    partitions_def=DAILY,
    check_specs=[
        dg.AssetCheckSpec("reconciles", asset="ingest_ledger", blocking=True,
                          description="Every landing file: rows_in = rows_accepted + rows_quarantined."),
        dg.AssetCheckSpec("conforms_to_contract", asset="runs", blocking=True,
                          description="The written partition matches schemas/runs.yaml (types, nulls, bounds, key)."),
        dg.AssetCheckSpec("conforms_to_contract", asset="utilisation_samples", blocking=True,
                          description="The written partition matches schemas/utilisation_samples.yaml."),
    ],
)
def raw_ingest(context: dg.AssetExecutionContext, fleet: FleetHome):
    """Read every landing file of the day, validate each row against its contract, write the day whole."""
    day = context.partition_key
    home = fleet.data_home()
    result = ingest_day(home, day, fleet.hardware().platforms.keys())
    for table, frame in result.frames().items():
        path = lake.write_partition(home, table, day, frame)
        meta = {"dagster/row_count": frame.height, "path": dg.MetadataValue.path(str(path))}
        if table == "ingest_ledger":
            meta["files"] = frame.height
            meta["ledger"] = preview(frame.drop("sha256", "ingested_at"), rows=20)
        if table == "quarantine":
            by_reason = frame.group_by("reason_code").len().sort("len", descending=True)
            meta["by_reason"] = dg.MetadataValue.json(dict(by_reason.iter_rows()))  # a handful of reason codes
        yield dg.MaterializeResult(asset_key=table, metadata=meta)

    bad = reconciliation(result.ingest_ledger)
    yield dg.AssetCheckResult(
        asset_key="ingest_ledger", check_name="reconciles", passed=bad.height == 0,
        metadata={"files": result.ingest_ledger.height, "files_not_reconciling": bad.height,
                  "rows_in": int(result.ingest_ledger["rows_in"].sum()),
                  "rows_accepted": int(result.ingest_ledger["rows_accepted"].sum()),
                  "rows_quarantined": int(result.ingest_ledger["rows_quarantined"].sum())},
    )
    for table in ("runs", "utilisation_samples"):
        written = lake.read_partition(home, table, day)
        problems = conformance_violations(written, contract(table))
        yield dg.AssetCheckResult(asset_key=table, check_name="conforms_to_contract", passed=not problems,
                                  metadata={"violations": dg.MetadataValue.json(problems), "rows": written.height})


def raw_frames(home, day: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(runs, utilisation_samples) of one day, read back from the lake."""
    return lake.read_partition(home, "runs", day), lake.read_partition(home, "utilisation_samples", day)
