"""The production instance: Dagster storage in a real PostgreSQL server on loopback, running the nightly
job."""

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from pipelines.lib.paths import PROJECT_ROOT
from tests.conftest import DAY
from tests.e2e.conftest import BIN, run

pytestmark = pytest.mark.slow


def _pg_bin() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return (
        os.path.dirname(found[-1])
        if found
        else (os.path.dirname(shutil.which("initdb")) if shutil.which("initdb") else None)
    )


def _as_postgres(cmd: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root; CI runs as root.
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@pytest.fixture
def postgres():
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip(
            "PostgreSQL server binaries not found (Debian package 'postgresql', installed by `make test`)"
        )
    # Outside pytest's tmp tree: its parents are private to root, and the server runs as 'postgres'.
    root = Path(tempfile.mkdtemp(prefix="fleet-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data = root / "data"
    init = subprocess.run(
        _as_postgres([f"{bindir}/initdb", "-D", str(data), "-U", "dagster", "--auth=trust", "-E", "UTF8"]),
        capture_output=True,
        text=True,
    )
    assert init.returncode == 0, init.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pg_ctl = [f"{bindir}/pg_ctl", "-D", str(data), "-w"]
    started = subprocess.run(
        _as_postgres(pg_ctl + ["-o", f"-h 127.0.0.1 -p {port} -k {root}", "-l", str(root / "log"), "start"]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        made = subprocess.run(
            [f"{bindir}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "dagster", "dagster"],
            capture_output=True,
            text=True,
        )
        assert made.returncode == 0, made.stderr
        yield port
    finally:
        subprocess.run(_as_postgres(pg_ctl + ["-m", "fast", "stop"]), capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


def test_nightly_job_runs_against_postgres_storage(postgres, landed, tmp_path):
    import psycopg2

    dh = tmp_path / "dagster_home"
    dh.mkdir()
    shutil.copyfile(PROJECT_ROOT / "dagster_home" / "dagster.postgres.yaml", dh / "dagster.yaml")
    env = {
        "DAGSTER_HOME": str(dh),
        "FLEET_HOME": str(landed.root),
        "DAGSTER_PG_HOST": "127.0.0.1",
        "DAGSTER_PG_PORT": str(postgres),
        "DAGSTER_PG_USER": "dagster",
        "DAGSTER_PG_PASSWORD": "",
        "DAGSTER_PG_DB": "dagster",
    }
    # `fleet run` makes the day a partition in the PostgreSQL storage, then runs it as a nightly run.
    p = run([str(BIN / "fleet"), "run", "--home", str(landed.root), "--from", DAY], env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    con = psycopg2.connect(host="127.0.0.1", port=postgres, user="dagster", dbname="dagster")
    try:
        cur = con.cursor()
        cur.execute("SELECT status FROM runs WHERE pipeline_name = 'nightly'")
        assert [r[0] for r in cur.fetchall()] == ["SUCCESS", "SUCCESS"]  # the day, then the merge
        cur.execute("SELECT partitions_def_name, partition FROM dynamic_partitions")
        assert cur.fetchall() == [("landing_days", DAY)]
        cur.execute("SELECT count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'")
        assert cur.fetchone()[0] >= 13
    finally:
        con.close()
    assert not (dh / "history").exists()  # nothing went to SQLite
    assert landed.catalog_path.exists()
