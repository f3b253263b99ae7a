"""A disk that fills up during the night: one clear line (no traceback), exit 1, what was staged removed,
and once there is room again the same night as on a roomy disk.

The data home sits on a small tmpfs mounted for the test (root only; CI runs as root)."""

import os
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

from pipelines.cli import main
from pipelines.lib import lake
from pipelines.lib.paths import DataHome
from tests.e2e.conftest import BIN

pytestmark = pytest.mark.slow
TABLES = ["runs", "utilisation_samples", "quarantine", "ingest_ledger"]


def _fleet(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "fleet"), *args], capture_output=True, text=True, timeout=600, env=os.environ.copy()
    )


def _size_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.fixture
def small_disk(tmp_path: Path):
    """A tmpfs with room for the landing files and little more; remount it with ``size=`` to grow it."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    src = DataHome.resolve(tmp_path / "src")
    main(
        ["synth", "--days", "1", "--start", "2026-11-20", "--runs-per-day", "300", "--format", "parquet"]
        + ["--out", str(src.landing)]
    )
    size = _size_of(src.landing) + 4 * 2**20  # staging the day needs ~10 MB more than this
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)])
    if mounted.returncode:
        pytest.skip("this machine does not allow mounting a tmpfs")
    try:
        shutil.copytree(src.landing, mnt / "home" / "landing")
        yield mnt, src
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _state(home: DataHome) -> dict[str, pl.DataFrame]:
    out = {}
    for t in TABLES:
        frame = lake.read_table(home, t).drop("ingested_at", strict=False)
        out[t] = frame.sort(frame.columns)
    return out


def _said_disk_full(proc: subprocess.CompletedProcess, home: Path) -> None:
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    line = proc.stderr.strip().splitlines()[-1]
    assert f"the disk holding {home} filled up" in line
    assert "No space left on device" in line and "run again" in line


def test_a_full_disk_is_one_clear_line_and_frees_what_it_staged(small_disk):
    mnt, src = small_disk
    home = DataHome.resolve(mnt / "home")

    ingest = _fleet("ingest", "--home", str(home.root))
    _said_disk_full(ingest, home.root)
    assert not any(home.staging.iterdir())
    assert lake.read_table(home, "ingest_ledger").height == 0  # nothing of the day is marked done

    run = _fleet("run", "--home", str(home.root))
    _said_disk_full(run, home.root)
    assert not any(home.staging.iterdir())

    # room again: the night completes and equals the night on a roomy disk
    subprocess.run(["mount", "-o", "remount,size=400m", str(mnt)], check=True)
    again = _fleet("run", "--home", str(home.root))
    assert again.returncode == 0, again.stderr[-2000:]
    assert not any(home.staging.iterdir())
    roomy = _fleet("run", "--home", str(src.root))
    assert roomy.returncode == 0, roomy.stderr[-2000:]
    mine, clean = _state(home), _state(src)
    for t in TABLES:
        assert mine[t].equals(clean[t]), t
    assert mine["runs"].height == 300
