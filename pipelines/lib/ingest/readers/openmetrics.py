"""Prometheus text exposition and OpenMetrics with timestamps (scrapes saved with their times, exports made
for ``promtool tsdb create-blocks-from openmetrics``): one row per sample, numbered by its line.

What a line is (both tiers implement exactly this; the differential test holds them to it):

- Lines end at LF; one trailing CR is dropped before a line is judged (CRLF files), and a BOM opening the
  file is skipped. Blank lines (spaces and tabs only) are not rows.
- A line whose first non-blank character is ``#`` is a comment. ``# TYPE <name> <type>`` (a known type)
  gives the type of the samples of that family on later lines: a sample's family is its name, or its name
  less one of SUFFIXES (``_total``, ``_bucket``, ...) when that family was declared. ``# EOF`` ends an
  OpenMetrics file: a non-blank line after it is rejected (``bad_metric_line``).
- Any other line is a sample: ``name[{labels}] value [timestamp] [# exemplar]``, tokens separated by
  spaces or tabs. Label values may hold the escapes ``\\\\``, ``\\"`` and ``\\n`` only; a label name twice
  on a line makes it a bad line; a label with an empty value is absent (as in Prometheus). The labels are
  kept as one JSON object with sorted keys. Values are decimal numbers (exponent allowed), ``NaN`` or a
  signed ``Inf``/``Infinity`` (any case).
- A timestamp is milliseconds in Prometheus text and seconds in OpenMetrics; the file's first timestamp
  decides which (>= 1e11: milliseconds), so one file has one unit (a timestamp of the other unit lands far
  outside 2000..2099 and is rejected as out of bounds). Timestamps are kept to the microsecond (the float
  value times 10^6 or 10^3, rounded half up). A sample without a timestamp (a live scrape) is rejected:
  its time is unknown. A file in seconds (OpenMetrics) that does not end with ``# EOF`` was cut short and
  is quarantined whole (``file_truncated``).

The fast tier is vectorised in polars over chunks of lines; the precise tier judges one line at a time in
Python and is the reference. Any doubt in the fast tier (a label value holding the placeholder character
it unescapes with) hands the file to the precise tier from its start.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import polars as pl

from pipelines.lib.contracts import Contract
from pipelines.lib.ingest.readers.base import (
    LISTED_REJECT_SCHEMA,
    ROW,
    FallBack,
    FileInfo,
    FileProblem,
    RawBatch,
    Source,
    bad_encoding,
    oversized,
)

TIERS = ("polars", "precise")  # tried in order; the last one is the reference
CHUNK_BYTES = 16 << 20  # text judged at once by the fast tier (cut at a line end)
TYPES = frozenset(
    {"counter", "gauge", "histogram", "summary", "untyped", "unknown", "info", "stateset", "gaugehistogram"}
)
SUFFIXES = ("_total", "_created", "_count", "_sum", "_bucket", "_gcount", "_gsum", "_info")
MS_FROM = 1e11  # a first timestamp at or above this is in milliseconds (2000..2099 is 9.5e8..4.1e9 s)
MAX_ABS_US = 4e18  # timestamps beyond this many microseconds cannot be held (int64): out of bounds
RAW = "__fleet_raw"
_BOM = "\ufeff"
_PLACEHOLDER = "\x00"  # stands for an escaped backslash while the fast tier unescapes

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_PAIR = rf"{_LABEL}[ \t]*=[ \t]*{_QUOTED}"
_LABELS = rf"\{{[ \t]*(?:{_PAIR}(?:[ \t]*,[ \t]*{_PAIR})*[ \t]*,?[ \t]*)?\}}"
VALUE = r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:inf(?:inity)?)|(?i:nan))"
_TS = r"[+-]?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
SAMPLE = rf"^({_NAME})({_LABELS})?[ \t]+({VALUE})(?:[ \t]+({_TS}))?(?:[ \t]+#.*)?[ \t]*$"
HEAD = rf"^({_NAME})({_LABELS})?$"
TAIL = rf"^(.*?)[ \t]+({VALUE})(?:[ \t]+({_TS}))?(?:[ \t]+#.*)?[ \t]*$"
PAIR = rf'({_LABEL})[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"'
ESCAPES_OK = r'^(?:[^"\\]|\\[\\"n])*$'
TYPE_LINE = r"^#[ \t]+TYPE[ \t]+([^ \t]+)[ \t]+([^ \t]+)"
EOF_LINE = "# EOF"

_SAMPLE_RE, _PAIR_RE = re.compile(SAMPLE), re.compile(PAIR)
_ESCAPES_RE, _TYPE_RE = re.compile(ESCAPES_OK), re.compile(TYPE_LINE)
_SIGNED_NAN = re.compile(r"^[+-](?i:nan)$")


def sniff(head: bytes) -> bool:
    """The start of a Prometheus or OpenMetrics text file (for files whose name says nothing)."""
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
    return bool(
        re.match(rb"#[ \t]+(HELP|TYPE|UNIT|EOF)\b|[a-zA-Z_:][a-zA-Z0-9_:]*(\{|[ \t]+[-+.0-9NnIi])", text)
    )


@dataclass
class _File:
    """What a pass over a file carries from one chunk of lines to the next."""

    types: dict[str, str] = field(default_factory=dict)
    scale: float | None = None  # 1e6 (seconds) or 1e3 (milliseconds) once the first timestamp is seen
    eof: bool = False


def _scale_for(first: float) -> float:
    return 1e3 if abs(first) >= MS_FROM else 1e6


def _us(t: float, scale: float) -> int | None:
    """Microseconds of a timestamp (rounded half up), or None when no int64 can hold it."""
    x = t * scale
    if not math.isfinite(x) or abs(x) > MAX_ABS_US:
        return None
    return math.floor(x + 0.5)


def _family_type(name: str, types: dict[str, str]) -> str | None:
    if name in types:
        return types[name]
    for suffix in SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in types:
            return types[name[: -len(suffix)]]
    return None


def _unescape(v: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), v)


# ---------------------------------------------------------------- the precise tier (reference)


def judge_line(line: str, state: _File) -> tuple[str, tuple] | None:
    """The reference verdict on one line (CR, BOM already dropped): None for a blank line or a comment
    (a TYPE or EOF line updates ``state``), ("sample", (metric, labels, ts_text, value, type)) or
    ("reject", (reason, field, message))."""
    t = line.lstrip(" \t")
    if not t.strip(" \t"):
        return None
    if state.eof:
        return "reject", ("bad_metric_line", None, "a line after # EOF (an OpenMetrics file ends there)")
    if t.startswith("#"):
        if t.rstrip(" \t") == EOF_LINE:
            state.eof = True
        elif (m := _TYPE_RE.match(t)) and m.group(2) in TYPES:
            state.types[m.group(1)] = m.group(2)
        return None
    m = _SAMPLE_RE.match(t)
    if m is None or _SIGNED_NAN.match(m.group(3)):
        return "reject", ("bad_metric_line", None, "not a sample line: name{labels} value timestamp")
    name, labels_text, value_text, ts_text = m.groups()
    labels: dict[str, str] = {}
    for pm in _PAIR_RE.finditer(labels_text or ""):
        key, raw = pm.group(1), pm.group(2)
        if not _ESCAPES_RE.match(raw):
            return "reject", ("bad_metric_line", None, f'label {key}: only \\\\, \\" and \\n may be escaped')
        if key in labels:
            return "reject", ("bad_metric_line", None, f"label {key} appears twice")
        labels[key] = _unescape(raw)
    shown = json.dumps(
        {k: v for k, v in sorted(labels.items()) if v != ""}, ensure_ascii=False, separators=(",", ":")
    )
    return "sample", (name, shown, ts_text, float(value_text), _family_type(name, state.types))


def _missing_ts() -> tuple[str, str, str]:
    return (
        "missing_required",
        "ts",
        "a sample without a timestamp (a live scrape): export samples with their timestamps "
        "(the HTTP API, promtool tsdb dump, or the exporter's timestamps)",
    )


def _ts_bounds() -> tuple[str, str, str]:
    return "out_of_bounds", "ts", "the timestamp is outside what can be held (2000..2099 expected)"


def _lines(src: Source) -> Iterator[tuple[int, str]]:
    """(line number, text without its LF) of every line, BOM skipped; checks UTF-8 and the line length
    limit."""
    limit = src.limits.max_record_bytes
    for first, text in _chunks(src):
        pieces = text.split("\n")
        if text.endswith("\n"):
            pieces.pop()
        for number, piece in enumerate(pieces, start=first):
            if len(piece) > limit and len(piece.encode()) > limit:
                raise oversized(src.rel, number, len(piece.encode()), limit)
            yield number, piece


def _read_precise(src: Source, c: Contract, info: FileInfo) -> Iterator[RawBatch]:
    state = _File()
    rows: list[tuple] = []
    rejects: list[tuple] = []

    def batch() -> RawBatch:
        frame = pl.DataFrame(
            rows,
            schema={
                ROW: pl.Int64,
                "metric": pl.String,
                "labels": pl.String,
                "ts": pl.Int64,
                "value": pl.Float64,
                "type": pl.String,
                RAW: pl.String,
            },
            orient="row",
        ).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))
        rej = pl.DataFrame(
            rejects,
            schema=LISTED_REJECT_SCHEMA,
            orient="row",
        )
        rows.clear()
        rejects.clear()
        return RawBatch(frame=frame, rejects=rej, raw_column=RAW)

    for number, line in _lines(src):
        verdict = judge_line(line.removesuffix("\r"), state)
        if verdict is None:
            continue
        kind, what = verdict
        if kind == "reject":
            rejects.append((number, *what, line))
        else:
            name, labels, ts_text, value, typ = what
            if ts_text is None:
                rejects.append((number, *_missing_ts(), line))
                continue
            t = float(ts_text)
            if state.scale is None:
                state.scale = _scale_for(t)
            us = _us(t, state.scale)
            if us is None:
                rejects.append((number, *_ts_bounds(), line))
                continue
            rows.append((number, name, labels, us, value, typ, line))
        if len(rows) + len(rejects) >= 200_000:
            yield batch()
    if rows or rejects:
        yield batch()
    _check_end(src, state)


def _check_end(src: Source, state: _File) -> None:
    if state.scale == 1e6 and not state.eof:
        raise FileProblem(
            "file_truncated",
            f"{src.rel}: OpenMetrics (timestamps in seconds) ends with '# EOF'; this file does not: "
            "it was cut short; deliver it again",
        )


# ---------------------------------------------------------------- the fast tier


class _Doubt(Exception):
    """The fast tier cannot vouch for a chunk; the precise tier reads the file."""


def _chunks(src: Source) -> Iterator[tuple[int, str]]:
    """(number of the chunk's first line, text of whole lines) of at most about CHUNK_BYTES each."""
    number, offset, rest, first = 0, 0, b"", True
    with src.open() as stream:
        while True:
            chunk = stream.read(CHUNK_BYTES)
            data = rest + chunk
            if not data:
                return
            cut = data.rfind(b"\n") + 1 if chunk else len(data)
            if cut == 0:
                if len(data) > src.limits.max_record_bytes:
                    raise oversized(src.rel, number + 1, len(data), src.limits.max_record_bytes)
                rest = data
                continue
            block, rest = data[:cut], data[cut:]
            try:
                text = block.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise bad_encoding(src.rel, exc, offset) from exc
            if first:
                text, first = text.removeprefix(_BOM), False
            offset += len(block)
            yield number + 1, text
            number += text.count("\n") + (0 if text.endswith("\n") else 1)
            if not chunk:
                return


def _labels_json(frame: pl.DataFrame) -> pl.DataFrame:
    """Per line (ROW): the canonical labels JSON, and the reference's complaint about the first bad pair
    (an escape other than \\\\, \\" and \\n, or a label name seen earlier on the line). Each distinct
    label text is judged once (a series repeats its labels at every scrape), then joined back to its lines."""
    texts = frame.select("labels_text").unique().with_row_index(ROW)
    judged = _labels_of(texts).join(texts, on=ROW).drop(ROW)
    return frame.join(judged, on="labels_text", how="left").select(ROW, "labels", "problem")


def _labels_of(frame: pl.DataFrame) -> pl.DataFrame:
    pairs = (
        frame.select(ROW, pl.col("labels_text").str.extract_all(PAIR).alias("pair"))
        .explode("pair")
        .drop_nulls("pair")
        .with_columns(pl.col("pair").str.extract_groups(PAIR).alias("g"))
        .select(
            ROW,
            pl.col("g").struct.field("1").alias("key"),
            pl.col("g").struct.field("2").alias("raw"),
        )
    )
    if pairs.select(pl.col("raw").str.contains(_PLACEHOLDER, literal=True).any()).item():
        raise _Doubt("a label value holds the placeholder character")
    checked = pairs.with_columns(
        (~pl.col("raw").str.contains(ESCAPES_OK)).alias("bad_escape"),
        (pl.int_range(pl.len()).over(ROW, "key") > 0).alias("again"),
        pl.col("raw")
        .str.replace_all("\\\\", _PLACEHOLDER, literal=True)
        .str.replace_all('\\"', '"', literal=True)
        .str.replace_all("\\n", "\n", literal=True)
        .str.replace_all(_PLACEHOLDER, "\\", literal=True)
        .alias("value"),
    )
    problems = (
        checked.filter(pl.col("bad_escape") | pl.col("again"))
        .group_by(ROW, maintain_order=True)
        .first()
        .select(
            ROW,
            pl.when(pl.col("bad_escape"))
            .then(pl.format('label {}: only \\\\, \\" and \\n may be escaped', "key"))
            .otherwise(pl.format("label {} appears twice", "key"))
            .alias("problem"),
        )
    )
    members = (
        checked.filter(pl.col("value") != "")
        .sort(ROW, "key", maintain_order=True)
        .select(
            ROW,
            pl.concat_str(
                pl.lit('"'),
                pl.col("key"),
                pl.lit('":'),
                pl.struct(pl.col("value").alias("v")).struct.json_encode().str.slice(5).str.head(-1),
            ).alias("member"),
        )
        .group_by(ROW, maintain_order=True)
        .agg(pl.col("member").str.join(","))
        .select(ROW, pl.format("{{{}}}", "member").alias("labels"))
    )
    return members.join(problems, on=ROW, how="full", coalesce=True)


def _chunk_lines(first: int, text: str, state: _File) -> pl.DataFrame:
    """A chunk's non-blank lines, numbered from ``first``: the text (``t``), whether it is # EOF, a comment,
    or after an # EOF (on an earlier line, or in an earlier chunk)."""
    lines = (
        pl.Series("line", [text])
        .str.split("\n")
        .explode()
        .to_frame()
        .with_row_index(ROW, offset=first)
        .with_columns(pl.col(ROW).cast(pl.Int64))
    )
    if text.endswith("\n"):
        lines = lines.head(-1)
    t = pl.col("line").str.strip_suffix("\r").str.strip_chars_start(" \t")
    lines = lines.with_columns(t.alias("t")).filter(pl.col("t").str.strip_chars_end(" \t") != "")
    lines = lines.with_columns(
        (pl.col("t").str.strip_chars_end(" \t") == EOF_LINE).alias("is_eof"),
        pl.col("t").str.starts_with("#").alias("comment"),
    )
    after = pl.col("is_eof").cast(pl.Int32).cum_sum().shift(1, fill_value=0) > 0
    return lines.with_columns((after | pl.lit(state.eof)).alias("after_eof"))


def _judge_chunk(first: int, text: str, state: _File) -> RawBatch:
    lines = _chunk_lines(first, text, state)
    declared = (
        lines.filter(pl.col("comment") & ~pl.col("after_eof"))
        .with_columns(pl.col("t").str.extract_groups(TYPE_LINE).alias("g"))
        .select(
            ROW, pl.col("g").struct.field("1").alias("family"), pl.col("g").struct.field("2").alias("type")
        )
        .filter(pl.col("type").is_in(list(TYPES)))
    )
    if lines["is_eof"].any() and not state.eof:
        state.eof = True
    body = lines.filter(~pl.col("comment") | pl.col("after_eof"))
    parsed = _samples(body)
    bad_line = (
        pl.col("after_eof")
        | pl.col("metric").is_null()
        | pl.col("value_text").str.contains(r"^[+-](?i:nan)$").fill_null(False)
    )
    parsed = parsed.with_columns(bad_line.alias("bad_line"))
    good = parsed.filter(~pl.col("bad_line"))
    labels = _labels_json(good.select(ROW, "labels_text"))
    good = good.join(labels, on=ROW, how="left").with_columns(pl.col("labels").fill_null("{}"))
    typed = _types(good, declared, state)
    for row_family, typ in declared.select("family", "type").iter_rows():
        state.types[row_family] = typ
    if state.scale is None:
        stamped = typed.filter(pl.col("problem").is_null() & pl.col("ts_text").is_not_null())
        if stamped.height:
            state.scale = _scale_for(float(stamped["ts_text"][0]))
    scale = state.scale or 1e6
    x = pl.col("ts_text").cast(pl.Float64) * scale
    typed = typed.with_columns(
        pl.when(x.abs() <= MAX_ABS_US).then((x + 0.5).floor().cast(pl.Int64)).alias("us"),
        pl.col("value_text").cast(pl.Float64).alias("value"),
    )
    rejects = _chunk_rejects(parsed, typed)
    rows = typed.filter(pl.col("problem").is_null() & pl.col("us").is_not_null()).select(
        ROW,
        "metric",
        "labels",
        pl.col("us").cast(pl.Datetime("us", "UTC")).alias("ts"),
        "value",
        "type",
        pl.col("line").alias(RAW),
    )
    return RawBatch(frame=rows, rejects=rejects, raw_column=RAW)


def _chunk_rejects(parsed: pl.DataFrame, typed: pl.DataFrame) -> pl.DataFrame:
    """A chunk's rejected lines, in order: not sample lines (or after # EOF), samples with a problem, and
    samples without a timestamp or with one out of bounds."""
    return pl.concat(
        [
            parsed.filter(pl.col("bad_line")).select(
                ROW,
                pl.lit("bad_metric_line").alias("reason_code"),
                pl.lit(None, pl.String).alias("field"),
                pl.when(pl.col("after_eof"))
                .then(pl.lit("a line after # EOF (an OpenMetrics file ends there)"))
                .otherwise(pl.lit("not a sample line: name{labels} value timestamp"))
                .alias("message"),
                pl.col("line").alias("raw_record"),
            ),
            typed.filter(pl.col("problem").is_not_null()).select(
                ROW,
                pl.lit("bad_metric_line").alias("reason_code"),
                pl.lit(None, pl.String).alias("field"),
                pl.col("problem").alias("message"),
                pl.col("line").alias("raw_record"),
            ),
            typed.filter(pl.col("problem").is_null() & pl.col("ts_text").is_null()).select(
                ROW,
                *[
                    pl.lit(v).alias(k)
                    for k, v in zip(("reason_code", "field", "message"), _missing_ts(), strict=True)
                ],
                pl.col("line").alias("raw_record"),
            ),
            typed.filter(
                pl.col("problem").is_null() & pl.col("ts_text").is_not_null() & pl.col("us").is_null()
            ).select(
                ROW,
                *[
                    pl.lit(v).alias(k)
                    for k, v in zip(("reason_code", "field", "message"), _ts_bounds(), strict=True)
                ],
                pl.col("line").alias("raw_record"),
            ),
        ]
    ).sort(ROW)


def _samples(body: pl.DataFrame) -> pl.DataFrame:
    """metric, labels_text, value_text, ts_text of each line as SAMPLE reads it (null metric: no sample).
    The tail (value, timestamp, exemplar) is cut off first, and the head (name and labels) is judged once
    per distinct head: a series repeats its head at every scrape. Where the shortest head before a valid
    tail is no valid head (a label value that holds ' 1 # '), the line is read with SAMPLE whole."""
    split = (
        body.with_columns(pl.col("t").str.extract_groups(TAIL).alias("g"))
        .with_columns(
            pl.col("g").struct.field("1").alias("head"),
            pl.col("g").struct.field("2").alias("value_text"),
            pl.col("g").struct.field("3").alias("ts_text"),
        )
        .drop("g")
    )
    heads = split.select("head").drop_nulls().unique()
    heads = heads.with_columns(pl.col("head").str.extract_groups(HEAD).alias("h")).select(
        "head",
        pl.col("h").struct.field("1").alias("metric"),
        pl.col("h").struct.field("2").fill_null("").alias("labels_text"),
    )
    split = split.join(heads, on="head", how="left")
    whole = split.filter(pl.col("metric").is_null())
    if whole.height:
        whole = whole.with_columns(pl.col("t").str.extract_groups(SAMPLE).alias("g")).with_columns(
            pl.col("g").struct.field("1").alias("metric"),
            pl.col("g").struct.field("2").fill_null("").alias("labels_text"),
            pl.col("g").struct.field("3").alias("value_text"),
            pl.col("g").struct.field("4").alias("ts_text"),
        )
        split = pl.concat([split.filter(pl.col("metric").is_not_null()), whole.select(split.columns)])
    return split.sort(ROW).drop("head")


def _types(good: pl.DataFrame, declared: pl.DataFrame, state: _File) -> pl.DataFrame:
    """Each sample's type: its family's TYPE on an earlier line (this chunk's, else an earlier chunk's);
    the family is the name, else the name less a suffix whose family was declared."""
    stripped = pl.coalesce(
        [
            pl.when(pl.col("metric").str.ends_with(s)).then(pl.col("metric").str.strip_suffix(s))
            for s in SUFFIXES
        ]
    )
    frame = good.sort(ROW).with_columns(stripped.alias("base"))
    right = declared.sort(ROW).rename({ROW: "__decl_row"})
    for key, out in (("metric", "t_exact"), ("base", "t_base")):
        frame = frame.join_asof(
            right.rename({"family": key, "type": out}),
            left_on=ROW,
            right_on="__decl_row",
            by=key,
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,  # both sides are sorted by line above
        ).drop("__decl_row")
    known = dict(state.types)
    before = {  # types declared in earlier chunks
        key: pl.col(key).replace_strict(known, default=None, return_dtype=pl.String)
        for key in ("metric", "base")
    }
    return frame.with_columns(
        pl.coalesce("t_exact", before["metric"], "t_base", before["base"]).alias("type")
    ).drop("t_exact", "t_base", "base")


def _read_fast(src: Source, c: Contract, info: FileInfo) -> Iterator[RawBatch]:
    state = _File()
    for first, text in _chunks(src):
        yield _judge_chunk(first, text, state)
    _check_end(src, state)


_READERS = {"polars": _read_fast, "precise": _read_precise}


def read(src: Source, c: Contract, info: FileInfo) -> Iterator[RawBatch | FallBack]:
    """The fast tier, and the precise one (the reference) if it has a doubt or fails at any batch."""
    *fast, last = TIERS
    if info.reference_only:
        fast = []
    for tier in fast:
        try:
            yield from _READERS[tier](src, c, info)
            info.tier = tier
            return
        except Exception as exc:  # any doubt or fault: the reference reads the file from its start
            yield FallBack(f"{tier}: {(str(exc).splitlines() or [type(exc).__name__])[0]}")
    yield from _READERS[last](src, c, info)
    info.tier = last
