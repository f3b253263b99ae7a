"""The production instance: Dagster storage in a real PostgreSQL server on loopback, running the nightly
job."""

import shutil

import pytest

from pipelines.lib.paths import PROJECT_ROOT
from tests.support.cli import BIN, run
from tests.support.homes import DAY
from tests.support.servers import create_database

pytestmark = pytest.mark.usefixtures("fleet_cli")  # every test crosses the process boundary


@pytest.fixture
def postgres(postgres_server):
    create_database(postgres_server, "instance")
    return postgres_server


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
        "DAGSTER_PG_DB": "instance",
    }
    # `fleet run` makes the day a partition in the PostgreSQL storage, then runs it as a nightly run.
    p = run([str(BIN / "fleet"), "run", "--home", str(landed.root), "--from", DAY], env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    con = psycopg2.connect(host="127.0.0.1", port=postgres, user="dagster", dbname="instance")
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
