"""Days on Celery workers: real `fleet worker` processes on a real Redis broker (with a password), the Dagster
instance in a real PostgreSQL, all on 127.0.0.1. The lake they write equals an in-process night's."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psycopg2
import pytest

from pipelines.cli import main
from pipelines.lib.paths import PROJECT_ROOT, DataHome
from tests.support.cli import BIN, run
from tests.support.lake_state import RUN_ORDER, assert_same_lakes
from tests.support.servers import REDIS_PASSWORD, create_database, free_port, postgres_env

pytestmark = pytest.mark.usefixtures("fleet_cli")  # every test crosses the process boundary
PASSWORD = REDIS_PASSWORD  # must never show in any output
DATABASE = "workers"  # on the session's PostgreSQL server
DAYS = ["2026-11-17", "2026-11-18", "2026-11-19", "2026-11-20"]


@pytest.fixture(scope="module")
def pg(postgres_server):
    create_database(postgres_server, DATABASE)
    return postgres_server


@pytest.fixture(scope="module")
def broker(redis_server):
    return redis_server


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("src") / "landing"
    synth = ["synth", "--days", "4", "--start", DAYS[0], "--runs-per-day", "6", "--seed", "5"]
    assert main([*synth, "--out", str(root)]) == 0  # in-process: the nights below cross the processes
    return root


@pytest.fixture(scope="module")
def reference(landing, tmp_path_factory) -> DataHome:
    """The same landing days run in-process on the default (SQLite) instance."""
    home = _home(landing, tmp_path_factory.mktemp("reference"))
    p = run([str(BIN / "fleet"), "run", "--home", str(home.root)], env={"DAGSTER_HOME": ""})
    assert p.returncode == 0, p.stderr[-3000:]
    return home


def _home(landing: Path, root: Path) -> DataHome:
    home = DataHome.resolve(root / "home")
    shutil.copytree(landing, home.landing)
    return home


def _env(home: DataHome, pg: int, broker: str, **extra: str) -> dict[str, str]:
    dh = home.root / "dagster_home"
    dh.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PROJECT_ROOT / "dagster_home" / "dagster.workers.yaml", dh / "dagster.yaml")
    return {
        "DAGSTER_HOME": str(dh),
        "FLEET_BROKER": broker,
        "DAGSTER_DISABLE_TELEMETRY": "1",
        **postgres_env(pg, DATABASE),
        **extra,
    }


def _start_worker(name: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(BIN / "fleet"), "worker", "--name", name],
            env={**os.environ, **env},
            cwd=PROJECT_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 60
    while "ready." not in log.read_text():
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.2)
    return proc


def _background(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    """``cmd`` started and left running, its output captured as text."""
    return subprocess.Popen(
        cmd,
        env={**os.environ, **env},
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
    proc.wait(timeout=60)


def _sql(pg: int, query: str, *params) -> list[tuple]:
    con = psycopg2.connect(host="127.0.0.1", port=pg, user="dagster", dbname=DATABASE)
    try:
        cur = con.cursor()
        cur.execute(query, params)
        return cur.fetchall()
    except psycopg2.errors.UndefinedTable:
        return []  # the instance's tables are made by the first `fleet` that opens it
    finally:
        con.close()


def _day_runs(pg: int, home: DataHome) -> dict[str, tuple[str, str, str]]:
    """Per day run of this home (not the merge): (day, status, the Celery worker that took it)."""
    rows = _sql(
        pg,
        "SELECT r.run_id, r.status, p.value, coalesce(w.value, '') FROM runs r "
        "JOIN run_tags p ON p.run_id = r.run_id AND p.key = 'dagster/partition' "
        "LEFT JOIN run_tags w ON w.run_id = r.run_id AND w.key = 'fleet/celery_worker' "
        "WHERE r.run_body LIKE %s AND NOT EXISTS "
        "(SELECT 1 FROM run_tags m WHERE m.run_id = r.run_id AND m.key = 'fleet/merge_inputs')",
        f"%{home.root}%",
    )
    return {run_id: (day, status, worker) for run_id, status, day, worker in rows}


def test_two_workers_share_a_four_day_backfill_and_write_the_in_process_lake(
    pg, broker, landing, reference, tmp_path
):
    home = _home(landing, tmp_path)
    env = _env(home, pg, broker)
    workers = [_start_worker(f"w{i}@%h", env, tmp_path / f"w{i}.log") for i in (1, 2)]
    try:
        p = run([str(BIN / "fleet"), "run", "--home", str(home.root), "--executor", "celery"], env=env)
    finally:
        for w in workers:
            _stop(w)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "[4/4]" in p.stdout and "merged analyses" in p.stdout
    runs = _day_runs(pg, home)
    assert sorted(day for day, _, _ in runs.values()) == DAYS
    assert {status for _, status, _ in runs.values()} == {"SUCCESS"}
    # Both workers took days (a worker takes one only when it has a free slot).
    assert {w.split("@")[0] for _, _, w in runs.values()} == {"w1", "w2"}
    assert_same_lakes(home, reference, ignore=RUN_ORDER)
    logs = p.stdout + p.stderr + "".join((tmp_path / f"w{i}.log").read_text() for i in (1, 2))
    assert PASSWORD not in logs
    assert not _sql(pg, "SELECT 1 FROM event_logs WHERE event LIKE %s LIMIT 1", f"%{PASSWORD}%")
    assert not _sql(pg, "SELECT 1 FROM runs WHERE run_body LIKE %s LIMIT 1", f"%{PASSWORD}%")


def test_a_worker_killed_mid_day_then_a_rerun_equals_a_clean_run(pg, broker, landing, reference, tmp_path):
    home = _home(landing, tmp_path)
    env = _env(home, pg, broker, FLEET_WORKER_WAIT_S="10")
    worker = _start_worker("solo@%h", env, tmp_path / "solo.log")
    cmd = [str(BIN / "fleet"), "run", "--home", str(home.root), "--executor", "celery"]
    first = _background(cmd, env)
    try:
        # Kill the worker (its whole process group, SIGKILL) once its day wrote something and is still going.
        deadline = time.monotonic() + 180
        while True:
            assert time.monotonic() < deadline and first.poll() is None, first.communicate()
            started = [r for r, (_, status, _) in _day_runs(pg, home).items() if status == "STARTED"]
            if started and _sql(
                pg,
                "SELECT 1 FROM event_logs WHERE run_id = %s AND dagster_event_type = 'ASSET_MATERIALIZATION'",
                started[0],
            ):
                break
            time.sleep(0.05)
        _stop(worker, signal.SIGKILL)
        out, err = first.communicate(timeout=300)
    finally:
        _stop(worker, signal.SIGKILL)
        if first.poll() is None:
            first.kill()
    # The dead worker's day is failed, the days no worker took are canceled, and the run says both.
    assert first.returncode == 1, out + err
    assert "is gone (killed?)" in out and "no worker took day run(s)" in err, out + err
    statuses = sorted(status for _, status, _ in _day_runs(pg, home).values())
    assert statuses == ["CANCELED", "CANCELED", "CANCELED", "FAILURE"], statuses

    worker = _start_worker("again@%h", env, tmp_path / "again.log")
    try:
        second = run(cmd, env=env)
    finally:
        _stop(worker)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert_same_lakes(home, reference, ignore=RUN_ORDER)
    # The canceled runs' queued tasks reached the new worker too, which left them as they were.
    runs = _day_runs(pg, home).values()
    assert sorted(status for _, status, _ in runs) == ["CANCELED"] * 3 + ["FAILURE"] + ["SUCCESS"] * 4
    assert all(worker == "" for _, status, worker in runs if status == "CANCELED")
    assert (tmp_path / "again.log").read_text().count("] received") == 7  # 3 stale tasks + 4 new days


def test_no_worker_is_a_clear_error_after_the_wait(pg, broker, landing, tmp_path):
    home = _home(landing, tmp_path)
    env = _env(home, pg, broker, FLEET_WORKER_WAIT_S="3")
    p = run(
        [str(BIN / "fleet"), "run", "--home", str(home.root), "--executor", "celery", "--from", DAYS[0]],
        env=env,
    )
    assert p.returncode == 1
    assert (
        f"fleet run: no worker took day run(s) {DAYS[0]}: none answered on broker redis://:***@127.0.0.1:"
        in (p.stderr)
    )
    assert "Traceback" not in p.stderr and PASSWORD not in p.stdout + p.stderr
    assert [status for _, status, _ in _day_runs(pg, home).values()] == ["CANCELED"]
    down = run(
        [str(BIN / "fleet"), "run", "--home", str(home.root), "--executor", "celery", "--from", DAYS[1]],
        env={**env, "FLEET_BROKER": f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0"},
    )
    assert down.returncode == 1 and "does not answer" in down.stderr and "no day was sent" in down.stderr
    assert PASSWORD not in down.stdout + down.stderr and "Traceback" not in down.stderr
    assert [day for day, _, _ in _day_runs(pg, home).values()] == [DAYS[0]]  # no run made for DAYS[1]
    bad = run(
        [str(BIN / "fleet"), "run", "--home", str(home.root), "--executor", "celery"],
        env={**env, "FLEET_BROKER": "amqp://x"},
    )
    assert bad.returncode == 2 and "expected redis://HOST:PORT/DB" in bad.stderr


def test_a_frozen_worker_is_found_by_its_silence(pg, broker, landing, tmp_path):
    """A worker that stops answering (here SIGSTOP: alive to the process table, as a worker on a lost
    machine would be to this one) has its day marked failed after the silence allowed."""
    home = _home(landing, tmp_path)
    env = _env(home, pg, broker, FLEET_WORKER_SILENCE_S="6", FLEET_WORKER_WAIT_S="5")
    worker = _start_worker("frozen@%h", env, tmp_path / "frozen.log")
    cmd = [str(BIN / "fleet"), "run", "--home", str(home.root), "--executor", "celery", "--from", DAYS[0]]
    p = _background(cmd, env)
    try:
        deadline = time.monotonic() + 120
        while not any(status == "STARTED" for _, status, _ in _day_runs(pg, home).values()):
            assert time.monotonic() < deadline and p.poll() is None, p.communicate()
            time.sleep(0.05)
        os.killpg(worker.pid, signal.SIGSTOP)
        out, err = p.communicate(timeout=120)
    finally:
        _stop(worker, signal.SIGKILL)
        if p.poll() is None:
            p.kill()
    assert p.returncode == 1, out + err
    assert "its worker frozen@" in err and "has not answered the broker for" in err, out + err
    assert [status for _, status, _ in _day_runs(pg, home).values()] == ["FAILURE"]


def test_a_task_that_ended_without_its_run_fails_the_day(broker):
    """A day's process lost on another machine (OOM, crash) leaves the Celery task FAILURE and the run
    unfinished: the broker's word marks the run failed, naming what Celery saw."""
    import dagster as dg
    from dagster_celery.tags import DAGSTER_CELERY_TASK_ID_TAG

    from pipelines.workers import _Watch, celery_app

    @dg.op
    def noop() -> None:
        pass

    @dg.job
    def one() -> None:
        noop()

    app = celery_app(broker)
    with dg.DagsterInstance.ephemeral() as instance:
        run = instance.create_run_for_job(one, tags={DAGSTER_CELERY_TASK_ID_TAG: "lost-task-1"})
        app.backend.mark_as_failure("lost-task-1", RuntimeError(f"Worker exited prematurely {PASSWORD}"))
        _Watch(app, broker, silence_s=60).check(instance, [run])
        after = instance.get_run_by_id(run.run_id)
        assert after.status == dg.DagsterRunStatus.FAILURE
        message = next(
            r.message for r in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
        )
        assert "its Celery task ended without it (Worker exited prematurely ***)" in message


