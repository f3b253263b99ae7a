"""Ingest one landing day: read every file, validate every row against its contract, quarantine the rest.

For each day the partition is rebuilt whole from the day's landing files, so re-running is idempotent
and a corrected file replaces its earlier rows. Every file gets a ledger row whose counts reconcile:
rows_in = rows_accepted + rows_quarantined.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import duckdb
import polars as pl

from pipelines.lib.contracts import Contract, contract, validate_strings
from pipelines.lib.paths import DataHome
from pipelines.lib.sqlfiles import sql_text

LANDING_TABLES = ("runs", "utilisation_samples")
CARRY = ("_source_file", "_row_number", "_raw")
TS_OUT = "%Y-%m-%dT%H:%M:%S%.6fZ"


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

    def frames(self) -> dict[str, pl.DataFrame]:
        return {"runs": self.runs, "utilisation_samples": self.utilisation_samples,
                "quarantine": self.quarantine, "ingest_ledger": self.ingest_ledger}


def landing_files(home: DataHome, day: str) -> list[LandingFile]:
    """Regular, non-hidden files of landing/<source>/<day>/, in delivery order (mtime, then path)."""
    out = []
    if not home.landing.exists():
        return out
    for source_dir in sorted(p for p in home.landing.iterdir() if p.is_dir() and not p.name.startswith(".")):
        day_dir = source_dir / day
        if not day_dir.is_dir():
            continue
        for f in sorted(day_dir.iterdir()):
            if f.name.startswith(".") or not f.is_file():
                continue
            out.append(LandingFile(source=source_dir.name, path=f, relpath=str(f.relative_to(home.landing))))
    return sorted(out, key=lambda lf: (lf.path.stat().st_mtime_ns, lf.relpath))


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
    """(format, gzipped) from the file name, confirmed by content (Parquet magic, gzip magic)."""
    gz = head[:2] == b"\x1f\x8b"
    base = name[:-3] if name.endswith(".gz") else name
    if head[:4] == b"PAR1":
        return "parquet", False
    if base.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl", gz
    if base.endswith((".csv", ".tsv")):
        return "csv", gz
    if base.endswith(".parquet"):
        return "parquet", gz
    return None, gz


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
        raise FileProblem("file_unreadable", f"{rel}: not UTF-8 text (byte {exc.start}: {exc.reason})") from exc


def _read_jsonl(text: str, c: Contract) -> tuple[pl.DataFrame, list[str]]:
    lines = pl.DataFrame({"line": pl.Series(text.split("\n"), dtype=pl.String)}).with_row_index("row_number", offset=1)
    lines = lines.with_columns(pl.col("line").str.strip_chars_end("\r")).filter(pl.col("line").str.strip_chars() != "")
    names = [col.name for col in c.landing_columns]
    paths = ['$."' + n + '"' for n in names]
    con = duckdb.connect()
    try:
        con.register("lines", lines)
        parsed = con.sql(sql_text("transforms/jsonl_fields.sql"), params={"paths": paths}).pl()
    finally:
        con.close()
    keys = parsed.get_column("keys").explode().drop_nulls().unique().sort().to_list()
    extras = [k for k in keys if k not in names]
    frame = parsed.select(
        pl.col("row_number").cast(pl.Int64).alias("_row_number"),
        pl.col("is_valid_json"), pl.col("json_kind"),
        *[pl.col("field_values").list.get(i, null_on_oob=True).alias(n) for i, n in enumerate(names)],
    ).with_columns(lines.get_column("line").alias("_raw"))
    return frame, extras


def _read_csv(text: str, c: Contract) -> tuple[pl.DataFrame, list[str]]:
    try:
        frame = pl.read_csv(text.encode(), infer_schema=False)
    except pl.exceptions.PolarsError as exc:
        raise FileProblem("file_unreadable", f"not valid CSV: {str(exc).splitlines()[0]}") from exc
    names = [col.name for col in c.landing_columns]
    extras = [x for x in frame.columns if x not in names]
    raw = pl.struct(pl.all()).struct.json_encode() if frame.width else pl.lit(None, pl.String)
    return frame.with_columns(raw.alias("_raw")).with_row_index("_row_number", offset=2).with_columns(
        pl.col("_row_number").cast(pl.Int64)), extras


def _read_parquet(data: bytes, c: Contract) -> tuple[pl.DataFrame, list[str]]:
    import io

    try:
        frame = pl.read_parquet(io.BytesIO(data))
    except Exception as exc:  # pyarrow/polars raise several types for a damaged file
        raise FileProblem("file_unreadable", f"not a readable Parquet file: {str(exc).splitlines()[0]}") from exc
    as_text = frame.with_columns([
        (pl.col(n).dt.convert_time_zone("UTC") if t.time_zone else pl.col(n).dt.replace_time_zone("UTC")).dt.to_string(TS_OUT)
        if isinstance(t, pl.Datetime) else pl.col(n).cast(pl.String)
        for n, t in frame.schema.items()
    ])
    names = [col.name for col in c.landing_columns]
    extras = [x for x in frame.columns if x not in names]
    raw = pl.struct(pl.all()).struct.json_encode() if frame.width else pl.lit(None, pl.String)
    return as_text.with_columns(raw.alias("_raw")).with_row_index("_row_number", offset=1).with_columns(
        pl.col("_row_number").cast(pl.Int64)), extras


def read_strings(data: bytes, name: str, rel: str, c: Contract) -> tuple[pl.DataFrame, list[str], str]:
    """A landing file as string columns + ``_row_number`` + ``_raw``; raises FileProblem for whole-file faults."""
    if not data:
        raise FileProblem("file_empty", f"{rel}: the file is empty (0 bytes)")
    fmt, gz = detect_format(name, data[:4])
    if fmt is None:
        raise FileProblem("file_unknown_format", f"{rel}: unknown format; name it .jsonl, .csv or .parquet (optionally .gz)")
    if gz:
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as exc:
            raise FileProblem("file_unreadable", f"{rel}: gzip stream is damaged or truncated ({exc})") from exc
    if fmt == "parquet":
        frame, extras = _read_parquet(data, c)
    else:
        text = _decode(data, rel)
        frame, extras = (_read_jsonl if fmt == "jsonl" else _read_csv)(text, c)
    if frame.height == 0:
        raise FileProblem("file_empty", f"{rel}: no data rows")
    return frame, extras, fmt


def _json_rejects(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split JSONL rows into (objects, rejects) on JSON validity."""
    if "is_valid_json" not in frame.columns:
        return frame, pl.DataFrame()
    bad_json = ~pl.col("is_valid_json")
    not_obj = pl.col("is_valid_json") & (pl.col("json_kind") != "OBJECT")
    rejects = frame.filter(bad_json | not_obj).select(
        "_source_file", "_row_number",
        pl.when(bad_json).then(pl.lit("bad_json")).otherwise(pl.lit("not_an_object")).alias("reason_code"),
        pl.lit(None, pl.String).alias("field"),
        pl.when(bad_json).then(pl.lit("line is not valid JSON"))
        .otherwise(pl.format("line is JSON but not an object ({})", pl.col("json_kind").str.to_lowercase())).alias("message"),
        pl.col("_raw").alias("raw_record"),
    )
    return frame.filter(~(bad_json | not_obj)).drop("is_valid_json", "json_kind"), rejects


