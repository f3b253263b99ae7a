"""The ledger row and the quarantine entries of one landing file, typed.

A file's row rejects are kept one by one up to the ingest limits' ``max_rejects_per_file`` (the first by
row number); the rest are counted by reason and summed up in one ``rejects_capped`` entry, so a hostile
file can hold neither memory nor the quarantine. A rejected row's original content is kept up to
``raw_record_max_bytes`` and marked when cut.
"""

from __future__ import annotations

import collections
import datetime as dt
from dataclasses import dataclass, field

import polars as pl
import pyarrow as pa

from pipelines.lib.contracts import contract
from pipelines.lib.frames import arrow_series
from pipelines.lib.ingest.readers.base import LISTED_REJECT_SCHEMA, ROW
from pipelines.lib.settings import DEFAULT_LIMITS
from workload_model.scalars import as_int

CROSS_ROW_REASONS = frozenset({"unknown_run", "ts_outside_run", "duplicate_key"})
FILL = "__fleet_fill"  # the raw record is to be the row's original line (read back at the file's end)
JUDGE = "__fleet_judge"  # the verdict came from a fast tier: judged again from the original line
REJECT_SCHEMA = pl.Schema(
    {
        **LISTED_REJECT_SCHEMA,
        "raw_record_cut": pl.Boolean,
        FILL: pl.Boolean,
        JUDGE: pl.Boolean,
    }
)


