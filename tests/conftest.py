"""Shared fixtures: a temporary data home and small synthetic landing days."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from pipelines.lib.paths import DataHome
from synthetic_fleet.catalog import load_hardware, load_models
from synthetic_fleet.sampler import sample_day
from synthetic_fleet.writers import write_day

DAY = "2026-11-20"

os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")
# The per-user cache (the report's JavaScript bundle) starts empty and is shared by this session only.
_USER_CACHE = tempfile.mkdtemp(prefix="fleet-test-cache-")
os.environ["XDG_CACHE_HOME"] = _USER_CACHE
atexit.register(shutil.rmtree, _USER_CACHE, True)
# Scratch space a full run needs at its peak (measured: under 1 GB; a passed test's files are removed).
SCRATCH_PEAK_BYTES = 1 << 30


def pytest_sessionstart(session: pytest.Session) -> None:
    """Say so first when scratch space is short: a disk that runs out mid-run fails tests far from the
    cause (printed even under -q)."""
    where = tempfile.gettempdir()
    free = shutil.disk_usage(where).free
    if free < 2 * SCRATCH_PEAK_BYTES:
        text = (
            f"WARNING: {free / 2**30:.1f} GiB free in {where}; the suite uses about 1 GiB of scratch space "
            "at its peak: tests may fail with 'No space left on device'"
        )
        terminal = session.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            terminal.write_line(text, yellow=True)
        else:
            sys.stderr.write(text + "\n")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DataHome:
    """An empty data home under tmp_path, also exported as $FLEET_HOME."""
    h = DataHome.resolve(tmp_path / "home")
    h.root.mkdir(parents=True)
    monkeypatch.setenv("FLEET_HOME", str(h.root))
    return h


@pytest.fixture(scope="session")
def hw():
    return load_hardware()


@pytest.fixture(scope="session")
def models():
    return load_models()


@pytest.fixture(scope="session")
def small_day(hw, models):
    """One small synthetic day (12 runs), shared read-only."""
    return sample_day(DAY, 12, 11, hw, models)


@pytest.fixture
def landed(home: DataHome, small_day) -> DataHome:
    """A data home with one synthetic day in landing/synthetic/<DAY>/ as JSON Lines."""
    write_day(small_day, home.landing, source="synthetic", fmt="jsonl")
    return home


@pytest.fixture(scope="session")
def definitions():
    """The real code location, loaded once: Dagster keeps a process-global load context that a sensor
    context built over these definitions binds to its (temporary) instance, so reloading later fails."""
    from pipelines.definitions import defs

    return defs()


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory):
    """A real S3-compatible server (SeaweedFS) on 127.0.0.1 for the whole session."""
    from tests.servers import seaweedfs

    with seaweedfs(tmp_path_factory.mktemp("seaweedfs")) as store:
        yield store


@pytest.fixture
def s3_lake(s3_store, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh lake prefix in the S3 store, its credentials in the environment the standard AWS way."""
    import uuid

    for name, value in s3_store.env.items():
        monkeypatch.setenv(name, value)
    return f"s3://{s3_store.bucket}/lake-{uuid.uuid4().hex[:12]}"
