"""One landing day, streaming: every file read in batches, every row validated against its contract,
accepted rows written to a staging folder as they come, the rest quarantined with a reason.

Memory is set by a batch (the ingest limits' ``batch_rows``), not by the day: runs (one row per
training run) are held in memory, samples and extra fields go batch by batch into staged Parquet files,
with one 64-bit hash of each sample's key in a third. The day is rebuilt whole from its landing files, so
re-running is idempotent and a corrected file replaces its earlier rows. Every file gets a ledger row
whose counts reconcile: rows_in = rows_accepted + rows_quarantined. A whole-file problem is one quarantine
entry (row_number 0) that accounts for all of the file's rows.

A file that changes while it is read is read again (a producer still writing it), up to MAX_READS times.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.lib.contracts import ConformanceProfile, Contract, contract
from pipelines.lib.fileio import full_disk
from pipelines.lib.frames import arrow_frame
from pipelines.lib.ingest import cross_row, dedupe
from pipelines.lib.ingest.cross_row import FILE, ORDER, SAMPLE_KEY
from pipelines.lib.ingest.day_state import METRICS, DayIngest, FileState, SamplePart
from pipelines.lib.ingest.entries import (
    TS_OUT,
    FileEntry,
    FileReject,
    RejectLog,
    ledger_frame,
    quarantine_frame,
    reject_frame,
    row_rejects,
)
from pipelines.lib.ingest.hashing import FileHasher, file_stamp
from pipelines.lib.ingest.line_texts import finish_all_texts, finish_texts
from pipelines.lib.ingest.prometheus.derive import derive_day, landing_runs
from pipelines.lib.ingest.prometheus.mapping import load_mapping
from pipelines.lib.ingest.readers import FORMATS, Format, detect
from pipelines.lib.ingest.readers.base import (
    ROW,
    FallBack,
    FileInfo,
    FileProblem,
    Inconsistent,
    RawBatch,
    Source,
    prefetched,
)
from pipelines.lib.ingest.staging import StagedParquet, new_staging
from pipelines.lib.ingest.validation import validate_rows
from pipelines.lib.ingest.volume import day_volume, run_samples, trailing_samples
from pipelines.lib.paths import DataHome
from pipelines.lib.settings import DEFAULT_LIMITS, IngestLimits
from pipelines.lib.storage import lake
from pipelines.lib.storage.landing import LandingFile, day_files
from workload_model.catalog import load_hardware

LANDING_TABLES = ("runs", "utilisation_samples")
HEAD_BYTES = 64  # read from a file's start to recognise its format
HASH_FIRST_BYTES = 8 << 20  # files up to this size are hashed before reading (a duplicate is never read)
MAX_READS = 3  # a file that changes while it is read is read again, this many times at most
DICTIONARY = ["run_id", "server_id", "role", "day"]  # dictionary-encode the repetitive columns only
# Samples are the lake's bulk: snappy (Parquet's and DuckDB's default) costs a third of zstd's CPU for
# ~1.3x the bytes; the small tables keep zstd.
SAMPLES_PARQUET = {"compression": "snappy", "use_dictionary": DICTIONARY}
METRICS_PARQUET = {
    "compression": "snappy",
    "use_dictionary": ["metric", "labels", "type", "day", "source_file"],
}


def table_for(name: str) -> str | None:
    """The contract a landing file feeds, from its name: ``<table>[-anything].<ext>``."""
    for t in sorted(LANDING_TABLES, key=len, reverse=True):
        if name == t or name.startswith((t + ".", t + "-", t + "_")):
            return t
    return None


def recognise(lf: LandingFile, staging: Path) -> tuple[Format | None, bool]:
    """A landing file's format and whether it is gzipped, from its name and its first bytes (a gzipped
    file from its decompressed start); (None, gz) when unknown or unreadable."""
    named = table_for(lf.path.name)
    try:
        with open(lf.path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
        if head[:2] == b"\x1f\x8b":
            with Source(lf.path, lf.relpath, True, staging).open() as s:
                inner = s.read(HEAD_BYTES)
            fmt, _ = detect(lf.path.name.removesuffix(".gz"), inner, named)
            return fmt, True
    except (OSError, FileProblem):
        return None, False
    return detect(lf.path.name, head, named)


def table_of(lf: LandingFile, staging: Path) -> str | None:
    """The contract a landing file feeds: its format's (Prometheus exports: metric_samples), else its
    name's (``<table>[-anything].<ext>``). A file with a problem (a FIFO, a link out of landing) and one
    whose name gives its table in a format of no fixed table is never opened here."""
    named = table_for(lf.path.name)
    base = lf.path.name.removesuffix(".gz")
    fixed = [s for f in FORMATS if f.table for s in f.suffixes]
    if lf.problem or (named is not None and not base.endswith(tuple(fixed))):
        return named
    fmt, _ = recognise(lf, staging)
    return fmt.table if fmt is not None and fmt.table else table_for(lf.path.name)


class Day:
    """The state of one day's ingest while its files stream through."""

    def __init__(
        self,
        home: DataHome,
        day: str,
        platforms: Iterable[str],
        staging: Path,
        now: dt.datetime,
        limits: IngestLimits = DEFAULT_LIMITS,
        prior: dedupe.Prior | None = None,
    ):
        self.home, self.day, self.staging, self.now = home, day, staging, now
        self.limits = limits
        self.day_date = dt.date.fromisoformat(day)
        self.allowed = {"hardware_catalog": frozenset(platforms)}
        self.prior = prior if prior is not None else dedupe.read_prior(home, day)
        self.slices: list[dict] = []  # a split day's slices: which files, read by which process
        self.seen: dict[str, tuple[str, int]] = {}  # BLAKE3 -> (first file today, its rows)
        self.seen_sizes: set[int] = set()
        self.files: list[FileState] = []
        self.runs_parts: list[pl.DataFrame] = []
        self.runs = pl.DataFrame()
        self.windows = pl.DataFrame()
        self.dup_runs: dict[str, str] = {}  # run_id -> the other day that holds it
        self.prior_sample_hashes: set[int] = set()
        self.staged: list[StagedParquet] = []  # every staged file's writer, stopped by abort()
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
        self.dead_samples: set[int] = set()  # staged row groups dropped (a file's fault or a fallback)
        # samples staged before this state's own (a split day's slices); row groups count across them all
        self.parts: list[SamplePart] = []
        self.extra_parts: list[tuple[Path, int]] = []  # extra fields staged before (path, row groups)
        self.sealed = False
        self.metrics = self._staged(
            staging / "metric_samples.parquet", contract(METRICS).arrow_schema(), **METRICS_PARQUET
        )
        self.dead_metrics: set[int] = set()
        self.derived: dict[tuple[str, str], FileState] = {}  # (landing file, table) -> its derived rows
        self.notes: list[str] = []  # what the Prometheus derivation left out
        self.dead_extras: set[int] = set()
        self.profile = ConformanceProfile(contract("utilisation_samples"))

    # -- files

    def new_file(self, lf: LandingFile, order: int, table: str | None) -> FileState:
        f = FileState(
            lf=lf, order=order, entry=self._entry(lf, table), table=table, rejects=self._reject_log()
        )
        self.files.append(f)
        return f

    def _reject_log(self) -> RejectLog:
        return RejectLog(self.limits.max_rejects_per_file, self.limits.raw_record_max_bytes)

    def _entry(self, lf: LandingFile, table: str | None) -> FileEntry:
        return FileEntry(
            day=self.day_date,
            source=lf.source,
            source_file=lf.relpath,
            size_bytes=lf.signature[1],
            table_name=table,
            ingested_at=self.now,
        )

    def file_problem(self, f: FileState, reason: str, message: str) -> None:
        """The whole file is quarantined: whatever was read of it is dropped, and it counts as unreadable
        (rows_in 0), however far it was read before the fault showed (a truncated or bomb gzip, ...)."""
        self.drop_rows(f)
        if reason != "file_duplicate":  # a duplicate's rows are those of its first copy, counted there
            f.entry.rows_in = 0
        f.entry.problem = FileReject(reason, message)

    def drop_rows(self, f: FileState) -> None:
        """Forget everything read from ``f`` (its staged row groups are dropped at the end)."""
        f.accepted = 0
        f.rejects = self._reject_log()
        f.run_extras = []
        (self.dead_metrics if f.table == METRICS else self.dead_samples).update(f.row_groups)
        self.dead_extras.update(f.extra_groups)
        f.row_groups, f.extra_groups = [], []
        self.runs_parts = [p for p in self.runs_parts if not p.height or p[ORDER][0] != f.order]

    def ingest_file(self, f: FileState) -> None:
        lf = f.lf
        if lf.problem:
            self.file_problem(f, *lf.problem)
            return
        if f.entry.table_name is None:
            self.file_problem(
                f,
                "file_unknown_table",
                f"{lf.relpath}: cannot tell which table this is; name it "
                + " or ".join(t + "[-suffix].<ext>" for t in LANDING_TABLES)
                + " (Prometheus exports: .om or .prom text, or an API response)",
            )
            return
        for _ in range(MAX_READS):
            stamp = file_stamp(lf.path)
            self._read_once(f)
            if f.entry.problem is not None and f.entry.problem.reason_code == "file_duplicate":
                return
            if file_stamp(lf.path) == stamp:
                break
            self.drop_rows(f)
            f.entry, f.info = self._entry(lf, f.table), FileInfo()
        else:
            self.file_problem(
                f,
                "file_unstable",
                f"{lf.relpath}: changed while it was being read, {MAX_READS} times in a row; a producer is "
                "still writing it: deliver files whole (write to a hidden or temporary name, then rename)",
            )
        if f.entry.problem is None or f.entry.problem.reason_code != "file_duplicate":
            self.seen.setdefault(f.entry.blake3, (lf.relpath, f.entry.rows_in))
            self.seen_sizes.add(f.entry.size_bytes)

    def _read_once(self, f: FileState) -> None:
        lf = f.lf
        try:
            with open(lf.path, "rb") as fh:
                head = fh.read(HEAD_BYTES)
                size = os.fstat(fh.fileno()).st_size
        except OSError as exc:
            self.file_problem(f, "file_unreadable", f"{lf.relpath}: cannot be read ({exc.strerror})")
            return
        f.entry.size_bytes = size
        if not head:
            self.file_problem(f, "file_empty", f"{lf.relpath}: the file is empty (0 bytes)")
            return
        hasher = FileHasher(lf.path)
        f.hashed = True
        if self.may_repeat(size):
            hasher.run()  # may be a duplicate: decide before reading a row
            if self._duplicate(f, hasher.hexdigest):
                return
        else:
            hasher.start()  # cannot be a duplicate of anything known; hash while reading
        c = f.contract()
        try:
            self._read(f, c, head)
        except FileProblem as p:
            if full_disk(p):
                raise
            self.file_problem(f, p.reason, p.message)
        except Exception as exc:  # one producer's odd file must not stop the day: it is quarantined
            if full_disk(exc):  # ... but a full disk is the machine's fault: it stops the day
                raise
            first = (str(exc).splitlines() or [""])[0][:200]
            self.file_problem(
                f,
                "file_unreadable",
                f"{lf.relpath}: could not be read as {c.name} ({type(exc).__name__}: {first})",
            )
        hasher.join()
        f.entry.blake3 = hasher.hexdigest
        if f.entry.problem is None and f.entry.rows_in == 0:
            self.file_problem(f, "file_empty", f"{lf.relpath}: no data rows")

    def may_repeat(self, size: int) -> bool:
        """Could a file of this size repeat one already known? (Then it is hashed before it is read.)"""
        return size <= HASH_FIRST_BYTES or size in self.prior.sizes or size in self.seen_sizes

    def _duplicate(self, f: FileState, digest: str) -> bool:
        f.entry.blake3 = digest
        if digest in self.seen:
            self.repeat_of(f, *self.seen[digest])
            return True
        if digest in self.prior.files:
            d, first = self.prior.files[digest]
            self.file_problem(
                f,
                "file_duplicate",
                f"{f.lf.relpath}: identical to {first}, already accepted on {d} (same BLAKE3); "
                "its rows are kept from there once",
            )
            return True
        return False

    def repeat_of(self, f: FileState, first: str, rows: int) -> None:
        """``f`` repeats ``first``, a file of the day read before it (with ``rows`` data rows)."""
        f.entry.rows_in = rows
        self.file_problem(
            f,
            "file_duplicate",
            f"{f.lf.relpath}: identical to {first} (same BLAKE3); its {rows} rows are taken from there once",
        )

    # -- reading

    def _read(self, f: FileState, c: Contract, head: bytes) -> None:
        lf = f.lf
        named = table_for(lf.path.name)
        fmt, gz = detect(lf.path.name, head, named)
        if gz:  # the decompressed start decides (a gzipped API response may be named .json.gz)
            with Source(lf.path, lf.relpath, True, self.staging).open() as s:
                inner = s.read(HEAD_BYTES)
            if not inner:
                raise FileProblem("file_empty", f"{lf.relpath}: the file is empty once decompressed")
            fmt, _ = detect(lf.path.name.removesuffix(".gz"), inner, named)
        if fmt is None or (fmt.table or c.name) != c.name:
            raise FileProblem(
                "file_unknown_format",
                f"{lf.relpath}: unknown format; name it .jsonl, .csv or .parquet (optionally .gz), "
                "or .om / .prom for Prometheus text",
            )
        f.fmt, f.src = fmt, Source(lf.path, lf.relpath, gz, self.staging, self.limits)
        f.entry.format = fmt.name
        try:
            self._consume(f, c)
            try:
                finish_texts(f, c, self.allowed, self.limits.raw_record_max_bytes)
            except Inconsistent:
                f.info = FileInfo(reference_only=True)
                self._consume(f, c)
                finish_texts(f, c, self.allowed, self.limits.raw_record_max_bytes)
        finally:
            f.src.close()
        f.entry.extra_columns = ",".join(f.info.extra_columns) or None
        f.entry.reader_tier = f.info.tier

    def _consume(self, f: FileState, c: Contract) -> None:
        self.drop_rows(f)
        f.entry.rows_in = 0
        fmt, src = f.opened()
        with contextlib.closing(prefetched(fmt.read(src, c, f.info))) as batches:
            for b in batches:
                if isinstance(b, FallBack):
                    self.drop_rows(f)
                    f.entry.rows_in = 0
                    continue
                if b.rejects is not None and b.rejects.height:
                    f.entry.rows_in += b.rejects.height
                    f.rejects.add(reject_frame(b.rejects))
                if b.frame.height:
                    f.entry.rows_in += b.frame.height
                    self._validate(f, c, b)

    def _validate(self, f: FileState, c: Contract, b: RawBatch) -> None:
        quoted = b.exact and b.value_texts  # else the rejects are judged again from their lines
        v = validate_rows(
            b.frame, c, carry=(ROW,), allowed=self.allowed, raw_column=b.raw_column, raw_records=quoted
        )
        dropped = v.rejected[ROW]
        if v.rejected.height:
            f.rejects.add(reject_frame(v.rejected, judge=not quoted))
        if c.name == METRICS:
            self._write_metrics(f, v.accepted)
            return
        if c.name == "runs":
            self.runs_parts.append(
                v.accepted.with_columns(
                    pl.lit(f.lf.relpath).alias(FILE), pl.lit(f.order, pl.Int32).alias(ORDER)
                )
            )
            f.accepted += v.accepted.height
            if b.extras is not None and b.extras.height:
                f.run_extras.append(b.extras.filter(~pl.col(ROW).is_in(dropped.implode())))
            return
        crossed = self._write_samples(f, v.accepted, exact=b.exact)
        if b.extras is not None and b.extras.height:
            gone = pl.concat([dropped, crossed]) if crossed.len() else dropped
            self._stage_extras(f, b.extras.filter(~pl.col(ROW).is_in(gone.implode())))

    # -- Prometheus samples (streamed; runs and utilisation samples are derived from them once all are read)

    def _write_metrics(self, f: FileState, acc: pl.DataFrame) -> None:
        if not acc.height:
            return
        c = contract(METRICS)
        rows = acc.with_columns(
            pl.lit(self.day_date).alias("day"),
            pl.lit(f.lf.relpath).alias("source_file"),
            pl.col(ROW).alias("row_number"),
        ).select(c.column_names)
        table = rows.to_arrow().cast(self.metrics.schema)
        _text_guard(table, f.lf.relpath)
        f.row_groups.append(self.metrics.write(table))
        f.accepted += acc.height

    # -- Prometheus: the day's samples settled, then runs and utilisation samples derived from them

    def settle_metrics(self) -> Path | None:
        """The staged Prometheus samples less dropped row groups and repeated samples (the same series at
        the same time delivered again: the first delivery is kept, the others are duplicate_key)."""
        path = self.metrics.close()
        if path is None:
            return None
        if self.dead_metrics:
            path = self._rewrite_metrics(path, None)
            if path is None:
                return None
        order = {f.lf.relpath: f.order for f in self.files if f.derived_from is None}
        repeats = dedupe.metric_repeats(path, order, self.staging / "spill", self.limits.duckdb_memory)
        if not repeats.height:
            return path
        by_file = {f.lf.relpath: f for f in self.files if f.table == METRICS}
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
        return self._rewrite_metrics(path, repeats.select("source_file", "row_number"))

    def _rewrite_metrics(self, src: Path, drop: pl.DataFrame | None) -> Path | None:
        """The staged samples without dead row groups and the rows in ``drop`` (rare: faults, repeats)."""
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

    def derive(self) -> None:
        """Runs and utilisation samples from the day's Prometheus samples (then the day's runs are settled,
        derived ones among them, and the derived samples validated and staged like any file's)."""
        path = self.settle_metrics()
        if path is None:
            self.settle_runs()
            return
        hw = load_hardware(self.home.user_catalog_dir / "hardware.yaml")
        mapping = load_mapping(self.home, frozenset(hw.platforms))
        derived = derive_day(path, self.day, mapping, hw, self.staging, self.limits.duckdb_memory)
        self.notes = derived.notes
        self._derived_runs(landing_runs(derived))
        self.settle_runs()
        if derived.samples_path is not None:
            self._derived_samples(derived.samples_path)
        if derived.bad_readings_path is not None:
            self._bad_readings(derived.bad_readings_path)

    def _derived_for(self, rel: str, table: str) -> FileState:
        """The rows of ``table`` derived from landing file ``rel``: quarantined under it, in no ledger row."""
        key = (rel, table)
        if key not in self.derived:
            origin = next(f for f in self.files if f.lf.relpath == rel and f.derived_from is None)
            pseudo = FileState(
                lf=origin.lf,
                order=len(self.files),
                entry=self._entry(origin.lf, table),
                table=table,
                derived_from=origin,
                rejects=self._reject_log(),
            )
            self.files.append(pseudo)
            self.derived[key] = pseudo
        return self.derived[key]

    def _derived_rejects(self, f: FileState, rejected: pl.DataFrame) -> None:
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
                self._derived_rejects(f, v.rejected)
            self.runs_parts.append(
                v.accepted.with_columns(pl.lit(rel).alias(FILE), pl.lit(f.order, pl.Int32).alias(ORDER))
            )
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
                    self._derived_rejects(f, v.rejected)
                self._write_samples(f, v.accepted, exact=True)

    def _bad_readings(self, path: Path) -> None:
        """Quarantine the readings no derived sample could use, under their own lines."""
        pf = pq.ParquetFile(path)
        for rg in range(pf.num_row_groups):
            batch = arrow_frame(pf.read_row_group(rg)).rename({"row_number": ROW})
            for (rel,), part in batch.group_by("source_file", maintain_order=True):
                self._derived_rejects(self._derived_for(rel, "utilisation_samples"), part)

    # -- samples (streamed)

    def _write_samples(self, f: FileState, acc: pl.DataFrame, *, exact: bool) -> pl.Series:
        """Write the accepted samples of a batch, less those a cross-row rule rejects; their rows."""
        none = pl.Series(ROW, [], pl.Int64)
        if not acc.height:
            return none
        crossed = none
        suspects = cross_row.suspects(acc, self.windows)
        if suspects is not None and suspects.any():
            rej = cross_row.sample_rejects(
                acc.filter(suspects),
                self.windows,
                self.dup_runs,
                self.prior_sample_hashes,
                from_lines=f.from_lines,
            )
            if rej.height:
                f.rejects.add(reject_frame(rej, fill=f.from_lines, judge=not exact))
                crossed = rej[ROW]
                acc = acc.filter(~pl.col(ROW).is_in(crossed.implode()))  # delivery order kept
        self._write_accepted(f, acc)
        return crossed

    def _write_accepted(self, f: FileState, acc: pl.DataFrame) -> None:
        if not acc.height:
            return
        c = contract("utilisation_samples")
        rows = acc.select(
            [pl.lit(self.day_date).alias("day") if x == "day" else pl.col(x) for x in c.column_names]
        )
        table = rows.to_arrow().cast(self.samples.schema)  # types are the contract's by construction
        _text_guard(table, f.lf.relpath)
        self.profile.update(rows)
        f.row_groups.append(self.samples.write(table))
        self.group_sizes.append(acc.height)
        f.accepted += acc.height
        self.hashes.write(dedupe.key_hashes(acc, ROW))

    def _stage_extras(self, f: FileState, extras: pl.DataFrame) -> None:
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

    # -- runs (small: in memory)

    def settle_runs(self) -> None:
        """Duplicate run ids (first delivery wins, across files and days); then the runs' time windows."""
        c = contract("runs")
        names = [x.name for x in c.landing_columns]
        if self.runs_parts:
            runs = pl.concat(self.runs_parts, how="vertical_relaxed")
        else:
            runs = (
                c.empty_frame()
                .select(names)
                .with_columns(
                    pl.lit(None, pl.String).alias(FILE),
                    pl.lit(None, pl.Int64).alias(ROW),
                    pl.lit(None, pl.Int32).alias(ORDER),
                )
            )
        from_lines = {f.order for f in self.files if f.from_lines}
        self.runs, rejects, self.dup_runs = cross_row.settle_runs(runs, self.prior.runs, from_lines)
        by_order = {f.order: f for f in self.files}
        touched = []
        for (order,), part in rejects.group_by(ORDER):
            f = by_order[order]
            f.rejects.add(reject_frame(part.drop(ORDER), fill=f.from_lines))
            touched.append(f)
        for f in self.files:
            if f.entry.table_name == "runs" and f.entry.problem is None:
                f.accepted = int((self.runs[ORDER] == f.order).sum())
        finish_all_texts(touched, self.allowed, self.limits.raw_record_max_bytes)
        self.windows = cross_row.windows(self.runs)
        self.prior_sample_hashes = dedupe.prior_sample_hashes(self.home, self.dup_runs)

    def stage_run_extras(self) -> None:
        kept = self.runs.select(ORDER, ROW)
        for f in self.files:
            if f.entry.table_name == "runs" and f.run_extras:
                extras = pl.concat(f.run_extras)
                keep = kept.filter(pl.col(ORDER) == f.order)[ROW]
                f.run_extras = []
                self._stage_extras(f, extras.filter(pl.col(ROW).is_in(keep.implode())))

    # -- uniqueness of samples over the whole day

    def seal(self) -> None:
        """Close the staged writers; what they wrote becomes this state's last part (once: a state is
        sealed before it travels to another worker, and a merged day is sealed when its samples settle)."""
        if self.sealed:
            return
        self.sealed = True
        samples, hashes = self.samples.close(), self.hashes.close()
        if samples is not None:
            if hashes is None:  # a key hash is staged with every sample
                raise RuntimeError(f"{self.day}: staged samples without their key hashes")
            self.parts.append(
                SamplePart(samples, hashes, list(self.group_sizes), dict(self.profile.problems))
            )
        extras = self.extras.close()
        if extras is not None:
            self.extra_parts.append((extras, self.extras.groups))

    def settle_samples(self) -> int:
        """Reject repeated sample keys (first delivery wins, whichever part holds them); returns rows whose
        key still repeats in what will be written (the unique_key check: 0 unless ingest has a bug)."""
        self.seal()
        if not self.parts:
            self._rewrite_extras(self.dead_extras, {})
            return 0
        sizes = [n for p in self.parts for n in p.group_sizes]
        starts = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        clash = dedupe.key_clashes([p.hashes for p in self.parts], self.dead_samples)
        drop: dict[int, list[int]] = {}
        dropped_rows: dict[str, list[int]] = {}
        remaining = 0
        if clash.height:
            group = np.searchsorted(starts, clash["pos"].to_numpy(), side="right") - 1
            # (a Prometheus file's row groups are the staged metric samples': not these)
            owner = {g: f for f in self.files if f.table != METRICS for g in f.row_groups}
            owners = [owner[g] for g in group.tolist()]
            # delivery order: the samples derived from Prometheus first, then the files in landing order
            clash = clash.with_columns(
                pl.Series("rg", group, dtype=pl.Int64),
                pl.Series("off", clash["pos"].to_numpy() - starts[group], dtype=pl.Int64),
                pl.Series("ord", [f.order for f in owners], dtype=pl.Int32),
                pl.Series("rank", [-1 if f.derived_from else f.order for f in owners], dtype=pl.Int32),
            )
            exact = dedupe.exact_duplicates(self._groups(), clash)
            by_order = {f.order: f for f in self.files}
            names = {g.order: g.lf.relpath for g in self.files}
            touched = []
            for (order,), part in exact.filter(pl.col("repeat")).group_by("ord"):
                f = by_order[order]
                q = part.select(
                    pl.col("row").alias(ROW),
                    pl.lit("duplicate_key").alias("reason_code"),
                    pl.lit("ts").alias("field"),
                    pl.format(
                        "sample ({}, {}, {}) was already delivered in {}; the first delivery is kept",
                        "run_id",
                        "server_id",
                        pl.col("ts").dt.to_string(TS_OUT),
                        pl.col("kept_in_order").replace_strict(names, return_dtype=pl.String),
                    ).alias("message"),
                    pl.lit(None, pl.String).alias("raw_record") if f.from_lines else pl.col("raw_record"),
                )
                f.rejects.add(reject_frame(q, fill=f.from_lines))
                f.accepted -= q.height
                touched.append(f)
                dropped_rows[f.lf.relpath] = q[ROW].to_list()
                for rg, off in part.select("rg", "off").iter_rows():
                    drop.setdefault(rg, []).append(off)
            kept = exact.filter(~pl.col("repeat"))
            remaining = kept.height - kept.select(pl.struct(SAMPLE_KEY).n_unique()).item()
            finish_all_texts(
                sorted(touched, key=lambda f: f.order), self.allowed, self.limits.raw_record_max_bytes
            )
        if self.dead_samples or drop:
            self._rewrite_samples(drop)
        self._rewrite_extras(self.dead_extras, dropped_rows)
        return remaining

    def _groups(self) -> list[tuple[Path, int]]:
        """Every staged row group of samples, across parts: (its file, its index there)."""
        return [(p.samples, g) for p in self.parts for g in range(len(p.group_sizes))]

    def _rewrite_samples(self, drop: dict[int, list[int]]) -> None:
        """Rewrite the parts that hold dead row groups or dropped rows without them (rare: faults,
        duplicates); the other parts stay as they are."""
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

    def _rewrite_extras(self, dead: set[int], dropped_rows: dict[str, list[int]]) -> None:
        """The staged extra fields as one file, less dead row groups and rows dropped as duplicates (rare)."""
        self.seal()
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

    def _staged(self, path: Path, schema: pa.Schema, **options) -> StagedParquet:
        staged = StagedParquet(path, schema, **options)
        self.staged.append(staged)
        return staged

    def abort(self) -> None:
        """Stop every staged file's writer (after a failure), so that no open file keeps its space."""
        for staged in self.staged:
            staged.abort()

    # -- the results

    def quarantine(self) -> pl.DataFrame:
        return quarantine_frame(
            [(f.entry, None if f.entry.problem else f.rejects.entries(f.lf.relpath)) for f in self.files]
        )

    def ledger(self) -> pl.DataFrame:
        return ledger_frame([(f.entry, *f.counts()) for f in self.files if f.derived_from is None])


