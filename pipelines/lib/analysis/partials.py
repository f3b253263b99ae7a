"""Per-part aggregates of a day's samples, kept for the day's analyses.

A part is one Parquet file of the day's samples (a split day publishes one per slice). Each staged
samples file carries a fresh id in its Parquet metadata (``PART_ID_KEY``), written once and never
rewritten: a file the merge rewrites (rows dropped) is a new file with a new id. A slice computes its
part's aggregates where it runs (on any worker) and leaves them here under that id, with a digest of the
SQL, its parameters and the runs it joined; the day's analyses take them instead of scanning the part
again. Nothing depends on an entry being there: a missing or stale one is computed again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

PART_ID_KEY = b"fleet.part_id"
RUN_SYSTEM = ["run_id", "model_name", "platform", "placement"]  # what a part's histograms join


def new_part_id() -> str:
    """A fresh id for a file about to be written."""
    return uuid.uuid4().hex


def part_id(path: str | Path) -> str | None:
    """The id a staged samples file was written with (None: a file written otherwise, or unreadable)."""
    try:
        meta = pq.read_metadata(path).metadata or {}
    except (OSError, ValueError):
        return None
    raw = meta.get(PART_ID_KEY)
    return raw.decode() if raw else None


def runs_digest(runs: pl.DataFrame) -> str:
    """A digest of the runs' systems, whatever their column types or row order."""
    canon = runs.select(pl.col(c).cast(pl.String) for c in RUN_SYSTEM).unique()
    canon = canon.sort(RUN_SYSTEM, nulls_last=True)
    return hashlib.blake2b(canon.write_csv().encode(), digest_size=16).hexdigest()


def partial_digest(sql: str, params: dict, runs: str | None = None) -> str:
    """What a part's aggregate depends on besides the part: its SQL, parameters and (histograms) runs."""
    text = json.dumps({"sql": sql, "params": params, "runs": runs}, sort_keys=True)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


class PartialCache:
    """One day's per-part aggregates under ``root/day=<day>/<part id>/<name>.<digest>.parquet``."""

    def __init__(self, root: Path, day: str):
        self.folder = root / f"day={day}"
        self.hits = 0

    def _path(self, pid: str, name: str, digest: str) -> Path:
        return self.folder / pid / f"{name}.{digest}.parquet"

    def get(self, pid: str, name: str, digest: str) -> pl.DataFrame | None:
        """The stored aggregate, or None."""
        path = self._path(pid, name, digest)
        try:
            frame = pl.read_parquet(path)
        except (OSError, pl.exceptions.PolarsError):
            return None
        self.hits += 1
        return frame

    def put(self, pid: str, name: str, digest: str, frame: pl.DataFrame) -> None:
        """Store an aggregate (written aside, then renamed: a reader sees all of it or nothing)."""
        path = self._path(pid, name, digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{uuid.uuid4().hex[:8]}.tmp")
        frame.write_parquet(tmp)
        tmp.replace(path)

    def prune(self, keep: set[str]) -> None:
        """Remove the entries of parts the day no longer holds (it was replaced)."""
        if not self.folder.is_dir():
            return
        for entry in self.folder.iterdir():
            if entry.name not in keep:
                shutil.rmtree(entry, ignore_errors=True)