def test_a_split_day_is_read_by_both_workers_and_writes_the_in_process_lake(pg, broker, landing, tmp_path):
    # One day whose source delivered its samples in 8 files, split into a slice per file.
    src = tmp_path / "landing"
    shutil.copytree(landing / "synthetic" / DAYS[0], src / "synthetic" / DAYS[0])
    samples = src / "synthetic" / DAYS[0] / "utilisation_samples.jsonl"
    lines = samples.read_bytes().splitlines(keepends=True)
    step = -(-len(lines) // 8)
    for i in range(8):
        (samples.parent / f"utilisation_samples-{i}.jsonl").write_bytes(
            b"".join(lines[i * step : (i + 1) * step])
        )
    samples.unlink()
    reference = _home(src, tmp_path / "reference")
    p = run([str(BIN / "fleet"), "run", "--home", str(reference.root)], env={"DAGSTER_HOME": ""})
    assert p.returncode == 0, p.stderr[-3000:]

    home = _home(src, tmp_path / "split")
    env = _env(home, pg, broker)
    logs = [tmp_path / f"s{i}.log" for i in (1, 2)]
    workers = [_start_worker(f"s{i}@%h", env, log) for i, log in zip((1, 2), logs, strict=True)]
    try:
        p = run(
            [str(BIN / "fleet"), "run", "--home", str(home.root), "--executor", "celery"],
            env={**env, "FLEET_SLICE_BYTES": "1"},
        )
    finally:
        for w in workers:
            _stop(w)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert_same_lakes(home, reference)
    # The day ran on one worker; its slices were steps of its run, which both workers read.
    ((run_id, (_, status, day_worker)),) = _day_runs(pg, home).items()
    assert status == "SUCCESS" and day_worker
    read_by = _slices_read_by(pg, run_id)
    assert len(read_by) == 8 and {who.split("@")[0] for who in read_by} == {"s1", "s2"}, read_by
    steps = {k for (k,) in _sql(pg, "SELECT DISTINCT step_key FROM event_logs WHERE run_id = %s", run_id)}
    assert sum(k.startswith("raw_ingest.read_slice[s00") for k in steps if k) == 8, steps
    assert not list(home.step_outputs.iterdir())  # what the steps handed on went with the run
    assert PASSWORD not in p.stdout + p.stderr + "".join(log.read_text() for log in logs)
    assert not _sql(pg, "SELECT 1 FROM runs WHERE run_body LIKE %s LIMIT 1", f"%{PASSWORD}%")


def _slices_read_by(pg: int, run_id: str) -> list[str]:
    """Who read each slice of the run's day: the samples' ``slices`` metadata, as the run recorded it."""
    (event,) = _sql(
        pg,
        "SELECT event FROM event_logs WHERE run_id = %s AND dagster_event_type = 'ASSET_MATERIALIZATION' "
        "AND asset_key LIKE %s",
        run_id,
        '%"utilisation_samples"%',
    )
    return re.findall(r'read_by\\?": \\?"([^"\\]+)', event[0])
