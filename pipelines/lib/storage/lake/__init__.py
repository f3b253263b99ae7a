"""The storage layer: every lake table a Delta table, in a local folder (the default) or under s3://.

One interface owns the layout (``<lake>/<table>/day=YYYY-MM-DD/part-*.parquet``, the partition column kept in
the files too, so DuckDB reads them as they are), the atomic publish of a day (one Delta commit that removes
the day's files and adds the new ones: readers see the old day or the new one, never a mix; writers of
different days commit concurrently, of the same day one after the other, the last one whole),
listing (days, row counts from the log), versions, what DuckDB and the analyst views read (the snapshot's
files), locks, and the vacuum policy. Callers never build a lake path themselves.

The same code serves both backends: deltalake takes a local path or an s3:// URI with the standard AWS
settings; files are written through pyarrow's filesystem for either.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from deltalake import DeltaTable, Schema
from deltalake.exceptions import CommitFailedError, TableNotFoundError
from deltalake.transaction import AddAction, RemoveAction

from pipelines.lib.contracts import contract
from pipelines.lib.errors import Unavailable
from pipelines.lib.frames import arrow_frame
from pipelines.lib.paths import DataHome
from pipelines.lib.settings import lake_cache_bytes
from pipelines.lib.storage.lake import locks, s3
from pipelines.lib.storage.lake.copies import LocalCopies
from pipelines.lib.storage.lake.datafiles import put
from pipelines.lib.storage.lake.s3 import storage_options

PART = "part-{}.parquet"
COMMIT_WAIT_S = 600  # longest wait for another writer of the same day to commit
COMMIT_LEASE_S = 120  # a commit lock a killed writer left is taken over after this (a commit takes < 1 s)
VACUUM_RETENTION_HOURS = 24  # files a commit removed stay this long: analysts' open catalogs still read them
# Every reader opens a table by replaying its log from the last checkpoint: Delta's default of one per 100
# commits made an open cost 0.3 ms per commit (a lake of 95 days: 17 ms each, 40 s of a 71 s backfill).
CHECKPOINT_INTERVAL = 10
COMMIT_ATTEMPTS = 40  # a commit that loses to other days' writers is built again this often (about 30 s)

__all__ = [
    "ConcurrentWrite",
    "Lake",
    "promote_partition",
    "read_partition",
    "read_table",
    "store",
    "table_files",
    "to_arrow",
    "write_partition",
    "write_table",
]


class ConcurrentWrite(RuntimeError):
    """Other writers' commits kept getting in first, every attempt; ours was not applied."""


class OtherSchema(Unavailable):
    """A lake table's columns are not its contract's (written by another version of the product)."""


def to_arrow(frame: pl.DataFrame, table: str) -> pa.Table:
    """The frame as an Arrow table with exactly the contract's schema (order, types, nullability); raises
    ``pyarrow.ArrowInvalid`` on text that is not UTF-8."""
    c = contract(table)
    out = c.conform(frame).to_arrow().cast(c.arrow_schema())
    out.validate(full=True)  # the lake never holds text that is not UTF-8
    return out


