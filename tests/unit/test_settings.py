"""The deployment's settings: flags over the environment over the defaults, bad values named."""

import pytest

from pipelines.lib.settings import Settings, shown


def test_defaults_environment_and_flags_in_that_order(tmp_path):
    s = Settings.resolve(tmp_path, environ={})
    assert (s.executor, s.broker, s.pool_wait_s, s.worker_wait_s, s.ingest.duckdb_memory) == (
        "in_process",
        "",
        600.0,
        600.0,
        "512MB",
    )
    assert s.home.root == tmp_path and s.home.lake_uri == str(tmp_path / "lake")
    assert s.lake_cache_bytes == 8 << 30
    env = {
        "FLEET_HOME": str(tmp_path / "h"),
        "FLEET_LAKE": "s3://bucket/lake",
        "FLEET_EXECUTOR": "celery",
        "FLEET_BROKER": "redis://127.0.0.1:6379/0",
        "FLEET_POOL_WAIT_S": "3",
        "FLEET_WORKER_WAIT_S": "7.5",
        "FLEET_WORKER_SILENCE_S": "20",
        "FLEET_DUCKDB_MEMORY": "2GB",
        "FLEET_LAKE_CACHE_BYTES": "1_000_000",
    }
    s = Settings.resolve(environ=env)
    assert s.home.root == tmp_path / "h" and s.home.lake_uri == "s3://bucket/lake"
    assert (
        s.executor,
        s.broker,
        s.pool_wait_s,
        s.worker_wait_s,
        s.worker_silence_s,
        s.ingest.duckdb_memory,
        s.lake_cache_bytes,
    ) == (
        "celery",
        "redis://127.0.0.1:6379/0",
        3.0,
        7.5,
        20.0,
        "2GB",
        1_000_000,
    )
    s = Settings.resolve(tmp_path, lake=str(tmp_path / "l"), executor="in_process", broker="", environ=env)
    assert s.home.root == tmp_path and s.home.lake_uri == str(tmp_path / "l") and s.executor == "in_process"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FLEET_EXECUTOR": "dask"}, "executor 'dask': expected one of in_process, celery"),
        ({"FLEET_EXECUTOR": "celery"}, "the celery executor needs a broker"),
        (
            {"FLEET_EXECUTOR": "celery", "FLEET_BROKER": "amqp://u:secret@h//"},
            "broker 'amqp://u:***@h//': expected redis://",
        ),
        ({"FLEET_POOL_WAIT_S": "soon"}, "$FLEET_POOL_WAIT_S='soon': expected seconds"),
        ({"FLEET_WORKER_WAIT_S": "0"}, "worker_wait_s 0.0: expected seconds > 0"),
        ({"FLEET_DUCKDB_MEMORY": "lots"}, "duckdb_memory 'lots': expected a size such as 512MB"),
        ({"FLEET_BATCH_ROWS": "10"}, "batch_rows 10: expected a whole number >= 1,000"),
        ({"FLEET_MAX_RECORD_BYTES": "1MB"}, "$FLEET_MAX_RECORD_BYTES='1MB': expected a whole number"),
        ({"FLEET_BATCH_ROWS": "\u00b2"}, "$FLEET_BATCH_ROWS='\u00b2': expected a whole number (0-9"),
        ({"FLEET_BATCH_ROWS": "9" * 20}, f"$FLEET_BATCH_ROWS='{'9' * 20}': expected a whole number (0-9"),
        ({"FLEET_LAKE_CACHE_BYTES": "\u0663"}, "$FLEET_LAKE_CACHE_BYTES='\u0663': expected a whole number"),
        ({"FLEET_LAKE": "gs://b/p"}, "a lake is a local folder or s3://bucket/prefix"),
        (
            {"FLEET_LAKE_CACHE_BYTES": "8GB"},
            "$FLEET_LAKE_CACHE_BYTES='8GB': expected a whole number of bytes",
        ),
    ],
)
def test_a_bad_value_is_named(tmp_path, env, message):
    with pytest.raises(ValueError) as exc:
        Settings.resolve(tmp_path, environ=env)
    assert message in str(exc.value)
    assert "secret" not in str(exc.value)


def test_a_broker_password_is_never_shown():
    assert shown("redis://:pw@h:6379/0") == "redis://:***@h:6379/0"
    assert shown("rediss://user:pw@h/1") == "rediss://user:***@h/1"
    assert shown("redis://h:6379/0") == "redis://h:6379/0"
