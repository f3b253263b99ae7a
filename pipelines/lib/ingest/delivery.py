"""`fleet ingest` without the printing: deliver a folder into landing, ingest days, count what happened."""

from __future__ import annotations

import os
import shutil
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.lib.errors import UsageError
from pipelines.lib.paths import DataHome
from pipelines.lib.settings import DEFAULT_LIMITS, IngestLimits


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
    not_read: str | None = None  # the warning naming landing entries no day reads (misplaced, hidden)
    volume_problems: list[str] = field(default_factory=list)  # "<day>: <source>: what did not arrive"
    notes: list[str] = field(default_factory=list)  # "<day>: what the Prometheus derivation left out"
    fix_first: list[str] = field(default_factory=list)  # unknown columns, fields missing from every row
    examples: dict[str, str] = field(default_factory=dict)  # reason -> its first entry, where and why


def deliver_tree(src: Path, home: DataHome) -> list[str]:
    """Copy a folder in the landing layout (<source>/<YYYY-MM-DD>/<file>) into the data home's landing;
    returns the days delivered.

    Entries are delivered as the landing folder would hold them, never read through: a link is delivered
    as a link to the same target (ingest then quarantines it as ``file_outside_landing``), a FIFO or other
    non-regular file as a FIFO (``file_not_regular``); misplaced files keep their place and are reported."""
    from pipelines.lib import fileio
    from pipelines.lib.storage.landing import walk

    entries = list(walk(src))
    if not [e for e in entries if e.day is not None]:
        raise UsageError(f"{src} holds no files in the landing layout <source>/<YYYY-MM-DD>/<file>")
    for e in entries:
        dst = home.landing / e.path.relative_to(src)
        dst.parent.mkdir(parents=True, exist_ok=True)
        reason = e.problem[0] if e.problem else None
        if reason == "file_hidden" and e.path.is_dir():
            shutil.copytree(e.path, dst, symlinks=True, dirs_exist_ok=True)
        elif e.path.is_symlink() or reason == "file_outside_landing":
            dst.unlink(missing_ok=True)
            dst.symlink_to(os.path.realpath(e.path))
        elif reason == "file_not_regular":
            dst.unlink(missing_ok=True)
            if stat.S_ISFIFO(e.path.lstat().st_mode):
                os.mkfifo(dst)
        else:
            with fileio.atomic_target(dst) as tmp:
                shutil.copyfile(e.path, tmp)
    return sorted({e.day for e in entries if e.day is not None})


def not_read_warning(home: DataHome) -> str | None:
    """The landing entries no day reads (outside <source>/<YYYY-MM-DD>/, or hidden), in one line."""
    from pipelines.lib.storage import landing

    return landing.not_read_warning(landing.not_read(home))


def ingest_days(
    home: DataHome,
    days: Iterable[str],
    progress: Callable[[str], None] = lambda _: None,
    limits: IngestLimits = DEFAULT_LIMITS,
) -> IngestSummary:
    """Ingest each landing day against the home's hardware catalog, then republish the analyst catalog;
    ``progress`` hears of each day as it is done."""
    import polars as pl

    from pipelines.lib.ingest import advice, ingest_partition
    from pipelines.lib.ingest.dedupe import dependent_days, dependent_note
    from pipelines.lib.ingest.volume import failing
    from pipelines.lib.query.warehouse import publish_catalog
    from workload_model.catalog import load_hardware

    days = list(days)
    # days that kept out deliveries as accepted on one of these: read again after them, one at a time
    after = {d: on for d, on in dependent_days(home, days).items() if d not in days}
    for day, on in sorted(after.items()):
        progress(f"  [~] {day}: {dependent_note(on)}")
    summary = IngestSummary(days=days + sorted(after))
    platforms = load_hardware(home.user_catalog_dir / "hardware.yaml").platforms.keys()
    ledgers, quarantines = [], []
    for i, day in enumerate(summary.days, 1):
        start = time.perf_counter()
        outcome = ingest_partition(home, day, platforms, limits)
        led = outcome.result.ingest_ledger
        progress(
            f"  [{i}/{len(summary.days)}] {day}: {led.height} files, {int(led['rows_in'].sum()):,} rows in "
            f"({time.perf_counter() - start:.1f} s)"
        )
        ledgers.append(outcome.result.ingest_ledger)
        quarantines.append(outcome.result.quarantine)
        if not outcome.promoted:
            summary.blocked.append(day)
        summary.volume_problems += [f"{day}: {m}" for m in failing(outcome.result.sample_volume)["message"]]
        summary.notes += [f"{day}: {n}" for n in outcome.result.notes]
    publish_catalog(home)
    ledger, quarantine = pl.concat(ledgers), pl.concat(quarantines)
    summary.files = ledger.height
    summary.rows_in = int(ledger["rows_in"].sum())
    summary.rows_accepted = int(ledger["rows_accepted"].sum())
    summary.rows_quarantined = int(ledger["rows_quarantined"].sum())
    summary.files_by_status = dict(ledger.group_by("file_status").len().sort("file_status").iter_rows())
    by_reason = quarantine.group_by("reason_code").agg(pl.len().alias("entries"))
    summary.entries_by_reason = dict(by_reason.sort("entries", descending=True).iter_rows())
    summary.fix_first = advice.unknown_columns(ledger) + advice.missing_everywhere(ledger, quarantine)
    summary.examples = advice.examples(quarantine)
    summary.not_read = not_read_warning(home)
    return summary
