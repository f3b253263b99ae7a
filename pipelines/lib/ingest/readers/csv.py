"""CSV with a header row: every field read as text by pyarrow's streaming reader; a row's number is the
line on which its record starts (the header is line 1; a quoted field may span lines, blank lines are
skipped).

pyarrow does not say where a record starts, so a second pass over the same bytes numbers the records in
step with the batches: line ends (LF, CRLF or a lone CR) that are not inside a quoted field end records,
and commas outside quotes count each record's fields. That pass is exact for RFC 4180 quoting, which it
checks (a quote opens a field or ends one, "" inside a quoted field); a file with other quoting is
numbered by Python's csv module instead (the ``python`` tier, slower). A record with the wrong number of
fields is rejected alone (``bad_csv_row``), not the whole file.

The first tier (``typed``, files without quotes) has pyarrow read the contract's finite float columns as
numbers, which skips building and converting their text (most of a samples file's bytes). pyarrow reads a
finite number exactly as the text path's parse does (tested value by value; a non-finite one is a reject
anyway), so the accepted rows are the text tiers'. A rejected row's message and raw record must quote the
value as written, so its line is read back once the file is read and judged by the text path
(``Verdicts``). From a value pyarrow cannot read as a number, or reads as a non-finite one (the text parse
may not read it: ``nan(1)``), on, the tier reads the rest of the file as text (the rows before it are the
text tiers' own); any other problem gives the tier up: the ``lines`` tier reads the file from its start.
"""

from __future__ import annotations

import collections
import contextlib
import csv as pycsv
import functools
import io
from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from pipelines.lib.contracts import Contract
from pipelines.lib.frames import arrow_frame
from pipelines.lib.ingest.readers.base import (
    ROW,
    FallBack,
    FileInfo,
    FileProblem,
    Inconsistent,
    RawBatch,
    Source,
    bad_encoding,
    extra_names,
    extras_json,
    oversized,
    prefetched,
    refuse_reserved,
    text_groups,
    verdict_frame,
)
from pipelines.lib.ingest.readers.csv_records import (
    LF,
    NUMBERINGS,
    Irregular,
    NotNumbers,
    Numbering,
    line_records,
    parts,
)
from pipelines.lib.ingest.validation import validate_rows

TIERS = ("typed", "lines", "rfc4180", "python")
CSV_BLOCK_BYTES = 8 << 20  # pyarrow's parse block: a data row may be up to this long (or the record limit)


def _header(stream: io.BufferedReader[Any], rel: str, limit: int) -> list[str]:
    head = stream.peek(limit + 1)[: limit + 1]
    cut = min((i for i in (head.find(b"\n"), head.find(b"\r")) if i >= 0), default=-1)
    if cut < 0 and len(head) > limit:
        raise oversized(rel, 1, len(head), limit)
    line = head if cut < 0 else head[:cut]
    try:
        text = line.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise bad_encoding(rel, exc, 0) from exc
    if text.count('"') % 2:
        raise FileProblem(
            "file_unreadable", f"{rel}: the header row must be one line (a quoted name spans lines)"
        )
    return next(pycsv.reader([text]), [])


def _checked_header(stream: io.BufferedReader[Any], src: Source, c: Contract) -> tuple[list[str], list[str]]:
    """The header row and the columns in it no contract knows; a file without one, or one that repeats or
    reserves a name, is refused."""
    header = _header(stream, src.rel, src.limits.max_record_bytes)
    if not [h for h in header if h]:
        raise FileProblem("file_empty", f"{src.rel}: no header row")
    refuse_reserved(header, src.rel)
    dups = sorted({h for h in header if header.count(h) > 1})
    if dups:
        raise FileProblem("file_unreadable", f"{src.rel}: the header repeats column(s) {dups}")
    names = [col.name for col in c.landing_columns]
    return header, [h for h in header if h not in names]


