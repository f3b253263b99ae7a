"""Streaming readers of landing files: every format in batches, so memory is set by a batch, not by a file.

A reader yields ``RawBatch``es: the contract's fields (typed where the format or a JSON tier gives types,
else text), the row number of each row in its file, parse-level rejects (bad JSON, not an object) and
fields the contract does not know. Whole-file faults raise ``FileProblem``. JSON Lines is read in up to
three tiers, each used only where it can vouch for every line: DuckDB's parallel reader with the columns
it detects from the file's first records; pyarrow's reader with the contract as its schema; and, if
anything in the file is irregular, line by line (the precise path, DuckDB's JSON functions on each line),
so every line gets its own verdict. CSV is read by pyarrow's streaming reader, Parquet batch by batch.
Gzipped files are decompressed as a stream with limits on the expanded size and the expansion ratio.
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import json
import os
import queue
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from pipelines.lib.contracts import Contract
from pipelines.lib.sqlfiles import sql_text

BATCH_ROWS = 200_000  # rows per batch: the unit of memory (a few tens of MB) and of a Parquet row group
CHUNK_BYTES = 16 << 20  # bytes of text per batch on the precise JSON Lines path
SAMPLE_RECORDS = 20_480  # records the DuckDB tier detects a JSON Lines file's columns from
MAX_LINE_BYTES = 1 << 20  # a JSONL line or CSV row above 1 MiB is not telemetry: the file is quarantined
MAX_EXPANDED_BYTES = 64 << 30  # a gzip member that expands beyond 64 GiB is refused
MAX_EXPANSION_RATIO = 200  # ... and so is one that expands more than 200x once past 16 MiB
RATIO_FLOOR_BYTES = 16 << 20
INTERNAL = "__fleet_"  # prefix of internal columns; an input column with it is refused
ROW = "__fleet_row"


class FileProblem(Exception):
    """A whole landing file cannot be read; it is quarantined with this reason."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class RawBatch:
    """Rows of one file: ``frame`` holds the contract's fields present in the file and ``__fleet_row``."""

    frame: pl.DataFrame
    rejects: pl.DataFrame | None = None  # __fleet_row, reason_code, field, message, raw_record
    extras: pl.DataFrame | None = None  # __fleet_row, fields (JSON of the fields no contract knows)
    raw_column: str | None = None  # column of ``frame`` holding each row's original text


@dataclass
class FileInfo:
    """What a reader learnt about a file while reading it."""

    extra_columns: list[str] = field(default_factory=list)


_DONE = object()


def prefetched(items: Iterator, depth: int = 2) -> Iterator:
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


def detect_format(name: str, head: bytes) -> tuple[str | None, bool]:
    """(format, gzipped) from content where it is unambiguous (gzip/Parquet magic, a leading '{'), else
    from the name."""
    gz = head[:2] == b"\x1f\x8b"
    base = name[:-3] if name.endswith(".gz") else name
    if head[:4] == b"PAR1":
        return "parquet", False
    if base.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl", gz
    if base.endswith(".csv"):
        return "csv", gz
    if base.endswith(".parquet"):
        return "parquet", gz
    if gz:
        return None, True  # decided after decompression
    first = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if first in (b"{", b"["):
        return "jsonl", False
    return None, False


