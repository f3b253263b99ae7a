"""A full disk is named as such, however deep the error that says so; other errors are left alone."""

import errno
import sqlite3

from pipelines.lib import preflight
from pipelines.lib.preflight import disk_full


class StepError(Exception):
    pass


def test_a_full_disk_is_found_behind_wrappers(tmp_path):
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise StepError('Error occurred while executing op "raw_ingest"') from inner
    except StepError as wrapped:
        line = disk_full(wrapped, tmp_path / "home")  # the home need not exist yet
    assert line is not None
    assert f"the disk holding {tmp_path / 'home'} filled up (now " in line
    assert "OSError: [Errno 28] No space left on device" in line and "run again" in line


def test_sqlite_and_pyarrow_texts_count_too(tmp_path):
    assert disk_full(sqlite3.OperationalError("database or disk is full"), tmp_path)
    assert disk_full(
        OSError("Error writing bytes to file. Detail: [errno 28] No space left on device"), tmp_path
    )
    assert disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"), tmp_path)


def test_other_errors_are_not_a_full_disk_unless_the_disk_is_nearly_full(tmp_path, monkeypatch):
    vague = sqlite3.OperationalError("disk I/O error")
    assert disk_full(vague, tmp_path) is None
    assert disk_full(ValueError("a bug"), tmp_path) is None
    monkeypatch.setattr(preflight, "NEARLY_FULL_BYTES", 2**62)  # as if the disk had less than that left
    assert "OperationalError: disk I/O error" in disk_full(vague, tmp_path)
