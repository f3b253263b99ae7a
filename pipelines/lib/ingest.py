"""Ingest one landing day, streaming: every file is read in batches, every row validated against its
contract, accepted rows written as they come, the rest quarantined with a reason.

Memory is set by a batch (``readers.BATCH_ROWS``), not by the day: runs (one row per training run) are
held in memory, samples go batch by batch into a staged Parquet file beside the lake, with one 64-bit hash
of each sample's key in a second staged file. Uniqueness is then decided by DuckDB over those hashes (out of
core), and only colliding keys are compared exactly. The day is rebuilt whole from its landing files, so
re-running is idempotent and a corrected file replaces its earlier rows. Every file gets a ledger row whose
counts reconcile: rows_in = rows_accepted + rows_quarantined. A whole-file problem is one quarantine entry
(row_number 0) that accounts for all of the file's rows; a file's row rejects beyond
``MAX_REJECTS_PER_FILE`` are summarised in one ``rejects_capped`` entry.

Uniqueness holds across days too: a file whose bytes were already accepted on another day is a
``file_duplicate``, a run already in another day's partition a ``duplicate_key``, and so are the samples
of such a run that the other day already holds.
"""

from __future__ import annotations

import collections
import datetime as dt
import hashlib
import queue
import shutil
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock

from pipelines.lib import lake, readers
from pipelines.lib.contracts import (
    ConformanceProfile,
    Contract,
    conformance_violations,
    contract,
    key_duplicates,
    validate_rows,
)
from pipelines.lib.fileio import fsync_dir, sweep_temporaries
from pipelines.lib.landing import LandingFile, day_files
from pipelines.lib.paths import DataHome
from pipelines.lib.readers import ROW, FallBack, FileInfo, FileProblem
from pipelines.lib.sqlfiles import sql_text

LANDING_TABLES = ("runs", "utilisation_samples")
SAMPLE_KEY = ("run_id", "server_id", "ts")
TS_OUT = "%Y-%m-%dT%H:%M:%S%.6fZ"
MAX_REJECTS_PER_FILE = 1000  # row rejects kept one by one per file; the rest are summarised in one entry
HASH_FIRST_BYTES = 8 << 20  # files up to this size are hashed before reading (a duplicate is never read)
DICTIONARY = ["run_id", "server_id", "role", "day"]  # dictionary-encode the repetitive columns only
# Samples are the lake's bulk: snappy (Parquet's and DuckDB's default) costs a third of zstd's CPU for
# ~1.3x the bytes; the small tables keep zstd.
SAMPLES_PARQUET = {"compression": "snappy", "use_dictionary": DICTIONARY}
QUARANTINE_COLUMNS = ("row_number", "reason_code", "field", "message", "raw_record")


def table_for(name: str) -> str | None:
    """The contract a landing file feeds, from its name: ``<table>[-anything].<ext>``."""
    for t in sorted(LANDING_TABLES, key=len, reverse=True):
        if name == t or name.startswith((t + ".", t + "-", t + "_")):
            return t
    return None


# ---------------------------------------------------------------- bookkeeping


@dataclass
class _File:
    """One landing file's ledger entry and what ingest learnt while reading it."""

    lf: LandingFile
    order: int
    entry: dict
    accepted: int = 0
    quarantined: int = 0  # rows quarantined one by one (file-level problems are counted in the entry)
    rejects: list[pl.DataFrame] = field(default_factory=list)
    rejected_rows: list[pl.Series] = field(default_factory=list)
    row_groups: list[int] = field(default_factory=list)
    dead_groups: list[int] = field(default_factory=list)  # written, then dropped (a fault or a fallback)
    extras: list[pl.DataFrame] = field(default_factory=list)
    ordinals: bool = False  # JSONL DuckDB and pyarrow tiers: row numbers are record ordinals until mapped
    gz: bool = False
    info: FileInfo = field(default_factory=FileInfo)

    def reject(self, frame: pl.DataFrame) -> None:
        if frame.height:
            self.rejects.append(frame.select(ROW, *QUARANTINE_COLUMNS[1:]))
            self.rejected_rows.append(frame[ROW])
            self.quarantined += frame.height


