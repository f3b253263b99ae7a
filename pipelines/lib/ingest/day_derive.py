"""Prometheus samples into the day: the staged samples settled (a sample delivered again is quarantined),
then runs and utilisation samples derived from them, validated and staged like any file's rows, and the
day's runs settled with the derived ones among them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from pipelines.lib.contracts import contract
from pipelines.lib.frames import arrow_frame
from pipelines.lib.ingest import dedupe
from pipelines.lib.ingest.day_runs import DayRuns, stage_checked
from pipelines.lib.ingest.day_staging import DayStaging
from pipelines.lib.ingest.day_state import METRICS, FileState
from pipelines.lib.ingest.entries import TS_OUT, reject_frame, row_rejects
from pipelines.lib.ingest.file_book import FileBook
from pipelines.lib.ingest.line_texts import Allowed
from pipelines.lib.ingest.prometheus.derive import derive_day, landing_runs
from pipelines.lib.ingest.prometheus.mapping import load_mapping
from pipelines.lib.ingest.readers.base import ROW
from pipelines.lib.ingest.validation import validate_rows
from pipelines.lib.paths import DataHome
from pipelines.lib.settings import IngestLimits
from workload_model.catalog import load_hardware


@dataclass
class Derivation:
    """One day's derivation, over the day's files, runs and staged files (the runs are settled here)."""

    home: DataHome
    day: str
    limits: IngestLimits
    allowed: Allowed
    book: FileBook
    runs: DayRuns
    staged: DayStaging
    derived: dict[tuple[str, str], FileState] = field(default_factory=dict)  # (file, table) -> its rows

    def run(self) -> list[str]:
        """Derive and settle; what the derivation left out, in words."""
        path = self.settle_metrics()
        if path is None:
            self._settle_runs()
            return []
        hw = load_hardware(self.home.user_catalog_dir / "hardware.yaml")
        mapping = load_mapping(self.home, frozenset(hw.platforms))
        derived = derive_day(path, self.day, mapping, hw, self.staged.staging, self.limits.duckdb_memory)
        self._derived_runs(landing_runs(derived))
        self._settle_runs()
        if derived.samples_path is not None:
            self._derived_samples(derived.samples_path)
        if derived.bad_readings_path is not None:
            self._bad_readings(derived.bad_readings_path)
        return derived.notes

    def _settle_runs(self) -> None:
        b = self.book
        self.runs.settle(b.files, b.prior.runs, self.home, self.allowed, self.limits.raw_record_max_bytes)

    def settle_metrics(self) -> Path | None:
        """The staged Prometheus samples less dropped row groups and repeated samples (the same series at
        the same time delivered again: the first delivery is kept, the others are duplicate_key)."""
        staged = self.staged
        path = staged.metrics.close()
        if path is None:
            return None
        if staged.dead_metrics:
            path = staged.rewrite_metrics(path, None)
            if path is None:
                return None
        files = self.book.files
        order = {f.lf.relpath: f.order for f in files if f.derived_from is None}
        repeats = dedupe.metric_repeats(path, order, staged.staging / "spill", self.limits.duckdb_memory)
        if not repeats.height:
            return path
        by_file = {f.lf.relpath: f for f in files if f.table == METRICS}
        cols = [c.name for c in contract(METRICS).landing_columns]
        for (rel,), part in repeats.group_by("source_file"):
            f = by_file[rel]
            rows = part.rename({"row_number": ROW})
            message = pl.format(
                "sample {}{} at {} was already delivered in {}; the first delivery is kept",
                "metric",
                "labels",
                pl.col("ts").dt.to_string(TS_OUT),
                "kept_in",
            )
            f.rejects.add(
                reject_frame(row_rejects(rows, "duplicate_key", "ts", message, cols, from_lines=False))
            )
            f.accepted -= rows.height
        return staged.rewrite_metrics(path, repeats.select("source_file", "row_number"))

    def _derived_for(self, rel: str, table: str) -> FileState:
        """The rows of ``table`` derived from landing file ``rel``: quarantined under it, in no ledger row."""
        key = (rel, table)
        if key not in self.derived:
            files = self.book.files
            origin = next(f for f in files if f.lf.relpath == rel and f.derived_from is None)
            self.derived[key] = self.book.add(origin.lf, len(files), table, derived_from=origin)
        return self.derived[key]

    def _rejects(self, f: FileState, rejected: pl.DataFrame) -> None:
        f.rejects.add(
            reject_frame(
                rejected.with_columns(
                    pl.concat_str(pl.lit("derived from Prometheus samples: "), "message").alias("message")
                )
            )
        )

    def _derived_runs(self, runs: pl.DataFrame) -> None:
        c = contract("runs")
        for (rel,), part in runs.group_by("anchor_file", maintain_order=True):
            f = self._derived_for(rel, "runs")
            v = validate_rows(
                part.rename({"anchor_row": ROW}).drop("anchor_file"), c, carry=(ROW,), allowed=self.allowed
            )
            if v.rejected.height:
                self._rejects(f, v.rejected)
            self.runs.add(v.accepted, rel, f.order)
            f.accepted += v.accepted.height

    def _derived_samples(self, path: Path) -> None:
        c = contract("utilisation_samples")
        names = [x.name for x in c.landing_columns]
        pf = pq.ParquetFile(path)
        for rg in range(pf.num_row_groups):
            batch = arrow_frame(pf.read_row_group(rg, columns=[*names, "anchor_file", "anchor_row"]))
            for (rel,), part in batch.group_by("anchor_file", maintain_order=True):
                f = self._derived_for(rel, "utilisation_samples")
                v = validate_rows(
                    part.rename({"anchor_row": ROW}).drop("anchor_file"),
                    c,
                    carry=(ROW,),
                    allowed=self.allowed,
                )
                if v.rejected.height:
                    self._rejects(f, v.rejected)
                stage_checked(f, v.accepted, self.runs, self.staged, exact=True)

    def _bad_readings(self, path: Path) -> None:
        """Quarantine the readings no derived sample could use, under their own lines."""
        pf = pq.ParquetFile(path)
        for rg in range(pf.num_row_groups):
            batch = arrow_frame(pf.read_row_group(rg)).rename({"row_number": ROW})
            for (rel,), part in batch.group_by("source_file", maintain_order=True):
                self._rejects(self._derived_for(rel, "utilisation_samples"), part)
