"""Prometheus HTTP API responses (``/api/v1/query_range``, or ``/api/v1/query`` with a range selector, as
``fleet ingest --source prometheus --url`` saves them): one row per sample; a row's number is its position
in the file, counting every sample of every series in file order (1-based).

The response is one JSON object, read as a stream: the envelope (``status``, ``data.resultType``) is
walked key by key and each series of ``data.result`` is decoded on its own by Python's JSON decoder, so
memory is bounded by one series (at most MAX_SERIES_BYTES of text) and a batch, not by the file. A
``matrix`` series holds ``values`` (``[[unix seconds, "value"], ...]``), a ``vector`` series one
``value``. An error response (``"status": "error"``) quarantines the file with the server's message;
``scalar`` and ``string`` results hold no series and are refused. A series whose labels are not text, an
element that is not a series, or a pair that is not ``[timestamp, "value"]`` is rejected as ``bad_json``
(one row per sample it holds); native histogram points are rejected as ``wrong_type`` (not read). Values
follow the text format's number syntax (``NaN``, ``+Inf`` and ``-Inf`` included); timestamps are kept to
the microsecond (rounded half up). The API gives no metric types: ``type`` is null.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipelines.lib.contracts import Contract
from pipelines.lib.ingest.readers.base import (
    LISTED_REJECT_SCHEMA,
    ROW,
    FileInfo,
    FileProblem,
    RawBatch,
    Source,
)
from pipelines.lib.ingest.readers.openmetrics import MAX_ABS_US, VALUE

CHUNK_CHARS = 1 << 20  # text read ahead at a time
MAX_SERIES_BYTES = 16 << 20  # one series object (or any other value) above this is refused
_DECODER = json.JSONDecoder()
_WS = " \t\r\n"
_VALUE_RE = re.compile(rf"^{VALUE}$")
_SIGNED_NAN = re.compile(r"^[+-](?i:nan)$")


def magic(head: bytes) -> bool:
    """The start of an API response: an object whose first key is status (the server writes it first)."""
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
    return bool(re.match(rb'\{\s*"status"\s*:\s*"(success|error)"', text))


class _Text:
    """The file's text as a stream, read ahead CHUNK_CHARS at a time; values are decoded one at a time."""

    def __init__(self, stream, rel: str):
        self.stream, self.rel = stream, rel
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buf, self.pos, self.eof, self.offset = "", 0, False, 0
        self.dropped = 0  # characters consumed and dropped from the front of buf

    def _more(self) -> bool:
        if self.eof:
            return False
        data = self.stream.read(CHUNK_CHARS)
        try:
            text = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            raise FileProblem(
                "file_bad_encoding",
                f"{self.rel}: not UTF-8 text (near byte {self.offset + exc.start}: {exc.reason}); "
                "re-export the file as UTF-8",
            ) from exc
        self.offset += len(data)
        if not data:
            self.eof = True
        if self.pos > CHUNK_CHARS:  # drop what was consumed
            self.dropped += self.pos
            self.buf, self.pos = self.buf[self.pos :], 0
        self.buf += text
        return bool(data)

    def peek(self) -> str:
        """The next non-blank character ('' at the end of the file), not consumed."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def take(self, expected: str) -> str:
        ch = self.peek()
        if ch == "":
            self.truncated()
        if ch not in expected:
            self.broken(f"expected one of {expected!r} at character {self.dropped + self.pos:,}")
        self.pos += 1
        return ch

    def value(self) -> Any:
        """The next JSON value, decoded whole (within MAX_SERIES_BYTES)."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if len(self.buf) - self.pos > MAX_SERIES_BYTES:
                    raise FileProblem(
                        "file_oversized_line",
                        f"{self.rel}: a value of more than {MAX_SERIES_BYTES:,} characters (one series); "
                        "pull shorter time pages",
                    ) from exc
                if self._more():
                    continue
                if exc.pos >= len(self.buf.rstrip(_WS)) - 1 or exc.msg.startswith("Unterminated string"):
                    self.truncated()
                self.broken(f"{exc.msg} at character {self.dropped + exc.pos:,}")
            # a number at the end of the read-ahead may go on in the next chunk
            if end == len(self.buf) and isinstance(value, int | float) and self._more():
                continue
            self.pos = end
            return value

    def truncated(self):
        raise FileProblem(
            "file_truncated", f"{self.rel}: the JSON ends in the middle of a value; deliver it again"
        )

    def broken(self, why: str):
        raise FileProblem("file_unreadable", f"{self.rel}: not a Prometheus API response ({why})")


def _members(text: _Text) -> Iterator[str]:
    """Keys of the object that starts here; the caller consumes each value."""
    text.take("{")
    if text.peek() == "}":
        text.take("}")
        return
    while True:
        key = text.value()
        if not isinstance(key, str):
            text.broken("an object key that is not text")
        text.take(":")
        yield key
        if text.take(",}") == "}":
            return


