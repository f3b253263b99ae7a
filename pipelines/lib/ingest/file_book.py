"""The day's files as its ledger sees them: each file's entry and rejects, which content was seen first
today (BLAKE3) and what other days accepted; the day's quarantine and ledger frames come from here."""

from __future__ import annotations

import datetime as dt

import polars as pl

from pipelines.lib.ingest import dedupe
from pipelines.lib.ingest.day_state import FileState
from pipelines.lib.ingest.entries import FileEntry, RejectLog, ledger_frame, quarantine_frame
from pipelines.lib.settings import IngestLimits
from pipelines.lib.storage.landing import LandingFile

HASH_FIRST_BYTES = 8 << 20  # files up to this size are hashed before reading (a duplicate is never read)


class FileBook:
    """Every file of the day (landing files, and the rows derived from one), in the order they were met."""

    def __init__(self, day_date: dt.date, now: dt.datetime, limits: IngestLimits, prior: dedupe.Prior):
        self.day_date, self.now, self.limits, self.prior = day_date, now, limits, prior
        self.files: list[FileState] = []
        self.seen: dict[str, tuple[str, int]] = {}  # BLAKE3 -> (first file today, its rows)
        self.seen_sizes: set[int] = set()

    def add(
        self, lf: LandingFile, order: int, table: str | None, derived_from: FileState | None = None
    ) -> FileState:
        f = FileState(
            lf=lf,
            order=order,
            entry=self.entry(lf, table),
            table=table,
            derived_from=derived_from,
            rejects=self.reject_log(),
        )
        self.files.append(f)
        return f

    def reject_log(self) -> RejectLog:
        return RejectLog(self.limits.max_rejects_per_file, self.limits.raw_record_max_bytes)

    def entry(self, lf: LandingFile, table: str | None) -> FileEntry:
        return FileEntry(
            day=self.day_date,
            source=lf.source,
            source_file=lf.relpath,
            size_bytes=lf.signature[1],
            table_name=table,
            ingested_at=self.now,
        )

    def may_repeat(self, size: int) -> bool:
        """Could a file of this size repeat one already known? (Then it is hashed before it is read.)"""
        return size <= HASH_FIRST_BYTES or size in self.prior.sizes or size in self.seen_sizes

    def remember(self, f: FileState) -> None:
        """``f`` is the first delivery of its content today (unless one was already remembered)."""
        self.seen.setdefault(f.entry.blake3, (f.lf.relpath, f.entry.rows_in))
        self.seen_sizes.add(f.entry.size_bytes)

    def quarantine(self) -> pl.DataFrame:
        return quarantine_frame(
            [(f.entry, None if f.entry.problem else f.rejects.entries(f.lf.relpath)) for f in self.files]
        )

    def ledger(self) -> pl.DataFrame:
        return ledger_frame([(f.entry, *f.counts()) for f in self.files if f.derived_from is None])
