"""What every reader shares: the file being read, what a reader yields, the limits on hostile input."""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import threading
import uuid
import zlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from pipelines.lib.fileio import size_text
from pipelines.lib.ingest.validation import Validated
from pipelines.lib.settings import IngestLimits

# The limits on one file (batch size, record size, expansion, rejects listed) are the deployment's
# (``pipelines.lib.settings.IngestLimits``), carried by the file's ``Source``.
RATIO_FLOOR_BYTES = 16 << 20  # the expansion ratio is judged once a file expanded past this
INTERNAL = "__fleet_"  # prefix of internal columns; an input column with it is refused
ROW = "__fleet_row"
# A rejected row as a reader lists it (the ingest adds its bookkeeping columns, entries.REJECT_SCHEMA).
LISTED_REJECT_SCHEMA = pl.Schema(
    {
        ROW: pl.Int64,
        "reason_code": pl.String,
        "field": pl.String,
        "message": pl.String,
        "raw_record": pl.String,
    }
)


class FileProblem(Exception):
    """A whole landing file cannot be read; it is quarantined with this reason."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class RawBatch:
    """Rows of one file: ``frame`` holds the contract's fields present in the file and ``__fleet_row`` (the
    row's number in its file, as the format defines it).

    ``exact``: the values are the ones the format's reference path gives. A fast tier that reads numbers as
    numbers (not their text) sets it False: its rejected rows are then judged again from their original
    text, so their messages and raw records are the reference path's."""

    frame: pl.DataFrame
    rejects: pl.DataFrame | None = None  # __fleet_row, reason_code, field, message, raw_record
    extras: pl.DataFrame | None = None  # __fleet_row, fields (JSON of the fields no contract knows)
    raw_column: str | None = None  # column of ``frame`` holding each row's original text
    exact: bool = True
    # the values of ``frame`` are their text as written; a tier that reads numbers as numbers with exact
    # values (CSV's typed tier) sets it False: its rejected rows are judged again from their lines
    value_texts: bool = True


@dataclass
class FileInfo:
    """What a reader learnt about a file while reading it."""

    extra_columns: list[str] = field(default_factory=list)
    tier: str | None = None  # the reader tier whose answer was kept (formats with tiers)
    reference_only: bool = False  # read by the format's reference tier alone (a fast tier was wrong)


TEXT_GROUP = 64  # lines handed out (and judged) at once, at most
TEXT_GROUP_BYTES = 4 << 20  # ... and about this much text (a line may be up to max_record_bytes)


def text_groups(texts: Iterator[tuple[int, str]]) -> Iterator[dict[int, str]]:
    """(row, original text) pairs in groups of TEXT_GROUP rows or about TEXT_GROUP_BYTES of text, so that
    reading rows back (``Format.line_texts``) holds one group in memory."""
    group: dict[int, str] = {}
    size = 0
    for row, text in texts:
        group[row] = text
        size += len(text)
        if len(group) == TEXT_GROUP or size >= TEXT_GROUP_BYTES:
            yield group
            group, size = {}, 0
    if group:
        yield group


class Inconsistent(Exception):
    """A fast tier's verdict on a row differs from the reference path's: the file is read again by it."""


def verdict_frame(v: Validated, rejects: pl.DataFrame | None = None) -> pl.DataFrame:
    """The reference path's verdicts on rows (``Format.verdicts``): ``accepted``, else their reject
    (reason_code, field, message, raw_record), by row number."""
    columns = [ROW, "accepted", "reason_code", "field", "message", "raw_record"]
    rejected = [v.rejected] if rejects is None else [v.rejected, rejects]
    return pl.concat(
        [
            *[r.with_columns(pl.lit(False).alias("accepted")).select(columns) for r in rejected],
            v.accepted.select(ROW)
            .with_columns(pl.lit(None, pl.String).alias(x) for x in columns[2:])
            .with_columns(pl.lit(True).alias("accepted"))
            .select(columns),
        ]
    ).sort(ROW)


