"""Promotion of a staged day: blocking checks decide whether runs and samples replace the day's
partitions; ledger, quarantine and extra fields are always written (they explain). Days are read
concurrently; promotion is serialised under one lock and a day that raced another is read again."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from pipelines.lib.contracts import conformance_violations, contract, key_duplicates
from pipelines.lib.ingest.cross_row import SAMPLE_KEY
from pipelines.lib.ingest.day import ingest_day, reconciliation
from pipelines.lib.ingest.day_state import METRICS, DayIngest
from pipelines.lib.ingest.dedupe import read_prior
from pipelines.lib.ingest.split import merge_day, read_slices, settle_day
from pipelines.lib.paths import DataHome
from pipelines.lib.settings import DEFAULT_LIMITS, IngestLimits
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
    """Ingest a day and write it. Ledger, quarantine and extra fields are always written (they explain);
    runs and samples are promoted only if every blocking check passes, else the last good partition stays.

    Writers of one day queue on the lake's lock of that day (across machines sharing the lake); days are
    read concurrently and promoted one at a time under the lake's promotion lock. If another day accepted
    one of this day's files or runs meanwhile (the same delivery in two day folders), the day is read again
    under the lock, so the first delivery wins across days as it does within one. A day whose sample files
    hold more than ``limits.slice_bytes`` (when set) is read in slices, in processes of their own, and merged
    (``pipelines.lib.ingest.split``): the same day as one pass gives; on a `fleet worker`, its slices are
    also offered to the other workers (``split.offer_slices_with``)."""
    platforms = list(platforms)
    lake_ = lake.store(home)
    with lake_.lock(f"day={day}"):
        # left by a killed writer of this day (we hold its lock, so nobody is still writing them)
        for stale in [*home.staging.glob(f"day={day}.*"), *home.staging.glob(f"split-day={day}.*")]:
            shutil.rmtree(stale, ignore_errors=True)
        result = _read_day(home, day, platforms, limits)
        with lake_.lock("promote"):
            if _raced(home, day, result):
                result.discard()
                result = ingest_day(home, day, platforms, limits=limits)
            return _promote(home, day, result)


def _read_day(
    home: DataHome,
    day: str,
    platforms: list[str],
    limits: IngestLimits,
) -> DayIngest:
    """The day staged: in one pass, or in slices merged when its sample files are larger than a slice."""
    if not limits.slice_bytes:
        return ingest_day(home, day, platforms, limits=limits)
    slices = settle_day(home, day, platforms, limits)
    if not slices:
        return ingest_day(home, day, platforms, limits=limits)
    try:
        parts = read_slices(home, slices, limits.slice_processes)
        return merge_day(home, slices[0].root, parts)
    except BaseException:
        shutil.rmtree(slices[0].root, ignore_errors=True)
        raise


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
