"""Landing-file writers: landing/<source>/<YYYY-MM-DD>/<table>.<ext>, byte-for-byte reproducible."""

from __future__ import annotations

import gzip
import io
import os
from pathlib import Path

import polars as pl

from synthetic_fleet.sampler import DayFleet

FORMATS = ("jsonl", "csv", "parquet")
TS_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def _text_ready(frame: pl.DataFrame) -> pl.DataFrame:
    """Timestamps as ISO-8601 UTC strings, as producers write them."""
    return frame.with_columns([pl.col(c).dt.to_string(TS_FORMAT) for c, t in frame.schema.items() if isinstance(t, pl.Datetime)])


def _encode(frame: pl.DataFrame, fmt: str) -> bytes:
    buf = io.BytesIO()
    if fmt == "jsonl":
        _text_ready(frame).write_ndjson(buf)
    elif fmt == "csv":
        _text_ready(frame).write_csv(buf)
    elif fmt == "parquet":
        frame.write_parquet(buf, compression="zstd", statistics=False)
    else:
        raise ValueError(f"unknown format {fmt!r}; valid: {', '.join(FORMATS)}")
    return buf.getvalue()


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write under a hidden temporary name, then rename: a watcher never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp"
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_day(fleet: DayFleet, landing: Path, *, source: str = "synthetic", fmt: str = "jsonl", gzip_level: int | None = None) -> list[Path]:
    """Write one day's runs and samples as landing files; returns their paths."""
    folder = landing / source / fleet.day
    written = []
    for table, frame in (("runs", fleet.runs), ("utilisation_samples", fleet.samples)):
        data = _encode(frame, fmt)
        name = f"{table}.{fmt}"
        if gzip_level is not None and fmt != "parquet":
            data = gzip.compress(data, compresslevel=gzip_level, mtime=0)  # mtime=0 keeps the bytes reproducible
            name += ".gz"
        path = folder / name
        write_bytes_atomic(path, data)
        written.append(path)
    return written