def _walk(text: _Text, seen: dict[str, Any]) -> Iterator[Any]:
    """Each element of data.result, in order; the envelope's fields go to ``seen``."""
    for key in _members(text):
        if key != "data":
            seen[key] = text.value()
            continue
        if text.peek() != "{":
            seen["data"] = text.value()
            continue
        for inner in _members(text):
            if inner != "result":
                seen[inner] = text.value()
                continue
            if text.peek() != "[":
                seen["result"] = text.value()
                continue
            text.take("[")
            if text.peek() == "]":
                text.take("]")
                continue
            while True:
                yield text.value()
                if text.take(",]") == "]":
                    break
    if text.peek() != "":
        text.broken("text after the response object")


def _labels(metric: Any) -> tuple[str | None, str] | None:
    """(metric name, labels as sorted JSON without empty values), or None when the labels are not text."""
    if not isinstance(metric, dict) or not all(isinstance(v, str) for v in metric.values()):
        return None
    name = metric.get("__name__")
    labels = {k: v for k, v in sorted(metric.items()) if k != "__name__" and v != ""}
    return name, json.dumps(labels, ensure_ascii=False, separators=(",", ":"))


class _Batch:
    """Series gathered until a batch holds ``batch_rows`` rows."""

    def __init__(self):
        self.parts: list[tuple[str | None, str, int, pa.Array, pa.Array]] = []
        self.rejects: list[tuple] = []
        self.rows = 0

    def add(self, name, labels, first: int, ts: pa.Array, values: pa.Array) -> None:
        self.parts.append((name, labels, first, ts, values))
        self.rows += len(ts)

    def reject(self, row: int, reason: str, field: str | None, message: str, raw: str) -> None:
        self.rejects.append((row, reason, field, message, raw))
        self.rows += 1

    def frames(self) -> RawBatch:
        counts = np.array([len(p[3]) for p in self.parts], dtype=np.int64)
        firsts = np.array([p[2] for p in self.parts], dtype=np.int64)
        n = int(counts.sum())
        rows = np.repeat(firsts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts) + np.arange(n)
        ts = (
            pl.Series(pa.chunked_array([p[3] for p in self.parts], pa.float64()))
            if n
            else pl.Series([], dtype=pl.Float64)
        )
        text = (
            pl.Series(pa.chunked_array([p[4] for p in self.parts], pa.string()))
            if n
            else pl.Series([], dtype=pl.String)
        )
        x = ts * 1e6
        frame = pl.DataFrame(
            {
                ROW: rows,
                "metric": pl.Series(
                    np.repeat(np.array([p[0] for p in self.parts], dtype=object), counts), dtype=pl.String
                ),
                "labels": pl.Series(
                    np.repeat(np.array([p[1] for p in self.parts], dtype=object), counts), dtype=pl.String
                ),
                "ts_s": ts,
                "us": pl.select(
                    pl.when(x.abs() <= MAX_ABS_US).then((x + 0.5).floor().cast(pl.Int64))
                ).to_series(),
                "value_text": text,
            }
        )
        ok_value = pl.col("value_text").str.contains(_VALUE_RE.pattern) & ~pl.col("value_text").str.contains(
            _SIGNED_NAN.pattern
        )
        frame = frame.with_columns(ok_value.alias("ok_value"))
        as_json = lambda c: pl.struct(pl.col(c).alias("v")).struct.json_encode().str.slice(5).str.head(-1)  # noqa: E731
        raw = pl.concat_str(  # the sample as the series held it: its labels and its [timestamp, "value"]
            pl.lit('{"__name__":'),
            as_json("metric").fill_null("null"),
            pl.lit(',"labels":'),
            pl.col("labels"),
            pl.lit(',"value":['),
            pl.col("ts_s").cast(pl.String),
            pl.lit(","),
            as_json("value_text"),
            pl.lit("]}"),
        )
        bad = frame.filter(~pl.col("ok_value") | pl.col("us").is_null()).select(
            ROW,
            pl.when(~pl.col("ok_value"))
            .then(pl.lit("wrong_type"))
            .otherwise(pl.lit("out_of_bounds"))
            .alias("reason_code"),
            pl.when(~pl.col("ok_value")).then(pl.lit("value")).otherwise(pl.lit("ts")).alias("field"),
            pl.when(~pl.col("ok_value"))
            .then(pl.format("value {} is not a number", pl.col("value_text").str.slice(0, 80)))
            .otherwise(pl.format("timestamp {} cannot be held (2000..2099 expected)", "ts_s"))
            .alias("message"),
            raw.alias("raw_record"),
        )
        good = frame.filter(pl.col("ok_value") & pl.col("us").is_not_null()).select(
            ROW,
            "metric",
            "labels",
            pl.col("us").cast(pl.Datetime("us", "UTC")).alias("ts"),
            pl.col("value_text").cast(pl.Float64).alias("value"),
            pl.lit(None, pl.String).alias("type"),
        )
        listed = pl.DataFrame(
            self.rejects,
            schema=LISTED_REJECT_SCHEMA,
            orient="row",
        )
        self.parts, self.rejects, self.rows = [], [], 0
        return RawBatch(frame=good, rejects=pl.concat([bad, listed]).sort(ROW))


