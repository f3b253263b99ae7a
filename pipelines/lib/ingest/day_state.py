"""What one landing day's ingest holds and hands on: each file's state while it is read (``FileState``), the
staged samples of a part of the day (``SamplePart``) and the day's result, staged and ready to promote
(``DayIngest``)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from pipelines.lib.contracts import Contract, contract
from pipelines.lib.ingest.entries import FileEntry, RejectLog
from pipelines.lib.ingest.readers import Format
from pipelines.lib.ingest.readers.base import FileInfo, Source
from pipelines.lib.storage.landing import LandingFile

METRICS = (
    "metric_samples"  # what Prometheus and OpenMetrics files feed (their format says so, not their name)
)


@dataclass
class FileState:
    """One landing file's ledger entry and what ingest learnt while reading it."""

    lf: LandingFile
    order: int
    entry: FileEntry
    table: str | None = None  # the contract it feeds (its format's or its name's)
    derived_from: FileState | None = None  # rows derived from this landing file's samples (no ledger row)
    accepted: int = 0
    rejects: RejectLog = field(default_factory=RejectLog)
    row_groups: list[int] = field(default_factory=list)  # staged samples' row groups of this file
    extra_groups: list[int] = field(default_factory=list)  # staged extra fields' row groups
    run_extras: list[pl.DataFrame] = field(default_factory=list)  # runs: staged once duplicates are settled
    fmt: Format | None = None
    src: Source | None = None
    info: FileInfo = field(default_factory=FileInfo)
    hashed: bool = False  # reached the duplicate check (a file that failed to open or is empty did not)

    def contract(self) -> Contract:
        """The contract of the table it feeds (known before it is read)."""
        if self.entry.table_name is None:
            raise RuntimeError(f"{self.lf.relpath}: read before its table was known")
        return contract(self.entry.table_name)

    def opened(self) -> tuple[Format, Source]:
        """Its format and source (set before a row is read)."""
        if self.fmt is None or self.src is None:
            raise RuntimeError(f"{self.lf.relpath}: read before it was opened")
        return self.fmt, self.src

    @property
    def from_lines(self) -> bool:
        """Raw records are the rows' original lines (read back when needed)."""
        return self.fmt is not None and self.fmt.raw_is_line

    def counts(self) -> tuple[int, int]:
        """(rows accepted, rows quarantined) for the ledger."""
        if self.entry.problem is not None:
            return 0, self.entry.rows_in
        return self.accepted, self.rejects.total


@dataclass
class SamplePart:
    """Staged samples of one part of the day (the whole day, or a slice read on a worker) and one 64-bit key
    hash per sample, row group for row group, with what conformance found in them."""

    samples: Path
    hashes: Path
    group_sizes: list[int]
    problems: dict[str, str]


@dataclass
class DayIngest:
    """One day's ingest, staged beside the lake and ready to be promoted."""

    day: str
    staging: Path
    runs: pl.DataFrame
    quarantine: pl.DataFrame
    ingest_ledger: pl.DataFrame
    samples_paths: list[Path]  # the staged samples: one file, or one per slice of a split day
    samples_rows: int
    samples_violations: list[str]
    samples_duplicated: int
    extra_fields_path: Path | None
    extra_fields_rows: int
    sample_volume: pl.DataFrame
    metric_samples_path: Path | None = None  # the day's Prometheus samples (staged)
    metric_samples_rows: int = 0
    notes: list[str] = field(default_factory=list)  # what the Prometheus derivation left out
    landing_files: frozenset[str] = frozenset()  # the day's landing files as listed when reading began
    prior_files: frozenset[str] = frozenset()  # other days' accepted file hashes, as read at the start
    prior_runs: frozenset[str] = frozenset()  # other days' run ids, as read at the start
    slices: list[dict] = field(default_factory=list)  # a split day's slices: files, read by which process

    @property
    def utilisation_samples(self) -> pl.DataFrame:
        """The staged samples (reads them whole: for tests and small days)."""
        if not self.samples_paths:
            return contract("utilisation_samples").empty_frame()
        return pl.read_parquet(self.samples_paths)

    @property
    def metric_samples(self) -> pl.DataFrame:
        """The staged Prometheus samples (reads them whole: for tests and small days)."""
        if self.metric_samples_path is None:
            return contract(METRICS).empty_frame()
        return pl.read_parquet(self.metric_samples_path)

    @property
    def extra_fields(self) -> pl.DataFrame:
        if self.extra_fields_path is None:
            return contract("extra_fields").empty_frame()
        return pl.read_parquet(self.extra_fields_path)

    def row_counts(self) -> dict[str, int]:
        return {
            "runs": self.runs.height,
            "utilisation_samples": self.samples_rows,
            "quarantine": self.quarantine.height,
            "ingest_ledger": self.ingest_ledger.height,
            "extra_fields": self.extra_fields_rows,
            "sample_volume": self.sample_volume.height,
            METRICS: self.metric_samples_rows,
        }

    def frames(self) -> dict[str, pl.DataFrame]:
        """Every table as a frame (reads staged files whole: for tests and small days)."""
        return {
            "runs": self.runs,
            "utilisation_samples": self.utilisation_samples,
            "quarantine": self.quarantine,
            "ingest_ledger": self.ingest_ledger,
            "extra_fields": self.extra_fields,
            "sample_volume": self.sample_volume,
            METRICS: self.metric_samples,
        }

    def discard(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