class _Staged:
    """A Parquet file written batch by batch, one row group per batch, by a background thread (pyarrow
    frees the GIL), so writing overlaps reading and validating the next batch. At most two batches wait."""

    def __init__(self, path: Path, schema: pa.Schema, **options):
        self.path, self.schema = path, schema
        self.options = {"compression": "zstd", **options}
        self.groups = 0
        self.rows = 0
        self._queue: queue.Queue[pa.Table | None] = queue.Queue(maxsize=2)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def _drain(self) -> None:
        writer = None
        try:
            while (table := self._queue.get()) is not None:
                if writer is None:
                    writer = pq.ParquetWriter(self.path, self.schema, **self.options)
                writer.write_table(table, row_group_size=max(table.num_rows, 1))
        except BaseException as exc:  # re-raised by close()
            self._error = exc
            while self._queue.get() is not None:
                pass
        finally:
            if writer is not None:
                writer.close()

    def write(self, table: pa.Table) -> int:
        """Queue one batch; returns its row-group index."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._drain, daemon=True)
            self._thread.start()
        self._queue.put(table)
        self.groups += 1
        self.rows += table.num_rows
        return self.groups - 1

    def close(self) -> Path | None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error
        return self.path if self.groups else None


# One 64-bit hash of each staged sample's key and its row number in its file, in the staged file's order.
_HASH_SCHEMA = pa.schema([("h", pa.uint64()), ("row", pa.int64())])


@dataclass
class DayIngest:
    """One day's ingest, staged beside the lake and ready to be promoted."""

    day: str
    staging: Path
    runs: pl.DataFrame
    quarantine: pl.DataFrame
    ingest_ledger: pl.DataFrame
    samples_path: Path | None
    samples_rows: int
    samples_violations: list[str]
    samples_duplicated: int
    extra_fields_path: Path | None
    extra_fields_rows: int
    prior_files: frozenset[str] = frozenset()  # other days' accepted file hashes, as read at the start
    prior_runs: frozenset[str] = frozenset()  # other days' run ids, as read at the start

    @property
    def utilisation_samples(self) -> pl.DataFrame:
        """The staged samples (reads them whole: for tests and small days)."""
        if self.samples_path is None:
            return contract("utilisation_samples").empty_frame()
        return pl.read_parquet(self.samples_path)

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
        }

    def frames(self) -> dict[str, pl.DataFrame]:
        """Every table as a frame (reads staged files whole: for tests and small days)."""
        return {
            "runs": self.runs,
            "utilisation_samples": self.utilisation_samples,
            "quarantine": self.quarantine,
            "ingest_ledger": self.ingest_ledger,
            "extra_fields": self.extra_fields,
        }

    def discard(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


# ---------------------------------------------------------------- what other days already hold


@dataclass
class _Prior:
    """What other days' partitions already accepted: file hashes and run ids (small: one row per file/run)."""

    files: dict[str, tuple[str, str]]  # sha256 -> (day, source_file)
    sizes: set[int]
    runs: dict[str, str]  # run_id -> day


def _prior(home: DataHome, day: str) -> _Prior:
    files: dict[str, tuple[str, str]] = {}
    sizes: set[int] = set()
    runs: dict[str, str] = {}
    for path in lake.table_files(home, "ingest_ledger"):
        d = path.parent.name.removeprefix("day=")
        if d == day:
            continue
        led = pl.read_parquet(path, columns=["sha256", "source_file", "size_bytes", "rows_accepted"])
        for sha, src, size, acc in led.iter_rows():
            if acc and sha not in files:
                files[sha] = (d, src)
                sizes.add(size)
    for path in lake.table_files(home, "runs"):
        d = path.parent.name.removeprefix("day=")
        if d != day:
            for rid in pl.read_parquet(path, columns=["run_id"])["run_id"].to_list():
                runs.setdefault(rid, d)
    return _Prior(files, sizes, runs)


# ---------------------------------------------------------------- the day


class _Day:
    """The state of one day's ingest while its files stream through."""

    def __init__(self, home: DataHome, day: str, platforms: Iterable[str], staging: Path, now: dt.datetime):
        self.home, self.day, self.staging, self.now = home, day, staging, now
        self.day_date = dt.date.fromisoformat(day)
        self.allowed = {"hardware_catalog": frozenset(platforms)}
        self.prior = _prior(home, day)
        self.seen: dict[str, tuple[str, int]] = {}  # sha256 -> (first file today, its rows)
        self.seen_sizes: set[int] = set()
        self.files: list[_File] = []
        self.runs_parts: list[pl.DataFrame] = []
        self.runs = pl.DataFrame()
        self.windows = pl.DataFrame()
        self.dup_runs: dict[str, str] = {}  # run_id -> the other day that holds it
        self.prior_sample_hashes: set[int] = set()
        s_schema = contract("utilisation_samples").arrow_schema()
        self.samples = _Staged(staging / "utilisation_samples.parquet", s_schema, **SAMPLES_PARQUET)
        self.hashes = _Staged(
            staging / "sample_keys.parquet", _HASH_SCHEMA, compression="none", use_dictionary=False
        )
        self.group_sizes: list[int] = []
        self.extras = _Staged(staging / "extra_fields.parquet", contract("extra_fields").arrow_schema())
        self.profile = ConformanceProfile(contract("utilisation_samples"))

    # -- files

    def new_file(self, lf: LandingFile, order: int) -> _File:
        name = lf.path.name
        entry = {
            "day": self.day_date,
            "source": lf.source,
            "source_file": lf.relpath,
            "sha256": "0" * 64,
            "size_bytes": lf.signature[1],
            "format": None,
            "table_name": table_for(name),
            "rows_in": 0,
            "extra_columns": None,
            "ingested_at": self.now,
            "_file_quarantined": 0,
            "_file_reject": None,
        }
        f = _File(lf=lf, order=order, entry=entry)
        self.files.append(f)
        return f

    def file_problem(self, f: _File, reason: str, message: str) -> None:
        """The whole file is quarantined: whatever was read of it is dropped, and it counts as unreadable
        (rows_in 0), however far it was read before the fault showed (a truncated or bomb gzip, ...)."""
        self.drop_rows(f)
        if reason != "file_duplicate":  # a duplicate's rows are those of its first copy, counted there
            f.entry["rows_in"] = 0
        f.entry["_file_quarantined"] = f.entry["rows_in"]
        f.entry["_file_reject"] = {"reason_code": reason, "message": message}

    def drop_rows(self, f: _File) -> None:
        f.accepted = f.quarantined = 0
        f.rejects, f.rejected_rows, f.extras = [], [], []
        f.dead_groups.extend(f.row_groups)
        f.row_groups = []
        self.runs_parts = [p for p in self.runs_parts if p.height and p["__fleet_order"][0] != f.order]

    # -- reading

    def ingest_file(self, f: _File) -> None:
        lf = f.lf
        if lf.problem:
            self.file_problem(f, *lf.problem)
            return
        table = f.entry["table_name"]
        if table is None:
            self.file_problem(
                f,
                "file_unknown_table",
                f"{lf.relpath}: cannot tell which table this is; name it "
                + " or ".join(t + "[-suffix].<ext>" for t in LANDING_TABLES),
            )
            return
        try:
            with open(lf.path, "rb") as fh:
                head = fh.read(8)
        except OSError as exc:
            self.file_problem(f, "file_unreadable", f"{lf.relpath}: cannot be read ({exc.strerror})")
            return
        if not head:
            self.file_problem(f, "file_empty", f"{lf.relpath}: the file is empty (0 bytes)")
            return
        size = lf.signature[1]
        hasher = _Hasher(lf.path)
        if size <= HASH_FIRST_BYTES or size in self.prior.sizes or size in self.seen_sizes:
            hasher.run()  # may be a duplicate: decide before reading a row
            if self.duplicate(f, hasher.hexdigest):
                return
        else:
            hasher.start()  # cannot be a duplicate of anything known; hash while reading
        c = contract(table)
        try:
            self.read(f, c, head)
        except FileProblem as p:
            self.file_problem(f, p.reason, p.message)
        except Exception as exc:  # one producer's odd file must not stop the day: it is quarantined
            first = (str(exc).splitlines() or [""])[0][:200]
            self.file_problem(
                f,
                "file_unreadable",
                f"{lf.relpath}: could not be read as {c.name} ({type(exc).__name__}: {first})",
            )
        hasher.join()
        f.entry["sha256"] = hasher.hexdigest
        if f.entry["_file_reject"] is None and f.entry["rows_in"] == 0:
            self.file_problem(f, "file_empty", f"{lf.relpath}: no data rows")
        if f.entry["_file_reject"] is None or f.entry["_file_reject"]["reason_code"] != "file_duplicate":
            self.seen.setdefault(hasher.hexdigest, (lf.relpath, f.entry["rows_in"]))
            self.seen_sizes.add(size)

    def duplicate(self, f: _File, sha: str) -> bool:
        f.entry["sha256"] = sha
        if sha in self.seen:
            first, rows = self.seen[sha]
            f.entry["rows_in"] = rows
            self.file_problem(
                f,
                "file_duplicate",
                f"{f.lf.relpath}: identical to {first} (same sha256); "
                f"its {rows} rows are taken from there once",
            )
            return True
        if sha in self.prior.files:
            d, first = self.prior.files[sha]
            self.file_problem(
                f,
                "file_duplicate",
                f"{f.lf.relpath}: identical to {first}, already accepted on {d} (same sha256); "
                "its rows are kept from there once",
            )
            return True
        return False

    def read(self, f: _File, c: Contract, head: bytes) -> None:
        lf = f.lf
        fmt, gz = readers.detect_format(lf.path.name, head)
        f.gz = gz
        if gz and fmt is None:
            with readers.open_plain(lf.path, lf.relpath, True) as s:
                inner = s.read(8)
            if not inner:
                raise FileProblem("file_empty", f"{lf.relpath}: the file is empty once decompressed")
            fmt, _ = readers.detect_format(lf.path.name.removesuffix(".gz"), inner)
        if fmt is None:
            raise FileProblem(
                "file_unknown_format",
                f"{lf.relpath}: unknown format; name it .jsonl, .csv or .parquet (optionally .gz)",
            )
        f.entry["format"] = fmt
        info = f.info
        if fmt == "jsonl":
            f.ordinals = True
            batches = readers.read_jsonl(lf.path, c, lf.relpath, gz, info, self.staging)
            self.consume(f, c, batches)
        elif fmt == "csv":
            with readers.open_plain(lf.path, lf.relpath, gz) as stream:
                self.consume(f, c, readers.read_csv(stream, c, lf.relpath, info))
        else:
            plain = readers.plain_copy(lf.path, lf.relpath, gz, self.staging)
            try:
                self.consume(f, c, readers.read_parquet(plain, c, lf.relpath, info))
            finally:
                if plain != lf.path:
                    plain.unlink(missing_ok=True)
        f.entry["extra_columns"] = ",".join(info.extra_columns) or None
        if f.ordinals and (f.rejects or f.extras or c.name == "runs"):
            self.map_lines(f)
        self.stage_extras(f)

    def consume(self, f: _File, c: Contract, batches) -> None:
        for b in readers.prefetched(batches):
            if isinstance(b, FallBack):
                self.drop_rows(f)
                f.entry["rows_in"] = 0
                f.ordinals = b.ordinals
                continue
            if b.rejects is not None and b.rejects.height:
                f.entry["rows_in"] += b.rejects.height
                f.reject(b.rejects)
            if b.extras is not None and b.extras.height:
                f.extras.append(b.extras)
            if b.frame.height:
                f.entry["rows_in"] += b.frame.height
                self.validate(f, c, b)

    def validate(self, f: _File, c: Contract, b: readers.RawBatch) -> None:
        v = validate_rows(b.frame, c, carry=(ROW,), allowed=self.allowed, raw_column=b.raw_column)
        f.reject(v.rejected)
        if c.name == "runs":
            self.runs_parts.append(
                v.accepted.with_columns(
                    pl.lit(f.lf.relpath).alias("__fleet_file"),
                    pl.lit(f.order, pl.Int32).alias("__fleet_order"),
                )
            )
            f.accepted += v.accepted.height
        else:
            self.write_samples(f, v.accepted)

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
                    pl.lit(None, pl.String).alias("__fleet_file"),
                    pl.lit(None, pl.Int64).alias(ROW),
                    pl.lit(None, pl.Int32).alias("__fleet_order"),
                )
            )
        runs = runs.sort("__fleet_order", ROW)
        first = runs.with_columns(pl.col("__fleet_file").first().over("run_id").alias("__kept_in"))
        again = ~first["run_id"].is_first_distinct()
        prior_day = first["run_id"].replace_strict(self.prior.runs, default=None, return_dtype=pl.String)
        elsewhere = prior_day.is_not_null() & ~again
        self._reject_runs(
            first.filter(again),
            pl.format(
                "run_id {} was already delivered in {}; the first delivery is kept",
                pl.col("run_id"),
                pl.col("__kept_in"),
            ),
        )
        self._reject_runs(
            first.filter(elsewhere).with_columns(prior_day.filter(elsewhere).alias("__prior")),
            pl.format(
                "run_id {} was already accepted on {}; the first delivery is kept",
                pl.col("run_id"),
                pl.col("__prior"),
            ),
        )
        self.dup_runs = dict(zip(first.filter(elsewhere)["run_id"], prior_day.filter(elsewhere), strict=True))
        self.runs = runs.filter(~(again | elsewhere))
        for f in self.files:
            if f.entry["table_name"] == "runs":
                f.accepted = int((self.runs["__fleet_order"] == f.order).sum())
        self.windows = self.runs.select(
            "run_id",
            pl.col("start_ts").alias("__start"),
            pl.col("end_ts").alias("__end"),
            pl.lit(True).alias("__known"),
        )
        self.prior_sample_hashes = _prior_sample_hashes(self.home, self.dup_runs)

    def _reject_runs(self, rows: pl.DataFrame, message: pl.Expr) -> None:
        if not rows.height:
            return
        run_cols = [x.name for x in contract("runs").landing_columns]
        q = rows.select(
            "__fleet_order",
            ROW,
            pl.lit("duplicate_key").alias("reason_code"),
            pl.lit("run_id").alias("field"),
            message.alias("message"),
            _typed_json(rows, run_cols).alias("raw_record"),
        )
        by_order = {f.order: f for f in self.files}
        for (order,), part in q.group_by("__fleet_order"):
            by_order[order].reject(part.drop("__fleet_order"))

    # -- samples (streamed)

    def _suspects(self, acc: pl.DataFrame) -> pl.Series | None:
        """Rows that may break a cross-row rule (None when none can): of an unknown run, or of a run some
        of whose samples in this batch fall outside its time. Decided per run from its first and last
        sample in the batch, so a clean batch costs one group-by, not a test per row."""
        span = (
            acc.group_by("run_id")
            .agg(pl.col("ts").min().alias("__lo"), pl.col("ts").max().alias("__hi"))
            .join(self.windows, on="run_id", how="left")
        )
        off = span.filter(
            pl.col("__known").is_null()
            | ((pl.col("__lo") < pl.col("__start")) | (pl.col("__hi") > pl.col("__end"))).fill_null(False)
        )
        if not off.height:
            return None
        return acc["run_id"].is_in(off["run_id"].implode(), nulls_equal=True)

    def write_samples(self, f: _File, acc: pl.DataFrame) -> None:
        if not acc.height:
            return
        suspects = self._suspects(acc)
        if suspects is not None and suspects.any():
            indexed = acc.with_row_index("__i")
            rejected = self._cross_row_rejects(f, indexed.filter(suspects))
            acc = indexed.filter(~pl.col("__i").is_in(rejected.implode())).drop("__i")  # delivery order kept
        self._write_accepted(f, acc)

    def _cross_row_rejects(self, f: _File, rows: pl.DataFrame) -> pl.Series:
        """Quarantine the rows (unknown run, duplicate of another day, outside the run); their indexes."""
        cols = [x.name for x in contract("utilisation_samples").landing_columns]
        joined = rows.join(self.windows, on="run_id", how="left", maintain_order="left")
        out = []
        unknown = joined["__known"].is_null()
        if unknown.any():
            bad = joined.filter(unknown)
            keys = bad.select(pl.struct(SAMPLE_KEY).hash().alias("h"))["h"]
            elsewhere = bad["run_id"].is_in(list(self.dup_runs)) & keys.is_in(list(self.prior_sample_hashes))
            shown = pl.col("ts").dt.to_string(TS_OUT)
            dup = bad.filter(elsewhere)
            message = pl.format(
                "sample ({}, {}, {}) was already accepted on {}; the first delivery is kept",
                pl.col("run_id"),
                pl.col("server_id"),
                shown,
                pl.col("run_id").replace_strict(self.dup_runs, default=None),
            )
            f.reject(_row_rejects(dup, "duplicate_key", "ts", message, cols))
            orphan = bad.filter(~elsewhere)
            message = (
                pl.when(pl.col("run_id").is_in(list(self.dup_runs)))
                .then(
                    pl.format(
                        "run_id {} was accepted on {}, not in this day's landing files; "
                        "deliver samples with their run",
                        pl.col("run_id"),
                        pl.col("run_id").replace_strict(self.dup_runs, default=None),
                    )
                )
                .otherwise(
                    pl.format(
                        "run_id {} has no accepted run record in this day's landing files", pl.col("run_id")
                    )
                )
            )
            f.reject(_row_rejects(orphan, "unknown_run", "run_id", message, cols))
            out.append(bad["__i"])
            joined = joined.filter(~unknown)
        outside = ((joined["ts"] < joined["__start"]) | (joined["ts"] > joined["__end"])).fill_null(False)
        if outside.any():
            bad = joined.filter(outside)
            message = pl.format(
                "ts {} is outside its run ({} .. {})",
                pl.col("ts").dt.to_string(TS_OUT),
                pl.col("__start").dt.to_string(TS_OUT),
                pl.col("__end").dt.to_string(TS_OUT).fill_null("running"),
            )
            f.reject(_row_rejects(bad, "ts_outside_run", "ts", message, cols))
            out.append(bad["__i"])
        return pl.concat(out) if out else pl.Series("__i", [], pl.UInt32)

    def _write_accepted(self, f: _File, joined: pl.DataFrame) -> None:
        if not joined.height:
            return
        c = contract("utilisation_samples")
        rows = joined.select(
            [pl.lit(self.day_date).alias("day") if x == "day" else pl.col(x) for x in c.column_names]
        )
        table = rows.to_arrow().cast(self.samples.schema)  # types are the contract's by construction
        self.profile.update(rows)
        rg = self.samples.write(table)
        f.row_groups.append(rg)
        self.group_sizes.append(joined.height)
        f.accepted += joined.height
        keys = joined.select(pl.struct(SAMPLE_KEY).hash().alias("h"), pl.col(ROW).alias("row"))
        self.hashes.write(keys.to_arrow().cast(_HASH_SCHEMA))

    # -- extras and line numbers

    def stage_extras(self, f: _File) -> None:
        if not f.extras:
            return
        extras = pl.concat(f.extras)
        if f.rejected_rows:
            extras = extras.filter(~pl.col(ROW).is_in(pl.concat(f.rejected_rows).implode()))
        f.extras = []
        if f.entry["table_name"] == "runs":
            f.extras = [extras]  # runs may still be dropped as duplicates; staged after settle_runs
            return
        self._stage_extras(f, extras)

    def _stage_extras(self, f: _File, extras: pl.DataFrame) -> None:
        if not extras.height:
            return
        rows = extras.select(
            pl.lit(self.day_date).alias("day"),
            pl.lit(f.lf.relpath).alias("source_file"),
            pl.col(ROW).alias("row_number"),
            pl.lit(f.entry["table_name"]).alias("table_name"),
            "fields",
        ).sort("row_number")
        self.extras.write(lake.to_arrow(rows, "extra_fields"))

    def stage_run_extras(self) -> None:
        kept = self.runs.select("__fleet_order", ROW)
        for f in self.files:
            if f.entry["table_name"] == "runs" and f.extras:
                ex = pl.concat(f.extras)
                keep = kept.filter(pl.col("__fleet_order") == f.order)[ROW]
                f.extras = []
                self._stage_extras(f, ex.filter(pl.col(ROW).is_in(keep.implode())))

    def map_lines(self, f: _File, frames: list[pl.DataFrame] | None = None) -> None:
        """JSONL DuckDB and pyarrow tiers: replace record ordinals by line numbers (blank lines skipped)."""
        mine = [p for p in self.runs_parts if p.height and p["__fleet_order"][0] == f.order]
        targets = f.rejects + f.extras + mine if frames is None else frames
        ordinals = pl.concat([t[ROW] for t in targets]) if targets else pl.Series(ROW, [], pl.Int64)
        if not ordinals.len():
            return
        lines = readers.jsonl_line_numbers(f.lf.path, f.lf.relpath, f.gz, ordinals)
        mapping = dict(zip(ordinals.to_list(), lines.to_list(), strict=True))
        if all(k == v for k, v in mapping.items()):
            return

        def remap(t: pl.DataFrame) -> pl.DataFrame:
            return t.with_columns(pl.col(ROW).replace_strict(mapping, return_dtype=pl.Int64))

        if frames is None:
            f.rejects = [remap(t) for t in f.rejects]
            f.rejected_rows = [t[ROW] for t in f.rejects]
            f.extras = [remap(t) for t in f.extras]
            self.runs_parts = [
                remap(p) if p.height and p["__fleet_order"][0] == f.order else p for p in self.runs_parts
            ]
        else:
            frames[:] = [remap(t) for t in frames]

    # -- uniqueness of samples over the whole day

    def settle_samples(self) -> int:
        """Reject repeated sample keys (first delivery wins); returns rows whose key still repeats
        in what will be written (the unique_key check: 0 unless ingest has a bug)."""
        samples_path = self.samples.close()
        hashes_path = self.hashes.close()
        dead = {g for f in self.files for g in f.dead_groups}
        if hashes_path is None:
            return 0
        starts = np.concatenate(([0], np.cumsum(self.group_sizes)))
        dead_ranges = [[int(starts[g]), int(starts[g + 1])] for g in sorted(dead)]
        con = duckdb.connect(
            config={
                "memory_limit": "512MB",
                "temp_directory": str(self.staging / "spill"),
            }
        )
        try:
            con.execute("SET enable_progress_bar = false")
            clash = con.sql(
                sql_text("transforms/sample_key_clashes.sql"),
                params={"hashes": str(hashes_path), "dead": dead_ranges},
            ).pl()
        finally:
            con.close()
        drop: dict[int, list[int]] = collections.defaultdict(list)
        remaining = 0
        if clash.height:
            group = np.searchsorted(starts, clash["pos"].to_numpy(), side="right") - 1
            owner = {g: f for f in self.files for g in f.row_groups}
            clash = clash.with_columns(
                pl.Series("rg", group, dtype=pl.Int64),
                pl.Series("off", clash["pos"].to_numpy() - starts[group], dtype=pl.Int64),
                pl.Series("ord", [owner[g].order for g in group.tolist()], dtype=pl.Int32),
            )
            exact = _exact_duplicates(samples_path, clash)
            by_order = {f.order: f for f in self.files}
            names = {g.order: g.lf.relpath for g in self.files}
            for (order,), part in exact.filter(pl.col("repeat")).group_by("ord"):
                f = by_order[order]
                q = part.select(
                    pl.col("row").alias(ROW),
                    pl.lit("duplicate_key").alias("reason_code"),
                    pl.lit("ts").alias("field"),
                    pl.format(
                        "sample ({}, {}, {}) was already delivered in {}; the first delivery is kept",
                        pl.col("run_id"),
                        pl.col("server_id"),
                        pl.col("ts").dt.to_string(TS_OUT),
                        pl.col("kept_in_order").replace_strict(names, return_dtype=pl.String),
                    ).alias("message"),
                    pl.col("raw_record"),
                )
                if f.ordinals:
                    frames = [q]
                    self.map_lines(f, frames)
                    q = frames[0]
                f.reject(q)
                f.accepted -= q.height
                for rg, off in part.select("rg", "off").iter_rows():
                    drop[rg].append(off)
            kept = exact.filter(~pl.col("repeat"))
            remaining = kept.height - kept.select(pl.struct(SAMPLE_KEY).n_unique()).item()
        if dead or drop:
            self._rewrite_samples(dead, drop)
        return remaining

    def _rewrite_samples(self, dead: set[int], drop: dict[int, list[int]]) -> None:
        """Rewrite the staged samples without dead row groups and dropped rows (rare: faults, duplicates)."""
        src = self.samples.path
        kept_path = self.staging / "utilisation_samples.kept.parquet"
        out = _Staged(kept_path, self.samples.schema, **SAMPLES_PARQUET)
        pf = pq.ParquetFile(src)
        self.profile = ConformanceProfile(contract("utilisation_samples"))
        for rg in range(pf.num_row_groups):
            if rg in dead:
                continue
            t = pf.read_row_group(rg)
            if rg in drop:
                keep = np.ones(t.num_rows, dtype=bool)
                keep[drop[rg]] = False
                t = t.filter(pa.array(keep))
            if t.num_rows:
                self.profile.update(pl.from_arrow(t))
                out.write(t)
        out.close()
        self.samples = out
        src.unlink(missing_ok=True)
        if out.groups == 0:
            kept_path.unlink(missing_ok=True)
        self._drop_extras_of_dropped()

    def _drop_extras_of_dropped(self) -> None:
        path = self.extras.close()
        if path is None:
            return
        rejected = pl.concat(
            [
                pl.DataFrame({"source_file": f.lf.relpath, "row_number": pl.concat(f.rejected_rows)})
                for f in self.files
                if f.rejected_rows
            ]
            or [pl.DataFrame(schema={"source_file": pl.String, "row_number": pl.Int64})]
        )
        keep_files = [f.lf.relpath for f in self.files if f.entry["_file_reject"] is None]
        frame = pl.read_parquet(path)
        frame = frame.filter(pl.col("source_file").is_in(keep_files)).join(
            rejected, on=["source_file", "row_number"], how="anti"
        )
        out = _Staged(self.staging / "extra_fields.kept.parquet", self.extras.schema)
        if frame.height:
            out.write(lake.to_arrow(frame, "extra_fields"))
        out.close()
        path.unlink(missing_ok=True)
        self.extras = out

    # -- the results

    def quarantine(self) -> pl.DataFrame:
        parts = []
        for f in self.files:
            base = {
                "day": self.day_date,
                "source": f.lf.source,
                "source_file": f.lf.relpath,
                "table_name": f.entry["table_name"],
            }
            if f.entry["_file_reject"] is not None:
                parts.append(
                    pl.DataFrame(
                        [
                            {
                                **base,
                                "row_number": 0,
                                "field": None,
                                "raw_record": None,
                                **f.entry["_file_reject"],
                            }
                        ]
                    )
                )
                continue
            if not f.rejects:
                continue
            rows = pl.concat(f.rejects, how="vertical_relaxed").sort(ROW).rename({ROW: "row_number"})
            if rows.height > MAX_REJECTS_PER_FILE:
                rest = rows.slice(MAX_REJECTS_PER_FILE)
                by_reason = rest.group_by("reason_code").len().sort("len", descending=True)
                summary = ", ".join(f"{r}: {n:,}" for r, n in by_reason.iter_rows())
                rows = pl.concat(
                    [
                        rows.head(MAX_REJECTS_PER_FILE),
                        pl.DataFrame(
                            {
                                "row_number": [rest["row_number"][0]],
                                "reason_code": ["rejects_capped"],
                                "field": [None],
                                "message": [
                                    f"{f.lf.relpath}: {rest.height:,} more rows were rejected from row "
                                    f"{rest['row_number'][0]} on ({summary}); only the first "
                                    f"{MAX_REJECTS_PER_FILE:,} are listed one by one"
                                ],
                                "raw_record": [None],
                            },
                            schema=rows.schema,
                        ),
                    ]
                )
            parts.append(rows.with_columns(*[pl.lit(v).alias(k) for k, v in base.items()]))
        c = contract("quarantine")
        if not parts:
            return c.empty_frame()
        q = pl.concat([p.select(c.column_names) for p in parts], how="vertical_relaxed")
        return c.conform(q).sort("source_file", "row_number")

    def ledger(self) -> pl.DataFrame:
        rows = []
        for f in self.files:
            e = {k: v for k, v in f.entry.items() if not k.startswith("_")}
            file_q = f.entry["_file_quarantined"] if f.entry["_file_reject"] is not None else 0
            accepted = 0 if f.entry["_file_reject"] is not None else f.accepted
            quarantined = file_q + (0 if f.entry["_file_reject"] is not None else f.quarantined)
            e.update(
                rows_accepted=accepted,
                rows_quarantined=quarantined,
                file_status="quarantined" if accepted == 0 else "partial" if quarantined else "accepted",
            )
            rows.append(e)
        c = contract("ingest_ledger")
        if not rows:
            return c.empty_frame()
        return c.conform(pl.DataFrame(rows, schema=c.polars_schema())).sort("source_file")