def _typed_json(frame: pl.DataFrame, columns: Iterable[str]) -> pl.Expr:
    cols = [pl.col(c).dt.to_string(TS_OUT) if isinstance(frame.schema[c], pl.Datetime) else pl.col(c) for c in columns]
    return pl.struct(cols).struct.json_encode()


def _reject(frame: pl.DataFrame, mask: pl.Expr, reason: str, field: str, message: pl.Expr, columns: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    mask = mask.fill_null(False)  # a null comparison (e.g. a running run has no end) is not a violation
    bad = frame.filter(mask).select(
        "_source_file", "_row_number", pl.lit(reason).alias("reason_code"), pl.lit(field).alias("field"),
        message.alias("message"), _typed_json(frame, columns).alias("raw_record"))
    return frame.filter(~mask), bad


def _cross_row_checks(runs: pl.DataFrame, samples: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, list[pl.DataFrame]]:
    """Duplicate keys (first delivery wins), samples of unknown runs, samples outside their run's time."""
    rejects = []
    order = ["_file_order", "_row_number"]
    runs = runs.sort(order)
    run_cols = contract("runs").landing_columns
    runs = runs.with_columns(pl.col("_source_file").first().over("run_id").alias("_kept_in"))
    runs, bad = _reject(runs, ~pl.col("run_id").is_first_distinct(), "duplicate_key", "run_id",
                        pl.format("run_id {} was already delivered in {}; the first delivery is kept",
                                  pl.col("run_id"), pl.col("_kept_in")),
                        [c.name for c in run_cols])
    runs = runs.drop("_kept_in")
    rejects.append(bad)
    sample_cols = [c.name for c in contract("utilisation_samples").landing_columns]
    samples = samples.sort(order).with_columns(pl.col("_source_file").first().over("run_id", "server_id", "ts").alias("_kept_in"))
    samples, bad = _reject(samples, ~pl.struct("run_id", "server_id", "ts").is_first_distinct(), "duplicate_key", "ts",
                           pl.format("sample ({}, {}, {}) was already delivered in {}; the first delivery is kept",
                                     pl.col("run_id"), pl.col("server_id"), pl.col("ts").dt.to_string(TS_OUT), pl.col("_kept_in")),
                           sample_cols)
    samples = samples.drop("_kept_in")
    rejects.append(bad)
    windows = runs.select("run_id", pl.col("start_ts").alias("_start"), pl.col("end_ts").alias("_end"))
    samples = samples.join(windows, on="run_id", how="left")
    samples, bad = _reject(samples, pl.col("_start").is_null(), "unknown_run", "run_id",
                           pl.format("run_id {} has no accepted run record in this day's landing files", pl.col("run_id")),
                           sample_cols)
    rejects.append(bad)
    samples, bad = _reject(samples, (pl.col("ts") < pl.col("_start")) | (pl.col("ts") > pl.col("_end")), "ts_outside_run", "ts",
                           pl.format("ts {} is outside its run ({} .. {})", pl.col("ts").dt.to_string(TS_OUT),
                                     pl.col("_start").dt.to_string(TS_OUT), pl.col("_end").dt.to_string(TS_OUT)),
                           sample_cols)
    rejects.append(bad)
    return runs, samples.drop("_start", "_end"), rejects


def ingest_day(home: DataHome, day: str, platforms: Iterable[str], *, now: dt.datetime | None = None) -> DayIngest:
    """Read and validate every landing file of ``day``; nothing is written here."""
    ingested_at = now or dt.datetime.now(dt.timezone.utc)
    allowed = {"hardware_catalog": frozenset(platforms)}
    day_date = dt.date.fromisoformat(day)
    accepted: dict[str, list[pl.DataFrame]] = {t: [] for t in LANDING_TABLES}
    rejects: list[pl.DataFrame] = []
    file_rejects: list[dict] = []
    ledger: list[dict] = []
    for order, lf in enumerate(landing_files(home, day)):
        data = lf.path.read_bytes()
        entry = {"day": day_date, "source": lf.source, "source_file": lf.relpath, "sha256": hashlib.sha256(data).hexdigest(),
                 "size_bytes": len(data), "format": None, "table_name": table_for(lf.path.name), "rows_in": 0,
                 "extra_columns": None, "ingested_at": ingested_at, "_order": order}
        try:
            if entry["table_name"] is None:
                raise FileProblem("file_unknown_table",
                                  f"{lf.relpath}: cannot tell which table this is; name it {' or '.join(t + '.<ext>' for t in LANDING_TABLES)}")
            c = contract(entry["table_name"])
            frame, extras, fmt = read_strings(data, lf.path.name, lf.relpath, c)
        except FileProblem as problem:
            file_rejects.append({"day": day_date, "source": lf.source, "source_file": lf.relpath, "row_number": 0,
                                 "table_name": entry["table_name"], "reason_code": problem.reason, "field": None,
                                 "message": problem.message, "raw_record": None})
            ledger.append(entry)
            continue
        entry.update(format=fmt, rows_in=frame.height, extra_columns=",".join(extras) or None)
        ledger.append(entry)
        frame = frame.with_columns(pl.lit(lf.relpath).alias("_source_file"), pl.lit(order).alias("_file_order"))
        frame, json_bad = _json_rejects(frame)
        if json_bad.height:
            rejects.append(json_bad)
        v = validate_strings(frame.drop([x for x in extras if x in frame.columns]), c,
                             carry=("_source_file", "_row_number", "_file_order"), allowed=allowed, raw_column="_raw")
        accepted[c.name].append(v.accepted)
        rejects.append(v.rejected.drop("_file_order"))

    runs_c, samples_c = contract("runs"), contract("utilisation_samples")
    empty = lambda c: c.empty_frame().select([x.name for x in c.landing_columns]).with_columns(  # noqa: E731
        pl.lit(None, pl.String).alias("_source_file"), pl.lit(None, pl.Int64).alias("_row_number"), pl.lit(None, pl.Int32).alias("_file_order"))
    runs = pl.concat(accepted["runs"] or [empty(runs_c)], how="vertical_relaxed")
    samples = pl.concat(accepted["utilisation_samples"] or [empty(samples_c)], how="vertical_relaxed")
    runs, samples, cross = _cross_row_checks(runs, samples)
    rejects.extend(cross)

    sources = pl.DataFrame([{"source_file": e["source_file"], "source": e["source"]} for e in ledger],
                           schema={"source_file": pl.String, "source": pl.String})
    q_schema = contract("quarantine").polars_schema()
    row_rejects = [r.select("_source_file", "_row_number", "reason_code", "field", "message", "raw_record") for r in rejects if r.height]
    quarantine = pl.concat(row_rejects, how="vertical_relaxed") if row_rejects else pl.DataFrame(
        schema={"_source_file": pl.String, "_row_number": pl.Int64, "reason_code": pl.String, "field": pl.String,
                "message": pl.String, "raw_record": pl.String})
    table_of = pl.DataFrame([{"source_file": e["source_file"], "table_name": e["table_name"]} for e in ledger],
                            schema={"source_file": pl.String, "table_name": pl.String})
    quarantine = (quarantine.rename({"_source_file": "source_file", "_row_number": "row_number"})
                  .join(sources, on="source_file", how="left").join(table_of, on="source_file", how="left")
                  .with_columns(pl.lit(day_date).alias("day")))
    if file_rejects:
        quarantine = pl.concat([quarantine, pl.DataFrame(file_rejects, schema=q_schema)], how="diagonal_relaxed")
    quarantine = contract("quarantine").conform(quarantine.select(list(q_schema))).sort("source_file", "row_number")

    counts_acc = pl.concat([runs.group_by("_source_file").len(), samples.group_by("_source_file").len()]).rename(
        {"_source_file": "source_file", "len": "rows_accepted"})
    counts_q = quarantine.filter(pl.col("row_number") > 0).group_by("source_file").len().rename({"len": "rows_quarantined"})
    ledger_df = (pl.DataFrame(ledger).drop("_order") if ledger else contract("ingest_ledger").empty_frame().drop(
        "rows_accepted", "rows_quarantined", "file_status"))
    ledger_df = (ledger_df.join(counts_acc, on="source_file", how="left").join(counts_q, on="source_file", how="left")
                 .with_columns(pl.col("rows_accepted", "rows_quarantined").fill_null(0).cast(pl.Int64),
                               pl.col("rows_in").cast(pl.Int64), pl.col("size_bytes").cast(pl.Int64),
                               pl.col("ingested_at").cast(pl.Datetime("us", "UTC")))
                 .with_columns(pl.when(pl.col("rows_accepted") == 0).then(pl.lit("quarantined"))
                               .when(pl.col("rows_quarantined") > 0).then(pl.lit("partial"))
                               .otherwise(pl.lit("accepted")).alias("file_status")))
    ledger_df = contract("ingest_ledger").conform(ledger_df)

    runs = runs.with_columns(pl.lit(day_date).alias("day"),
                             pl.col("_source_file").str.split("/").list.first().alias("source"))
    samples = samples.with_columns(pl.lit(day_date).alias("day"))
    return DayIngest(
        runs=contract("runs").conform(runs.sort("run_id")),
        utilisation_samples=contract("utilisation_samples").conform(samples.sort("run_id", "server_id", "ts")),
        quarantine=quarantine,
        ingest_ledger=ledger_df,
    )


def reconciliation(ledger: pl.DataFrame) -> pl.DataFrame:
    """Ledger rows whose counts do not reconcile (rows_in != accepted + quarantined)."""
    return ledger.filter(pl.col("rows_in") != pl.col("rows_accepted") + pl.col("rows_quarantined"))
