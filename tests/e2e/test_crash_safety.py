"""Killing ingest with SIGKILL at any point, then running it again, gives exactly one clean run's result."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from pipelines.cli import main
from pipelines.lib.paths import PROJECT_ROOT, DataHome
from pipelines.lib.storage import lake
from tests.support.cli import BIN
from tests.support.deadruns import instance_at

pytestmark = pytest.mark.usefixtures("fleet_cli")  # every test crosses the process boundary
TABLES = ["runs", "utilisation_samples", "quarantine", "ingest_ledger", "extra_fields"]


def _ingest(home: DataHome) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "fleet"), "ingest", "--home", str(home.root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _lake_state(home: DataHome) -> dict[str, pl.DataFrame]:
    out = {}
    for t in TABLES:
        frame = lake.read_table(home, t)
        if "ingested_at" in frame.columns:
            frame = frame.drop("ingested_at")
        out[t] = frame.sort(frame.columns)
    return out


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    src = DataHome.resolve(tmp_path_factory.mktemp("src"))
    main(
        [
            "synth",
            "--days",
            "3",
            "--start",
            "2026-11-20",
            "--runs-per-day",
            "40",
            "--seed",
            "3",
            "--out",
            str(src.landing),
        ]
    )
    bad = src.landing / "acme" / "2026-11-21" / "runs.jsonl"  # some quarantine too
    bad.parent.mkdir(parents=True)
    bad.write_text('{"run_id": "broken"}\nnot json\n')
    return src


def _fresh(landing: DataHome, root) -> DataHome:
    home = DataHome.resolve(root)
    shutil.copytree(landing.landing, home.landing)
    return home


def test_sigkill_at_any_point_then_rerun_equals_one_clean_run(landing, tmp_path):
    clean = _fresh(landing, tmp_path / "clean")
    t0 = time.monotonic()
    p = _ingest(clean)
    assert p.wait(timeout=300) == 0, p.stderr.read().decode()
    duration = time.monotonic() - t0
    reference = _lake_state(clean)
    assert reference["runs"].height == 120 and reference["quarantine"].height == 2

    for i, fraction in enumerate((0.15, 0.35, 0.55, 0.75, 0.9)):
        home = _fresh(landing, tmp_path / f"k{i}")
        proc = _ingest(home)
        time.sleep(duration * fraction)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        # Whatever the kill left behind is whole: every visible partition file is a complete Parquet file.
        for t in TABLES:
            for f in lake.table_files(home, t):
                pl.read_parquet(f)
        rerun = _ingest(home)
        assert rerun.wait(timeout=300) == 0, rerun.stderr.read().decode()
        state = _lake_state(home)
        for t in TABLES:
            assert state[t].equals(reference[t]), f"kill at {fraction:.0%}: {t} differs from a clean run"
        assert not list(home.staging.glob("*")), "the killed run's staging area was left behind"
        assert not list(home.warehouse.glob("*.building*"))


def _children(pid: int) -> dict[int, str]:
    """The live children of ``pid``: their pids and start times."""
    kids = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                kids[int(stat.parent.name)] = fields[19]
    return kids


def _alive(pid: int, started: str) -> bool:
    with contextlib.suppress(OSError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0] != "Z" and fields[19] == started
    return False


def test_a_killed_night_leaves_no_process_behind(landing, tmp_path):
    # SIGKILL of `fleet run --workers 2` while days ran left the day pool's two workers and multiprocessing's
    # resource tracker running (parent 1, about 0.9 GB), blocked forever.
    home = _fresh(landing, tmp_path / "night")
    night = subprocess.Popen(
        [str(BIN / "fleet"), "run", "--home", str(home.root), "--workers", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "DAGSTER_HOME": ""},
    )
    deadline = time.monotonic() + 120
    kids: dict[int, str] = {}
    while len(kids) < 3 and time.monotonic() < deadline:  # the two day workers and the resource tracker
        assert night.poll() is None, "the night ended before its days ran"
        time.sleep(0.2)
        kids = _children(night.pid)
    assert len(kids) >= 3, kids
    night.kill()
    night.wait()
    deadline = time.monotonic() + 15
    while any(_alive(p, s) for p, s in kids.items()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p, s in kids.items() if _alive(p, s)], "left running after the night was killed"


HOLD_DAYS = """
import sys, time
from pipelines.lib.storage import lake
from pipelines.lib.paths import DataHome
store = lake.store(DataHome.resolve(sys.argv[1]))
held = [store.lock(f"day={d}") for d in sys.argv[2:]]
for h in held:
    h.__enter__()
print("held", flush=True)
time.sleep(600)
"""


def test_a_night_stopped_while_its_days_wait_for_a_lock_says_so_and_leaves_nothing_behind(landing, tmp_path):
    # SIGTERM (from `timeout`, a scheduler) of `fleet run --workers 2` while its days waited on the lake's
    # lock of their day ended it without a word (the SIGTERM killed it outright) and left its day pool.
    home = _fresh(landing, tmp_path / "night")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_DAYS, str(home.root), "2026-11-20", "2026-11-21", "2026-11-22"],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        said = tmp_path / "stderr.txt"
        with open(said, "w") as err:
            night = subprocess.Popen(
                [str(BIN / "fleet"), "run", "--home", str(home.root), "--workers", "2"],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={**os.environ, "DAGSTER_HOME": ""},
            )
        deadline = time.monotonic() + 120
        while said.read_text().count("waiting for the lake's lock") < 2:
            assert night.poll() is None and time.monotonic() < deadline, said.read_text()
            time.sleep(0.2)
        kids = _children(night.pid)
        night.send_signal(signal.SIGTERM)
        assert night.wait(timeout=60) == 143
        text = said.read_text()
        assert "fleet run: stopped by a signal (SIGTERM/SIGINT)" in text and "Traceback" not in text, text
        who = f"held by process {holder.pid} on {socket.gethostname()}, since "
        assert f"waiting for the lake's lock 'day=2026-11-20', {who}" in text, text
        deadline = time.monotonic() + 15
        while any(_alive(p, s) for p, s in kids.items()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [p for p, s in kids.items() if _alive(p, s)], "left running after the night was stopped"
        instance = instance_at(home.dagster_home)
        try:  # the days' runs ended as stopped runs do, none left started
            assert not instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
        finally:
            instance.dispose()
    finally:
        holder.kill()
        holder.wait()