class _Hasher:
    """SHA-256 of a file, computed now or in a thread while the file is being read (hashlib frees the GIL)."""

    def __init__(self, path: Path):
        self.path = path
        self.hexdigest = "0" * 64
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        h = hashlib.sha256()
        try:
            with open(self.path, "rb") as fh:
                while chunk := fh.read(4 << 20):
                    h.update(chunk)
        except OSError:
            return
        self.hexdigest = h.hexdigest()

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, daemon=True)
        self._thread.start()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()


def _typed_json(frame: pl.DataFrame, columns: list[str]) -> pl.Expr:
    cols = [
        pl.col(c).dt.to_string(TS_OUT) if isinstance(frame.schema[c], pl.Datetime) else pl.col(c)
        for c in columns
        if c in frame.columns
    ]
    return pl.struct(cols).struct.json_encode()


def _row_rejects(
    rows: pl.DataFrame, reason: str, field: str, message: pl.Expr, cols: list[str]
) -> pl.DataFrame:
    """Quarantine entries for ``rows``: one reason and field, a message per row, the row as JSON."""
    return rows.select(
        ROW,
        pl.lit(reason).alias("reason_code"),
        pl.lit(field).alias("field"),
        message.alias("message"),
        _typed_json(rows, cols).alias("raw_record"),
    )