@dataclass
class FallBack:
    """Marker: a reader tier gave up; everything read so far from this file must be discarded and the
    next tier reads it from the start."""

    why: str


def limits_exceeded(expanded: int, stored: int, limits: IngestLimits) -> bool:
    """Whether ``expanded`` bytes from ``stored`` bytes breaks the expansion limits of one file."""
    return expanded > limits.max_expanded_bytes or (
        expanded > RATIO_FLOOR_BYTES and expanded > limits.max_expansion_ratio * max(stored, 1)
    )


def expansion_problem(rel: str, expanded: int, stored: int, what: str, limits: IngestLimits) -> FileProblem:
    return FileProblem(
        "file_decompression_limit",
        f"{rel}: {what} expands beyond the limits for one file ({expanded:,} bytes from {stored:,}: "
        f"over {limits.max_expansion_ratio}x or {size_text(limits.max_expanded_bytes)}); "
        "split it or deliver it uncompressed",
    )


class CappedGzip(io.RawIOBase):
    """A gzip stream decompressed on the fly, refusing bombs and reporting truncation as FileProblem."""

    def __init__(self, raw: io.BufferedReader[Any], rel: str, compressed_size: int, limits: IngestLimits):
        self._raw, self._rel, self._size, self._limits = raw, rel, max(compressed_size, 1), limits
        self._in = 0  # compressed bytes consumed: the ratio is judged as the stream goes
        self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._pending = b""
        self._out = 0
        self._eof = False

    def readable(self) -> bool:
        return True

    def _truncated(self, detail: str) -> FileProblem:
        return FileProblem(
            "file_truncated",
            f"{self._rel}: the gzip stream is truncated or damaged ({detail}); deliver it again",
        )

    def _refill(self) -> None:
        while not self._pending and not self._eof:
            chunk = self._d.unconsumed_tail or self._raw.read(64 << 10)
            if not self._d.unconsumed_tail:
                self._in += len(chunk)
            if not chunk:
                if not self._d.eof:
                    raise self._truncated("ends mid-member")
                self._eof = True
                return
            try:
                self._pending = self._d.decompress(chunk, 4 << 20)
            except zlib.error as exc:
                raise self._truncated(str(exc)) from exc
            self._out += len(self._pending)
            if limits_exceeded(self._out, self._in, self._limits):
                raise expansion_problem(
                    self._rel, self._out, self._in, f"the gzip stream (of {self._size:,} bytes)", self._limits
                )
            if self._d.eof and self._d.unused_data:  # concatenated members
                rest = self._d.unused_data
                self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                self._pending += self._d.decompress(rest, 4 << 20)

    def readinto(self, b) -> int:
        self._refill()
        n = min(len(b), len(self._pending))
        b[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


@dataclass
class Source:
    """One landing file as readers see it.

    ``path`` is the landing file itself: it is opened by Python only. Engines that take a file *name*
    (DuckDB reads ``[ab]`` or ``*`` in a name as a pattern) get ``engine_path()``: a link with a neutral
    name, or the decompressed copy of a gzipped file, in the day's staging folder."""

    path: Path
    rel: str  # relative to the landing root, printable: used in every message
    gz: bool
    scratch: Path
    limits: IngestLimits = field(default_factory=IngestLimits)
    _engine: Path | None = None

    @contextlib.contextmanager
    def open(self) -> Iterator[io.BufferedReader[Any]]:
        """The file's bytes, decompressed as a stream (within the limits) when gzipped."""
        with open(self.path, "rb") as fh:
            if self.gz:
                size = os.fstat(fh.fileno()).st_size
                yield io.BufferedReader(CappedGzip(fh, self.rel, size, self.limits), buffer_size=1 << 20)
            else:
                yield fh

    def engine_path(self) -> Path:
        """A path an engine may open by name: never the landing name itself."""
        if self._engine is None:
            target = self.scratch / f"input-{uuid.uuid4().hex}"
            if self.gz:
                try:
                    with self.open() as src, open(target, "wb") as dst:
                        while chunk := src.read(8 << 20):
                            dst.write(chunk)
                except BaseException:
                    target.unlink(missing_ok=True)
                    raise
            else:
                target.symlink_to(self.path)
            self._engine = target
        return self._engine

    def close(self) -> None:
        """Remove the engine path, if one was made."""
        if self._engine is not None:
            self._engine.unlink(missing_ok=True)
            self._engine = None


def fill(stream, view: memoryview) -> int:
    """Read into ``view`` until it is full or the stream ends; the bytes read."""
    got = 0
    while got < len(view):
        n = stream.readinto(view[got:])
        if not n:
            break
        got += n
    return got


def refuse_reserved(columns, rel: str) -> None:
    reserved = [c for c in columns if c and c.startswith(INTERNAL)]
    if reserved:
        raise FileProblem(
            "file_unreadable",
            f"{rel}: column name(s) {reserved} use the reserved prefix {INTERNAL!r}; rename them",
        )


def bad_encoding(rel: str, exc: UnicodeDecodeError, offset: int) -> FileProblem:
    return FileProblem(
        "file_bad_encoding",
        f"{rel}: not UTF-8 text (byte {offset + exc.start}: {exc.reason}); re-export the file as UTF-8",
    )


def oversized(rel: str, line: int, size: int, limit: int, what: str = "line") -> FileProblem:
    return FileProblem(
        "file_oversized_line",
        f"{rel}: {what} {line} is {size:,} bytes, above the {limit:,}-byte limit for one record",
    )


def extra_names(keys: list[str]) -> list[str]:
    """Internal column names for fields no contract knows (a key may be any text, the empty one too)."""
    return [f"{INTERNAL}x{i}" for i in range(len(keys))]


def extras_json(frame: pl.DataFrame, keys: list[str]) -> pl.DataFrame | None:
    """The fields no contract knows (columns ``extra_names(keys)``), one JSON object per row that has any:
    present (non-null) fields only, keys in sorted order, so the text does not depend on which other rows
    were read together."""
    if not keys:
        return None
    names = dict(zip(keys, extra_names(keys), strict=True))
    members = [
        pl.when(pl.col(names[k]).is_not_null()).then(
            pl.concat_str(
                pl.lit(json.dumps(k) + ":"),
                pl.struct(pl.col(names[k]).alias("v")).struct.json_encode().str.slice(5).str.head(-1),
            )
        )
        for k in sorted(keys)
    ]
    shown = frame.select(ROW, pl.concat_str(members, separator=",", ignore_nulls=True).alias("m"))
    kept = shown.filter(pl.col("m").is_not_null() & (pl.col("m") != ""))
    return kept.select(ROW, pl.format("{{{}}}", pl.col("m")).alias("fields"))


def numbered(frame: pl.DataFrame, first: int) -> pl.DataFrame:
    """``frame`` with ``__fleet_row`` counting from ``first``."""
    return frame.with_columns(
        pl.int_range(first, first + frame.height, dtype=pl.Int64, eager=True).alias(ROW)
    )


T = TypeVar("T")
_DONE = object()


def prefetched(items: Iterator[T], depth: int = 2) -> Generator[T, None, None]:
    """``items`` produced by a background thread, at most ``depth`` ahead: reading and parsing the next
    batch (DuckDB, pyarrow and polars free the GIL) overlaps with validating and writing this one.
    An exception in the producer is raised in the consumer; closing the consumer stops the producer."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put(("item", item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(("done", _DONE))
        except BaseException as exc:  # handed to the consumer
            q.put(("error", exc))

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        while True:
            kind, value = q.get()
            if kind == "done":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        while thread.is_alive():
            try:
                q.get_nowait()
            except queue.Empty:
                thread.join(timeout=0.05)
