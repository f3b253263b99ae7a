"""JSON Lines: one JSON object per line; a row's number is its line in the file.

The reference is the precise path: the file split at newlines, each non-blank line judged alone by
DuckDB's JSON functions (bad JSON, not an object, or its fields). Two faster tiers read ahead of it, each
kept only where its answer is the precise path's:

- DuckDB's parallel reader with the columns it detects from the file's first SAMPLE_RECORDS records;
- pyarrow's reader with the contract's fields as its schema.

A fast tier's records are numbered, in step with its batches, by a ``LineIndex``: a second pass over the
same bytes that also checks what the parsers cannot be trusted with. Every non-blank line must be one
object ``{...}`` (a ``null`` line, two objects on a line or one split over two make the file irregular),
no line above the record limit, valid UTF-8, and exactly one record per record line. Any doubt, error or
mismatch, at any batch, hands the file to the next tier from its start (``FallBack``). The fast tiers give
numbers as numbers, so their rejected rows are judged again from their original lines (``verdicts``).
"""

from __future__ import annotations

import collections
import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from pipelines.lib.contracts import Contract
from pipelines.lib.frames import arrow_frame
from pipelines.lib.ingest.readers.base import (
    ROW,
    FallBack,
    FileInfo,
    FileProblem,
    RawBatch,
    Source,
    bad_encoding,
    extra_names,
    extras_json,
    fill,
    oversized,
    refuse_reserved,
    text_groups,
    verdict_frame,
)
from pipelines.lib.ingest.validation import validate_rows
from pipelines.lib.query.sqlfiles import sql_text
from pipelines.lib.settings import IngestLimits

CHUNK_BYTES = 16 << 20  # bytes of text per pass of the line splitter
SAMPLE_RECORDS = 20_480  # records the DuckDB tier detects a file's columns from
TIERS = ("duckdb", "pyarrow", "precise")  # tried in order; the last one is the reference
MAX_ODD_LINES = 10_000  # lines with surrounding whitespace a fast tier checks one by one before giving up
RAW = "__fleet_raw"
_OPEN, _CLOSE, _CR, _LF = 123, 125, 13, 10
_BOM = b"\xef\xbb\xbf"
# A member whose value starts with t or f: true/false, which DuckDB would take as 1/0 in a number column
# (or text that merely looks so, which only costs a slower tier). A JSON Lines record has no raw newline.
_BOOLEAN_MEMBER = r":\s*[tf]"
_NUMERIC = ("float64", "int16", "int32", "int64")


class Irregular(Exception):
    """A fast tier cannot vouch for the file; the next tier reads it."""


def _connect() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    return con


# ---------------------------------------------------------------- splitting into lines


def parts(stream, rel: str, limits: IngestLimits) -> Iterator[tuple[int, int, memoryview, np.ndarray]]:
    """(number of the first line, byte offset, bytes, end offsets of the lines) per ~CHUNK_BYTES of whole
    lines, and at most ``batch_rows`` lines (a file of tiny lines stays in batches). A line's end is the
    offset of its newline (or of the end of the file). A line above ``max_record_bytes`` (counting a
    trailing CR, not the newline) raises ``file_oversized_line``.

    The bytes are a view of one buffer reused for every part: valid until the next part is asked for."""
    batch_rows, max_line = limits.batch_rows, limits.max_record_bytes
    buf = bytearray(2 * CHUNK_BYTES + max_line + 2)
    view = memoryview(buf)
    held, first, offset, eof = 0, 1, 0, False  # bytes kept at the front of the buffer
    newlines = np.empty(0, dtype=np.int64)  # offsets of the newlines among them
    while True:
        if not eof and held < CHUNK_BYTES:
            got = fill(stream, view[held : held + CHUNK_BYTES])
            eof = got < CHUNK_BYTES
            more = np.flatnonzero(np.frombuffer(view[held : held + got], dtype=np.uint8) == _LF) + held
            newlines = np.concatenate((newlines, more))
            held += got
        if not held:
            return
        if len(newlines) > batch_rows:
            ends = newlines[:batch_rows]
        elif eof:
            ends = newlines if buf[held - 1] == _LF else np.append(newlines, held)
        elif len(newlines):
            ends = newlines
        else:
            if held > max_line:
                raise oversized(rel, first, held, max_line)
            continue
        cut = int(ends[-1]) + 1 if ends[-1] < held else held
        lengths = np.diff(ends, prepend=-1) - 1
        if lengths.max() > max_line:
            i = int(lengths.argmax())
            raise oversized(rel, first + i, int(lengths[i]), max_line)
        yield first, offset, view[:cut], ends
        first += len(ends)
        offset += cut
        newlines = newlines[np.searchsorted(newlines, cut) :] - cut
        buf[: held - cut] = buf[cut:held]
        held -= cut
        if eof and not held:
            return