def _compact(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its text copied out: polars text columns are views that keep the whole buffer of
    the batch they came from alive (a few kept rejects would otherwise hold every batch they were in)."""
    return frame.with_columns(
        arrow_series(frame[c].to_arrow().cast(pa.large_string())).alias(c)
        for c, t in frame.schema.items()
        if t == pl.String
    )


def cap_raw(frame: pl.DataFrame, max_bytes: int) -> pl.DataFrame:
    """``raw_record`` cut to ``max_bytes`` (at a character boundary) and ``raw_record_cut`` set; text
    copied out of the batch it came from (``_compact``)."""
    over = (frame["raw_record"].str.len_bytes() > max_bytes).fill_null(False)
    if not over.any():
        return _compact(frame.with_columns(over.alias("raw_record_cut")))
    idx = over.arg_true()
    cut = [
        s.encode("utf-8")[:max_bytes].decode("utf-8", "ignore")
        for s in frame["raw_record"].gather(idx).to_list()
    ]
    return _compact(
        frame.with_columns(
            frame["raw_record"].scatter(idx, pl.Series(cut, dtype=pl.String)), over.alias("raw_record_cut")
        )
    )


def reject_frame(rows: pl.DataFrame, *, fill: bool = False, judge: bool = False) -> pl.DataFrame:
    """Rejects (``__fleet_row``, reason_code, field, message, raw_record) in the log's shape."""
    return rows.select(
        pl.col(ROW).cast(pl.Int64),
        *[pl.col(c).cast(pl.String) for c in ("reason_code", "field", "message", "raw_record")],
        pl.lit(False).alias("raw_record_cut"),
        pl.lit(fill).alias(FILL),
        pl.lit(judge).alias(JUDGE),
    )


@dataclass
class RejectLog:
    """A file's row rejects: the first ``keep`` by row number kept (raw records cut to ``raw_max`` bytes),
    the rest counted."""

    keep: int = DEFAULT_LIMITS.max_rejects_per_file
    raw_max: int = DEFAULT_LIMITS.raw_record_max_bytes
    kept: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=REJECT_SCHEMA))
    total: int = 0
    over: collections.Counter = field(default_factory=collections.Counter)
    over_first: int | None = None

    def add(self, rows: pl.DataFrame) -> None:
        """Log rejects in the log's shape (``reject_frame``): raw records of the kept ones are cut."""
        if not rows.height:
            return
        self.total += rows.height
        keep = self.keep
        if self.kept.height >= keep:  # the log is full: later rows are only counted
            last = self.kept[ROW][-1]
            self._count(rows.filter(pl.col(ROW) > last))
            rows = rows.filter(pl.col(ROW) <= last)
            if not rows.height:
                return
        if rows.height > keep:  # only the first rows by number can be kept
            rows = rows.sort(ROW, maintain_order=True)
            self._count(rows.slice(keep))
            rows = rows.head(keep)
        both = pl.concat([self.kept, cap_raw(rows, self.raw_max)]).sort(ROW, maintain_order=True)
        self.kept = both.head(keep)
        self._count(both.slice(keep))

    def _count(self, rest: pl.DataFrame) -> None:
        if rest.height:
            self.over.update(dict(rest["reason_code"].value_counts().iter_rows()))
            first = as_int(rest[ROW].min())
            self.over_first = first if self.over_first is None else min(self.over_first, first)

    def replace(self, kept: pl.DataFrame) -> None:
        """New versions of kept rows (same rows, e.g. with their original text read back)."""
        self.kept = _compact(
            kept.select(list(REJECT_SCHEMA)).cast(REJECT_SCHEMA).sort(ROW, maintain_order=True)
        )

    def entries(self, rel: str) -> pl.DataFrame:
        """The quarantine entries: the kept rows and, past the cap, one summary."""
        rows = self.kept.select(
            pl.col(ROW).alias("row_number"), "reason_code", "field", "message", "raw_record", "raw_record_cut"
        )
        if not self.over:
            return rows
        rest = sum(self.over.values())
        summary = ", ".join(
            f"{r}: {n:,}" for r, n in sorted(self.over.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        return pl.concat(
            [
                rows,
                pl.DataFrame(
                    {
                        "row_number": [self.over_first],
                        "reason_code": ["rejects_capped"],
                        "field": [None],
                        "message": [
                            f"{rel}: {rest:,} more rows were rejected from row {self.over_first} on "
                            f"({summary}); "
                            f"only the first {self.keep:,} are listed one by one"
                        ],
                        "raw_record": [None],
                        "raw_record_cut": [False],
                    },
                    schema=rows.schema,
                ),
            ]
        )


@dataclass
class FileReject:
    """A problem that quarantines a whole file (one entry with row_number 0)."""

    reason_code: str
    message: str


@dataclass
class FileEntry:
    """A landing file's ledger row. ``rows_in`` counts every data row read; a file quarantined whole
    accounts for its rows in its one entry."""

    day: dt.date
    source: str
    source_file: str
    size_bytes: int
    table_name: str | None
    ingested_at: dt.datetime
    blake3: str = "0" * 64
    format: str | None = None
    rows_in: int = 0
    extra_columns: str | None = None
    reader_tier: str | None = None
    problem: FileReject | None = None


def ledger_frame(rows: list[tuple[FileEntry, int, int]]) -> pl.DataFrame:
    """The ingest ledger from (entry, rows accepted, rows quarantined) per file."""
    c = contract("ingest_ledger")
    if not rows:
        return c.empty_frame()
    records = [
        {
            "day": e.day,
            "source": e.source,
            "source_file": e.source_file,
            "blake3": e.blake3,
            "size_bytes": e.size_bytes,
            "format": e.format,
            "table_name": e.table_name,
            "rows_in": e.rows_in,
            "rows_accepted": accepted,
            "rows_quarantined": quarantined,
            "file_status": "quarantined" if accepted == 0 else "partial" if quarantined else "accepted",
            "extra_columns": e.extra_columns,
            "reader_tier": None if e.problem else e.reader_tier,
            "ingested_at": e.ingested_at,
        }
        for e, accepted, quarantined in rows
    ]
    return c.conform(pl.DataFrame(records, schema=c.polars_schema())).sort("source_file")


def quarantine_frame(parts: list[tuple[FileEntry, pl.DataFrame | None]]) -> pl.DataFrame:
    """The quarantine from each file's entry and its row entries (``RejectLog.entries``)."""
    c = contract("quarantine")
    frames = []
    for e, rows in parts:
        base = {"day": e.day, "source": e.source, "source_file": e.source_file, "table_name": e.table_name}
        if e.problem is not None:
            rows = pl.DataFrame(
                {
                    "row_number": [0],
                    "reason_code": [e.problem.reason_code],
                    "field": pl.Series([None], dtype=pl.String),
                    "message": [e.problem.message],
                    "raw_record": pl.Series([None], dtype=pl.String),
                    "raw_record_cut": [False],
                }
            )
        if rows is None or not rows.height:
            continue
        frames.append(rows.with_columns(*[pl.lit(v).alias(k) for k, v in base.items()]))
    if not frames:
        return c.empty_frame()
    q = pl.concat([p.select(c.column_names) for p in frames], how="vertical_relaxed")
    return c.conform(q).sort("source_file", "row_number")


TS_OUT = "%Y-%m-%dT%H:%M:%S%.6fZ"


def typed_json(frame: pl.DataFrame, columns: list[str]) -> pl.Expr:
    """A row's typed values as JSON (timestamps as ISO-8601 UTC): the raw record of a format whose rows
    are not lines of text."""
    cols = [
        pl.col(c).dt.to_string(TS_OUT) if isinstance(frame.schema[c], pl.Datetime) else pl.col(c)
        for c in columns
        if c in frame.columns
    ]
    return pl.struct(cols).struct.json_encode()


def row_rejects(
    rows: pl.DataFrame,
    reason: str,
    field_name: str,
    message: pl.Expr,
    columns: list[str],
    *,
    from_lines: bool,
) -> pl.DataFrame:
    """Rejects for ``rows``: one reason and field, a message per row; the raw record is the row's line,
    read back later (``from_lines``), or its typed values as JSON."""
    raw = pl.lit(None, pl.String) if from_lines else typed_json(rows, columns)
    return rows.select(
        ROW,
        pl.lit(reason).alias("reason_code"),
        pl.lit(field_name).alias("field"),
        message.alias("message"),
        raw.alias("raw_record"),
    )