def _prior_sample_hashes(home: DataHome, dup_runs: dict[str, str]) -> set[int]:
    """Key hashes of the samples other days hold for runs delivered again today (rare, small)."""
    out: set[int] = set()
    by_day: dict[str, list[str]] = collections.defaultdict(list)
    for rid, d in dup_runs.items():
        by_day[d].append(rid)
    for d, rids in by_day.items():
        path = lake.partition_path(home, "utilisation_samples", d)
        if path.exists():
            keys = pl.scan_parquet(path).filter(pl.col("run_id").is_in(rids)).select(SAMPLE_KEY).collect()
            out.update(keys.select(pl.struct(SAMPLE_KEY).hash().alias("h"))["h"].to_list())
    return out


def _exact_duplicates(samples_path: Path | None, clash: pl.DataFrame) -> pl.DataFrame:
    """The rows whose key hashes clash, read back and compared exactly: ``repeat`` marks every row that
    repeats an earlier delivery's key (staged order is delivery order), ``kept_in_order`` the file kept."""
    pf = pq.ParquetFile(samples_path)
    parts = []
    for (rg,), part in clash.group_by("rg"):
        t = (
            pl.from_arrow(pf.read_row_group(rg))
            .with_row_index("off")
            .with_columns(pl.col("off").cast(pl.Int64))
        )
        parts.append(part.join(t, on="off"))
    rows = pl.concat(parts).sort("pos")
    cols = [x.name for x in contract("utilisation_samples").landing_columns]
    return rows.with_columns(
        pl.col("ord").first().over(list(SAMPLE_KEY)).alias("kept_in_order"),
        pl.struct(SAMPLE_KEY).is_first_distinct().not_().alias("repeat"),
        _typed_json(rows, cols).alias("raw_record"),
    )