def _decoded(part: memoryview, first: int, offset: int, rel: str) -> list[str]:
    """The lines of a part as text: a BOM opening the file dropped, trailing CRs stripped."""
    try:
        text = str(part, "utf-8-sig" if first == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        raise bad_encoding(rel, exc, offset) from exc
    lines = text.split("\n")
    if part[-1] == _LF:
        lines.pop()
    return [line.rstrip("\r") for line in lines]


# ---------------------------------------------------------------- the precise path (the reference)


def _pointer(name: str) -> str:
    """A JSON Pointer to a top-level key (any key, the empty one included)."""
    return "/" + name.replace("~", "~0").replace("/", "~1")


def parse_lines(
    con: duckdb.DuckDBPyConnection, table: pl.DataFrame, c: Contract, rel: str
) -> tuple[RawBatch, list[str]]:
    """Judge lines (``row_number``, ``line``; non-blank) one by one: bad JSON and non-objects are rejects
    with their text; objects become rows of text fields. Returns the batch and the unknown keys seen."""
    names = [col.name for col in c.landing_columns]
    known = set(names)
    con.register("lines", table)
    try:
        keys = [k for (k,) in con.sql(sql_text("transforms/jsonl_keys.sql")).fetchall()]
        refuse_reserved(keys, rel)
        extras = [k for k in keys if k not in known]
        parsed = con.sql(
            sql_text("transforms/jsonl_fields.sql"), params={"paths": [_pointer(n) for n in names + extras]}
        ).pl()
    finally:
        con.unregister("lines")
    flat = pl.Series(pa.chunked_array(parsed["field_values"].to_arrow()).combine_chunks().flatten())
    k = len(names) + len(extras)
    frame = pl.DataFrame(
        [
            parsed["row_number"].cast(pl.Int64).alias(ROW),
            *[flat.gather_every(k, offset=i).alias(n) for i, n in enumerate(names + extra_names(extras))],
            table["line"].alias(RAW),
        ]
    )
    bad_json = ~parsed["is_valid_json"]
    not_obj = parsed["is_valid_json"] & (parsed["json_kind"] != "OBJECT")
    # a member named twice: parsers disagree on which value counts (DuckDB keeps the first, most the last)
    twice = parsed.select(
        pl.col("keys").list.eval(pl.element().filter(pl.element().is_duplicated())).list.first()
    ).to_series()
    bad = bad_json | not_obj | twice.is_not_null()
    rejects = None
    if bad.any():
        kind = pl.Series(parsed["json_kind"].filter(bad)).str.to_lowercase()
        is_bad_json = pl.Series(bad_json.filter(bad))
        dup = twice.filter(bad)
        rejects = frame.filter(bad).select(
            ROW,
            pl.when(is_bad_json | dup.is_not_null())
            .then(pl.lit("bad_json"))
            .otherwise(pl.lit("not_an_object"))
            .alias("reason_code"),
            dup.alias("field"),
            pl.when(is_bad_json)
            .then(pl.lit("line is not valid JSON (check quotes, commas and brackets)"))
            .when(dup.is_not_null())
            .then(
                pl.format(
                    "member '{}' appears more than once in the object: which value is meant is ambiguous "
                    "(parsers differ); send each member once",
                    dup,
                )
            )
            .otherwise(
                pl.format("line is JSON but not an object ({}); each line must be one record {{...}}", kind)
            )
            .alias("message"),
            pl.col(RAW).alias("raw_record"),
        )
        frame = frame.filter(~bad)
    batch = RawBatch(
        frame=frame.drop(extra_names(extras)),
        rejects=rejects,
        extras=extras_json(frame, extras),
        raw_column=RAW,
    )
    return batch, extras


def _lines_table(first: int, lines: list[str]) -> pl.DataFrame:
    table = pl.DataFrame({"line": pl.Series(lines, dtype=pl.String)}).with_row_index(
        "row_number", offset=first
    )
    return table.filter(pl.col("line").str.contains(r"\S"))


def _precise(src: Source, c: Contract, info: FileInfo) -> Iterator[RawBatch]:
    """Line by line (in chunks): every non-blank line is a row, bad JSON and non-objects rejects."""
    seen: set[str] = set()
    con = _connect()
    try:
        with open(src.engine_path(), "rb") as stream:
            for first, offset, part, _ends in parts(stream, src.rel, src.limits):
                batch, extras = parse_lines(
                    con, _lines_table(first, _decoded(part, first, offset, src.rel)), c, src.rel
                )
                seen.update(extras)
                yield batch
    finally:
        con.close()
    info.extra_columns = sorted(seen)


# ---------------------------------------------------------------- numbering a fast tier's records


class LineIndex:
    """The line numbers of a file's record lines, handed out in step with a fast tier's batches, and the
    checks that make the tier's answer the precise path's (see the module's docstring).

    ``take(n)`` returns the next n record lines; ``finish()`` checks that no record line is left. Both
    raise ``Irregular`` when the file is not one object per non-blank line."""

    def __init__(
        self,
        stream,
        rel: str,
        limits: IngestLimits,
        *,
        pattern: str | None = None,
        check_utf8: bool = True,
    ):
        self._parts = parts(stream, rel, limits)
        self._pattern, self._check_utf8 = pattern, check_utf8
        self._pending: collections.deque[np.ndarray] = collections.deque()
        self._available = 0
        self._odd = 0
        self._done = False

    def take(self, n: int) -> np.ndarray:
        while self._available < n and not self._done:
            self._next_part()
        if self._available < n:
            raise Irregular("more records than record lines (a line holds several objects?)")
        out, need = [], n
        while need:
            head = self._pending[0]
            if len(head) <= need:
                out.append(self._pending.popleft())
                need -= len(head)
            else:
                out.append(head[:need])
                self._pending[0] = head[need:]
                need = 0
        self._available -= n
        return np.concatenate(out) if out else np.empty(0, dtype=np.int64)

    def finish(self) -> None:
        while not self._done:
            self._next_part()
        if self._available:
            raise Irregular("fewer records than record lines (an object split over lines?)")

    def _next_part(self) -> None:
        try:
            first, _offset, part, ends = next(self._parts)
        except StopIteration:
            self._done = True
            return
        except FileProblem as p:
            raise Irregular(p.message) from None
        if self._check_utf8:
            try:
                str(part, "utf-8")
            except UnicodeDecodeError:
                raise Irregular("not UTF-8") from None
        if self._pattern and _matches(part, self._pattern):
            raise Irregular("a member may be true or false")
        arr = np.frombuffer(part, dtype=np.uint8)
        starts = np.concatenate(([0], ends[:-1] + 1))
        if first == 1 and part[:3] == _BOM:
            starts[0] += len(_BOM)
        lengths = ends - starts
        has = lengths > 0
        head = np.where(has, arr[np.minimum(starts, len(arr) - 1)], 0)
        tail = np.where(has, arr[np.maximum(ends - 1, 0)], 0)
        cr = has & (tail == _CR)
        before_cr = np.where(cr & (lengths > 1), arr[np.maximum(ends - 2, 0)], 0)
        record = (head == _OPEN) & ((tail == _CLOSE) | (cr & (before_cr == _CLOSE)))
        blank = ~has | (cr & (lengths == 1))
        odd = np.flatnonzero(~(record | blank))
        if len(odd):
            self._odd += len(odd)
            if self._odd > MAX_ODD_LINES:
                raise Irregular("many lines with surrounding whitespace")
            for i in odd.tolist():
                text = bytes(part[starts[i] : ends[i]]).strip(b" \t\r")
                if not text:
                    blank[i] = True
                elif text[:1] == b"{" and text[-1:] == b"}":
                    record[i] = True
                else:
                    raise Irregular(f"line {first + i} is not one JSON object")
        lines = first + np.flatnonzero(record).astype(np.int64)
        self._pending.append(lines)
        self._available += len(lines)


def _matches(data: bytes | memoryview, pattern: str) -> bool:
    """Whether RE2 finds ``pattern`` in ``data`` (pyarrow; the GIL is released)."""
    offsets = pa.py_buffer(np.array([0, len(data)], dtype=np.int64))
    one = pa.LargeBinaryArray.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(data)])
    found = pc.call_function("match_substring_regex", [one], pc.MatchSubstringOptions(pattern))
    return bool(found[0].as_py())