class Lake:
    """The lake at ``uri``: a local folder or ``s3://bucket/prefix``."""

    def __init__(self, uri: str, cache: Path | None = None, cache_bytes: int = 0):
        self.uri = uri.rstrip("/")
        self.remote = self.uri.startswith("s3://")
        self.options = storage_options() if self.remote else None
        self._fs: pafs.FileSystem | None = None
        # Local copies of an object store's data files, which the product's own reads use (see ``readable``)
        self.copies = (
            LocalCopies(cache, cache_bytes, lambda: self.fs)
            if self.remote and cache is not None and cache_bytes > 0
            else None
        )

    def __repr__(self) -> str:  # never the credentials
        return f"Lake({self.uri!r})"

    # ------------------------------------------------------------------ layout

    def table_uri(self, table: str) -> str:
        return f"{self.uri}/{table}"

    @property
    def fs(self) -> pafs.FileSystem:
        """pyarrow's filesystem of the lake and the path of its root in it."""
        if self._fs is None:
            self._fs = s3.pyarrow_fs() if self.remote else pafs.LocalFileSystem()
        return self._fs

    def _fs_path(self, uri: str) -> str:
        return uri[5:] if uri.startswith("s3://") else uri

    @staticmethod
    def partitioned(table: str) -> bool:
        return contract(table).partitioned_by is not None

    def _created(self, table: str) -> DeltaTable:
        """A table this writer created (or found) before: its removal since is an error, not a new table."""
        if (delta := self._open(table)) is None:
            raise FileNotFoundError(f"{self.table_uri(table)}: the table was removed while being written")
        return delta

    def _open(self, table: str, version: int | None = None) -> DeltaTable | None:
        try:
            delta = DeltaTable(self.table_uri(table), version=version, storage_options=self.options)
        except TableNotFoundError:
            return None
        have = [f.name for f in delta.schema().fields]
        want = contract(table).column_names
        if sorted(have) != sorted(want):
            raise OtherSchema(
                f"{self.table_uri(table)}: its columns ({', '.join(have)}) are not the {table} contract's "
                f"({', '.join(want)}); it was written by another version of fleet. Re-ingest into a new "
                "data home (or lake), or move this one aside"
            )
        return delta

    def _create(self, table: str) -> DeltaTable:
        """The table, created empty with the contract's schema if missing (a racing creator is fine)."""
        existing = self._open(table)
        if existing is not None:
            return existing
        c = contract(table)
        with contextlib.suppress(Exception):  # another writer created it meanwhile: opened below
            DeltaTable.create(
                self.table_uri(table),
                c.arrow_schema(),
                partition_by=[c.partitioned_by] if c.partitioned_by else None,
                mode="ignore",
                storage_options=self.options,
                configuration={"delta.checkpointInterval": str(CHECKPOINT_INTERVAL)},
            )
        created = self._open(table)
        if created is None:
            raise OSError(f"cannot create the lake table {self.table_uri(table)}")
        return created

    # ------------------------------------------------------------------ writes

    def publish_day(self, table: str, day: str, data: pa.Table | Path | list[Path] | None) -> int:
        """Replace one day of a partitioned table whole, in one commit; returns its rows.

        ``data``: a table in the contract's schema, staged Parquet files in it (moved or uploaded into the
        table, never rewritten: one, or one per slice of a split day), or None or no files for an empty day
        (an empty file: the day is listed, 0 rows).
        Writers of one day commit one at a time (the last one's day stays whole); of different days, at once.
        """
        self._check_day(day)
        self._create(table)
        if data is None or (isinstance(data, list) and not data):
            # not Schema.empty_table(): that imports pandas (0.2-0.4 s of an ingest's process)
            data = pa.Table.from_batches([], schema=contract(table).arrow_schema())
        adds: list[AddAction] = []
        try:
            for one in data if isinstance(data, list) else [data]:
                adds.append(self._place(table, f"day={day}", one, {"day": day}))
        except BaseException:
            self._unplace(table, adds)
            raise
        partition_by = ["day"]  # the files are placed under day=
        actions: list[AddAction | RemoveAction] = [*adds]

        def replace_day(delta: DeltaTable) -> None:
            delta.create_write_transaction(
                actions,
                mode="overwrite",
                schema=delta.schema(),
                partition_by=partition_by,
                partition_filters=[("day", "=", day)],
            )

        self._commit(table, f"day {day}", adds, f"{table}.day={day}", replace_day)
        return sum(_rows(a) for a in adds)

    def write_table(self, table: str, data: pa.Table) -> int:
        """Replace an unpartitioned table whole, in one commit; returns its rows. The commit carries the
        contract's schema: a table written before a contract gained columns takes them."""
        self._create(table)
        add = self._place(table, "", data, {})
        schema = Schema.from_arrow(contract(table).arrow_schema())

        def replace_table(delta: DeltaTable) -> None:
            delta.create_write_transaction([add], mode="overwrite", schema=schema)

        self._commit(table, "the table", [add], table, replace_table)
        return _rows(add)

    def _commit(
        self, table: str, what: str, adds: list[AddAction], lock: str, write: Callable[[DeltaTable], None]
    ) -> None:
        """``write`` the commit of ``adds`` against the table's current snapshot, under the lock of what it
        replaces: an overwrite removes the files of the snapshot it was built on, so two writers of one day
        must not build on the same one (both files would stay).

        Delta judges an overwrite against every file of the snapshot it read, so a writer of another day that
        commits first fails ours too ("a concurrent transaction deleted data this operation read"). Holding
        this day's lock, the conflict is not with our day: the commit is built again on the new snapshot and
        retried. If every attempt loses, our files are removed and the caller told."""
        with self.lock(lock, timeout_s=COMMIT_WAIT_S, lease_s=COMMIT_LEASE_S):
            lost = None
            for attempt in range(COMMIT_ATTEMPTS):
                try:
                    write(self._created(table))
                    return
                except CommitFailedError as exc:
                    lost = exc
                    time.sleep(random.uniform(0, min(1.0, 0.01 * 2**attempt)))  # writers spread out
            self._unplace(table, adds)
            raise ConcurrentWrite(
                f"{self.table_uri(table)}: {COMMIT_ATTEMPTS} attempts to replace {what} each lost to another "
                f"writer's commit; this write was not applied (run it again): {lost}"
            ) from lost

    def _unplace(self, table: str, adds: list[AddAction]) -> None:
        """Remove files placed for a commit that will not happen."""
        for add in adds:
            with contextlib.suppress(OSError):
                self.fs.delete_file(self._fs_path(f"{self.table_uri(table)}/{add.path}"))

    def _place(self, table: str, folder: str, data: pa.Table | Path, partition: dict[str, str]) -> AddAction:
        """Write (or move/upload) one data file into the table; an AddAction for it."""
        rel = f"{folder}/{PART.format(uuid.uuid4().hex)}" if folder else PART.format(uuid.uuid4().hex)
        target = self._fs_path(f"{self.table_uri(table)}/{rel}")
        self.fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        try:
            rows = put(data, target, self.fs, self.remote, self.copies)
        except BaseException:  # a file no commit adds is removed (a disk full, a failed upload)
            with contextlib.suppress(OSError):
                self.fs.delete_file(target)
            raise
        size = self.fs.get_file_info(target).size
        return AddAction(
            path=rel,
            size=size,
            partition_values=partition,
            modification_time=int(time.time() * 1000),
            data_change=True,
            stats=json.dumps({"numRecords": rows}),
        )

    @staticmethod
    def _check_day(day: str) -> None:
        dt.date.fromisoformat(day)  # a day is YYYY-MM-DD, nothing else reaches a partition filter

    # ------------------------------------------------------------------ reads

    def _actions(self, table: str) -> pa.Table:
        delta = self._open(table)
        if delta is None:
            schema = pa.schema([("path", pa.string()), ("num_records", pa.int64())])
            return pa.Table.from_batches([], schema=schema)
        return _arrow(delta.get_add_actions(flatten=True))

    def files(self, table: str, day: str | None = None) -> list[str]:
        """URIs of the table's current files (of one day): what DuckDB and the analyst views read."""
        return self.snapshot(table, day)[1]

    def snapshot(self, table: str, day: str | None = None) -> tuple[int | None, list[str]]:
        """The table's current version and the URIs of its files (of one day), read together."""
        delta = self._open(table)
        if delta is None:
            return None, []
        actions = _arrow(delta.get_add_actions(flatten=True))
        if day is not None and actions.num_rows:
            actions = actions.filter(
                pc.call_function("equal", [actions["partition.day"], pa.scalar(dt.date.fromisoformat(day))])
            )
        return delta.version(), sorted(f"{self.table_uri(table)}/{p}" for p in actions["path"].to_pylist())

    def days(self, table: str) -> list[str]:
        """Days with a partition (possibly empty partitions are not listed)."""
        actions = self._actions(table)
        if not actions.num_rows:
            return []
        return sorted({d.isoformat() for d in actions["partition.day"].to_pylist()})

    def row_counts(self, table: str) -> dict[str, int]:
        """Rows per day, from the log (no data read)."""
        actions = self._actions(table)
        if not actions.num_rows:
            return {}
        frame = arrow_frame(actions.select(["partition.day", "num_records"]))
        per_day = frame.group_by("partition.day").agg(pl.col("num_records").sum())
        return {d.isoformat(): int(n) for d, n in per_day.iter_rows()}

    def read(self, table: str, day: str | None = None, columns: list[str] | None = None) -> pl.DataFrame:
        """The table (or one day of it) as a frame; an empty frame with the contract's columns if none."""
        return self.read_files(table, self.files(table, day), columns)

    def read_files(self, table: str, files: list[str], columns: list[str] | None = None) -> pl.DataFrame:
        """Those files of a table as one frame (the contract's empty frame for none)."""
        if not files:
            empty = contract(table).empty_frame()
            return empty.select(columns) if columns else empty
        paths = self.readable(files)
        return pl.read_parquet(
            paths,
            columns=columns,
            storage_options=self.options if any(p.startswith("s3://") for p in paths) else None,
            hive_partitioning=False,
            missing_columns="insert",
        )

    # ------------------------------------------------------------------ local copies of remote files

    def readable(self, uris: list[str]) -> list[str]:
        """Where to read the lake's data files ``uris`` from: on object storage with local copies, the copies
        (pipelines/lib/storage/lake/copies.py); else the URIs themselves."""
        return list(uris) if self.copies is None else self.copies.readable(uris)

    def prune_cache(self) -> list[Path]:
        """Keep the local copies within their bound; the copies dropped."""
        return [] if self.copies is None else self.copies.prune()

    def version(self, table: str) -> int | None:
        """The table's current Delta version (None if it does not exist): a cache key of what it holds."""
        delta = self._open(table)
        return None if delta is None else delta.version()

    def exists(self, table: str) -> bool:
        return self._open(table) is not None

    # ------------------------------------------------------------------ engines

    def duckdb(self, con) -> None:
        """Let a DuckDB connection read the lake's files (object storage through a registered filesystem:
        DuckDB's httpfs extension is downloaded at run time, which cannot be assumed)."""
        if self.remote:
            con.register_filesystem(s3.fsspec_fs())

    # ------------------------------------------------------------------ coordination

    @contextlib.contextmanager
    def lock(self, name: str, timeout_s: float = 3600, lease_s: float = locks.LEASE_S) -> Iterator[None]:
        """One holder at a time across processes and machines that share the lake (on object storage, a
        lease its holder's death lets expire after ``lease_s``)."""
        with locks.lock(self, name, timeout_s, lease_s):
            yield

    def vacuum(
        self, table: str, keep_version: int | None = None, retention_hours: float = VACUUM_RETENTION_HOURS
    ) -> list[str]:
        """Delete the files commits removed more than ``retention_hours`` ago, and files no commit added
        (a killed writer's) older than that, except those of version ``keep_version`` (the snapshot some
        published view reads); returns what the vacuum listed. The retention also protects the files of
        writers that have not committed yet."""
        delta = self._open(table)
        if delta is None:
            return []
        return delta.vacuum(
            retention_hours=int(retention_hours),
            dry_run=False,
            enforce_retention_duration=False,
            full=True,
            keep_versions=None if keep_version is None else [keep_version],
        )


