"""Promotion of a staged day: blocking checks decide whether runs and samples replace the day's
partitions; ledger, quarantine and extra fields are always written (they explain). Days are read
concurrently; promotion is serialised under one lock and a day that raced another is read again."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipelines.lib.contracts import conformance_violations, contract, key_duplicates
from pipelines.lib.ingest.cross_row import SAMPLE_KEY
from pipelines.lib.ingest.day import ingest_day, reconciliation
from pipelines.lib.ingest.day_state import METRICS, DayIngest
from pipelines.lib.ingest.dedupe import read_prior
from pipelines.lib.ingest.split import merge_day, read_task, settle_day, write_tasks
from pipelines.lib.paths import DataHome
from pipelines.lib.settings import DEFAULT_LIMITS, IngestLimits, reader_name
from pipelines.lib.storage import lake
from pipelines.lib.storage.landing import day_files


@dataclass
class CheckOutcome:
    table: str
    name: str
    passed: bool
    metadata: dict


@dataclass
class PartitionOutcome:
    """What one day's ingest wrote, and the blocking checks that decided whether runs and samples were
    promoted."""

    day: str
    result: DayIngest
    checks: list[CheckOutcome]
    promoted: bool
    written: dict[str, str]  # table -> where it lives


def blocking_checks(result: DayIngest, landing_now: set[str] | None = None) -> list[CheckOutcome]:
    """Reconciliation (every file's counts, and every file of the day's landing folders in the ledger:
    ``landing_now`` lists them as they are now), contract conformance and key uniqueness of what is about
    to be written."""
    ledger = result.ingest_ledger
    bad = reconciliation(ledger)
    unread = sorted((landing_now or set()) - set(ledger["source_file"].to_list()))
    checks = [
        CheckOutcome(
            "ingest_ledger",
            "reconciles",
            bad.height == 0 and not unread,
            {
                "files": ledger.height,
                "files_not_reconciling": bad.height,
                "landing_files_not_in_ledger": unread,
                "rows_in": int(ledger["rows_in"].sum()),
                "rows_accepted": int(ledger["rows_accepted"].sum()),
                "rows_quarantined": int(ledger["rows_quarantined"].sum()),
            },
        )
    ]
    runs_c = contract("runs")
    problems = conformance_violations(result.runs, runs_c)
    dups = key_duplicates(result.runs, runs_c)
    checks.append(
        CheckOutcome(
            "runs", "conforms_to_contract", not problems, {"violations": problems, "rows": result.runs.height}
        )
    )
    checks.append(
        CheckOutcome(
            "runs", "unique_key", dups == 0, {"duplicated_rows": dups, "key": ", ".join(runs_c.primary_key)}
        )
    )
    checks.append(
        CheckOutcome(
            "utilisation_samples",
            "conforms_to_contract",
            not result.samples_violations,
            {"violations": result.samples_violations, "rows": result.samples_rows},
        )
    )
    checks.append(
        CheckOutcome(
            "utilisation_samples",
            "unique_key",
            result.samples_duplicated == 0,
            {"duplicated_rows": result.samples_duplicated, "key": ", ".join(SAMPLE_KEY)},
        )
    )
    return checks


def _raced(home: DataHome, day: str, result: DayIngest) -> bool:
    """Did another day accept one of this day's files or runs while this day was being read?"""
    now = read_prior(home, day)
    new_files = set(now.files) - result.prior_files
    new_runs = set(now.runs) - result.prior_runs
    mine_files = set(result.ingest_ledger.filter(pl.col("rows_accepted") > 0)["blake3"].to_list())
    return bool(new_files & mine_files or new_runs & set(result.runs["run_id"].to_list()))


def ingest_partition(
    home: DataHome,
    day: str,
    platforms: Iterable[str],
    limits: IngestLimits = DEFAULT_LIMITS,
) -> PartitionOutcome:
    """Ingest a day and write it, outside Dagster: ``settle_slices``, each slice read in this process,
    ``promote_day`` (the steps of ``raw_ingest``, in order)."""
    platforms = list(platforms)
    tasks = settle_slices(home, day, platforms, limits)
    try:
        parts = [read_task(t, reader_name()) for t in tasks]
    except BaseException:
        if tasks:
            shutil.rmtree(tasks[0].parent, ignore_errors=True)
        raise
    return promote_day(home, day, platforms, limits, parts)


def settle_slices(home: DataHome, day: str, platforms: Iterable[str], limits: IngestLimits) -> list[Path]:
    """The first step of a day whose sample files hold more than ``limits.slice_bytes`` (when set): its runs
    settled, under the day's lock, and one task file per slice (``split.read_task`` reads one anywhere);
    [] when the day fits one pass."""
    if not limits.slice_bytes:
        return []
    with lake.store(home).lock(f"day={day}"):
        slices = settle_day(home, day, list(platforms), limits)
    return write_tasks(home, slices)


def promote_day(
    home: DataHome, day: str, platforms: Iterable[str], limits: IngestLimits, parts: list[Path]
) -> PartitionOutcome:
    """The last step: the day merged from its slices' sealed states (``parts``, in slice order; with none,
    read here in one pass), then written. Ledger, quarantine and extra fields are always written (they
    explain); runs and samples only if every blocking check passes, else the last good partition stays.

    Writers of one day queue on the lake's lock of that day (across machines sharing the lake); days are
    promoted one at a time under the lake's promotion lock. If another day accepted one of this day's files
    or runs meanwhile (the same delivery in two day folders), the day is read again in one pass under the
    lock, so the first delivery wins across days as it does within one. The split's folder goes whatever
    happens."""
    platforms = list(platforms)
    lake_ = lake.store(home)
    root = parts[0].parent.parent if parts else None
    try:
        with lake_.lock(f"day={day}"):
            # left by a killed one-pass writer of this day (we hold its lock: nobody is still writing them)
            for stale in home.staging.glob(f"day={day}.*"):
                shutil.rmtree(stale, ignore_errors=True)
            if root is not None:
                result = merge_day(home, root, parts)
            else:
                result = ingest_day(home, day, platforms, limits=limits)
            with lake_.lock("promote"):
                if _raced(home, day, result):
                    result.discard()
                    result = ingest_day(home, day, platforms, limits=limits)
                return _promote(home, day, result)
    finally:
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


def _promote(home: DataHome, day: str, result: DayIngest) -> PartitionOutcome:
    """Write the day: ledger, quarantine and extra fields always; runs and samples if the checks pass.
    Each table's day is one commit; the ledger is committed last (a day whose ledger is written is whole)."""
    try:
        checks = blocking_checks(result, {f.relpath for f in day_files(home, day)})
        promote = all(c.passed for c in checks)
        lake.write_partition(home, "quarantine", day, result.quarantine)
        lake.promote_partition(home, "extra_fields", day, result.extra_fields_path)
        lake.write_partition(home, "sample_volume", day, result.sample_volume)
        written = ["quarantine", "extra_fields", "sample_volume"]
        if promote:
            lake.write_partition(home, "runs", day, result.runs)
            lake.promote_partition(home, "utilisation_samples", day, result.samples_paths)
            lake.promote_partition(home, METRICS, day, result.metric_samples_path)
            written += ["runs", "utilisation_samples", METRICS]
        lake.write_partition(home, "ingest_ledger", day, result.ingest_ledger)
        written.append("ingest_ledger")
    finally:
        result.discard()
    # published: read them from the lake
    result.samples_paths = []
    result.metric_samples_path = result.extra_fields_path = None
    where = {t: lake.store(home).table_uri(t) for t in written}
    return PartitionOutcome(day=day, result=result, checks=checks, promoted=promote, written=where)