def _rebatched(batches, limits: IngestLimits) -> Iterator[pl.DataFrame]:
    """Record batches gathered into frames of about ``batch_rows`` rows or ``batch_bytes`` (readers hand
    out smaller ones: each costs a validation, a Parquet row group and their fixed overheads)."""
    pending, rows, size = [], 0, 0
    for rb in itertools.chain(batches, [None]):
        if rb is not None:
            pending.append(rb)
            rows += rb.num_rows
            size += rb.nbytes
        if rows and (rb is None or rows >= limits.batch_rows or size >= limits.batch_bytes):
            yield arrow_frame(pa.Table.from_batches(pending))
            pending, rows, size = [], 0, 0


# ---------------------------------------------------------------- the fast tiers


def _sample_keys(path: Path, records: int, max_line: int) -> list[str] | None:
    """Keys of the first ``records`` records, in order of appearance; None if a line is not a JSON object
    or is longer than ``max_line``."""
    keys: dict[str, None] = {}
    seen = 0
    with open(path, "rb") as fh:
        while seen < records and (line := fh.readline(max_line + 2)):
            if len(line) > max_line:
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


def _duckdb_tier(src: Source, c: Contract, info: FileInfo) -> Iterator[RawBatch]:
    """DuckDB's reader with the columns it detects from the first SAMPLE_RECORDS records, used where every
    detected column is a number (DOUBLE) where the contract wants one, or text (VARCHAR; JSON, unquoted
    here), and the detected names are exactly the sample's keys. A key, a duplicate or a value the
    detection did not foresee makes DuckDB raise; a true/false anywhere (DuckDB would read it as 1/0) makes
    the line index give up."""
    path, limits = src.engine_path(), src.limits
    numeric = {col.name for col in c.landing_columns if col.type in _NUMERIC}
    known = {col.name for col in c.landing_columns}
    con = _connect()
    try:
        relation = con.sql(
            sql_text("transforms/jsonl_detected.sql"),
            params={
                "file": str(path),
                "sample_records": SAMPLE_RECORDS,
                "max_object_bytes": limits.max_record_bytes,
            },
        )
        names, types = relation.columns, [str(t) for t in relation.types]
        if (
            _sample_keys(path, SAMPLE_RECORDS, limits.max_record_bytes) != names
        ):  # DuckDB renames keys that differ only in case
            raise Irregular("the detected columns are not the sample's keys")
        for name, t in zip(names, types, strict=True):
            # a column only null in the sample ("NULL") would read later values as null, and DuckDB then
            # stops raising on keys outside the sample
            if t not in ("VARCHAR", "JSON") and not (t == "DOUBLE" and name in numeric):
                raise Irregular(f"'{name}' detected as {t}")
        extras = [n for n in names if n not in known]
        if "" in extras:
            raise Irregular("an empty key")
        as_json = [n for n, t in zip(names, types, strict=True) if t == "JSON"]
        with open(path, "rb") as again:
            index = LineIndex(
                again, src.rel, limits, pattern=_BOOLEAN_MEMBER, check_utf8=False
            )  # DuckDB checks UTF-8
            for frame in _rebatched(relation.to_arrow_reader(limits.batch_rows), limits):
                frame = frame.with_columns(pl.Series(ROW, index.take(frame.height)))
                if as_json:
                    frame = frame.with_columns(_json_text(frame[n]) for n in as_json)
                frame = frame.rename(dict(zip(extras, extra_names(extras), strict=True)))
                yield RawBatch(
                    frame=frame.drop(extra_names(extras)), extras=extras_json(frame, extras), exact=False
                )
            index.finish()
        info.extra_columns = sorted(extras)
    finally:
        con.close()


