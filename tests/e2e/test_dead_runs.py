"""A `fleet run` killed with SIGKILL leaves its Dagster run STARTED; such runs are marked failed (by the
dead-run sensor the daemon ticks, and by the next `fleet run`), so the run queue (limit 2) never blocks."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.instance.ref import InstanceRef
from dagster._core.utils import make_new_run_id

from pipelines.lib.paths import INSTANCE_TEMPLATE, PROJECT_ROOT
from pipelines.runs import WORKER_TAG, fail_dead_runs, this_worker
from tests.e2e.conftest import BIN, run

STARTED = dg.DagsterRunStatus.STARTED


def _instance(dagster_home: Path) -> dg.DagsterInstance:
    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(dagster_home)))


def _started(instance, worker: str | None, status=STARTED) -> str:
    run_id = make_new_run_id()
    instance.add_run(
        dg.DagsterRun(
            job_name="nightly", run_id=run_id, status=status, tags={WORKER_TAG: worker} if worker else {}
        )
    )
    return run_id


def _dead_worker() -> str:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    host, _, rest = this_worker().partition(":")
    return f"{host}:{p.pid}:1"


def test_only_runs_of_dead_processes_are_failed(definitions):
    with dg.instance_for_test() as instance:
        dead = _started(instance, _dead_worker())
        alive = _started(instance, this_worker())
        elsewhere = _started(instance, "another-host:1:1")  # cannot be judged from here
        untagged = _started(instance, None)
        reused_pid = _started(instance, this_worker().rsplit(":", 1)[0] + ":0")  # same pid, other start
        assert sorted(fail_dead_runs(instance)) == sorted([dead, reused_pid])
        status = {r.run_id: r.status for r in instance.get_runs()}
        assert status[dead] == status[reused_pid] == dg.DagsterRunStatus.FAILURE
        assert status[alive] == status[elsewhere] == status[untagged] == STARTED
        # The daemon's sensor does the same on its tick.
        again = _started(instance, _dead_worker())
        with dg.build_sensor_context(instance=instance, definitions=definitions) as ctx:
            tick = definitions.resolve_sensor_def("dead_run_sensor").evaluate_tick(ctx)
        assert "1 dead run(s) marked failed" in tick.skip_message
        assert instance.get_run_by_id(again).status == dg.DagsterRunStatus.FAILURE


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
    instance = _instance(dagster_home)
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


def dead_run_home(tmp_path: Path, runs: int) -> tuple[Path, list[str]]:
    """A Dagster home with ``runs`` runs left STARTED by SIGKILLed `fleet run`s (of their own data home)."""
    dh = tmp_path / "dagster_home"
    dh.mkdir()
    (dh / "dagster.yaml").write_text(INSTANCE_TEMPLATE.read_text())
    other = tmp_path / "killed_home"
    synth = ["synth", "--days", "1", "--start", "2026-11-10", "--runs-per-day", "6", "--out"]
    assert run([str(BIN / "fleet"), *synth, str(other / "landing")]).returncode == 0
    return dh, [kill_fleet_run_midway(other, dh) for _ in range(runs)]


@pytest.mark.slow
def test_a_killed_fleet_run_is_marked_failed_by_the_next_one(tmp_path, landed):
    dh, killed = dead_run_home(tmp_path, 1)
    instance = _instance(dh)
    try:
        assert instance.get_run_by_id(killed[0]).status == STARTED  # left behind by the dead process
        p = run([str(BIN / "fleet"), "run", "--home", str(landed.root)], env={"DAGSTER_HOME": str(dh)})
        assert p.returncode == 0, p.stderr[-2000:]
        assert f"marked 1 run(s) of a killed earlier process failed: {killed[0]}" in p.stdout
        assert instance.get_run_by_id(killed[0]).status == dg.DagsterRunStatus.FAILURE
        assert not instance.get_runs(filters=dg.RunsFilter(statuses=[STARTED]))
    finally:
        instance.dispose()
