"""Ingest one landing day: read every file, validate every row against its contract, quarantine the rest.

For each day the partition is rebuilt whole from the day's landing files, so re-running is idempotent
and a corrected file replaces its earlier rows. Every file gets a ledger row whose counts reconcile:
rows_in = rows_accepted + rows_quarantined. A whole-file problem is one quarantine entry (row_number 0)
that accounts for all of the file's rows.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import polars as pl

from pipelines.lib import lake
from pipelines.lib.contracts import (
    Contract,
    conformance_violations,
    contract,
    key_duplicates,
    validate_strings,
)
from pipelines.lib.paths import DataHome
from pipelines.lib.sqlfiles import sql_text

LANDING_TABLES = ("runs", "utilisation_samples")
TS_OUT = "%Y-%m-%dT%H:%M:%S%.6fZ"
MAX_LINE_BYTES = 1 << 20  # a JSONL line or CSV row above 1 MiB is not telemetry: the file is quarantined
# Internal columns carried beside a file's fields; an input column with this prefix is refused.
INTERNAL = "__fleet_"
CARRY = ("__fleet_file", "__fleet_row", "__fleet_order")


class FileProblem(Exception):
    """A whole landing file cannot be read; it is quarantined with this reason."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class LandingFile:
    source: str
    path: Path
    relpath: str  # relative to the landing root, as shown to people


@dataclass
class DayIngest:
    """Everything one day's ingest produces, ready for the lake."""

    runs: pl.DataFrame
    utilisation_samples: pl.DataFrame
    quarantine: pl.DataFrame
    ingest_ledger: pl.DataFrame
    extra_fields: pl.DataFrame

    def frames(self) -> dict[str, pl.DataFrame]:
        return {
            "runs": self.runs,
            "utilisation_samples": self.utilisation_samples,
            "quarantine": self.quarantine,
            "ingest_ledger": self.ingest_ledger,
            "extra_fields": self.extra_fields,
        }


def landing_files(home: DataHome, day: str) -> list[LandingFile]:
    """Non-hidden entries of landing/<source>/<day>/, in delivery order (mtime, then path)."""
    out = []
    if not home.landing.exists():
        return out
    for source_dir in sorted(p for p in home.landing.iterdir() if p.is_dir() and not p.name.startswith(".")):
        day_dir = source_dir / day
        if not day_dir.is_dir():
            continue
        for f in day_dir.iterdir():
            if f.name.startswith(".") or f.is_dir():
                continue
            out.append(
                LandingFile(source=source_dir.name, path=f, relpath=f"{source_dir.name}/{day}/{f.name}")
            )

    def order(lf: LandingFile):
        try:
            return (lf.path.lstat().st_mtime_ns, lf.relpath)
        except OSError:
            return (0, lf.relpath)

    return sorted(out, key=order)


def landing_days(home: DataHome) -> list[str]:
    """Every day folder present under any landing source."""
    if not home.landing.exists():
        return []
    days = {d.name for s in home.landing.iterdir() if s.is_dir() for d in s.iterdir() if d.is_dir()}
    return sorted(d for d in days if _is_day(d))


def _is_day(text: str) -> bool:
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10


def detect_format(name: str, head: bytes) -> tuple[str | None, bool]:
    """(format, gzipped) from content where it is unambiguous (gzip/Parquet magic, a leading '{'), else the name."""
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


def table_for(name: str) -> str | None:
    """The contract a landing file feeds, from its name: ``<table>[-anything].<ext>``."""
    for t in sorted(LANDING_TABLES, key=len, reverse=True):
        if name == t or name.startswith((t + ".", t + "-", t + "_")):
            return t
    return None


