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
from pipelines.lib.paths import DataHome
from pipelines.lib.storage import lake
from tests.support.cli import BIN

pytestmark = pytest.mark.usefixtures("fleet_cli")  # every test crosses the process boundary
TABLES = ["runs", "utilisation_samples", "quarantine", "ingest_ledger"]


def _fleet(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "fleet"), *args], capture_output=True, text=True, timeout=600, env=os.environ.copy()
    )


def _size_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.fixture(params=["parquet", "jsonl.gz"])
def small_disk(request, tmp_path: Path):
    """A day run on a roomy disk, and a tmpfs holding the same landing files with a quarter of that run's
    lake to spare: staging the day (or unpacking its gzip files) fills it. Remount with ``size=`` to grow."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8) (CI runs as root)")
    src = DataHome.resolve(tmp_path / "src")
    fmt = ["--format", "parquet"] if request.param == "parquet" else ["--format", "jsonl", "--gzip"]
    synth = ["synth", "--days", "1", "--start", "2026-11-20", "--runs-per-day", "300", *fmt]
    main([*synth, "--out", str(src.landing)])
    roomy = _fleet("run", "--home", str(src.root))
    assert roomy.returncode == 0, roomy.stderr[-2000:]
    mnt = tmp_path / "disk"
    mnt.mkdir()
    size = _size_of(src.landing) + _size_of(src.root / "lake") // 4
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
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-3000:]
    assert f"the disk holding {home} filled up" in lines[0]
    assert "No space left on device" in lines[0] or "disk is full" in lines[0]
    assert "staged was removed" in lines[0] and lines[0].endswith("run again")


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
    subprocess.run(["mount", "-o", "remount,size=1g", str(mnt)], check=True)
    again = _fleet("run", "--home", str(home.root))
    assert again.returncode == 0, again.stderr[-2000:]
    assert not any(home.staging.iterdir())
    mine, clean = _state(home), _state(src)
    for t in TABLES:
        assert mine[t].equals(clean[t]), t
    assert mine["runs"].height == 300