# ---------------------------------------------------------------- entry points


def ingest_day(
    home: DataHome,
    day: str,
    platforms: Iterable[str],
    *,
    now: dt.datetime | None = None,
    staging: Path | None = None,
) -> DayIngest:
    """Read and validate every landing file of ``day`` into a staging folder beside the lake.

    Nothing in the lake changes here; ``ingest_partition`` promotes the result.
    """
    staging = staging or _new_staging(home, day)
    state = _Day(home, day, platforms, staging, now or dt.datetime.now(dt.UTC))
    files = day_files(home, day)
    runs_first = sorted(range(len(files)), key=lambda i: (table_for(files[i].path.name) != "runs", i))
    made = {i: state.new_file(files[i], i) for i in range(len(files))}
    settled = False
    for i in runs_first:
        f = made[i]
        if not settled and f.entry["table_name"] != "runs":
            state.settle_runs()
            settled = True
        state.ingest_file(f)
    if not settled:
        state.settle_runs()
    state.stage_run_extras()
    duplicated = state.settle_samples()
    extras_path = state.extras.close()
    runs = state.runs.with_columns(
        pl.lit(state.day_date).alias("day"),
        pl.col("__fleet_file").str.split("/").list.first().alias("source"),
    )
    return DayIngest(
        day=day,
        staging=staging,
        runs=contract("runs").conform(runs.sort("run_id")),
        quarantine=state.quarantine(),
        ingest_ledger=state.ledger(),
        samples_path=state.samples.path if state.samples.groups else None,
        samples_rows=state.samples.rows,
        samples_violations=state.profile.violations(),
        samples_duplicated=duplicated,
        extra_fields_path=extras_path,
        extra_fields_rows=state.extras.rows,
        prior_files=frozenset(state.prior.files),
        prior_runs=frozenset(state.prior.runs),
    )