_FAST_TYPES = {t: pa.float64() for t in _NUMERIC}


def _pyarrow_tier(src: Source, c: Contract, info: FileInfo) -> Iterator[RawBatch]:
    """pyarrow's parallel JSON reader with the contract's fields as its schema: numbers as numbers
    (integrality is checked later), everything else as text. A field the contract does not know, a value
    of another JSON type, a line that is not one object make it raise."""
    path = src.engine_path()
    schema = pa.schema([(col.name, _FAST_TYPES.get(col.type, pa.string())) for col in c.landing_columns])
    with pa.OSFile(str(path)) as native, open(path, "rb") as again:  # pyarrow's own file: no GIL waits
        index = LineIndex(again, src.rel, src.limits)
        reader = pajson.open_json(
            native,
            # a longer line cannot fit in a block: it raises, and the next tier refuses it
            read_options=pajson.ReadOptions(block_size=src.limits.max_record_bytes + 1),
            parse_options=pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"),
        )
        for frame in _rebatched(reader, src.limits):
            yield RawBatch(frame=frame.with_columns(pl.Series(ROW, index.take(frame.height))), exact=False)
        index.finish()
    info.extra_columns = []


_READERS = {"duckdb": _duckdb_tier, "pyarrow": _pyarrow_tier, "precise": _precise}


