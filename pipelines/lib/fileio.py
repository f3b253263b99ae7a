"""Atomic file writes: every file the product publishes appears whole or not at all.

A file is written under a unique hidden temporary name in its target folder, flushed to disk, then renamed
into place. Temporary names are unique per writer, so two writers never delete each other's files; a writer
killed mid-way leaves only a hidden ``.<name>.<id>.tmp`` that ``sweep_temporaries`` removes once nobody can
still be writing it (the caller holds the lock that makes that true).
"""

from __future__ import annotations

import contextlib
import errno
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

TMP_SUFFIX = ".tmp"


def temporary_path(target: Path) -> Path:
    """A hidden, unique sibling of ``target`` to write before renaming."""
    return target.parent / f".{target.name}.{uuid.uuid4().hex}{TMP_SUFFIX}"


def fsync_file(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(tmp: Path, target: Path) -> None:
    """Flush ``tmp`` and rename it onto ``target`` (readers see the old or the new file, never a mix)."""
    fsync_file(tmp)
    os.replace(tmp, target)
    fsync_dir(target.parent)


@contextlib.contextmanager
def atomic_target(target: Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``target``, on error it is removed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(target)
    try:
        yield tmp
        publish(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes(target: Path, data: bytes) -> None:
    """Replace ``target`` with ``data`` atomically."""
    with atomic_target(target) as tmp:
        tmp.write_bytes(data)


def write_text(target: Path, text: str) -> None:
    write_bytes(target, text.encode("utf-8"))


def write_parquet(target: Path, table: pa.Table, *, compression: str = "zstd") -> None:
    """Replace ``target`` with ``table`` as Parquet atomically."""
    with atomic_target(target) as tmp:
        pq.write_table(table, tmp, compression=compression)


def sweep_temporaries(folder: Path, name: str) -> None:
    """Remove temporaries of ``name`` left in ``folder`` by killed writers (only under the writer's lock)."""
    if folder.is_dir():
        for stale in folder.glob(f".{name}.*{TMP_SUFFIX}"):
            stale.unlink(missing_ok=True)


def size_text(n: int) -> str:
    """``n`` bytes in the largest binary unit it fills, to three digits (64 GiB, 1.5 MiB, 512 bytes)."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} bytes"


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the errors behind it (``raise ... from``, or raised while handling), each once."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def engine_error(e: BaseException) -> tuple[str, str]:
    """(package, class) of an error: ("sqlite3", "OperationalError"), ("duckdb", "IOException"), ..."""
    return type(e).__module__.lstrip("_").split(".")[0], type(e).__name__


def full_disk(exc: BaseException) -> BaseException | None:
    """The error in ``exc``'s chain that says a disk (or a quota) is full; None if none does. Such an error
    is the machine's, never a file's fault: it must stop the work, not quarantine a file.

    Only the OS's error number and the storage engines' own I/O errors count, never the text of any error:
    parse errors quote the data (a value reading "No space left on device" must not stop a night)."""
    for e in causes(exc):
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):  # pyarrow's too
            return e
        kind = engine_error(e)
        if kind == ("sqlite3", "OperationalError") and str(e) == "database or disk is full":
            return e
        if kind == ("duckdb", "IOException") and "no space left on device" in str(e).lower():
            return e
    return None