class CappedGzip(io.RawIOBase):
    """A gzip stream decompressed on the fly, refusing bombs and reporting truncation as FileProblem."""

    def __init__(self, raw: io.BufferedReader, rel: str, compressed_size: int):
        self._raw, self._rel, self._size = raw, rel, max(compressed_size, 1)
        self._in = 0  # compressed bytes consumed: the ratio is judged as the stream goes
        self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._pending = b""
        self._out = 0
        self._eof = False

    def readable(self) -> bool:
        return True

    def _refill(self) -> None:
        while not self._pending and not self._eof:
            chunk = self._d.unconsumed_tail or self._raw.read(64 << 10)
            if not self._d.unconsumed_tail:
                self._in += len(chunk)
            if not chunk:
                if not self._d.eof:
                    raise FileProblem(
                        "file_truncated",
                        f"{self._rel}: the gzip stream is truncated or damaged (ends mid-member); "
                        "deliver it again",
                    )
                self._eof = True
                return
            try:
                self._pending = self._d.decompress(chunk, 4 << 20)
            except zlib.error as exc:
                raise FileProblem(
                    "file_truncated",
                    f"{self._rel}: the gzip stream is truncated or damaged ({exc}); deliver it again",
                ) from exc
            self._out += len(self._pending)
            self._check_limits()
            if self._d.eof and self._d.unused_data:  # concatenated members
                rest = self._d.unused_data
                self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                self._pending += self._d.decompress(rest, 4 << 20)

    def _check_limits(self) -> None:
        if self._out > MAX_EXPANDED_BYTES or (
            self._out > RATIO_FLOOR_BYTES and self._out > MAX_EXPANSION_RATIO * max(self._in, 1)
        ):
            raise FileProblem(
                "file_decompression_limit",
                f"{self._rel}: expands beyond the limits for one file "
                f"({self._out:,} bytes from the first {self._in:,} of {self._size:,}: "
                f"over {MAX_EXPANSION_RATIO}x or {MAX_EXPANDED_BYTES >> 30} GiB); "
                "split it or deliver it uncompressed",
            )

    def readinto(self, b) -> int:
        self._refill()
        n = min(len(b), len(self._pending))
        b[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


@contextlib.contextmanager
def open_plain(path: Path, rel: str, gz: bool) -> Iterator[io.BufferedIOBase]:
    """The file's bytes, decompressed as a stream when gzipped."""
    with open(path, "rb") as fh:
        if gz:
            yield io.BufferedReader(CappedGzip(fh, rel, os.fstat(fh.fileno()).st_size), buffer_size=1 << 20)
        else:
            yield fh


def plain_copy(path: Path, rel: str, gz: bool, scratch: Path) -> Path:
    """A path DuckDB or pyarrow can open: the file itself, or its decompressed copy in ``scratch``."""
    if not gz:
        return path
    target = scratch / f"{abs(hash(rel))}.plain"
    with open_plain(path, rel, gz) as src, open(target, "wb") as dst:
        while chunk := src.read(8 << 20):
            dst.write(chunk)
    return target


def refuse_reserved(columns, rel: str) -> None:
    reserved = [c for c in columns if c and c.startswith(INTERNAL)]
    if reserved:
        raise FileProblem(
            "file_unreadable",
            f"{rel}: column name(s) {reserved} use the reserved prefix {INTERNAL!r}; rename them",
        )


def _bad_encoding(rel: str, exc: UnicodeDecodeError, offset: int) -> FileProblem:
    return FileProblem(
        "file_bad_encoding",
        f"{rel}: not UTF-8 text (byte {offset + exc.start}: {exc.reason}); re-export the file as UTF-8",
    )


def _oversized(rel: str, line: int, size: int) -> FileProblem:
    return FileProblem(
        "file_oversized_line",
        f"{rel}: line {line} is {size:,} bytes, above the {MAX_LINE_BYTES:,}-byte limit for one record",
    )


# ---------------------------------------------------------------- JSON Lines


def _connect() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    return con


def _jsonl_frame(
    field_values: pa.ListArray | pa.ChunkedArray, names: list[str], rows: pl.Series
) -> pl.DataFrame:
    """One column per field from DuckDB's list of extracted strings (every list has one entry per path)."""
    flat = pl.Series(pa.chunked_array(field_values).combine_chunks().flatten())
    k = len(names)
    return pl.DataFrame([rows, *[flat.gather_every(k, offset=i).alias(n) for i, n in enumerate(names)]])


_FAST_TYPES = {"float64": pa.float64(), "int16": pa.float64(), "int32": pa.float64(), "int64": pa.float64()}


def _jsonl_pyarrow(stream: io.BufferedIOBase, c: Contract) -> Iterator[RawBatch]:
    """One pass of pyarrow's parallel JSON reader with the contract's fields as its schema: numbers as
    numbers (integrality is checked later), everything else as text. Anything irregular (a field the
    contract does not know, a value of another JSON type, a line that is not an object or not JSON, a
    line above MAX_LINE_BYTES, bytes that are not UTF-8) raises pa.ArrowInvalid and the caller reads the
    file precisely instead. Row numbers are record ordinals (blank lines are skipped) until mapped."""
    schema = pa.schema([(col.name, _FAST_TYPES.get(col.type, pa.string())) for col in c.landing_columns])
    reader = pajson.open_json(
        stream,
        read_options=pajson.ReadOptions(block_size=MAX_LINE_BYTES + 1),  # a longer line cannot fit
        parse_options=pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"),
    )
    for frame in _rebatched(reader):
        yield RawBatch(frame=frame)


def _rebatched(batches) -> Iterator[pl.DataFrame]:
    """Record batches gathered into frames of at least BATCH_ROWS rows (readers hand out smaller ones:
    each costs a validation, a Parquet row group and their fixed overheads), each row numbered with its
    record ordinal in ``__fleet_row``."""
    pending, size, ordinal = [], 0, 0
    for rb in itertools.chain(batches, [None]):
        if rb is not None:
            pending.append(rb)
            size += rb.num_rows
        if size and (rb is None or size >= BATCH_ROWS):
            frame = pl.from_arrow(pa.Table.from_batches(pending))
            yield frame.with_columns(
                pl.int_range(ordinal + 1, ordinal + 1 + size, dtype=pl.Int64, eager=True).alias(ROW)
            )
            ordinal += size
            pending, size = [], 0


class _Unvouched(Exception):
    """The DuckDB tier cannot vouch for a JSON Lines file; the next tier reads it."""


# A member whose value starts with t or f: true/false, which DuckDB would take as 1/0 in a number column
# (or text that merely looks so, which only costs a slower tier). A JSON Lines record has no raw newline.
_BOOLEAN_MEMBER = r":\s*[tf]"

_SCAN_BYTES = 16 << 20


class _LiteralScan(threading.Thread):
    """Whether a file's bytes hold a match of ``pattern`` within a line (RE2 over chunks, GIL released)."""

    def __init__(self, path: Path, pattern: str):
        super().__init__(daemon=True)
        self.path, self.pattern = path, pattern
        self.found = False
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            tail = b""  # the previous chunk's last, unfinished line
            with open(self.path, "rb") as fh:
                while not self.stop.is_set() and (chunk := fh.read(_SCAN_BYTES)):
                    # a match lies within one line: within this chunk, or across its start
                    first_end = chunk.find(b"\n")
                    head = chunk if first_end < 0 else chunk[: first_end + 1]
                    if _matches(chunk, self.pattern) or (tail and _matches(tail + head, self.pattern)):
                        self.found = True
                        return
                    last_end = chunk.rfind(b"\n")
                    # a line over MAX_LINE_BYTES fails the DuckDB tier anyway: the tail need not be longer
                    tail = (tail + chunk)[-MAX_LINE_BYTES:] if last_end < 0 else chunk[last_end + 1 :]
        except BaseException as exc:  # handed to the reader, which falls to the next tier
            self.error = exc


def _matches(data: bytes, pattern: str) -> bool:
    offsets = pa.py_buffer(np.array([0, len(data)], dtype=np.int64))
    one = pa.LargeBinaryArray.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(data)])
    return bool(pa.compute.match_substring_regex(one, pattern)[0].as_py())


