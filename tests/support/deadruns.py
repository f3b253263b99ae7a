"""Dagster homes holding runs that `fleet run`s killed with SIGKILL left STARTED."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import dagster as dg
import pytest

from pipelines.cli import main
from pipelines.lib.paths import INSTANCE_TEMPLATE, PROJECT_ROOT
from tests.support.cli import BIN

STARTED = dg.DagsterRunStatus.STARTED


def instance_at(dagster_home: Path) -> dg.DagsterInstance:
    """The instance whose dagster.yaml is in ``dagster_home``, as `fleet` opens it ($DAGSTER_HOME)."""
    before = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    try:
        return dg.DagsterInstance.get()
    finally:
        if before is None:
            del os.environ["DAGSTER_HOME"]
        else:
            os.environ["DAGSTER_HOME"] = before


def kill_fleet_run_midway(home: Path, dagster_home: Path) -> str:
    """Start `fleet run` on ``home``, SIGKILL it once its first run is STARTED; returns that run's id."""
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home), "DAGSTER_DISABLE_TELEMETRY": "1"}
    proc = subprocess.Popen(
        [str(BIN / "fleet"), "run", "--home", str(home)],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    instance = instance_at(dagster_home)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            runs = instance.get_runs(filters=dg.RunsFilter(statuses=[STARTED]))
            if runs:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                return runs[0].run_id
            time.sleep(0.05)
        pytest.fail("`fleet run` never reached a STARTED run")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        instance.dispose()


def instance_and_landing(tmp_path: Path, home_name: str, runs_per_day: int) -> tuple[Path, Path]:
    """A Dagster home made from the instance template, and a data home with one synthetic landing day
    (written in-process: only the runs under test need processes of their own)."""
    dh = tmp_path / "dagster_home"
    dh.mkdir()
    (dh / "dagster.yaml").write_text(INSTANCE_TEMPLATE.read_text())
    home = tmp_path / home_name
    synth = ["synth", "--days", "1", "--start", "2026-11-10", "--runs-per-day", str(runs_per_day), "--out"]
    assert main([*synth, str(home / "landing")]) == 0
    return dh, home


def dead_run_home(tmp_path: Path, runs: int) -> tuple[Path, list[str]]:
    """A Dagster home with ``runs`` runs left STARTED by SIGKILLed `fleet run`s (of their own data home)."""
    dh, other = instance_and_landing(tmp_path, "killed_home", 6)
    return dh, [kill_fleet_run_midway(other, dh) for _ in range(runs)]
