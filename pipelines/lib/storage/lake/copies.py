"""Local copies of an object store's data files, which the product's own reads use: DuckDB and polars read
them at disk speed instead of through Python's S3 client. A day the product wrote itself is copied as it is
uploaded; any other file is downloaded once, when first read.

Delta never rewrites a data file (a new version writes new files), so a copy stays right for as long as its
file exists. The copies are kept under a bound by dropping the least recently used ones, except those used
in the last ``CACHE_KEEP_S`` seconds (a scan under way)."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow.fs as pafs

CACHE_KEEP_S = 3600  # a copy used (read or written) this recently stays, whatever the copies' size


class LocalCopies:
    """The copies under ``root``, at most ``max_bytes`` of them (give or take those in use), of files on the
    filesystem ``fs()`` gives."""

    def __init__(self, root: Path, max_bytes: int, fs: Callable[[], pafs.FileSystem]):
        self.root, self.max_bytes, self._fs = root, max_bytes, fs

    def path(self, uri: str) -> Path:
        return self.root / uri.removeprefix("s3://")

    def part(self, uri: str) -> Path:
        """A temporary name beside ``uri``'s copy, to write it under before it is complete."""
        part = self.path(uri).with_suffix(f".{uuid.uuid4().hex[:8]}.part")
        part.parent.mkdir(parents=True, exist_ok=True)
        return part

    def readable(self, uris: list[str]) -> list[str]:
        """The local copies of ``uris``, each fetched if it is not here yet."""
        paths, fetched = [], False
        for uri in uris:
            path = self.path(uri)
            try:
                os.utime(path)  # used now: kept by the pruning for a while
            except FileNotFoundError:
                part = self.part(uri)
                try:
                    pafs.copy_files(
                        uri.removeprefix("s3://"),
                        str(part),
                        source_filesystem=self._fs(),
                        destination_filesystem=pafs.LocalFileSystem(),
                    )
                    part.replace(path)
                finally:
                    part.unlink(missing_ok=True)
                fetched = True
            paths.append(str(path))
        if fetched:
            self.prune()
        return paths

    def keep(self, local: Path, uri: str) -> None:
        """``local`` (just uploaded to ``uri``) becomes the copy of it."""
        path = self.path(uri)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            local.replace(path)
        except OSError:  # on another filesystem than staging, say: the copy is fetched when first read
            local.unlink(missing_ok=True)
            return
        self.prune()

    def prune(self) -> list[Path]:
        """Drop the least recently used copies until they are under ``max_bytes`` (copies used in the last
        ``CACHE_KEEP_S`` seconds stay); the copies dropped."""
        if not self.root.exists():
            return []
        copies = []
        for path in self.root.rglob("*"):
            with contextlib.suppress(FileNotFoundError):  # another process dropped it meanwhile
                st = path.stat()
                if path.is_file():
                    copies.append((st.st_mtime, st.st_size, path))
        total = sum(size for _, size, _ in copies)
        recent = time.time() - CACHE_KEEP_S
        dropped = []
        for mtime, size, path in sorted(copies):
            if total <= self.max_bytes or mtime > recent:
                break
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_mtime > recent:  # a reader took it up since the listing
                    continue
                path.unlink()
                total -= size
                dropped.append(path)
        return dropped