def _decode(data: bytes, rel: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileProblem(
            "file_bad_encoding",
            f"{rel}: not UTF-8 text (byte {exc.start}: {exc.reason}); re-export the file as UTF-8",
        ) from exc


def _check_line_lengths(lengths: pl.Series, rel: str, first_line: int) -> None:
    if lengths.len() and lengths.max() > MAX_LINE_BYTES:
        idx = int(lengths.arg_max())
        raise FileProblem(
            "file_oversized_line",
            f"{rel}: line {idx + first_line} is {lengths.max():,} bytes, above the "
            f"{MAX_LINE_BYTES:,}-byte limit for one record",
        )


def _refuse_reserved(columns, rel: str) -> None:
    reserved = [c for c in columns if c and c.startswith(INTERNAL)]
    if reserved:
        raise FileProblem(
            "file_unreadable",
            f"{rel}: column name(s) {reserved} use the reserved prefix {INTERNAL!r}; rename them",
        )


def _read_jsonl(text: str, c: Contract, rel: str) -> tuple[pl.DataFrame, list[str]]:
    lines = pl.DataFrame({"line": pl.Series(text.split("\n"), dtype=pl.String)}).with_row_index(
        "row_number", offset=1
    )
    _check_line_lengths(lines.get_column("line").str.len_bytes(), rel, 1)
    lines = lines.with_columns(pl.col("line").str.strip_chars_end("\r")).filter(
        pl.col("line").str.strip_chars() != ""
    )
    con = duckdb.connect()
    try:
        con.register("lines", lines)
        keys = con.sql(sql_text("transforms/jsonl_keys.sql")).pl().get_column("k").to_list()
        names = [col.name for col in c.landing_columns]
        _refuse_reserved(keys, rel)
        extras = [
            k for k in keys if k and k not in names
        ]  # an empty key cannot be addressed; it stays in the raw line
        fields = names + extras
        parsed = con.sql(
            sql_text("transforms/jsonl_fields.sql"),
            params={"paths": ['$."' + n.replace('"', '\\"') + '"' for n in fields]},
        ).pl()
    finally:
        con.close()
    frame = parsed.select(
        pl.col("row_number").cast(pl.Int64).alias("__fleet_row"),
        pl.col("is_valid_json").alias("__fleet_valid"),
        pl.col("json_kind").alias("__fleet_kind"),
        *[pl.col("field_values").list.get(i, null_on_oob=True).alias(n) for i, n in enumerate(fields)],
    ).with_columns(lines.get_column("line").alias("__fleet_raw"))
    return frame, extras


def _read_csv(data: bytes, c: Contract, rel: str) -> tuple[pl.DataFrame, list[str]]:
    text = _decode(data, rel)
    _check_line_lengths(pl.Series(text.split("\n")).str.len_bytes(), rel, 1)
    try:
        frame = pl.read_csv(text.encode(), infer_schema=False)
    except pl.exceptions.PolarsError as exc:
        raise FileProblem("file_unreadable", f"{rel}: not valid CSV ({str(exc).splitlines()[0]})") from exc
    _refuse_reserved(frame.columns, rel)
    dup_header = [n for n in frame.columns if n.endswith("_duplicated_0")]
    if dup_header:
        raise FileProblem("file_unreadable", f"{rel}: the header repeats column(s) {dup_header}")
    names = [col.name for col in c.landing_columns]
    extras = [x for x in frame.columns if x not in names]
    raw = pl.struct(pl.all()).struct.json_encode() if frame.width else pl.lit(None, pl.String)
    # Data row i is line i + 1 (the header is line 1).
    return frame.with_columns(raw.alias("__fleet_raw")).with_row_index("__fleet_row", offset=2).with_columns(
        pl.col("__fleet_row").cast(pl.Int64)
    ), extras


def _read_parquet(data: bytes, c: Contract, rel: str) -> tuple[pl.DataFrame, list[str]]:
    try:
        frame = pl.read_parquet(io.BytesIO(data))
    except Exception as exc:  # pyarrow/polars raise several types for a damaged file
        raise FileProblem(
            "file_unreadable", f"{rel}: not a readable Parquet file ({str(exc).splitlines()[0]})"
        ) from exc
    _refuse_reserved(frame.columns, rel)
    as_text = frame.with_columns(
        [
            (
                pl.col(n).dt.convert_time_zone("UTC")
                if t.time_zone
                else pl.col(n).dt.replace_time_zone("UTC")
            ).dt.to_string(TS_OUT)
            if isinstance(t, pl.Datetime)
            else pl.col(n).cast(pl.String)
            for n, t in frame.schema.items()
        ]
    )
    names = [col.name for col in c.landing_columns]
    extras = [x for x in frame.columns if x not in names]
    raw = pl.struct(pl.all()).struct.json_encode() if as_text.width else pl.lit(None, pl.String)
    return as_text.with_columns(raw.alias("__fleet_raw")).with_row_index(
        "__fleet_row", offset=1
    ).with_columns(pl.col("__fleet_row").cast(pl.Int64)), extras


def read_strings(data: bytes, name: str, rel: str, c: Contract) -> tuple[pl.DataFrame, list[str], str]:
    """A landing file as string columns + ``_row_number`` + ``_raw``; raises FileProblem for whole-file faults."""
    if not data:
        raise FileProblem("file_empty", f"{rel}: the file is empty (0 bytes)")
    fmt, gz = detect_format(name, data[:8])
    if gz:
        try:
            data = gzip.decompress(data)
        except (EOFError, zlib.error) as exc:
            raise FileProblem(
                "file_truncated", f"{rel}: the gzip stream is truncated or damaged ({exc}); deliver it again"
            ) from exc
        except OSError as exc:
            raise FileProblem("file_unreadable", f"{rel}: not a readable gzip file ({exc})") from exc
        if fmt is None:
            fmt, _ = detect_format(name[:-3] if name.endswith(".gz") else name, data[:8])
        if not data:
            raise FileProblem("file_empty", f"{rel}: the file is empty once decompressed")
    if fmt is None:
        raise FileProblem(
            "file_unknown_format", f"{rel}: unknown format; name it .jsonl, .csv or .parquet (optionally .gz)"
        )
    if fmt == "parquet":
        frame, extras = _read_parquet(data, c, rel)
    elif fmt == "jsonl":
        frame, extras = _read_jsonl(_decode(data, rel), c, rel)
    else:
        frame, extras = _read_csv(data, c, rel)
    if frame.height == 0:
        raise FileProblem("file_empty", f"{rel}: no data rows")
    return frame, extras, fmt


def _json_rejects(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split JSONL rows into (objects, rejects) on JSON validity."""
    if "__fleet_valid" not in frame.columns:
        return frame, pl.DataFrame()
    bad_json = ~pl.col("__fleet_valid")
    not_obj = pl.col("__fleet_valid") & (pl.col("__fleet_kind") != "OBJECT")
    rejects = frame.filter(bad_json | not_obj).select(
        "__fleet_file",
        "__fleet_row",
        pl.when(bad_json).then(pl.lit("bad_json")).otherwise(pl.lit("not_an_object")).alias("reason_code"),
        pl.lit(None, pl.String).alias("field"),
        pl.when(bad_json)
        .then(pl.lit("line is not valid JSON (check quotes, commas and brackets)"))
        .otherwise(
            pl.format(
                "line is JSON but not an object ({}); each line must be one record {{...}}",
                pl.col("__fleet_kind").str.to_lowercase(),
            )
        )
        .alias("message"),
        pl.col("__fleet_raw").alias("raw_record"),
    )
    return frame.filter(~(bad_json | not_obj)).drop("__fleet_valid", "__fleet_kind"), rejects


def _typed_json(frame: pl.DataFrame, columns: Iterable[str]) -> pl.Expr:
    cols = [
        pl.col(c).dt.to_string(TS_OUT) if isinstance(frame.schema[c], pl.Datetime) else pl.col(c)
        for c in columns
    ]
    return pl.struct(cols).struct.json_encode()


def _reject(
    frame: pl.DataFrame, mask: pl.Expr, reason: str, field_name: str, message: pl.Expr, columns: list[str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    mask = mask.fill_null(False)  # a null comparison (e.g. a running run has no end) is not a violation
    bad = frame.filter(mask).select(
        "__fleet_file",
        "__fleet_row",
        pl.lit(reason).alias("reason_code"),
        pl.lit(field_name).alias("field"),
        message.alias("message"),
        _typed_json(frame, columns).alias("raw_record"),
    )
    return frame.filter(~mask), bad


def _cross_row_checks(
    runs: pl.DataFrame, samples: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, list[pl.DataFrame]]:
    """Duplicate keys (first delivery wins), samples of unknown runs, samples outside their run's time."""
    rejects = []
    order = ["__fleet_order", "__fleet_row"]
    run_cols = [c.name for c in contract("runs").landing_columns]
    runs = runs.sort(order).with_columns(
        pl.col("__fleet_file").first().over("run_id").alias("__fleet_kept_in")
    )
    runs, bad = _reject(
        runs,
        ~pl.col("run_id").is_first_distinct(),
        "duplicate_key",
        "run_id",
        pl.format(
            "run_id {} was already delivered in {}; the first delivery is kept",
            pl.col("run_id"),
            pl.col("__fleet_kept_in"),
        ),
        run_cols,
    )
    rejects.append(bad)
    runs = runs.drop("__fleet_kept_in")
    sample_cols = [c.name for c in contract("utilisation_samples").landing_columns]
    key = ["run_id", "server_id", "ts"]
    samples = samples.sort(order).with_columns(
        pl.col("__fleet_file").first().over(key).alias("__fleet_kept_in")
    )
    samples, bad = _reject(
        samples,
        ~pl.struct(key).is_first_distinct(),
        "duplicate_key",
        "ts",
        pl.format(
            "sample ({}, {}, {}) was already delivered in {}; the first delivery is kept",
            pl.col("run_id"),
            pl.col("server_id"),
            pl.col("ts").dt.to_string(TS_OUT),
            pl.col("__fleet_kept_in"),
        ),
        sample_cols,
    )
    rejects.append(bad)
    windows = runs.select(
        "run_id",
        pl.col("start_ts").alias("__fleet_start"),
        pl.col("end_ts").alias("__fleet_end"),
        pl.lit(True).alias("__fleet_known"),
    )
    samples = samples.drop("__fleet_kept_in").join(windows, on="run_id", how="left")
    samples, bad = _reject(
        samples,
        pl.col("__fleet_known").is_null(),
        "unknown_run",
        "run_id",
        pl.format("run_id {} has no accepted run record in this day's landing files", pl.col("run_id")),
        sample_cols,
    )
    rejects.append(bad)
    samples, bad = _reject(
        samples,
        (pl.col("ts") < pl.col("__fleet_start")) | (pl.col("ts") > pl.col("__fleet_end")),
        "ts_outside_run",
        "ts",
        pl.format(
            "ts {} is outside its run ({} .. {})",
            pl.col("ts").dt.to_string(TS_OUT),
            pl.col("__fleet_start").dt.to_string(TS_OUT),
            pl.col("__fleet_end").dt.to_string(TS_OUT).fill_null("running"),
        ),
        sample_cols,
    )
    rejects.append(bad)
    return runs, samples.drop("__fleet_start", "__fleet_end", "__fleet_known"), rejects


@dataclass
class _FileOutcome:
    ledger: dict
    file_reject: dict | None = None
    accepted: pl.DataFrame | None = None
    rejected: list[pl.DataFrame] = field(default_factory=list)
    extras: pl.DataFrame | None = None


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve(strict=True).relative_to(root.resolve())
        return True
    except (ValueError, OSError):
        return False


def _ingest_file(
    home: DataHome,
    lf: LandingFile,
    order: int,
    day_date: dt.date,
    ingested_at: dt.datetime,
    allowed: dict,
    seen: dict[str, tuple[str, int]],
) -> _FileOutcome:
    entry = {
        "day": day_date,
        "source": lf.source,
        "source_file": lf.relpath,
        "sha256": "0" * 64,
        "size_bytes": 0,
        "format": None,
        "table_name": table_for(lf.path.name),
        "rows_in": 0,
        "extra_columns": None,
        "ingested_at": ingested_at,
        "_file_quarantined": 0,
    }

    def problem(reason: str, message: str) -> _FileOutcome:
        entry["_file_quarantined"] = entry["rows_in"]
        return _FileOutcome(
            ledger=entry,
            file_reject={
                "day": day_date,
                "source": lf.source,
                "source_file": lf.relpath,
                "row_number": 0,
                "table_name": entry["table_name"],
                "reason_code": reason,
                "field": None,
                "message": message,
                "raw_record": None,
            },
        )

    if not _inside(lf.path, home.landing):
        return problem(
            "file_outside_landing",
            f"{lf.relpath}: is a link to {lf.path.resolve()}, outside the landing folder; "
            "deliver the file itself",
        )
    data = lf.path.read_bytes()
    entry.update(sha256=hashlib.sha256(data).hexdigest(), size_bytes=len(data))
    if entry["table_name"] is None:
        return problem(
            "file_unknown_table",
            f"{lf.relpath}: cannot tell which table this is; name it "
            + " or ".join(t + "[-suffix].<ext>" for t in LANDING_TABLES),
        )
    if entry["sha256"] in seen and data:
        first, rows = seen[entry["sha256"]]
        entry["rows_in"] = rows
        return problem(
            "file_duplicate",
            f"{lf.relpath}: identical to {first} (same sha256); its {rows} rows are taken from there once",
        )
    c = contract(entry["table_name"])
    try:
        return _validate_file(lf, order, c, data, entry, allowed, seen)
    except FileProblem as p:
        return problem(p.reason, p.message)
    except (
        Exception
    ) as exc:  # one producer's odd file must not stop the day: it is quarantined with the error
        first = (str(exc).splitlines() or [""])[0][:200]
        return problem(
            "file_unreadable", f"{lf.relpath}: could not be read as {c.name} ({type(exc).__name__}: {first})"
        )


def _validate_file(
    lf: LandingFile,
    order: int,
    c: Contract,
    data: bytes,
    entry: dict,
    allowed: dict,
    seen: dict[str, tuple[str, int]],
) -> _FileOutcome:
    frame, extras, fmt = read_strings(data, lf.path.name, lf.relpath, c)
    entry.update(format=fmt, rows_in=frame.height, extra_columns=",".join(extras) or None)
    seen[entry["sha256"]] = (lf.relpath, frame.height)
    frame = frame.with_columns(pl.lit(lf.relpath).alias("__fleet_file"), pl.lit(order).alias("__fleet_order"))
    frame, json_bad = _json_rejects(frame)
    out = _FileOutcome(ledger=entry, rejected=[json_bad] if json_bad.height else [])
    v = validate_strings(frame.drop(extras), c, carry=CARRY, allowed=allowed, raw_column="__fleet_raw")
    out.accepted = v.accepted
    out.rejected.append(v.rejected.drop("__fleet_order"))
    if extras:
        kept = frame.filter(pl.any_horizontal(pl.col(extras).is_not_null())).select(
            "__fleet_file", "__fleet_row", pl.struct(extras).struct.json_encode().alias("fields")
        )
        out.extras = kept.join(v.accepted.select("__fleet_row"), on="__fleet_row", how="semi").with_columns(
            pl.lit(c.name).alias("table_name")
        )
    return out


def ingest_day(
    home: DataHome, day: str, platforms: Iterable[str], *, now: dt.datetime | None = None
) -> DayIngest:
    """Read and validate every landing file of ``day``; nothing is written here."""
    ingested_at = now or dt.datetime.now(dt.UTC)
    allowed = {"hardware_catalog": frozenset(platforms)}
    day_date = dt.date.fromisoformat(day)
    seen: dict[str, tuple[str, int]] = {}
    outcomes = [
        _ingest_file(home, lf, order, day_date, ingested_at, allowed, seen)
        for order, lf in enumerate(landing_files(home, day))
    ]

    def stacked(table: str) -> pl.DataFrame:
        c = contract(table)
        parts = [o.accepted for o in outcomes if o.accepted is not None and o.ledger["table_name"] == table]
        empty = (
            c.empty_frame()
            .select([x.name for x in c.landing_columns])
            .with_columns(
                pl.lit(None, pl.String).alias("__fleet_file"),
                pl.lit(None, pl.Int64).alias("__fleet_row"),
                pl.lit(None, pl.Int32).alias("__fleet_order"),
            )
        )
        return pl.concat(parts or [empty], how="vertical_relaxed")

    runs, samples, cross = _cross_row_checks(stacked("runs"), stacked("utilisation_samples"))
    ledger = [o.ledger for o in outcomes]
    rejects = [r for o in outcomes for r in o.rejected if r.height] + [r for r in cross if r.height]
    q_schema = contract("quarantine").polars_schema()
    quarantine = (
        pl.concat(
            [
                r.select("__fleet_file", "__fleet_row", "reason_code", "field", "message", "raw_record")
                for r in rejects
            ],
            how="vertical_relaxed",
        )
        if rejects
        else pl.DataFrame(
            schema={
                "__fleet_file": pl.String,
                "__fleet_row": pl.Int64,
                "reason_code": pl.String,
                "field": pl.String,
                "message": pl.String,
                "raw_record": pl.String,
            }
        )
    )
    files = pl.DataFrame(
        [{k: e[k] for k in ("source_file", "source", "table_name")} for e in ledger],
        schema={"source_file": pl.String, "source": pl.String, "table_name": pl.String},
    )
    quarantine = (
        quarantine.rename({"__fleet_file": "source_file", "__fleet_row": "row_number"})
        .join(files, on="source_file", how="left")
        .with_columns(pl.lit(day_date).alias("day"))
    )
    file_rejects = [o.file_reject for o in outcomes if o.file_reject]
    if file_rejects:
        quarantine = pl.concat(
            [quarantine.select(list(q_schema)), pl.DataFrame(file_rejects, schema=q_schema)],
            how="vertical_relaxed",
        )
    quarantine = (
        contract("quarantine").conform(quarantine.select(list(q_schema))).sort("source_file", "row_number")
    )

    accepted_counts = pl.concat(
        [runs.group_by("__fleet_file").len(), samples.group_by("__fleet_file").len()]
    ).rename({"__fleet_file": "source_file", "len": "rows_accepted"})
    row_q = (
        quarantine.filter(pl.col("row_number") > 0)
        .group_by("source_file")
        .len()
        .rename({"len": "rows_quarantined"})
    )
    ledger_schema = {**contract("ingest_ledger").polars_schema(), "_file_quarantined": pl.Int64}
    base = [c for c in ledger_schema if c not in ("rows_accepted", "rows_quarantined", "file_status")]
    ledger_df = (
        pl.DataFrame(ledger, schema={k: ledger_schema[k] for k in base})
        if ledger
        else pl.DataFrame(schema={k: ledger_schema[k] for k in base})
    )
    ledger_df = (
        ledger_df.join(accepted_counts, on="source_file", how="left")
        .join(row_q, on="source_file", how="left")
        .with_columns(
            pl.col("rows_accepted").fill_null(0).cast(pl.Int64),
            (pl.col("rows_quarantined").fill_null(0) + pl.col("_file_quarantined")).cast(pl.Int64),
        )
        .with_columns(
            pl.when(pl.col("rows_accepted") == 0)
            .then(pl.lit("quarantined"))
            .when(pl.col("rows_quarantined") > 0)
            .then(pl.lit("partial"))
            .otherwise(pl.lit("accepted"))
            .alias("file_status")
        )
    )
    ledger_df = contract("ingest_ledger").conform(ledger_df.sort("source_file"))

    extras = [o.extras for o in outcomes if o.extras is not None]
    extra_df = (
        pl.concat(extras)
        if extras
        else pl.DataFrame(
            schema={
                "__fleet_file": pl.String,
                "__fleet_row": pl.Int64,
                "fields": pl.String,
                "table_name": pl.String,
            }
        )
    )
    # Only rows that were finally accepted (not later quarantined as duplicates, unknown runs, ...).
    kept_rows = pl.concat(
        [runs.select("__fleet_file", "__fleet_row"), samples.select("__fleet_file", "__fleet_row")]
    )
    extra_df = extra_df.join(kept_rows, on=["__fleet_file", "__fleet_row"], how="semi")
    extra_df = extra_df.rename({"__fleet_file": "source_file", "__fleet_row": "row_number"}).with_columns(
        pl.lit(day_date).alias("day")
    )

    runs = runs.with_columns(
        pl.lit(day_date).alias("day"), pl.col("__fleet_file").str.split("/").list.first().alias("source")
    )
    samples = samples.with_columns(pl.lit(day_date).alias("day"))
    return DayIngest(
        runs=contract("runs").conform(runs.sort("run_id")),
        utilisation_samples=contract("utilisation_samples").conform(
            samples.sort("run_id", "server_id", "ts")
        ),
        quarantine=quarantine,
        ingest_ledger=ledger_df,
        extra_fields=contract("extra_fields").conform(extra_df.sort("source_file", "row_number")),
    )


def reconciliation(ledger: pl.DataFrame) -> pl.DataFrame:
    """Ledger rows whose counts do not reconcile (rows_in != accepted + quarantined)."""
    return ledger.filter(pl.col("rows_in") != pl.col("rows_accepted") + pl.col("rows_quarantined"))


@dataclass
class CheckOutcome:
    table: str
    name: str
    passed: bool
    metadata: dict


@dataclass
class PartitionOutcome:
    """What one day's ingest wrote, and the blocking checks that decided whether runs and samples were promoted."""

    day: str
    result: DayIngest
    checks: list[CheckOutcome]
    promoted: bool
    written: dict[str, Path]


def blocking_checks(result: DayIngest) -> list[CheckOutcome]:
    """Reconciliation, contract conformance and key uniqueness, on the frames about to be written."""
    ledger = result.ingest_ledger
    bad = reconciliation(ledger)
    checks = [
        CheckOutcome(
            "ingest_ledger",
            "reconciles",
            bad.height == 0,
            {
                "files": ledger.height,
                "files_not_reconciling": bad.height,
                "rows_in": int(ledger["rows_in"].sum()),
                "rows_accepted": int(ledger["rows_accepted"].sum()),
                "rows_quarantined": int(ledger["rows_quarantined"].sum()),
            },
        )
    ]
    for table in ("runs", "utilisation_samples"):
        frame = result.frames()[table]
        problems = conformance_violations(frame, contract(table))
        dups = key_duplicates(frame, contract(table))
        checks.append(
            CheckOutcome(
                table, "conforms_to_contract", not problems, {"violations": problems, "rows": frame.height}
            )
        )
        checks.append(
            CheckOutcome(
                table,
                "unique_key",
                dups == 0,
                {"duplicated_rows": dups, "key": ", ".join(contract(table).primary_key)},
            )
        )
    return checks


def ingest_partition(home: DataHome, day: str, platforms: Iterable[str]) -> PartitionOutcome:
    """Ingest a day and write it. Ledger, quarantine and extra fields are always written (they explain);
    runs and samples are promoted only if every blocking check passes, else the last good partition stays."""
    result = ingest_day(home, day, platforms)
    checks = blocking_checks(result)
    promote = all(c.passed for c in checks)
    written = {}
    for table, frame in result.frames().items():
        if table in LANDING_TABLES and not promote:
            continue
        written[table] = lake.write_partition(home, table, day, frame)
    return PartitionOutcome(day=day, result=result, checks=checks, promoted=promote, written=written)
