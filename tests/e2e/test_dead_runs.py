"""A `fleet run` killed with SIGKILL leaves its Dagster run STARTED; such runs are marked failed (by the
dead-run sensor the daemon ticks, and by the next `fleet run`), so the run queue (limit 2) never blocks."""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import dagster as dg
import pytest

from pipelines.lib.paths import PROJECT_ROOT
from pipelines.lib.procs import this_worker
from pipelines.runs import (
    WAREHOUSE_POOL,
    WORKER_TAG,
    fail_dead_runs,
    free_slots_of_finished_runs,
    pool_holders,
)
from tests.support.cli import BIN, run
from tests.support.deadruns import dead_run_home, instance_and_landing, instance_at

STARTED = dg.DagsterRunStatus.STARTED


def _started(instance, worker: str | None, status=STARTED) -> str:
    run_id = str(uuid.uuid4())
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


@pytest.mark.usefixtures("fleet_cli")
def test_a_killed_fleet_run_is_marked_failed_by_the_next_one(tmp_path, landed):
    dh, killed = dead_run_home(tmp_path, 1)
    instance = instance_at(dh)
    try:
        assert instance.get_run_by_id(killed[0]).status == STARTED  # left behind by the dead process
        p = run([str(BIN / "fleet"), "run", "--home", str(landed.root)], env={"DAGSTER_HOME": str(dh)})
        assert p.returncode == 0, p.stderr[-2000:]
        assert f"marked 1 run(s) of a killed earlier process failed: {killed[0]}" in p.stdout
        assert instance.get_run_by_id(killed[0]).status == dg.DagsterRunStatus.FAILURE
        assert not instance.get_runs(filters=dg.RunsFilter(statuses=[STARTED]))
    finally:
        instance.dispose()


# ---------------------------------------------------------------- pool slots held by runs that are over


def _holding(instance, worker: str | None) -> str:
    """A STARTED run of ``worker`` that holds the warehouse pool's slot."""
    run_id = _started(instance, worker)
    instance.event_log_storage.initialize_concurrency_limit_to_default(WAREHOUSE_POOL)
    status = instance.event_log_storage.claim_concurrency_slot(WAREHOUSE_POOL, run_id, "analyst_catalog")
    assert status.slot_status.value == "CLAIMED"
    return run_id


def _live_worker() -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen(["sleep", "600"])
    ticks = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    return p, f"{this_worker().partition(':')[0]}:{p.pid}:{ticks}"


def test_dead_run_recovery_frees_the_pool_slots_it_held(definitions):
    with dg.instance_for_test(overrides={"concurrency": {"pools": {"default_limit": 1}}}) as instance:
        dead = _holding(instance, _dead_worker())
        assert pool_holders(instance, WAREHOUSE_POOL) == [dead]
        assert fail_dead_runs(instance) == [dead]
        assert pool_holders(instance, WAREHOUSE_POOL) is None
        # a run failed some other way (the UI, run monitoring) gives its slot back too
        other = _holding(instance, None)
        instance.report_run_failed(instance.get_run_by_id(other), message="terminated")
        assert free_slots_of_finished_runs(instance) == [other]
        assert pool_holders(instance, WAREHOUSE_POOL) is None
        # and so does the daemon's sensor
        again = _holding(instance, _dead_worker())
        with dg.build_sensor_context(instance=instance, definitions=definitions) as ctx:
            definitions.resolve_sensor_def("dead_run_sensor").evaluate_tick(ctx)
        assert instance.get_run_by_id(again).status == dg.DagsterRunStatus.FAILURE
        assert pool_holders(instance, WAREHOUSE_POOL) is None


def _pool_home(tmp_path: Path) -> tuple[Path, Path]:
    return instance_and_landing(tmp_path, "home", 4)


@pytest.mark.usefixtures("fleet_cli")
def test_a_slot_left_by_a_killed_catalog_writer_does_not_stop_the_next_night(tmp_path):
    dh, home = _pool_home(tmp_path)
    instance = instance_at(dh)
    try:
        held = _holding(instance, _dead_worker())
        p = run([str(BIN / "fleet"), "run", "--home", str(home)], env={"DAGSTER_HOME": str(dh)}, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        assert held in p.stdout  # marked failed, its slot given back
        assert pool_holders(instance, WAREHOUSE_POOL) is None
    finally:
        instance.dispose()


@pytest.mark.usefixtures("fleet_cli")
def test_waiting_for_a_pool_held_by_a_live_run_ends_with_a_clear_message(tmp_path):
    dh, home = _pool_home(tmp_path)
    instance = instance_at(dh)
    holder, worker = _live_worker()
    try:
        held = _holding(instance, worker)
        start = time.monotonic()
        p = run(
            [str(BIN / "fleet"), "run", "--home", str(home)],
            env={"DAGSTER_HOME": str(dh), "FLEET_POOL_WAIT_S": "3"},
            timeout=300,
        )
        assert p.returncode == 1
        assert f"the 'warehouse' pool is still held by run {held} after 3 s" in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
        assert time.monotonic() - start < 120
    finally:
        holder.kill()
        holder.wait()
        instance.dispose()


LOSES_THE_RACE = """
import sys
from pipelines import orchestrate
from pipelines.cli import main
orchestrate.wait_for_pool = lambda *a, **k: None  # the slot is taken after the check: Dagster waits
# --force: nothing changed since the first run, which would otherwise leave the catalog as it is
sys.exit(main(["run", "--home", sys.argv[1], "--force"]))
"""


@pytest.mark.usefixtures("fleet_cli")
@pytest.mark.parametrize("stop", ["timeout", "sigterm"])
def test_a_run_waiting_inside_dagster_for_a_slot_stops_in_bounded_time(tmp_path, stop):
    dh, home = _pool_home(tmp_path)
    assert (
        run([str(BIN / "fleet"), "run", "--home", str(home)], env={"DAGSTER_HOME": str(dh)}).returncode == 0
    )
    instance = instance_at(dh)
    holder, worker = _live_worker()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(dh),
        "DAGSTER_DISABLE_TELEMETRY": "1",
        "FLEET_POOL_WAIT_S": "4" if stop == "timeout" else "600",
    }
    published = sorted((home / "reports").rglob("*")) + [home / "warehouse" / "fleet.duckdb"]
    before = {p: p.stat().st_mtime_ns for p in published}
    try:
        held = _holding(instance, worker)
        proc = subprocess.Popen(
            [sys.executable, "-c", LOSES_THE_RACE, str(home)],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if stop == "sigterm":
            deadline = time.monotonic() + 120
            while not any(
                p.run_id != held and p.assigned_timestamp is None
                for p in instance.event_log_storage.get_concurrency_info(WAREHOUSE_POOL).pending_steps
            ):
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == (1 if stop == "timeout" else 143), err[-3000:]
        assert "Traceback" not in err
        # "nothing was published": the report waits for the catalog, so neither was touched
        assert {p: p.stat().st_mtime_ns for p in published} == before
        if stop == "timeout":
            assert f"waited 4 s for the 'warehouse' pool, held by run {held}" in err
        waiting = [r for r in instance.get_runs() if r.run_id != held and r.status == STARTED]
        assert not waiting  # the waiting run was marked failed, not left STARTED
        assert pool_holders(instance, WAREHOUSE_POOL) == [held]
    finally:
        holder.kill()
        holder.wait()
        instance.dispose()