def _tier(src: Source, c: Contract, info: FileInfo, tier: str) -> Iterator[RawBatch]:
    typed = tier == "typed"
    numbers = {col.name for col in c.landing_columns if col.type == "float64" and col.finite} if typed else ()
    with src.open() as raw:
        stream = raw if hasattr(raw, "peek") else io.BufferedReader(raw)
        limits = src.limits
        header, extras = _checked_header(stream, src, c)
        info.extra_columns = extras
        internal = dict(zip(extras, extra_names(extras), strict=True))
        invalid = _Skipped(abort=NUMBERINGS[tier] is line_records, keep=limits.max_rejects_per_file)

        # pyarrow parses blocks of whole rows: a row longer than the block refuses the file. So a CSV data
        # row is bounded by the block, at least 8 MiB (smaller blocks cost speed), more when the limit is.
        block = max(CSV_BLOCK_BYTES, limits.max_record_bytes + 1)
        # where pyarrow cuts a file into blocks depends on where it starts reading, and a row longer than a
        # block is refused or not by where the cuts fall: so the typed tier, which may start again mid-file,
        # reads only files whose lines are all well under a block (no row can straddle)
        numbered = functools.partial(line_records, longest=block // 2) if typed else NUMBERINGS[tier]
        try:
            reader = _reader(stream, header, numbers, 1, block, invalid)
        except pa.ArrowInvalid as exc:
            raise _problem(src.rel, exc, invalid, block - 1, typed) from exc
        # the numbering pass reads the file again in a thread of its own, beside pyarrow's parse
        with (
            src.open() as again,
            contextlib.closing(prefetched(numbered(again, len(header)))) as records,
            contextlib.ExitStack() as rest,
        ):
            numbering = Numbering(records, len(header))
            as_text = False  # the typed tier went on as text from a number it could not give

            def text_from_here(why: str):
                """The rows read so far are the text tiers' own: the rest of the file is read as text, from
                the first record not read yet (a problem there reads the whole file as text)."""
                line = numbering.next_line()
                if line is None:
                    raise NotNumbers(f"{why}, after the last record")
                tail = rest.enter_context(src.open())
                _skip(tail, _line_offset(src, line))
                try:
                    return _reader(tail, header, (), 0, block, invalid)
                except pa.ArrowInvalid as exc:
                    raise NotNumbers(f"pyarrow stopped reading from line {line} ({exc})") from exc

            while True:
                try:
                    rb = reader.read_next_batch()
                except StopIteration:
                    break
                except pa.ArrowInvalid as exc:
                    problem = _problem(src.rel, exc, invalid, block - 1, typed)
                    if as_text or not isinstance(problem, NotNumbers) or not problem.unreadable_number:
                        raise problem from exc
                    reader, as_text = text_from_here("a value pyarrow cannot read as a number"), True
                    continue
                if typed and not as_text and _not_finite(rb, numbers):
                    # a reject whose reason the text parse may not share (nan(1) is not a number to it)
                    _close(reader)
                    reader, as_text = text_from_here("a number that is not finite"), True
                    continue
                lines, bad_lines, bad_fields = numbering.take(rb.num_rows, invalid.pending)
                # renamed before polars sees them: it names an empty column name "column_<i>"
                rb = rb.rename_columns([internal.get(n, n) for n in rb.schema.names])
                frame = arrow_frame(rb).with_columns(pl.Series(ROW, lines))
                rejects = _malformed(bad_lines, bad_fields, invalid, len(header))
                yield RawBatch(
                    frame=frame.drop(internal.values()),
                    rejects=rejects,
                    extras=extras_json(frame, extras),
                    value_texts=not typed or as_text,
                )
            while invalid.pending:  # malformed records after the last row, a batch at a time
                _, bad_lines, bad_fields = numbering.take(0, min(invalid.pending, limits.batch_rows))
                if not len(bad_lines):
                    raise Irregular("pyarrow skipped a record the numbering pass finds well formed")
                rejects = _malformed(bad_lines, bad_fields, invalid, len(header))
                yield RawBatch(frame=pl.DataFrame({ROW: pl.Series([], dtype=pl.Int64)}), rejects=rejects)
            numbering.finish()


def _reader(stream, header: list[str], numbers, skip_rows: int, block: int, invalid: _Skipped):
    """pyarrow's streaming reader over ``stream``: the ``numbers`` columns as float64, the others as text
    (an unquoted empty field null, a quoted one the empty string)."""
    return pacsv.open_csv(
        stream,
        read_options=pacsv.ReadOptions(block_size=block, column_names=header, skip_rows=skip_rows),
        parse_options=pacsv.ParseOptions(newlines_in_values=True, invalid_row_handler=invalid.add),
        convert_options=pacsv.ConvertOptions(
            column_types={h: pa.float64() if h in numbers else pa.string() for h in header},
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )


def _line_parts(stream: io.BufferedReader[Any]) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """The parts of a file without quotes or lone CRs: (the line and byte offset of a part's first byte,
    its bytes, where each of its lines ends; a last line without a line end ends with the part)."""
    line, offset = 1, 0
    for arr, _, _ in parts(stream):
        ends = np.flatnonzero(arr == LF)
        if arr[-1] != LF:
            ends = np.append(ends, len(arr))
        yield line, offset, arr, ends
        line, offset = line + len(ends), offset + len(arr)


def _line_offset(src: Source, line: int) -> int:
    """The byte offset at which ``line`` starts, in a file without quotes or lone CRs (one pass)."""
    with src.open() as stream:
        for first, offset, _, ends in _line_parts(stream):
            if line < first + len(ends):
                k = line - first
                return offset + (int(ends[k - 1]) + 1 if k else 0)
    raise Irregular(f"no line {line} in the file")


def _not_finite(rb: pa.RecordBatch, numbers) -> bool:
    """Whether a typed column of the batch holds NaN or an infinity."""
    typed = [rb.column(name) for name in rb.schema.names if name in numbers]
    # compute's generated kernels by name (pc.call_function): their Python names are made at import
    not_finite = (pc.call_function("invert", [pc.call_function("is_finite", [c])]) for c in typed)
    return any(pc.call_function("any", [flags]).as_py() for flags in not_finite)


def _close(reader) -> None:
    """Stop a reader left behind (its read-ahead)."""
    with contextlib.suppress(Exception):
        reader.close()


def _skip(stream, n: int) -> None:
    """Position ``stream`` ``n`` bytes in (read through when it cannot seek: a gzip stream)."""
    if stream.seekable():
        stream.seek(n)
        return
    while n > 0:
        got = len(stream.read(min(n, 8 << 20)))
        if not got:
            raise Irregular("the file ended early")
        n -= got


class _Skipped:
    """The records pyarrow skipped as malformed, in file order: the text of the first ``keep`` (no more can
    be listed one by one), the count of all."""

    def __init__(self, *, abort: bool, keep: int):
        self.abort, self.keep = abort, keep  # abort: the tier cannot number them, stop at the first
        self.texts: collections.deque[str] = collections.deque()
        self.seen = 0  # reported by pyarrow
        self.taken = 0  # handed out as rejects

    def add(self, row) -> str:
        if self.seen < self.keep:
            self.texts.append(row.text)
        self.seen += 1
        return "error" if self.abort else "skip"

    def __bool__(self) -> bool:
        return self.seen > self.taken

    @property
    def pending(self) -> int:
        """Reported and not handed out yet."""
        return self.seen - self.taken

    def take(self, n: int) -> list[str | None]:
        if self.seen - self.taken < n:
            raise Irregular("a malformed record pyarrow did not report")
        self.taken += n
        return [self.texts.popleft() if self.texts else None for _ in range(n)]


def _malformed(lines: np.ndarray, fields: np.ndarray, invalid: _Skipped, width: int) -> pl.DataFrame | None:
    """Rejects for the records pyarrow skipped (their text, where kept, in the order pyarrow met them)."""
    if not len(lines):
        return None
    return pl.DataFrame(
        {
            ROW: pl.Series(lines, dtype=pl.Int64),
            "reason_code": pl.repeat("bad_csv_row", len(lines), eager=True),
            "field": pl.Series([None] * len(lines), dtype=pl.String),
            "__fields": fields,
            "raw_record": pl.Series(invalid.take(len(lines)), dtype=pl.String),
        }
    ).select(
        ROW,
        "reason_code",
        "field",
        pl.format(
            "the record has {} field(s) where the header has {}; check delimiters and quotes",
            "__fields",
            pl.lit(width),
        ).alias("message"),
        "raw_record",
    )


def _problem(rel: str, exc: Exception, invalid: _Skipped, limit: int, typed: bool = False) -> Exception:
    """What a pyarrow error means: a malformed record the tier stopped at, or a whole-file problem (with
    numbers typed, the text tier says which: its message may name another value of the file)."""
    if invalid.seen and invalid.abort:
        return Irregular("a malformed record")
    text = str(exc).splitlines()[0]
    if typed:
        unreadable = "conversion error to double" in text
        return NotNumbers(f"pyarrow stopped ({text[:200]})", unreadable_number=unreadable)
    if "UTF8" in text or "utf8" in text.lower():
        return FileProblem(
            "file_bad_encoding", f"{rel}: not UTF-8 text ({text}); re-export the file as UTF-8"
        )
    if "straddling" in text or "block size" in text.lower():
        return FileProblem(
            "file_oversized_line",
            f"{rel}: a record is above the {limit:,}-byte limit for one record",
        )
    return FileProblem("file_unreadable", f"{rel}: not valid CSV ({text})")


def read(src: Source, c: Contract, info: FileInfo) -> Iterator[RawBatch | FallBack]:
    """Numbers typed first, then the vectorised numberings; Python's csv module numbers a file whose
    quoting they cannot follow."""
    *fast, last = TIERS
    tiers = [] if info.reference_only else list(fast)
    while tiers:
        tier = tiers.pop(0)
        try:
            yield from _tier(src, c, info, tier)
            info.tier = tier
            return
        except Irregular as exc:
            yield FallBack(f"{tier}: {exc}")
            if tier == "typed" and not isinstance(exc, NotNumbers):  # the lines numbering stops there too
                tiers = [t for t in tiers if t != "lines"]
    yield from _tier(src, c, info, last)
    info.tier = last


# ---------------------------------------------------------------- rows judged again (typed tier)


def line_texts(src: Source, rows: np.ndarray) -> Iterator[dict[int, str]]:
    """The text of the given lines (sorted, unique; without their line end) of a file without quotes or
    lone CRs (the typed tier's), in groups (``text_groups``); one pass over the file."""
    return text_groups(_wanted_lines(src, rows))


def _wanted_lines(src: Source, rows: np.ndarray) -> Iterator[tuple[int, str]]:
    if not len(rows):
        return
    with src.open() as stream:
        for first, _, arr, ends in _line_parts(stream):
            lo, hi = np.searchsorted(rows, [first, first + len(ends)])
            for r in rows[lo:hi].tolist():
                k = r - first
                start = int(ends[k - 1]) + 1 if k else 0
                text = arr[start : int(ends[k])].tobytes().removesuffix(b"\r")
                yield r, text.decode("utf-8")  # the typed tier read its fields as UTF-8 or numbers
            if hi == len(rows):
                break


class Verdicts:
    """The text tiers' verdict on given lines of a file without quotes: each line's fields split at its
    commas, an empty field null (as pyarrow reads an unquoted empty field), validated as the text tiers
    validate their batches (the contract's columns in the header's order, then the row number)."""

    def __init__(self, src: Source) -> None:
        with src.open() as raw:
            stream = raw if hasattr(raw, "peek") else io.BufferedReader(raw)
            self._header = _header(stream, src.rel, src.limits.max_record_bytes)

    def __enter__(self) -> Verdicts:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def __call__(self, c: Contract, texts: dict[int, str], allowed, rel: str) -> pl.DataFrame:
        """Lines (row -> text): ``accepted``, else the reject the text tiers give them."""
        names = {col.name for col in c.landing_columns}
        fields = pl.Series(list(texts.values()), dtype=pl.String).str.split(",")
        if (fields.list.len() != len(self._header)).any():
            raise Inconsistent(f"{rel}: a judged line has another number of fields than the header")
        frame = pl.DataFrame(
            [fields.list.get(i).alias(h).replace("", None) for i, h in enumerate(self._header) if h in names]
            + [pl.Series(ROW, list(texts), dtype=pl.Int64)]
        )
        return verdict_frame(validate_rows(frame, c, carry=(ROW,), allowed=allowed))
