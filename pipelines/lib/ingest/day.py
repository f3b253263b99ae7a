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
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from pipelines.lib.contracts import ConformanceProfile, Contract, contract
from pipelines.lib.fileio import full_disk
from pipelines.lib.ingest import dedupe
from pipelines.lib.ingest.cross_row import FILE
from pipelines.lib.ingest.day_derive import Derivation
from pipelines.lib.ingest.day_runs import DayRuns, stage_checked
from pipelines.lib.ingest.day_settle import settle_samples
from pipelines.lib.ingest.day_staging import DayStaging
from pipelines.lib.ingest.day_state import METRICS, DayIngest, FileState
from pipelines.lib.ingest.entries import FileReject, reject_frame
from pipelines.lib.ingest.file_book import FileBook
from pipelines.lib.ingest.hashing import FileHasher, file_stamp
from pipelines.lib.ingest.line_texts import finish_texts
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
from pipelines.lib.ingest.staging import new_staging
from pipelines.lib.ingest.validation import validate_rows
from pipelines.lib.ingest.volume import day_volume, run_samples, trailing_samples
from pipelines.lib.paths import DataHome
from pipelines.lib.settings import DEFAULT_LIMITS, IngestLimits
from pipelines.lib.storage.landing import LandingFile, day_files

LANDING_TABLES = ("runs", "utilisation_samples")
HEAD_BYTES = 64  # read from a file's start to recognise its format
MAX_READS = 3  # a file that changes while it is read is read again, this many times at most


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
    """One day's ingest while its files stream through: each file recognised, read in batches, its rows
    validated and staged or quarantined. What it holds lives in its rooms: ``book`` (the files and their
    ledger entries), ``runs``, ``staged`` (the staged files) and the Prometheus ``notes``."""

    def __init__(
        self,
        home: DataHome,
        day: str,
        platforms: Iterable[str],
        staging: Path,
        now: dt.datetime,
        limits: IngestLimits = DEFAULT_LIMITS,
        prior: dedupe.Prior | None = None,
        runs: DayRuns | None = None,
    ):
        """``runs``: already settled (a slice of a split day reads against its day's runs)."""
        self.home, self.day, self.staging, self.now = home, day, staging, now
        self.limits = limits
        self.day_date = dt.date.fromisoformat(day)
        self.allowed = {"hardware_catalog": frozenset(platforms)}
        self.prior = prior if prior is not None else dedupe.read_prior(home, day)
        self.slices: list[dict] = []  # a split day's slices: which files, read by which process
        self.book = FileBook(self.day_date, now, limits, self.prior)
        self.runs = runs if runs is not None else DayRuns()
        self.staged = DayStaging(staging, self.day_date)
        self.notes: list[str] = []  # what the Prometheus derivation left out

    # -- files

    def new_file(self, lf: LandingFile, order: int, table: str | None) -> FileState:
        return self.book.add(lf, order, table)

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
        f.rejects = self.book.reject_log()
        f.run_extras = []
        self.staged.drop(f)
        self.runs.forget(f.order)

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
            f.entry, f.info = self.book.entry(lf, f.table), FileInfo()
        else:
            self.file_problem(
                f,
                "file_unstable",
                f"{lf.relpath}: changed while it was being read, {MAX_READS} times in a row; a producer is "
                "still writing it: deliver files whole (write to a hidden or temporary name, then rename)",
            )
        if f.entry.problem is None or f.entry.problem.reason_code != "file_duplicate":
            self.book.remember(f)

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
        if self.book.may_repeat(size):
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

    def _duplicate(self, f: FileState, digest: str) -> bool:
        f.entry.blake3 = digest
        if digest in self.book.seen:
            self.repeat_of(f, *self.book.seen[digest])
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
            self.staged.write_metrics(f, v.accepted)
            return
        if c.name == "runs":
            self.runs.add(v.accepted, f.lf.relpath, f.order)
            f.accepted += v.accepted.height
            if b.extras is not None and b.extras.height:
                f.run_extras.append(b.extras.filter(~pl.col(ROW).is_in(dropped.implode())))
            return
        crossed = stage_checked(f, v.accepted, self.runs, self.staged, exact=b.exact)
        if b.extras is not None and b.extras.height:
            gone = pl.concat([dropped, crossed]) if crossed.len() else dropped
            self.staged.write_extras(f, b.extras.filter(~pl.col(ROW).is_in(gone.implode())))

    # -- settling

    def derive(self) -> None:
        """Runs and utilisation samples from the day's Prometheus samples (then the day's runs are settled,
        derived ones among them, and the derived samples validated and staged like any file's)."""
        d = Derivation(self.home, self.day, self.limits, self.allowed, self.book, self.runs, self.staged)
        self.notes = d.run()

    def stage_run_extras(self) -> None:
        for f, extras in self.runs.kept_extras(self.book.files):
            self.staged.write_extras(f, extras)

    def settle_samples(self) -> int:
        """Repeated sample keys quarantined over the whole day; rows whose key still repeats (0)."""
        return settle_samples(self.staged, self.book.files, self.allowed, self.limits.raw_record_max_bytes)

    def seal(self) -> None:
        self.staged.seal()

    def abort(self) -> None:
        self.staged.abort()


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
    staged = state.staged
    extras_path, extras_rows = staged.extras_written()
    runs = contract("runs").conform(
        state.runs.runs.with_columns(
            pl.lit(state.day_date).alias("day"), pl.col(FILE).str.split("/").list.first().alias("source")
        ).sort("run_id")
    )
    samples = [p.samples for p in staged.parts]
    profile = ConformanceProfile(contract("utilisation_samples"))
    for p in staged.parts:
        for key, problem in p.problems.items():
            profile.problems.setdefault(key, problem)
    metrics_path = staged.metrics.close()
    volume = day_volume(day, run_samples(runs, samples), trailing_samples(home, day))
    return DayIngest(
        day=day,
        staging=state.staging,
        runs=runs,
        quarantine=state.book.quarantine(),
        ingest_ledger=state.book.ledger(),
        samples_paths=samples,
        samples_rows=sum(sum(p.group_sizes) for p in staged.parts),
        samples_violations=profile.violations(),
        samples_duplicated=duplicated,
        extra_fields_path=extras_path,
        extra_fields_rows=extras_rows,
        sample_volume=volume,
        metric_samples_path=metrics_path,
        metric_samples_rows=staged.metrics.rows,
        notes=state.notes,
        slices=state.slices,
        landing_files=frozenset(lf.relpath for lf in files),
        prior_files=frozenset(state.prior.files),
        prior_runs=frozenset(state.prior.runs),
    )


def reconciliation(ledger: pl.DataFrame) -> pl.DataFrame:
    """Ledger rows whose counts do not reconcile (rows_in != accepted + quarantined)."""
    return ledger.filter(pl.col("rows_in") != pl.col("rows_accepted") + pl.col("rows_quarantined"))