def _text_guard(table: pa.Table, rel: str) -> None:
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


def ingest_day(
    home: DataHome,
    day: str,
    platforms: Iterable[str],
    *,
    now: dt.datetime | None = None,
    staging: Path | None = None,
    limits: IngestLimits = DEFAULT_LIMITS,
) -> DayIngest:
    """Read and validate every landing file of ``day`` into a staging folder beside the lake, within
    ``limits``.

    Nothing in the lake changes here; ``ingest_partition`` promotes the result. If reading fails (a full
    disk, say), the staging folder is removed before the error goes on, so a failure frees what it wrote.
    """
    owned = staging is None
    staging = staging or new_staging(home, day)
    state = None
    try:
        state = Day(home, day, platforms, staging, now or dt.datetime.now(dt.UTC), limits)
        return _ingest_into(state)
    except BaseException:
        if state is not None:
            state.abort()
        if owned:
            shutil.rmtree(staging, ignore_errors=True)
        raise


def _ingest_into(state: Day) -> DayIngest:
    files = day_files(state.home, state.day)
    tables = [table_of(lf, state.staging) for lf in files]
    # runs first, then Prometheus samples (runs are derived from them), then utilisation samples
    order = sorted(range(len(files)), key=lambda i: (rank(tables[i]), i))
    made = {i: state.new_file(files[i], i, tables[i]) for i in range(len(files))}
    derived = False
    for i in order:
        f = made[i]
        if not derived and rank(f.table) == 2:
            state.derive()  # settles the runs too
            derived = True
        state.ingest_file(f)
    if not derived:
        state.derive()
    state.stage_run_extras()
    return day_result(state, files)


