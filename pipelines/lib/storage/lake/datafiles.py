"""Putting one data file into the lake: a staged file is moved (or copied across filesystems), or uploaded
and then removed or kept as the local copy; a frame is written in place, or written locally first when the
lake keeps local copies."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipelines.lib.storage.lake.copies import LocalCopies


def put(
    data: pa.Table | Path, target: str, fs: pafs.FileSystem, remote: bool, copies: LocalCopies | None
) -> int:
    """Put ``data`` at ``target`` on ``fs`` (the lake's: an object store when ``remote``); its rows."""
    if not isinstance(data, Path) and copies is None:
        with fs.open_output_stream(target) as out:
            pq.write_table(data, out, compression="zstd")
        return data.num_rows
    if not isinstance(data, Path):  # written here first, then uploaded and kept as the local copy
        assert copies is not None
        part = copies.part(f"s3://{target}")
        try:
            pq.write_table(data, part, compression="zstd")
            return put(part, target, fs, remote, copies)
        finally:
            part.unlink(missing_ok=True)
    rows = pq.ParquetFile(data).metadata.num_rows
    if remote:
        pafs.copy_files(
            str(data), target, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs
        )
        if copies is None:
            data.unlink()
        else:
            copies.keep(data, f"s3://{target}")
    else:
        try:
            data.replace(target)
        except OSError as exc:  # the staging area and the lake on different filesystems
            if exc.errno != errno.EXDEV:
                raise
            shutil.copyfile(data, target)
            data.unlink()
    return rows
