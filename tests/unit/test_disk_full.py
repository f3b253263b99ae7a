"""A full disk is named as such, however deep the error that says so; other errors are left alone."""

import errno
import sqlite3

import duckdb
import pyarrow as pa

from pipelines.lib.fileio import full_disk
from pipelines.lib.operations import preflight
from pipelines.lib.operations.preflight import disk_full


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


def test_the_storage_engines_own_errors_count_too(tmp_path):
    assert disk_full(sqlite3.OperationalError("database or disk is full"), tmp_path)
    assert disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"), tmp_path)
    con = duckdb.connect()
    try:
        con.execute("select 1 where error('IO Error: could not write: No space left on device')")
    except duckdb.Error as exc:  # duckdb's error() raises an InvalidInputException: not its I/O error
        assert disk_full(exc, tmp_path) is None
    assert disk_full(duckdb.IOException('Could not write file "x": No space left on device'), tmp_path)


def test_data_quoted_in_an_error_is_never_taken_for_a_full_disk(tmp_path):
    # parse errors quote values: a producer's "No space left on device" must not stop the night
    assert full_disk(ValueError("could not parse 'No space left on device' as f64")) is None
    assert (
        full_disk(pa.ArrowInvalid("CSV parse error: Expected 11 columns, got 1: No space left on device"))
        is None
    )
    assert full_disk(sqlite3.OperationalError("no such table: No space left on device")) is None
    assert full_disk(OSError("Error writing: No space left on device")) is None  # no errno: not the OS's


def test_other_errors_are_not_a_full_disk_unless_the_disk_is_nearly_full(tmp_path, monkeypatch):
    vague = sqlite3.OperationalError("disk I/O error")
    assert disk_full(vague, tmp_path) is None
    assert disk_full(ValueError("a bug"), tmp_path) is None
    monkeypatch.setattr(preflight, "NEARLY_FULL_BYTES", 2**62)  # as if the disk had less than that left
    assert "OperationalError: disk I/O error" in disk_full(vague, tmp_path)
    assert disk_full(ValueError("a bug"), tmp_path) is None  # a bug keeps its traceback, full disk or not
    assert disk_full(ConnectionRefusedError(111, "refused"), tmp_path) is None


def test_the_disk_named_is_the_one_that_filled_and_the_caller_says_what_stays(tmp_path):
    elsewhere = tmp_path / "elsewhere" / "out.parquet"
    line = disk_full(OSError(errno.ENOSPC, "No space left on device", str(elsewhere)), tmp_path / "home")
    assert line.startswith(f"the disk holding {elsewhere} filled up")
    assert line.endswith(". free some space and run again") and "staged" not in line
    said = disk_full(OSError(errno.ENOSPC, "No space left on device"), tmp_path, "the lake stays")
    assert said.endswith("the lake stays; free some space and run again")


def test_a_home_that_cannot_be_searched_does_not_turn_the_message_into_a_traceback(tmp_path, monkeypatch):
    def denied(path):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(preflight.shutil, "disk_usage", denied)
    line = disk_full(OSError(errno.ENOSPC, "No space left on device"), tmp_path / "a" / "b")
    assert line.startswith(f"the disk holding {tmp_path / 'a' / 'b'} filled up: ")