def _sample_keys(path: Path, records: int) -> list[str] | None:
    """Keys of the first ``records`` records, in order of appearance; None if a line is not a JSON object
    or is longer than MAX_LINE_BYTES."""
    keys: dict[str, None] = {}
    seen = 0
    with open(path, "rb") as fh:
        while seen < records and (line := fh.readline(MAX_LINE_BYTES + 2)):
            if len(line) > MAX_LINE_BYTES:
                return None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                return None
            if not isinstance(obj, dict):
                return None
            keys.update(dict.fromkeys(obj))
            seen += 1
    return list(keys)


def _json_text(s: pl.Series) -> pl.Series:
    """JSON values as the precise path sees them: strings unquoted, anything else its JSON text."""
    quoted = s.str.starts_with('"').fill_null(False)
    if not quoted.any():
        return s
    idx = quoted.arg_true()
    return s.scatter(idx, s.gather(idx).str.json_decode(pl.String))


def _jsonl_duckdb(path: Path, c: Contract, rel: str, info: FileInfo) -> Iterator[RawBatch]:
    """The DuckDB tier: columns detected from the first SAMPLE_RECORDS records, then read in parallel.

    It reads a file only where the result is the same as the precise path's: every detected column is a
    number (DOUBLE) where the contract wants one, or text (VARCHAR; JSON, unquoted here), and the detected
    names are exactly the sample's keys. A key, a duplicate or a value the detection did not foresee makes
    DuckDB raise, and a true/false anywhere (DuckDB would read it as 1/0) is caught by a scan of the bytes
    that runs alongside; either way ``_Unvouched`` or ``duckdb.Error`` sends the file to the next tier.
    """
    numeric = {col.name for col in c.landing_columns if col.type in _FAST_TYPES}
    known = {col.name for col in c.landing_columns}
    scan: _LiteralScan | None = None
    con = _connect()
    try:
        relation = con.sql(
            sql_text("transforms/jsonl_detected.sql"),
            params={"file": str(path), "sample_records": SAMPLE_RECORDS, "max_object_bytes": MAX_LINE_BYTES},
        )
        names, types = relation.columns, [str(t) for t in relation.types]
        if _sample_keys(path, SAMPLE_RECORDS) != names:  # DuckDB renames keys that differ only in case
            raise _Unvouched("the detected columns are not the sample's keys")
        refuse_reserved(names, rel)
        for name, t in zip(names, types, strict=True):
            # a column only null in the sample ("NULL") would read later values as null, and DuckDB then
            # stops raising on keys outside the sample: such a file goes to the next tier
            if t not in ("VARCHAR", "JSON") and not (t == "DOUBLE" and name in numeric):
                raise _Unvouched(f"'{name}' detected as {t}")
        extras = [n for n in names if n not in known]
        if "" in extras:
            raise _Unvouched("an empty key")
        scan = _LiteralScan(path, _BOOLEAN_MEMBER)
        scan.start()
        as_json = [n for n, t in zip(names, types, strict=True) if t == "JSON"]
        for frame in _rebatched(relation.to_arrow_reader(BATCH_ROWS)):
            if as_json:
                frame = frame.with_columns(_json_text(frame[n]) for n in as_json)
            yield RawBatch(frame=frame.drop(extras), extras=_extras_json(frame, extras) if extras else None)
        scan.join()
        if scan.error is not None:
            raise _Unvouched(f"the byte scan failed ({scan.error})")
        if scan.found:
            raise _Unvouched("a member may be true or false")
        info.extra_columns = sorted(extras)
    finally:
        if scan is not None:
            scan.stop.set()
        con.close()


