"""`fleet ingest` without the printing: deliver a folder into landing, ingest days, count what happened."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.lib.paths import DataHome
from pipelines.lib.preflight import UsageError


@dataclass
class IngestSummary:
    """Totals over the ingested days, for one screen of output."""

    days: list[str]
    files: int = 0
    rows_in: int = 0
    rows_accepted: int = 0
    rows_quarantined: int = 0
    files_by_status: dict[str, int] = field(default_factory=dict)
    entries_by_reason: dict[str, int] = field(default_factory=dict)  # most entries first
    blocked: list[str] = field(default_factory=list)  # days not promoted: a blocking check failed


def deliver_tree(src: Path, home: DataHome) -> list[str]:
    """Copy a folder in the landing layout (<source>/<YYYY-MM-DD>/<file>) into the data home's landing;
    returns the days delivered."""
    from pipelines.lib.ingest import landing_days
    from synthetic_fleet.writers import write_bytes_atomic

    probe = DataHome(src.parent) if src.name == "landing" else None
    days = landing_days(probe) if probe else []
    files = [p for p in sorted(src.glob("*/*/*")) if p.is_file() and not p.name.startswith(".")]
    if not files:
        raise UsageError(f"{src} holds no files in the landing layout <source>/<YYYY-MM-DD>/<file>")
    for f in files:
        write_bytes_atomic(home.landing / f.relative_to(src), f.read_bytes())
    return days or sorted({f.parent.name for f in files})


def ingest_days(home: DataHome, days: Iterable[str]) -> IngestSummary:
    """Ingest each landing day against the home's hardware catalog, then republish the analyst catalog."""
    import polars as pl

    from pipelines.lib.ingest import ingest_partition
    from pipelines.lib.warehouse import publish_catalog
    from synthetic_fleet.catalog import load_hardware

    summary = IngestSummary(days=list(days))
    platforms = load_hardware(home.user_catalog_dir / "hardware.yaml").platforms.keys()
    ledgers, quarantines = [], []
    for day in summary.days:
        outcome = ingest_partition(home, day, platforms)
        ledgers.append(outcome.result.ingest_ledger)
        quarantines.append(outcome.result.quarantine)
        if not outcome.promoted:
            summary.blocked.append(day)
    publish_catalog(home)
    ledger, quarantine = pl.concat(ledgers), pl.concat(quarantines)
    summary.files = ledger.height
    summary.rows_in = int(ledger["rows_in"].sum())
    summary.rows_accepted = int(ledger["rows_accepted"].sum())
    summary.rows_quarantined = int(ledger["rows_quarantined"].sum())
    summary.files_by_status = dict(ledger.group_by("file_status").len().sort("file_status").iter_rows())
    by_reason = quarantine.group_by("reason_code").agg(pl.len().alias("entries"))
    summary.entries_by_reason = dict(by_reason.sort("entries", descending=True).iter_rows())
    return summary