def _columns(values: list) -> tuple[pa.Array, pa.Array] | None:
    """(timestamps, value texts) of ``[[ts, "v"], ...]`` converted in bulk, or None if any pair is not
    exactly [number, text] (then each pair is judged on its own)."""
    if not values:
        return pa.array([], pa.float64()), pa.array([], pa.string())
    if set(map(type, values)) != {list} or set(map(len, values)) != {2}:
        return None
    ts, vs = zip(*values, strict=True)
    if not set(map(type, ts)) <= {int, float} or set(map(type, vs)) != {str}:
        return None
    return pa.array(ts, pa.float64()), pa.array(vs, pa.string())


def _pair_ok(pair: Any) -> bool:
    return (
        isinstance(pair, list)
        and len(pair) == 2
        and type(pair[0]) in (int, float)
        and isinstance(pair[1], str)
    )


def read(src: Source, c: Contract, info: FileInfo) -> Iterator[RawBatch]:
    """Every series of the response, a batch of about ``batch_rows`` samples at a time."""
    seen: dict[str, Any] = {}
    batch = _Batch()
    row = 1
    with src.open() as stream:
        text = _Text(stream, src.rel)
        if text.peek() == "\ufeff":
            text.pos += 1
        for element in _walk(text, seen):
            row = _series(element, row, batch)
            if batch.rows >= src.limits.batch_rows:
                yield batch.frames()
    status = seen.get("status")
    if status == "error":
        raise FileProblem(
            "file_unreadable",
            f"{src.rel}: the server answered an error ({seen.get('errorType', '?')}: "
            f"{str(seen.get('error', ''))[:300]}); nothing to read",
        )
    if status != "success":
        raise FileProblem("file_unreadable", f"{src.rel}: not a Prometheus API response (no status: success)")
    kind = seen.get("resultType")
    if kind not in ("matrix", "vector") or "result" in seen:
        raise FileProblem(
            "file_unreadable",
            f"{src.rel}: resultType {kind!r} holds no series; "
            "save a matrix (query_range, or a range selector)",
        )
    if batch.rows:
        yield batch.frames()


def _series(element: Any, row: int, batch: _Batch) -> int:
    """Add one element of data.result to the batch; returns the next row number."""
    shown = json.dumps(element, ensure_ascii=False)[:4096] if not isinstance(element, dict) else ""
    if not isinstance(element, dict):
        batch.reject(row, "bad_json", None, "a result element that is not a series object", shown)
        return row + 1
    if "values" in element:
        values = element["values"]
    elif "value" in element:
        values = [element["value"]]
    else:
        values = None
    histograms = element.get("histograms") or ([element["histogram"]] if "histogram" in element else [])
    metric_text = json.dumps(element.get("metric"), ensure_ascii=False, separators=(",", ":"))
    for h in histograms if isinstance(histograms, list) else [histograms]:
        batch.reject(
            row,
            "wrong_type",
            "value",
            "a native histogram sample: not read (export the classic _bucket, _sum and _count series)",
            f'{{"metric":{metric_text},"histogram":{json.dumps(h, ensure_ascii=False)[:4096]}}}',
        )
        row += 1
    if values is None:
        if not histograms:
            batch.reject(row, "bad_json", None, "a series without values", json.dumps(element)[:4096])
            row += 1
        return row
    if not isinstance(values, list):
        batch.reject(
            row, "bad_json", None, "a series whose values are not a list", json.dumps(element)[:4096]
        )
        return row + 1
    named = _labels(element.get("metric"))
    if named is None:
        for pair in values:
            batch.reject(
                row,
                "bad_json",
                None,
                "a series whose metric is not an object of text labels",
                f'{{"metric":{metric_text},"value":{json.dumps(pair, ensure_ascii=False)[:4096]}}}',
            )
            row += 1
        return row
    name, labels = named
    cols = _columns(values)
    if cols is not None:
        batch.add(name, labels, row, *cols)
        return row + len(values)
    for pair in values:  # an odd pair somewhere: each judged on its own
        if _pair_ok(pair):
            batch.add(name, labels, row, pa.array([pair[0]], pa.float64()), pa.array([pair[1]], pa.string()))
        else:
            batch.reject(
                row,
                "bad_json",
                None,
                'not a [timestamp, "value"] pair',
                f'{{"metric":{metric_text},"value":{json.dumps(pair, ensure_ascii=False)[:4096]}}}',
            )
        row += 1
    return row