def _arrow(stream) -> pa.Table:
    """An Arrow stream (delta-rs's arro3 tables) as a pyarrow table; not ``pa.table(stream)``, which imports
    pandas (0.2-0.4 s of every process that only ingests)."""
    return pa.RecordBatchReader.from_stream(stream).read_all()


def _rows(add: AddAction) -> int:
    return int(json.loads(add.stats)["numRecords"])


# ---------------------------------------------------------------------- the data home's lake


@functools.cache
def _lake(uri: str, cache: Path, cache_bytes: int) -> Lake:
    return Lake(uri, cache, cache_bytes)


def store(home: DataHome) -> Lake:
    """The lake of a data home (on object storage, with its local copies in the home's cache/lake/, at
    most $FLEET_LAKE_CACHE_BYTES of them)."""
    return _lake(home.lake_uri, home.root / "cache" / "lake", lake_cache_bytes(os.environ))


def write_partition(home: DataHome, table: str, day: str, frame: pl.DataFrame) -> str:
    """Replace one day of a table whole with ``frame``; readers see the old or the new day, never a mix.
    Returns the table's URI."""
    s = store(home)
    s.publish_day(table, day, to_arrow(frame, table))
    return s.table_uri(table)


def promote_partition(home: DataHome, table: str, day: str, staged: Path | list[Path] | None) -> str:
    """Publish staged Parquet files (in the contract's schema) as one day of a table, moved or uploaded
    into place; with nothing staged, the day becomes empty. Returns the table's URI."""
    s = store(home)
    s.publish_day(table, day, staged)
    return s.table_uri(table)


def write_table(home: DataHome, table: str, frame: pl.DataFrame) -> str:
    """Replace an unpartitioned table whole; returns its URI."""
    s = store(home)
    s.write_table(table, to_arrow(frame, table))
    return s.table_uri(table)


def read_partition(home: DataHome, table: str, day: str) -> pl.DataFrame:
    """One day of a table; an empty frame with the contract's columns if that day was never written."""
    return store(home).read(table, day)


def read_table(home: DataHome, table: str) -> pl.DataFrame:
    """A whole table (every partition, or the unpartitioned table)."""
    return store(home).read(table)


def table_files(home: DataHome, table: str, day: str | None = None) -> list[str]:
    """The current files of a table (of one day): what DuckDB scans out of core."""
    return store(home).files(table, day)
