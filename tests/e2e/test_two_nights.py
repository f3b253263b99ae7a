"""Two nights started together on one data home (cron and an operator): neither fails, and the data home
stays usable. Dagster creates an instance's SQLite databases on first use; two creators at once left two
alembic heads (every later night failed) or inserted the same partition twice."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from pipelines.lib.paths import PROJECT_ROOT, DataHome
from tests.support.cli import BIN, run

DAYS = ["2026-11-20", "2026-11-21"]


@pytest.mark.usefixtures("fleet_cli")
def test_first_nights_at_once_create_one_instance_and_a_later_night_runs(tmp_path, small_day):
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}  # each home's own instance
    for attempt in range(2):  # three processes at once: without the lock, the first attempt failed
        home = tmp_path / f"home{attempt}"
        start_at = time.time() + 4  # every interpreter is up by then
        nights = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.support.instance_setup", str(home), str(start_at), *DAYS],
                cwd=PROJECT_ROOT,
                env=env,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        said = [n.communicate(timeout=300)[1] for n in nights]
        assert [n.returncode for n in nights] == [0] * 3, said
    from synthetic_fleet.writers import write_day

    home = DataHome.resolve(tmp_path / "home1")
    write_day(small_day, home.landing)
    night = run([str(BIN / "fleet"), "run", "--home", str(home.root)], env={"DAGSTER_HOME": ""})
    assert night.returncode == 0 and "Traceback" not in night.stderr, night.stderr[-3000:]


@pytest.mark.usefixtures("fleet_cli")
def test_a_night_on_a_read_only_data_home_is_one_line(tmp_path, small_day):
    # The instance's SQLite databases exist, the data home is then mounted read-only: the night once
    # ended in a 100-line sqlite3.OperationalError.
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a read-only bind mount needs root and mount(8) (CI runs as root)")
    from synthetic_fleet.writers import write_day

    home = DataHome.resolve(tmp_path / "home")
    write_day(small_day, home.landing)
    env = {"DAGSTER_HOME": ""}
    setup = run([sys.executable, "-m", "tests.support.instance_setup", str(home.root), "0", *DAYS], env=env)
    assert setup.returncode == 0, setup.stderr[-2000:]
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "--bind", str(home.root), str(ro)]).returncode:
        pytest.skip("this machine does not allow bind mounts")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        night = run([str(BIN / "fleet"), "run", "--home", str(ro)], env=env)
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=False)
    assert night.returncode == 1 and "Traceback" not in night.stderr
    assert night.stderr.strip().splitlines() == [
        f"fleet run: Read-only file system ({ro}/dagster_home/.fleet-setup.lock)"
    ], night.stderr[-3000:]