def _extras_json(frame: pl.DataFrame, extras: list[str]) -> pl.DataFrame:
    kept = frame.filter(pl.any_horizontal(pl.col(extras).is_not_null()))
    return kept.select(ROW, pl.struct(extras).struct.json_encode().alias("fields"))


def _lines(stream: io.BufferedIOBase, rel: str) -> Iterator[tuple[int, list[str]]]:
    """(number of the first line, lines) per chunk of about CHUNK_BYTES, checked for size and encoding."""
    rest, first, offset = b"", 1, 0
    while True:
        chunk = stream.read(CHUNK_BYTES)
        buf = rest + chunk
        if not chunk:
            if not buf:
                return
            cut = len(buf)
        else:
            cut = buf.rfind(b"\n") + 1
            if cut == 0:
                if len(buf) > MAX_LINE_BYTES:
                    raise _oversized(rel, first, len(buf))
                rest = buf
                continue
        part, rest = buf[:cut], buf[cut:]
        arr = np.frombuffer(part, dtype=np.uint8)
        ends = np.flatnonzero(arr == 10)
        lengths = np.diff(np.concatenate(([-1], ends, [len(part) - 1] if part[-1:] != b"\n" else []))) - 1
        if len(lengths) and lengths.max() > MAX_LINE_BYTES:
            i = int(lengths.argmax())
            raise _oversized(rel, first + i, int(lengths[i]))
        try:
            text = part.decode("utf-8-sig" if first == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise _bad_encoding(rel, exc, offset) from exc
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        yield first, lines
        first += len(lines)
        offset += len(part)
        if not chunk:
            return


def _jsonl_precise(stream: io.BufferedIOBase, c: Contract, rel: str, info: FileInfo) -> Iterator[RawBatch]:
    """Line by line (in chunks): every line is a row, bad JSON and non-objects are rejects with their text."""
    names = [col.name for col in c.landing_columns]
    known = set(names)
    extras_seen: set[str] = set()
    con = _connect()
    try:
        for first, lines in _lines(stream, rel):
            table = pl.DataFrame({"line": pl.Series(lines, dtype=pl.String)}).with_row_index(
                "row_number", offset=first
            )
            table = table.with_columns(pl.col("line").str.strip_chars_end("\r")).filter(
                pl.col("line").str.contains(r"\S")
            )
            con.register("lines", table)
            keys = [k for (k,) in con.sql(sql_text("transforms/jsonl_keys.sql")).fetchall()]
            refuse_reserved(keys, rel)
            extras = [k for k in keys if k and k not in known]  # an empty key cannot be addressed
            extras_seen.update(extras)
            parsed = con.sql(
                sql_text("transforms/jsonl_fields.sql"),
                params={"paths": ['$."' + n.replace('"', '\\"') + '"' for n in names + extras]},
            ).pl()
            con.unregister("lines")
            frame = _jsonl_frame(
                parsed["field_values"].to_arrow(),
                names + extras,
                parsed["row_number"].cast(pl.Int64).alias(ROW),
            )
            frame = frame.with_columns(table["line"].alias("__fleet_raw"))
            bad_json = ~parsed["is_valid_json"]
            not_obj = parsed["is_valid_json"] & (parsed["json_kind"] != "OBJECT")
            bad = bad_json | not_obj
            rejects = None
            if bad.any():
                rejects = frame.filter(bad).select(
                    ROW,
                    pl.when(pl.Series(bad_json.filter(bad)))
                    .then(pl.lit("bad_json"))
                    .otherwise(pl.lit("not_an_object"))
                    .alias("reason_code"),
                    pl.lit(None, pl.String).alias("field"),
                    pl.when(pl.Series(bad_json.filter(bad)))
                    .then(pl.lit("line is not valid JSON (check quotes, commas and brackets)"))
                    .otherwise(
                        pl.format(
                            "line is JSON but not an object ({}); each line must be one record {{...}}",
                            pl.Series(parsed["json_kind"].filter(bad)).str.to_lowercase(),
                        )
                    )
                    .alias("message"),
                    pl.col("__fleet_raw").alias("raw_record"),
                )
                frame = frame.filter(~bad)
            extra_df = _extras_json(frame, extras) if extras else None
            yield RawBatch(
                frame=frame.drop(extras), rejects=rejects, extras=extra_df, raw_column="__fleet_raw"
            )
    finally:
        con.close()
    info.extra_columns = sorted(extras_seen)


def jsonl_line_numbers(path: Path, rel: str, gz: bool, ordinals: pl.Series) -> pl.Series:
    """Line numbers of the given record ordinals (1-based, counting only lines that hold a record)."""
    wanted = np.sort(np.unique(ordinals.to_numpy()))
    found: dict[int, int] = {}
    seen = 0
    with open_plain(path, rel, gz) as stream:
        for first, lines in _lines(stream, rel):
            nonblank = np.flatnonzero(
                np.fromiter((bool(s.strip()) for s in lines), dtype=bool, count=len(lines))
            )
            lo, hi = seen + 1, seen + len(nonblank)
            sel = wanted[(wanted >= lo) & (wanted <= hi)]
            for o in sel.tolist():
                found[o] = first + int(nonblank[o - lo])
            seen = hi
    return ordinals.replace_strict(found, default=None, return_dtype=pl.Int64)


def read_jsonl(
    path: Path, c: Contract, rel: str, gz: bool, info: FileInfo, scratch: Path
) -> Iterator[RawBatch | FallBack]:
    """JSON Lines: the DuckDB tier, else pyarrow's typed reader, else the precise path from the start.

    Batches of a tier already yielded are superseded: the caller drops what it kept of this file when it
    sees ``FallBack``. A gzipped file is decompressed (within the limits) to ``scratch`` first.
    """
    plain = plain_copy(path, rel, gz, scratch)
    try:
        try:
            yield from _jsonl_duckdb(plain, c, rel, info)
            return
        except (_Unvouched, duckdb.Error) as exc:
            yield FallBack(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, ordinals=True)
        try:
            with pa.OSFile(str(plain)) as native:  # pyarrow's own file: its threads never wait for the GIL
                yield from _jsonl_pyarrow(native, c)
            return
        except pa.ArrowInvalid as exc:  # irregular input: read it line by line
            yield FallBack(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, ordinals=False)
        with open(plain, "rb") as stream:
            yield from _jsonl_precise(stream, c, rel, info)
    finally:
        if plain != path:
            plain.unlink(missing_ok=True)


@dataclass
class FallBack:
    """Marker: a tier gave up; everything read so far from this file must be discarded. ``ordinals``:
    the next tier's row numbers are still record ordinals (else they are line numbers)."""

    why: str
    ordinals: bool


# ---------------------------------------------------------------- CSV


def _csv_header(stream: io.BufferedIOBase, rel: str) -> list[str]:
    head = stream.peek(MAX_LINE_BYTES + 1)[: MAX_LINE_BYTES + 1] if hasattr(stream, "peek") else b""
    line = head.split(b"\n", 1)[0]
    if b"\n" not in head and len(head) > MAX_LINE_BYTES:
        raise _oversized(rel, 1, len(head))
    try:
        text = line.decode("utf-8-sig").rstrip("\r")
    except UnicodeDecodeError as exc:
        raise _bad_encoding(rel, exc, 0) from exc
    return next(csv.reader([text]), [])


def read_csv(stream: io.BufferedIOBase, c: Contract, rel: str, info: FileInfo) -> Iterator[RawBatch]:
    """CSV with a header, every field as text; row numbers count the header as 1."""
    stream = stream if hasattr(stream, "peek") else io.BufferedReader(stream)
    header = _csv_header(stream, rel)
    if not [h for h in header if h]:
        raise FileProblem("file_empty", f"{rel}: no header row")
    refuse_reserved(header, rel)
    dups = sorted({h for h in header if header.count(h) > 1})
    if dups:
        raise FileProblem("file_unreadable", f"{rel}: the header repeats column(s) {dups}")
    names = [col.name for col in c.landing_columns]
    extras = [h for h in header if h not in names]
    info.extra_columns = extras
    try:
        reader = pacsv.open_csv(
            stream,
            read_options=pacsv.ReadOptions(block_size=8 << 20, column_names=header, skip_rows=1),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(header, pa.string()),
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )
    except pa.ArrowInvalid as exc:
        raise _csv_problem(rel, exc) from exc
    ordinal = 0
    while True:
        try:
            rb = reader.read_next_batch()
        except StopIteration:
            break
        except pa.ArrowInvalid as exc:
            raise _csv_problem(rel, exc) from exc
        frame = pl.from_arrow(rb)
        frame = frame.with_columns(
            pl.int_range(ordinal + 2, ordinal + 2 + frame.height, dtype=pl.Int64, eager=True).alias(ROW)
        )
        ordinal += frame.height
        if not frame.height:
            continue
        extra_df = _extras_json(frame, extras) if extras else None
        yield RawBatch(frame=frame.drop(extras), extras=extra_df)


def _csv_problem(rel: str, exc: Exception) -> FileProblem:
    text = str(exc).splitlines()[0]
    if "UTF8" in text or "utf8" in text.lower():
        return FileProblem(
            "file_bad_encoding", f"{rel}: not UTF-8 text ({text}); re-export the file as UTF-8"
        )
    if "straddling" in text or "block size" in text.lower():
        return FileProblem(
            "file_oversized_line",
            f"{rel}: a record is above the {MAX_LINE_BYTES:,}-byte limit for one record",
        )
    return FileProblem("file_unreadable", f"{rel}: not valid CSV ({text})")


# ---------------------------------------------------------------- Parquet

_READABLE = (
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_integer,
    pa.types.is_floating,
    pa.types.is_boolean,
    pa.types.is_timestamp,
    pa.types.is_date,
    pa.types.is_null,
    pa.types.is_string_view,
)


def read_parquet(path: Path, c: Contract, rel: str, info: FileInfo) -> Iterator[RawBatch]:
    """Parquet batch by batch, in its own types (validated as typed values, no text round trip)."""
    try:
        pf = pq.ParquetFile(path, pre_buffer=False)
        schema = pf.schema_arrow
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise FileProblem(
            "file_unreadable", f"{rel}: not a readable Parquet file ({str(exc).splitlines()[0]})"
        ) from exc
    refuse_reserved(schema.names, rel)
    odd = [f.name for f in schema if not any(t(f.type) for t in _READABLE)]
    if odd:
        raise FileProblem(
            "file_unreadable",
            f"{rel}: column(s) {odd} have types ingest cannot read (nested, duration, binary, ...)",
        )
    names = [col.name for col in c.landing_columns]
    extras = [n for n in schema.names if n not in names]
    info.extra_columns = extras
    ordinal = 0
    try:
        for rb in pf.iter_batches(batch_size=BATCH_ROWS):
            frame = pl.from_arrow(rb)
            frame = frame.with_columns(
                pl.int_range(ordinal + 1, ordinal + 1 + frame.height, dtype=pl.Int64, eager=True).alias(ROW)
            )
            ordinal += frame.height
            extra_df = None
            if extras:
                shown = frame.select(
                    ROW,
                    *[
                        pl.col(x).dt.to_string("%Y-%m-%dT%H:%M:%S%.6f")
                        if frame.schema[x].is_temporal()
                        else pl.col(x)
                        for x in extras
                    ],
                )
                extra_df = _extras_json(shown, extras)
            yield RawBatch(frame=frame.drop(extras), extras=extra_df)
    except FileProblem:
        raise
    except Exception as exc:
        raise FileProblem(
            "file_unreadable", f"{rel}: not a readable Parquet file ({str(exc).splitlines()[0]})"
        ) from exc
