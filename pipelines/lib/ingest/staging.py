"""A day is staged beside the lake before it is promoted: staged Parquet files written batch by batch."""

from __future__ import annotations

import queue
import threading
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.lib.analysis.partials import PART_ID_KEY, new_part_id
from pipelines.lib.paths import DataHome


def new_staging(home: DataHome, day: str) -> Path:
    """A fresh staging folder for one day's ingest (unique per writer)."""
    path = home.staging / f"day={day}.{uuid.uuid4().hex[:12]}"
    path.mkdir(parents=True)
    return path


# A fixed-width column is dictionary-encoded where its first batch repeats each value this often on average
# (and the dictionary stays far below Parquet's 1 MiB dictionary page): rounded readings (a utilisation to
# 4 decimals, a timestamp on the scrape grid) shrink ~2x and write faster; full-precision floats would pay
# the dictionary's hashing and fall back to plain encoding, ~3x the write.
REPEATS = 8
MAX_DICTIONARY_VALUES = 65_536


def repetitive_columns(table: pa.Table) -> list[str]:
    """The fixed-width columns of ``table`` whose values repeat enough to dictionary-encode."""
    most = min(table.num_rows // REPEATS, MAX_DICTIONARY_VALUES)
    return [
        field.name
        for field, column in zip(table.schema, table.columns, strict=True)
        if pa.types.is_primitive(field.type)
        and not pa.types.is_boolean(field.type)
        and len(column.unique()) <= most  # a null counts as one value
    ]


class StagedParquet:
    """A Parquet file written batch by batch, one row group per batch, by a background thread (pyarrow
    frees the GIL), so writing overlaps reading and validating the next batch. At most two batches wait.
    Each file carries an id of its own in its metadata (``partials.PART_ID_KEY``): what per-part
    aggregates are kept under.

    ``use_dictionary`` lists the columns always dictionary-encoded; with ``dictionary_where_repetitive``
    the fixed-width columns whose first batch repeats its values (``repetitive_columns``) are too."""

    def __init__(
        self, path: Path, schema: pa.Schema, *, dictionary_where_repetitive: bool = False, **options
    ):
        self.path, self.schema = path, schema
        self.part_id = new_part_id()
        self.options = {"compression": "zstd", **options}
        self.dictionary_where_repetitive = dictionary_where_repetitive
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
                    schema = self.schema.with_metadata(
                        {**(self.schema.metadata or {}), PART_ID_KEY: self.part_id.encode()}
                    )
                    writer = pq.ParquetWriter(self.path, schema, **self._options(table))
                writer.write_table(table, row_group_size=max(table.num_rows, 1))
        except BaseException as exc:  # re-raised by close()
            self._error = exc
            while self._queue.get() is not None:
                pass
        finally:
            if writer is not None:
                try:
                    writer.close()  # writes the footer: a full disk can fail here too
                except BaseException as exc:
                    self._error = self._error or exc

    def _options(self, first: pa.Table) -> dict:
        always = self.options.get("use_dictionary", True)
        if not self.dictionary_where_repetitive or always is True:
            return self.options
        listed = list(always or [])  # False: none listed
        return {
            **self.options,
            "use_dictionary": listed + [c for c in repetitive_columns(first) if c not in listed],
        }

    def write(self, table: pa.Table) -> int:
        """Queue one batch; returns its row-group index."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._drain, daemon=True)
            self._thread.start()
        self._queue.put(table)
        self.groups += 1
        self.rows += table.num_rows
        return self.groups - 1

    @classmethod
    def written(cls, path: Path, schema: pa.Schema, groups: int, rows: int, **options) -> StagedParquet:
        """A file another process wrote and closed (``groups`` row groups, ``rows`` rows)."""
        out = cls(path, schema, **options)
        out.groups, out.rows = groups, rows
        return out

    @property
    def writing(self) -> bool:
        """Its writer is running (it cannot be handed to another process)."""
        return self._thread is not None

    def abort(self) -> None:
        """Stop the writer and close the file, without raising (after a failure; ``close`` raises)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def close(self) -> Path | None:
        """Finish writing; the path, or None when nothing was written."""
        self.abort()
        if self._error is not None:
            raise self._error
        return self.path if self.groups else None