def _new_staging(home: DataHome, day: str) -> Path:
    path = home.lake / ".staging" / f"day={day}.{uuid.uuid4().hex[:12]}"
    path.mkdir(parents=True)
    return path


def reconciliation(ledger: pl.DataFrame) -> pl.DataFrame:
    """Ledger rows whose counts do not reconcile (rows_in != accepted + quarantined)."""
    return ledger.filter(pl.col("rows_in") != pl.col("rows_accepted") + pl.col("rows_quarantined"))


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
    written: dict[str, Path]


def blocking_checks(result: DayIngest) -> list[CheckOutcome]:
    """Reconciliation, contract conformance and key uniqueness of what is about to be written."""
    ledger = result.ingest_ledger
    bad = reconciliation(ledger)
    checks = [
        CheckOutcome(
            "ingest_ledger",
            "reconciles",
            bad.height == 0,
            {
                "files": ledger.height,
                "files_not_reconciling": bad.height,
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


def partition_lock(home: DataHome, day: str) -> FileLock:
    """One writer per day partition at a time (two runs of the same day queue behind each other)."""
    folder = home.lake / ".locks"
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder / f"day={day}.lock"))


def lake_lock(home: DataHome) -> FileLock:
    """Held while a day is promoted: what other days accepted cannot change under the promotion."""
    folder = home.lake / ".locks"
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder / "promote.lock"))


