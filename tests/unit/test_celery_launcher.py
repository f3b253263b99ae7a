"""Where a night's days go is the Dagster instance's word: `fleet run --executor celery` launches them with
the instance's run launcher, and refuses, in one line naming the instance and the fix, an instance that
would not send them to the workers of the broker named."""

import dagster as dg
import pytest

from pipelines.workers import LauncherMismatch, check_launcher

BROKER = "redis://:pw@127.0.0.1:1/0"  # nothing listens: no connection is made


def _celery(broker) -> dict:
    return {
        "run_launcher": {
            "module": "dagster_celery.launcher",
            "class": "CeleryRunLauncher",
            "config": {"broker": broker, "backend": broker, "default_queue": "dagster"},
        }
    }


def test_an_instance_with_the_celery_launcher_on_the_broker_is_taken():
    with dg.instance_for_test(overrides=_celery(BROKER)) as instance:
        check_launcher(instance, BROKER)


def test_the_default_launcher_is_refused_naming_the_workers_instance_file():
    with dg.instance_for_test() as instance, pytest.raises(LauncherMismatch) as err:
        check_launcher(instance, BROKER)
    assert "launches runs with DefaultRunLauncher, not on workers" in str(err.value)
    assert "dagster_home/dagster.workers.yaml" in str(err.value)


def test_another_broker_is_refused_without_either_password():
    other = _celery("redis://:other@10.0.0.9:6379/0")
    with dg.instance_for_test(overrides=other) as instance, pytest.raises(LauncherMismatch) as err:
        check_launcher(instance, BROKER)
    text = str(err.value)
    assert "sends runs to the broker redis://:***@10.0.0.9:6379/0, not to redis://:***@127.0.0.1:1/0" in text
    assert "pw" not in text.replace("password", "") and "other" not in text


def test_a_launcher_whose_broker_variable_is_unset_says_so(monkeypatch):
    monkeypatch.delenv("FLEET_BROKER_UNSET_HERE", raising=False)
    unset = _celery({"env": "FLEET_BROKER_UNSET_HERE"})
    with dg.instance_for_test(overrides=unset) as instance, pytest.raises(LauncherMismatch) as err:
        check_launcher(instance, BROKER)
    assert "does not load" in str(err.value) and "set $FLEET_BROKER" in str(err.value)
