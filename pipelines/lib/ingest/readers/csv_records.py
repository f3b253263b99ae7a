"""Where each record of a CSV file starts, and how many fields it has, in step with pyarrow's batches: by
line ends (no quotes), by RFC 4180 quoting (checked), or by Python's csv module (any other quoting)."""

from __future__ import annotations

import csv as pycsv
import io
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from pipelines.lib.ingest.readers.base import (
    fill,
)

SCAN_BYTES = 16 << 20
QUOTE, COMMA, LF, CR = 34, 44, 10, 13


class Irregular(Exception):
    """The numbering pass cannot follow the file; the next tier numbers it."""


class NotNumbers(Irregular):
    """pyarrow stopped with numbers typed (a value it cannot read as one, or a problem whose message the
    text tiers must give): the text tier of the same numbering reads the file."""

    def __init__(self, why: str, *, unreadable_number: bool = False):
        super().__init__(why)
        self.unreadable_number = unreadable_number  # the typed tier may read on as text from its record


class Numbering:
    """Start lines and field counts of a CSV file's records (after the header line), handed out in order:
    the well-formed ones to pyarrow's rows, the others as the records pyarrow skipped."""

    def __init__(self, records: Iterator[tuple[np.ndarray, np.ndarray]], width: int):
        self._records = records
        self._width = width
        self._lines = np.empty(0, np.int64)
        self._fields = np.empty(0, np.int64)
        self._done = False

    def _more(self) -> bool:
        try:
            lines, fields = next(self._records)
        except StopIteration:
            self._done = True
            return False
        self._lines = np.concatenate((self._lines, lines))
        self._fields = np.concatenate((self._fields, fields))
        return True

    def take(self, n: int, reported: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The next records: up to the n-th well-formed one (pyarrow's next n rows), then the malformed ones
        that follow, as many as pyarrow reported and were not taken yet (it may report those of blocks it
        parsed ahead: they wait for their place). Returns (lines of the n rows, lines and field
        counts of the malformed records among them)."""
        out, bad_lines, bad_fields = [], [], []
        while n or reported:
            if not len(self._lines) and not self._more():
                raise Irregular("pyarrow read more records than the numbering pass found")
            ok = self._fields == self._width
            if n:
                good = np.cumsum(ok)
                k = len(ok) if good[-1] < n else int(np.searchsorted(good, n)) + 1
            else:  # only malformed records may come before pyarrow's next row
                k = min(int(np.argmax(ok)) if ok.any() else len(ok), reported)
                if k == 0:
                    break  # the others reported come later: pyarrow parsed ahead of this batch
            lines, fields, ok = self._lines[:k], self._fields[:k], ok[:k]
            self._lines, self._fields = self._lines[k:], self._fields[k:]
            out.append(lines[ok])
            bad_lines.append(lines[~ok])
            bad_fields.append(fields[~ok])
            n -= int(ok.sum())
            reported -= int((~ok).sum())
            if reported < 0:
                raise Irregular("the numbering pass finds a record malformed that pyarrow read")
        empty = np.empty(0, np.int64)
        return (
            np.concatenate(out) if out else empty,
            np.concatenate(bad_lines) if bad_lines else empty,
            np.concatenate(bad_fields) if bad_fields else empty,
        )

    def next_line(self) -> int | None:
        """The line of the first record not taken yet; None when none is left."""
        while not len(self._lines) and self._more():
            pass
        return int(self._lines[0]) if len(self._lines) else None

    def finish(self) -> None:
        """No record may be left once pyarrow is done."""
        while not self._done:
            self._more()
        if len(self._lines):
            raise Irregular("the numbering pass found more records than pyarrow read")


class Part(NamedTuple):
    """Whole lines of a file as a byte array (a view of a reused buffer, valid until the next part is asked
    for), and whether they hold a quote or a CR (memchr over the bytes: a comparison array of each would
    cost a pass of its own)."""

    arr: np.ndarray
    quote: bool
    cr: bool


def parts(stream: io.BufferedReader[Any]) -> Iterator[Part]:
    """The file in parts of whole lines (a line ends at LF, CRLF or a lone CR) of about SCAN_BYTES."""
    buf = bytearray(5 * SCAN_BYTES)
    view = memoryview(buf)
    held = 0
    while True:
        got = fill(stream, view[held : held + SCAN_BYTES])
        end = held + got
        if not got:
            if held:
                yield _part(buf, view, held)
            return
        last = end - 1 if buf[end - 1] == CR else end  # a CR last may open a CRLF: keep it for later
        cut = max(buf.rfind(b"\n", 0, last), buf.rfind(b"\r", 0, last)) + 1
        if cut == 0:
            if end > 4 * SCAN_BYTES:
                raise Irregular("no line end in a long stretch")
            held = end
            continue
        yield _part(buf, view, cut)
        buf[: end - cut] = buf[cut:end]
        held = end - cut


def _part(buf: bytearray, view: memoryview, n: int) -> Part:
    arr = np.frombuffer(view[:n], dtype=np.uint8)
    return Part(arr, buf.find(b'"', 0, n) >= 0, buf.find(b"\r", 0, n) >= 0)


def line_records(
    stream: io.BufferedReader[Any], width: int, longest: int | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Records numbered as the non-empty lines after the header: exact for a file without quotes or lone
    CRs (checked); field counts are not looked at (the tier gives up on a malformed record)."""
    line, header = 1, True
    is_lf = np.empty(0, dtype=bool)  # reused: a fresh array per part costs the kernel its zeroed pages
    for arr, quote, has_cr in parts(stream):
        n = len(arr)
        if quote:
            raise Irregular("quoted fields")
        if len(is_lf) < n:
            is_lf = np.empty(n, dtype=bool)
        ends = np.flatnonzero(np.equal(arr, LF, out=is_lf[:n]))
        if has_cr:
            cr = np.flatnonzero(arr == CR)
            if np.any(arr[np.minimum(cr + 1, n - 1)] != LF) or cr[-1] == n - 1:
                raise Irregular("a lone CR ends a line")
        if arr[-1] != LF:
            ends = np.append(ends, n)
        gap = np.diff(ends, prepend=-1)  # each line's length + 1
        if longest is not None and gap.max() > longest:
            raise NotNumbers(f"a line longer than {longest:,} bytes")
        crlf = (gap > 1) & (arr[np.maximum(ends - 1, 0)] == CR) if has_cr else 0  # a CRLF's CR: no content
        keep = gap - crlf > 1
        if header:
            keep[0] = False
            header = False
        lines = (line + np.flatnonzero(keep)).astype(np.int64)
        yield lines, np.full(len(lines), width, dtype=np.int64)
        line += len(ends)


def _rfc4180_records(stream: io.BufferedReader[Any], width: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Records numbered by a vectorised pass, exact where quoting follows RFC 4180 (checked): line ends
    inside a quoted field do not end a record; empty lines are skipped; the first line is the header."""
    quotes = 0  # quotes before this part: an odd count means inside a quoted field
    line = 1  # the line of this part's first byte
    prev = LF  # the byte before this part
    start, commas, size = 1, 0, 0  # the record under way: start line, commas outside quotes, bytes
    header = True
    for arr, quote, has_cr in parts(stream):
        n = len(arr)
        q = np.flatnonzero(arr == QUOTE) if quote else np.empty(0, np.int64)
        if len(q):
            before = np.where(q > 0, arr[np.maximum(q - 1, 0)], prev)
            after = np.where(q < n - 1, arr[np.minimum(q + 1, n - 1)], LF)
            adjacent = np.diff(q) == 1
            ok_open = np.isin(before, (COMMA, LF, CR)) | np.concatenate(([False], adjacent))
            ok_close = np.isin(after, (COMMA, LF, CR)) | np.concatenate((adjacent, [False]))
            opener = (np.arange(len(q)) + quotes) % 2 == 0
            if not np.all(np.where(opener, ok_open, ok_close)):
                raise Irregular("quoting other than RFC 4180")
        ends = np.flatnonzero(arr == LF)
        if has_cr:
            cr = np.flatnonzero(arr == CR)
            lone = cr[(cr == n - 1) | (arr[np.minimum(cr + 1, n - 1)] != LF)]
            if len(lone):  # lone CRs end lines too
                ends = np.sort(np.concatenate((ends, lone)))
        outside = (np.searchsorted(q, ends) + quotes) % 2 == 0
        rec_end = ends[outside]
        rec_line = (line + np.arange(len(ends)))[outside]  # the line each record's end closes
        com = np.flatnonzero(arr == COMMA)
        if len(q):
            com = com[(np.searchsorted(q, com) + quotes) % 2 == 0]
        before_end = np.searchsorted(com, rec_end)  # commas before each record's end
        per = np.diff(np.concatenate(([0], before_end, [len(com)])))
        k = len(rec_end)
        if k:
            begin = np.concatenate(([0], rec_end[:-1] + 1))
            crlf = (rec_end > begin) & (arr[np.maximum(rec_end - 1, 0)] == CR) & (arr[rec_end] == LF)
            content = rec_end - begin - crlf
            content[0] += size
            fields = per[:k] + 1
            fields[0] += commas
            starts = np.concatenate(([start], rec_line[:-1] + 1))
            keep = content > 0
            if header:
                keep[0] = False
                header = False
            yield starts[keep].astype(np.int64), fields[keep].astype(np.int64)
            start, commas, size = int(rec_line[-1]) + 1, int(per[k]), n - int(rec_end[-1]) - 1
        else:
            commas += int(per[0])
            size += n
        quotes += len(q)
        line += len(ends)
        prev = int(arr[-1])
    if size and not header:  # a last record without a line end
        yield np.array([start], np.int64), np.array([commas + 1], np.int64)


def _python_records(stream: io.BufferedReader[Any], width: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Records numbered by Python's csv module (any quoting it reads; a line at a time)."""
    # bytes that are not UTF-8 are pyarrow's to report (file_bad_encoding), whichever thread meets them first
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="surrogateescape", newline="")
    # a field may be as long as pyarrow's block allows (the module's default limit is 128 KiB; it is global)
    pycsv.field_size_limit(max(pycsv.field_size_limit(), 2**31 - 1))
    reader = pycsv.reader(text)
    next(reader, None)
    lines, fields, last = [], [], reader.line_num
    for record in reader:
        if record:
            lines.append(last + 1)
            fields.append(len(record))
            if len(lines) >= 65_536:
                yield np.array(lines, np.int64), np.array(fields, np.int64)
                lines, fields = [], []
        last = reader.line_num
    if lines:
        yield np.array(lines, np.int64), np.array(fields, np.int64)


NUMBERINGS = {
    "typed": line_records,
    "lines": line_records,
    "rfc4180": _rfc4180_records,
    "python": _python_records,
}