def _raced(home: DataHome, day: str, result: DayIngest) -> bool:
    """Did another day accept one of this day's files or runs while this day was being read?"""
    now = _prior(home, day)
    new_files = set(now.files) - result.prior_files
    new_runs = set(now.runs) - result.prior_runs
    mine_files = set(result.ingest_ledger.filter(pl.col("rows_accepted") > 0)["sha256"].to_list())
    return bool(new_files & mine_files or new_runs & set(result.runs["run_id"].to_list()))


def ingest_partition(home: DataHome, day: str, platforms: Iterable[str]) -> PartitionOutcome:
    """Ingest a day and write it. Ledger, quarantine and extra fields are always written (they explain);
    runs and samples are promoted only if every blocking check passes, else the last good partition stays.

    Days are read concurrently; the promotion is serialised. If another day accepted one of this day's
    files or runs meanwhile (the same delivery in two day folders), the day is read again under the lock,
    so the first delivery wins across days as it does within one."""
    platforms = list(platforms)
    with partition_lock(home, day):
        # left by a killed writer of this day (we hold its lock, so nobody is still writing them)
        for stale in (home.lake / ".staging").glob(f"day={day}.*"):
            shutil.rmtree(stale, ignore_errors=True)
        for table in (*LANDING_TABLES, "quarantine", "ingest_ledger", "extra_fields"):
            sweep_temporaries(home.partition_dir(table, day), lake.PART_FILE)
        result = ingest_day(home, day, platforms)
        with lake_lock(home):
            if _raced(home, day, result):
                result.discard()
                result = ingest_day(home, day, platforms)
            return _promote(home, day, result)


def _promote(home: DataHome, day: str, result: DayIngest) -> PartitionOutcome:
    """Write the day: ledger, quarantine and extra fields always; runs and samples if the checks pass."""
    try:
        checks = blocking_checks(result)
        promote = all(c.passed for c in checks)
        written = {
            "quarantine": lake.write_partition(home, "quarantine", day, result.quarantine),
            "extra_fields": lake.promote_partition(home, "extra_fields", day, result.extra_fields_path),
        }
        if promote:
            written["runs"] = lake.write_partition(home, "runs", day, result.runs)
            written["utilisation_samples"] = lake.promote_partition(
                home, "utilisation_samples", day, result.samples_path
            )
        # the ledger last: a day whose ledger is written is whole
        written["ingest_ledger"] = lake.write_partition(home, "ingest_ledger", day, result.ingest_ledger)
    finally:
        result.discard()
    result.samples_path = written.get("utilisation_samples")
    result.extra_fields_path = written["extra_fields"]
    fsync_dir(home.lake)
    return PartitionOutcome(day=day, result=result, checks=checks, promoted=promote, written=written)