def rank(table: str | None) -> int:
    """Reading order of a table's landing files: runs, Prometheus samples (runs derive from them), others."""
    return {"runs": 0, METRICS: 1}.get(table or "", 2)


def day_result(state: Day, files: list[LandingFile]) -> DayIngest:
    """The day once every file is read (in one state, or merged from slices): samples settled, runs
    typed, volume measured."""
    home, day = state.home, state.day
    duplicated = state.settle_samples()
    extras_path, extras_rows = state.extras_written()
    runs = contract("runs").conform(
        state.runs.with_columns(
            pl.lit(state.day_date).alias("day"), pl.col(FILE).str.split("/").list.first().alias("source")
        ).sort("run_id")
    )
    samples = [p.samples for p in state.parts]
    profile = ConformanceProfile(contract("utilisation_samples"))
    for p in state.parts:
        for key, problem in p.problems.items():
            profile.problems.setdefault(key, problem)
    metrics_path = state.metrics.close()
    volume = day_volume(day, run_samples(runs, samples), trailing_samples(home, day))
    return DayIngest(
        day=day,
        staging=state.staging,
        runs=runs,
        quarantine=state.quarantine(),
        ingest_ledger=state.ledger(),
        samples_paths=samples,
        samples_rows=sum(sum(p.group_sizes) for p in state.parts),
        samples_violations=profile.violations(),
        samples_duplicated=duplicated,
        extra_fields_path=extras_path,
        extra_fields_rows=extras_rows,
        sample_volume=volume,
        metric_samples_path=metrics_path,
        metric_samples_rows=state.metrics.rows,
        notes=state.notes,
        slices=state.slices,
        landing_files=frozenset(lf.relpath for lf in files),
        prior_files=frozenset(state.prior.files),
        prior_runs=frozenset(state.prior.runs),
    )


def reconciliation(ledger: pl.DataFrame) -> pl.DataFrame:
    """Ledger rows whose counts do not reconcile (rows_in != accepted + quarantined)."""
    return ledger.filter(pl.col("rows_in") != pl.col("rows_accepted") + pl.col("rows_quarantined"))
