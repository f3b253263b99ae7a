"""What a day's ingest writes beside the lake while its files stream through: accepted samples (with one
64-bit key hash each), extra fields and Prometheus samples, each in a staged Parquet file; the row groups
a file's fault or a fallback made dead; the parts (a slice's staged samples) and the rewrites that leave
dead row groups and dropped rows out."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.lib.contracts import ConformanceProfile, contract
from pipelines.lib.frames import arrow_frame
from pipelines.lib.ingest import dedupe
from pipelines.lib.ingest.day_state import METRICS, FileState, SamplePart
from pipelines.lib.ingest.readers.base import ROW, FileProblem
from pipelines.lib.ingest.staging import StagedParquet
from pipelines.lib.storage import lake

DICTIONARY = ["run_id", "server_id", "role", "day"]  # the repetitive text columns
# Samples are the lake's bulk: snappy (Parquet's and DuckDB's default) costs a third of zstd's CPU for
# ~1.3x the bytes; the small tables keep zstd. Numbers and times are dictionary-encoded where they repeat.
SAMPLES_PARQUET = {"compression": "snappy", "use_dictionary": DICTIONARY, "dictionary_where_repetitive": True}
METRICS_PARQUET = {
    "compression": "snappy",
    "use_dictionary": ["metric", "labels", "type", "day", "source_file"],
    "dictionary_where_repetitive": True,
}


class DayStaging:
    """The staged files of one day (or of one slice of it) and their row groups."""

    def __init__(self, staging: Path, day_date: dt.date):
        self.staging, self.day_date = staging, day_date
        self.writers: list[StagedParquet] = []  # every staged file's writer, stopped by abort()
        self.samples = self._staged(
            staging / "utilisation_samples.parquet",
            contract("utilisation_samples").arrow_schema(),
            **SAMPLES_PARQUET,
        )
        self.hashes = self._staged(
            staging / "sample_keys.parquet", dedupe.HASH_SCHEMA, compression="none", use_dictionary=False
        )
        self.group_sizes: list[int] = []
        self.extras = self._staged(staging / "extra_fields.parquet", contract("extra_fields").arrow_schema())
        self.metrics = self._staged(
            staging / "metric_samples.parquet", contract(METRICS).arrow_schema(), **METRICS_PARQUET
        )
        self.dead_samples: set[int] = set()  # staged row groups dropped (a file's fault or a fallback)
        self.dead_extras: set[int] = set()
        self.dead_metrics: set[int] = set()
        # samples staged before this state's own (a split day's slices); row groups count across them all
        self.parts: list[SamplePart] = []
        self.extra_parts: list[tuple[Path, int]] = []  # extra fields staged before (path, row groups)
        self.sealed = False
        self.profile = ConformanceProfile(contract("utilisation_samples"))

    def _staged(self, path: Path, schema: pa.Schema, **options) -> StagedParquet:
        staged = StagedParquet(path, schema, **options)
        self.writers.append(staged)
        return staged

    def abort(self) -> None:
        """Stop every staged file's writer (after a failure), so that no open file keeps its space."""
        for staged in self.writers:
            staged.abort()

    def drop(self, f: FileState) -> None:
        """``f``'s staged row groups are dead: left out when the day settles."""
        (self.dead_metrics if f.table == METRICS else self.dead_samples).update(f.row_groups)
        self.dead_extras.update(f.extra_groups)
        f.row_groups, f.extra_groups = [], []

    # -- writing, batch by batch

    def write_samples(self, f: FileState, acc: pl.DataFrame) -> None:
        if not acc.height:
            return
        c = contract("utilisation_samples")
        rows = acc.select(
            [pl.lit(self.day_date).alias("day") if x == "day" else pl.col(x) for x in c.column_names]
        )
        table = rows.to_arrow().cast(self.samples.schema)  # types are the contract's by construction
        text_guard(table, f.lf.relpath)
        self.profile.update(rows)
        f.row_groups.append(self.samples.write(table))
        self.group_sizes.append(acc.height)
        f.accepted += acc.height
        self.hashes.write(dedupe.key_hashes(acc, ROW))

    def write_extras(self, f: FileState, extras: pl.DataFrame) -> None:
        if not extras.height:
            return
        rows = extras.select(
            pl.lit(self.day_date).alias("day"),
            pl.lit(f.lf.relpath).alias("source_file"),
            pl.col(ROW).alias("row_number"),
            pl.lit(f.entry.table_name).alias("table_name"),
            "fields",
        ).sort("row_number")
        try:
            table = lake.to_arrow(rows, "extra_fields")
        except pa.ArrowInvalid as exc:
            raise FileProblem("file_bad_encoding", f"{f.lf.relpath}: text that is not UTF-8 ({exc})") from exc
        f.extra_groups.append(self.extras.write(table))

    def write_metrics(self, f: FileState, acc: pl.DataFrame) -> None:
        if not acc.height:
            return
        c = contract(METRICS)
        rows = acc.with_columns(
            pl.lit(self.day_date).alias("day"),
            pl.lit(f.lf.relpath).alias("source_file"),
            pl.col(ROW).alias("row_number"),
        ).select(c.column_names)
        table = rows.to_arrow().cast(self.metrics.schema)
        text_guard(table, f.lf.relpath)
        f.row_groups.append(self.metrics.write(table))
        f.accepted += acc.height

    def seal(self) -> None:
        """Close the staged writers; what they wrote becomes this state's last part (once: a state is
        sealed before it travels to another worker, and a merged day is sealed when its samples settle)."""
        if self.sealed:
            return
        self.sealed = True
        samples, hashes = self.samples.close(), self.hashes.close()
        if samples is not None:
            if hashes is None:  # a key hash is staged with every sample
                raise RuntimeError(f"{self.staging}: staged samples without their key hashes")
            self.parts.append(
                SamplePart(samples, hashes, list(self.group_sizes), dict(self.profile.problems))
            )
        extras = self.extras.close()
        if extras is not None:
            self.extra_parts.append((extras, self.extras.groups))

    # -- rewrites (rare: faults, fallbacks, repeats)

    def rewrite_metrics(self, src: Path, drop: pl.DataFrame | None) -> Path | None:
        """The staged Prometheus samples without dead row groups and the rows in ``drop``."""
        out = self._staged(
            self.staging / f"metric_samples.{uuid.uuid4().hex[:8]}.parquet",
            self.metrics.schema,
            **METRICS_PARQUET,
        )
        pf = pq.ParquetFile(src)
        for rg in range(pf.num_row_groups):
            if rg in self.dead_metrics:
                continue
            t = pf.read_row_group(rg)
            if drop is not None and drop.height:
                t = arrow_frame(t).join(drop, on=["source_file", "row_number"], how="anti").to_arrow()
            if t.num_rows:
                out.write(t.cast(self.metrics.schema))
        self.dead_metrics = set()
        src.unlink(missing_ok=True)
        self.metrics = out
        return out.close()

    def groups(self) -> list[tuple[Path, int]]:
        """Every staged row group of samples, across parts: (its file, its index there)."""
        return [(p.samples, g) for p in self.parts for g in range(len(p.group_sizes))]

    def rewrite_samples(self, drop: dict[int, list[int]]) -> None:
        """Rewrite the parts that hold dead row groups or dropped rows (``drop``: row group -> offsets)
        without them; the other parts stay as they are."""
        kept: list[SamplePart] = []
        first = 0
        for part in self.parts:
            mine = range(first, first + len(part.group_sizes))
            first += len(part.group_sizes)
            if not any(g in self.dead_samples or g in drop for g in mine):
                kept.append(part)
                continue
            out = self._staged(
                part.samples.with_suffix(".kept.parquet"), self.samples.schema, **SAMPLES_PARQUET
            )
            profile = ConformanceProfile(contract("utilisation_samples"))
            pf = pq.ParquetFile(part.samples)
            sizes = []
            for g, rg in zip(mine, range(pf.num_row_groups), strict=True):
                if g in self.dead_samples:
                    continue
                t = pf.read_row_group(rg)
                if g in drop:
                    keep = np.ones(t.num_rows, dtype=bool)
                    keep[drop[g]] = False
                    t = t.filter(pa.array(keep))
                if t.num_rows:
                    profile.update(arrow_frame(t))
                    out.write(t)
                    sizes.append(t.num_rows)
            out.close()
            part.samples.unlink(missing_ok=True)
            if out.groups:
                kept.append(SamplePart(out.path, part.hashes, sizes, profile.problems))
            else:
                out.path.unlink(missing_ok=True)
        self.parts = kept

    def rewrite_extras(self, dropped_rows: dict[str, list[int]]) -> None:
        """The staged extra fields as one file, less dead row groups and rows dropped as duplicates
        (``dropped_rows``: source file -> row numbers)."""
        self.seal()
        dead = self.dead_extras
        if len(self.extra_parts) <= 1 and not (dead or dropped_rows):
            return
        out = self._staged(self.staging / "extra_fields.kept.parquet", self.extras.schema)
        gone = pl.DataFrame(
            {
                "source_file": [k for k, v in dropped_rows.items() for _ in v],
                "row_number": pl.Series([r for v in dropped_rows.values() for r in v], dtype=pl.Int64),
            }
        )
        first = 0
        for path, groups in self.extra_parts:
            pf = pq.ParquetFile(path)
            for rg in range(pf.num_row_groups):
                if first + rg in dead:
                    continue
                t = arrow_frame(pf.read_row_group(rg)).join(
                    gone, on=["source_file", "row_number"], how="anti"
                )
                if t.height:
                    out.write(t.to_arrow().cast(self.extras.schema))
            first += groups
            path.unlink(missing_ok=True)
        out.close()
        self.extra_parts = [(out.path, out.groups)] if out.groups else []

    def extras_written(self) -> tuple[Path | None, int]:
        """The staged extra fields once settled: (file, rows)."""
        if not self.extra_parts:
            return None, 0
        path = self.extra_parts[0][0]
        return path, pq.ParquetFile(path).metadata.num_rows


def text_guard(table: pa.Table, rel: str) -> None:
    """The lake never holds text that is not UTF-8, whatever a reader let through."""
    for name, col in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            try:
                col.validate(full=True)
            except pa.ArrowInvalid as exc:
                raise FileProblem(
                    "file_bad_encoding",
                    f"{rel}: '{name}' holds text that is not UTF-8 ({exc}); re-export it as UTF-8",
                ) from exc