def read(src: Source, c: Contract, info: FileInfo) -> Iterator[RawBatch | FallBack]:
    """The tiers in order: the first that finishes without doubt gives the file's answer. A gzipped file is
    decompressed (within the limits) to the staging folder first, so every pass reads the same bytes."""
    src.engine_path()
    *fast, last = TIERS
    if info.reference_only:
        fast = []
    for tier in fast:
        try:
            yield from _READERS[tier](src, c, info)
            info.tier = tier
            return
        except Exception as exc:  # any doubt, at any batch: the next tier reads the file from its start
            yield FallBack(f"{tier}: {(str(exc).splitlines() or [type(exc).__name__])[0]}")
    yield from _READERS[last](src, c, info)
    info.tier = last


# ---------------------------------------------------------------- original text of given rows


def line_texts(src: Source, rows: np.ndarray) -> Iterator[dict[int, str]]:
    """The text of the given lines (sorted, unique) as the precise path reads them, in groups
    (``text_groups``); one pass over the file."""
    return text_groups(_wanted_lines(src, rows))


def _wanted_lines(src: Source, rows: np.ndarray) -> Iterator[tuple[int, str]]:
    if not len(rows):
        return
    with open(src.engine_path(), "rb") as stream:
        for first, offset, part, ends in parts(stream, src.rel, src.limits):
            lo, hi = np.searchsorted(rows, [first, first + len(ends)])
            if lo == hi:
                continue
            lines = _decoded(part, first, offset, src.rel)
            for r in rows[lo:hi].tolist():
                yield r, lines[r - first]
            if hi == len(rows):
                break


class Verdicts:
    """The precise path's verdict on given lines, one DuckDB connection for a file's groups of lines."""

    def __init__(self, src: Source) -> None:
        self._con = _connect()

    def __enter__(self) -> Verdicts:
        return self

    def __exit__(self, *exc) -> None:
        self._con.close()

    def __call__(self, c: Contract, texts: dict[int, str], allowed, rel: str) -> pl.DataFrame:
        """Lines (row -> text): ``accepted``, else the reject the precise path gives them (reason_code,
        field, message, raw_record)."""
        table = pl.DataFrame(
            {"row_number": pl.Series(list(texts), dtype=pl.Int64), "line": list(texts.values())}
        )
        batch, _ = parse_lines(self._con, table, c, rel)
        return _verdict_frame(batch, c, allowed)


def _verdict_frame(batch: RawBatch, c: Contract, allowed) -> pl.DataFrame:
    v = validate_rows(batch.frame, c, carry=(ROW,), allowed=allowed, raw_column=RAW)
    return verdict_frame(v, batch.rejects)
