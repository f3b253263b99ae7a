"""Shared fixtures: data homes (empty, landed, materialised once for the session), real servers, processes.

What a fixture costs (a process, a server, a browser, a big input) marks the tests that use it: see
tests/support/tiers.py."""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from pipelines.cli import main
from pipelines.lib.paths import DataHome
from synthetic_fleet.sampler import sample_day
from synthetic_fleet.writers import write_day
from tests.support import cli
from tests.support.bigfiles import big_day
from tests.support.browser import chromium_path
from tests.support.homes import DAY, materialize_all, run_night
from tests.support.hypo import FAST  # noqa: F401  (loads the tier's hypothesis profile)
from tests.support.servers import REDIS_PASSWORD, postgresql, redis, seaweedfs
from workload_model.catalog import load_hardware, load_models

pytest_plugins = ["tests.support.tiers"]

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
def materialized_home(tmp_path_factory, small_day, definitions):
    """The whole asset graph materialised once for ``small_day``: (home, daily result, merged result), for
    every test that only reads it. A test that changes it takes ``materialized_copy``."""
    home = DataHome.resolve(tmp_path_factory.mktemp("materialized") / "home")
    home.root.mkdir(parents=True)
    write_day(small_day, home.landing, source="synthetic", fmt="jsonl")
    instance, daily, merged = materialize_all(home, definitions)
    try:
        yield home, daily, merged
    finally:
        instance.__exit__(None, None, None)


@pytest.fixture(scope="session")
def catalog(materialized_home) -> Path:
    """The analyst catalog (DuckDB file) of the materialised home: open it read-only."""
    return materialized_home[0].catalog_path


@pytest.fixture(scope="session")
def demo_home(tmp_path_factory, fleet_cli):
    """`fleet demo` run once, as a user runs it (the installed command, the data home's own Dagster
    instance): (home, the finished process), for every test that only reads it."""
    root = tmp_path_factory.mktemp("demo") / "home"
    p = fleet_cli(
        [str(cli.BIN / "fleet"), "demo", "--home", str(root), "--days", "2", "--runs-per-day", "15"],
        env={"DAGSTER_HOME": ""},
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return DataHome.resolve(root), p


@pytest.fixture(scope="session")
def night():
    """Runs whole nights in-process (tests.support.homes.run_night); a test that runs nights its own way
    takes it with usefixtures: either way it is marked `pipeline`."""
    return run_night


@pytest.fixture
def materialized_copy(materialized_home, tmp_path) -> DataHome:
    """A copy of the materialised home that a test may change (the catalog's views still name the
    original's lake files: query the copy's lake, not its catalog)."""
    home = DataHome.resolve(tmp_path / "home")
    shutil.copytree(materialized_home[0].root, home.root, symlinks=True)
    return home


@pytest.fixture(scope="session")
def fleet_cli():
    """Runs a command (the installed `fleet`, `dagster`, Python) as a subprocess: a test that needs the
    process boundary takes this fixture, which marks it `subprocess`."""
    return cli.run


@pytest.fixture(scope="session")
def calibrate_answers() -> dict[str, tuple[int, str]]:
    """`fleet calibrate` and `fleet calibrate --json` run once each, in-process (they fit the model: about a
    minute each): {"text": (exit code, stdout), "json": (exit code, stdout)}."""
    answers = {}
    for name, argv in (("text", ["calibrate"]), ("json", ["calibrate", "--json"])):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(argv)
        answers[name] = (code, out.getvalue())
    return answers


@pytest.fixture(scope="session")
def big_input():
    """For a test whose input is sized to cross real batch, block or slice boundaries, or whose computation
    is the sweep it checks: marks it `big`. Returns tests.support.bigfiles.big_day."""
    return big_day


@pytest.fixture(scope="session")
def chromium() -> str:
    path = chromium_path()
    if not path:
        pytest.fail("chromium is not installed: `make test` installs it (Debian package 'chromium')")
    return path


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory):
    """A real S3-compatible server (SeaweedFS) on 127.0.0.1 for the whole session."""
    with seaweedfs(tmp_path_factory.mktemp("seaweedfs")) as store:
        yield store


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server on 127.0.0.1 for the whole session: its port. Each module that uses it makes
    a database of its own (tests.support.servers.create_database)."""
    with postgresql() as port:
        yield port


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """A real Redis server on 127.0.0.1 with a password (REDIS_PASSWORD) for the whole session: its URL."""
    with redis(tmp_path_factory.mktemp("redis"), REDIS_PASSWORD) as url:
        yield url


@pytest.fixture
def s3_lake(s3_store, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh lake prefix in the S3 store, its credentials in the environment the standard AWS way."""
    import uuid

    for name, value in s3_store.env.items():
        monkeypatch.setenv(name, value)
    return f"s3://{s3_store.bucket}/lake-{uuid.uuid4().hex[:12]}"
