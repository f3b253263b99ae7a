"""Landing-file writers: landing/<source>/<YYYY-MM-DD>/<table>.<ext>, byte-for-byte reproducible; and the
sampler's truth of the waste it made, beside the landing root in truth/<source>/<YYYY-MM-DD>/ (never ingested:
the analysis does not read it, tests compare with it)."""

from __future__ import annotations

import gzip
import io
import queue
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import polars as pl

from pipelines.lib import fileio
from synthetic_fleet.exporters import write_exporters
from synthetic_fleet.sampler import DayFleet, sample_day
from synthetic_fleet.truth import WasteTruth
from workload_model.catalog import HardwareCatalog, ModelSpec

FORMATS = ("jsonl", "csv", "parquet", "openmetrics")  # openmetrics: as the exporters show it (exporters.py)
TRUTH_FILES = {"servers": "waste_truth_servers.parquet", "roles": "waste_truth_roles.parquet"}
TS_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def _text_ready(frame: pl.DataFrame) -> pl.DataFrame:
    """Timestamps as ISO-8601 UTC strings, as producers write them."""
    return frame.with_columns(
        [pl.col(c).dt.to_string(TS_FORMAT) for c, t in frame.schema.items() if isinstance(t, pl.Datetime)]
    )


def _encode(frame: pl.DataFrame, fmt: str) -> bytes:
    buf = io.BytesIO()
    if fmt == "jsonl":
        _text_ready(frame).write_ndjson(buf)
    elif fmt == "csv":
        _text_ready(frame).write_csv(buf)
    else:
        raise ValueError(f"unknown format {fmt!r}; valid: {', '.join(FORMATS)}")
    return buf.getvalue()


def truth_root(landing: Path) -> Path:
    """Where the truth of a landing root goes: truth/ beside it (<data home>/truth for the data home)."""
    return landing.parent / "truth"


def write_truth(truth: WasteTruth, folder: Path) -> list[Path]:
    """One day's truth as Parquet files in ``folder``."""
    written = []
    for key, name in TRUTH_FILES.items():
        path = folder / name
        with fileio.atomic_target(path) as tmp:
            getattr(truth, key).write_parquet(tmp, compression="zstd", statistics=False)
        written.append(path)
    return written


def read_truth(folder: Path) -> WasteTruth:
    """A day's truth as ``write_truth`` wrote it."""
    return WasteTruth(**{key: pl.read_parquet(folder / name) for key, name in TRUTH_FILES.items()})


def write_day(
    fleet: DayFleet,
    landing: Path,
    *,
    source: str = "synthetic",
    fmt: str = "jsonl",
    gzip_level: int | None = None,
    hw: HardwareCatalog | None = None,
) -> list[Path]:
    """Write one day's runs and samples as landing files (``openmetrics``: the exporters' scrapes, which need
    the hardware catalog ``hw``), and its truth (if drawn) beside the landing root; returns the landing
    files' paths."""
    folder = landing / source / fleet.day
    if fleet.truth is not None:
        write_truth(fleet.truth, truth_root(landing) / source / fleet.day)
    if fmt == "openmetrics":
        if hw is None:
            raise ValueError("openmetrics landing files need the hardware catalog (hw)")
        return write_exporters(fleet, landing, hw, source)
    written = []
    for table, frame in (("runs", fleet.runs), ("utilisation_samples", fleet.samples)):
        name = f"{table}.{fmt}"
        if fmt == "parquet":  # straight to the file: no in-memory copy of the encoded day
            path = folder / name
            with fileio.atomic_target(path) as tmp:  # a watcher never sees half a file
                frame.write_parquet(tmp, compression="zstd", statistics=False)
            written.append(path)
            continue
        data = _encode(frame, fmt)
        if gzip_level is not None and fmt != "parquet":
            data = gzip.compress(
                data, compresslevel=gzip_level, mtime=0
            )  # mtime=0 keeps the bytes reproducible
            name += ".gz"
        path = folder / name
        fileio.write_bytes(path, data)
        written.append(path)
    return written


def write_fleet(
    days: Iterable[str],
    runs_per_day: int,
    seed: int,
    hw: HardwareCatalog,
    models: dict[str, ModelSpec],
    landing: Path,
    *,
    source: str = "synthetic",
    fmt: str = "jsonl",
    gzip_level: int | None = None,
    on_day: Callable[[DayFleet, list[Path]], None] | None = None,
    truth: bool = False,
) -> None:
    """Generate day after day while a writer thread writes the previous day (encoding and I/O release the
    GIL), so generation overlaps with writing; at most two days are in memory at once. With ``truth``, each
    day's truth is written beside the landing root too."""
    handoff: queue.Queue = queue.Queue(maxsize=1)
    failure: list[BaseException] = []

    def writer() -> None:
        while (fleet := handoff.get()) is not None:
            try:
                paths = write_day(fleet, landing, source=source, fmt=fmt, gzip_level=gzip_level, hw=hw)
                if on_day:
                    on_day(fleet, paths)
            except BaseException as exc:  # surfaced in the caller's thread below
                failure.append(exc)

    thread = threading.Thread(target=writer, name="fleet-writer", daemon=True)
    thread.start()
    try:
        for day in days:
            if failure:
                break
            handoff.put(sample_day(day, runs_per_day, seed, hw, models, truth=truth))
    finally:
        handoff.put(None)
        thread.join()
    if failure:
        raise failure[0]
