"""Results that only change when their inputs do, kept under ``<data home>/cache/<name>/<key>/``.

The nightly fixed cost (the fleet correction's fit) is paid once per change of what it is computed from:
the key is a hash of the lake files a result reads (paths, sizes, modification times) and of the code and
catalogs it runs. What depends only on the installed code (the workload model's report views, the report's
JavaScript bundle) is kept once per user, under ``$XDG_CACHE_HOME/fleet-telemetry/`` (default
``~/.cache``), whatever the data home. Only the newest key of a name is kept. A result is written whole
before it is marked complete, so a killed writer leaves nothing that is read back.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import polars as pl

from pipelines.lib import fileio
from pipelines.lib.paths import PROJECT_ROOT, DataHome
from pipelines.lib.storage import lake

COMPLETE = "complete.json"


def _hash(parts: Iterable[str]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def files_version(paths: Iterable[Path]) -> str:
    """Changes when any of the files is added, removed, rewritten or touched (no file is read)."""
    parts = []
    for p in sorted(paths):
        try:
            st = p.stat()
            parts.append(f"{p}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append(f"{p}:missing")
    return _hash(parts)


def lake_version(home: DataHome, tables: Iterable[str]) -> str:
    """Version of the lake tables a result reads: their current files (every write adds a file of a new
    name; a vacuum, which changes no data, leaves it as it is)."""
    store = lake.store(home)
    return _hash([f for t in tables for f in store.files(t)])


def code_version(*folders: str) -> str:
    """Version of the project's own code and catalogs under ``folders`` (content hashed)."""
    h = hashlib.sha256()
    for folder in folders:
        for p in sorted((PROJECT_ROOT / folder).rglob("*")):
            if p.suffix in (".py", ".yaml", ".sql") and "__pycache__" not in p.parts:
                h.update(str(p.relative_to(PROJECT_ROOT)).encode())
                h.update(p.read_bytes())
    return h.hexdigest()[:24]


def key(*parts: str) -> str:
    return _hash(parts)


def cached_frames(
    home: DataHome, name: str, version: str, compute: Callable[[], dict[str, pl.DataFrame]]
) -> dict[str, pl.DataFrame]:
    """The frames ``compute`` returns, computed once per ``version`` and read back after that."""
    return _frames(home.root / "cache" / name, version, compute)


def cached_object(home: DataHome, name: str, version: str, compute: Callable[[], Any]) -> tuple[Any, bool]:
    """What ``compute`` returns, computed once per ``version`` and read back after that: (value, reused).
    Pickled, so ``version`` must name the library versions the value's classes come from; the file is the
    data home's own, read by no one else."""
    folder = home.root / "cache" / name / version
    done = folder / COMPLETE
    if done.exists():
        with open(folder / "value.pickle", "rb") as fh:
            return pickle.load(fh), True
    value = compute()
    shutil.rmtree(folder.parent, ignore_errors=True)
    fileio.write_bytes(folder / "value.pickle", pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    fileio.write_text(done, json.dumps({"name": name}))
    return value, False


def package_frames(
    name: str, version: str, compute: Callable[[], dict[str, pl.DataFrame]]
) -> dict[str, pl.DataFrame]:
    """``cached_frames`` for what depends only on the installed code (``version``), once per user."""
    return _frames(user_cache_dir() / name, version, compute, best_effort=True)


def package_text(name: str, version: str, compute: Callable[[], str]) -> str:
    """The text ``compute`` returns, computed once per ``version`` (of the package it comes from) for this
    user. An unwritable cache folder only means it is computed again next time."""
    path = user_cache_dir() / name / version / "value.txt"
    if path.exists():
        return path.read_text(encoding="utf-8")
    text = compute()
    try:
        shutil.rmtree(path.parent.parent, ignore_errors=True)
        fileio.write_text(path, text)
    except OSError:
        pass
    return text


def user_cache_dir() -> Path:
    """This user's cache for what depends only on installed packages, shared by every data home."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fleet-telemetry"


def _frames(
    root: Path, version: str, compute: Callable[[], dict[str, pl.DataFrame]], best_effort: bool = False
) -> dict[str, pl.DataFrame]:
    folder = root / version
    done = folder / COMPLETE
    if done.exists():
        names = json.loads(done.read_text(encoding="utf-8"))["frames"]
        return {n: pl.read_parquet(folder / f"{n}.parquet") for n in names}
    frames = compute()
    try:
        shutil.rmtree(root, ignore_errors=True)  # older versions are never read again
        folder.mkdir(parents=True, exist_ok=True)
        for n, frame in frames.items():
            fileio.write_parquet(folder / f"{n}.parquet", frame.to_arrow())
        fileio.write_text(done, json.dumps({"frames": list(frames)}))
    except OSError:
        if not best_effort:
            raise
    return frames
