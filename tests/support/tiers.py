"""Test tiers by cost, as a pytest plugin (loaded by tests/conftest.py).

A test's cost markers come from the fixtures it uses (directly or through other fixtures), so nobody has to
remember one: request ``fleet_cli`` to start the installed command, ``chromium`` for the browser, a server
fixture for a real server, ``big_input`` for an input sized to cross real batch boundaries. ``slow`` is the
union: ``make test-fast`` runs ``-m 'not slow'``.

Under pytest-xdist (``-n N --dist loadgroup``) every test is put in a group: the server or shared home it uses
(so each server starts once and each home is built once, on one worker), else its module if it uses a
fixture built once per module; any other test goes to whichever process is free.

``--durations-path FILE`` writes each test's time (setup, call and teardown) and tiers as JSON;
``make test-durations`` keeps them in tests/durations.json, which ``python -m tests.support.tiers`` sums.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

# fixture -> the cost marker a test that uses it gets
COST_FIXTURES: dict[str, str] = {
    "fleet_cli": "subprocess",
    "demo_home": "subprocess",
    "chromium": "browser",
    "s3_store": "server",
    "redis_server": "server",
    "postgres_server": "server",
    "prometheus_server": "server",
    "dagster_dev": "server",
    "big_input": "big",
    "calibrate_answers": "fit",
    "materialized_home": "pipeline",
    "night": "pipeline",
    "busy_day": "pipeline",
}
COST_MARKERS: dict[str, str] = {
    "subprocess": "starts a process of its own (the installed `fleet`/`dagster`, a helper, a kill -9)",
    "browser": "renders in headless Chromium",
    "server": "talks to a real server (S3 store, Redis, PostgreSQL, Prometheus, dagster dev)",
    "big": "an input sized to cross real batch boundaries (hundreds of thousands of rows)",
    "pipeline": "runs the pipeline in-process: the asset graph, whole nights, a split day read again",
    "fit": "fits the workload model to every calibration target (`fleet calibrate`)",
}
# session fixture -> the xdist group that keeps its tests on one worker (one server start, one build)
# (a test that uses several goes with the first listed; PostgreSQL and Redis share one group, as the Celery
# tests use both and the PostgreSQL instance test one of them)
SHARED_GROUPS: dict[str, str] = {
    "s3_store": "s3",
    "postgres_server": "postgres-redis",
    "redis_server": "postgres-redis",
    "prometheus_server": "prometheus",
    "demo_home": "demo",
    "materialized_home": "materialized",
    "calibrate_answers": "calibrate",
}
DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"
# Where the workers leave each test's group for the scheduler (pytest 9 ignores the node id suffix that
# xdist's own loadgroup relies on, so the groups travel in a file).
GROUPS_ENV = "FLEET_TEST_GROUPS"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--durations-path",
        default=None,
        help="write each test's seconds (setup + call + teardown) and cost markers to this JSON file",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: any cost marker below (deselected by make test-fast)")
    for name, why in COST_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {why} (added from the fixtures the test uses)")
    if hasattr(config, "workerinput"):
        return
    if config.getoption("durations_path"):
        config.pluginmanager.register(_Recorder(Path(config.getoption("durations_path"))), "fleet-durations")
    if config.getoption("dist", "no") == "loadgroup":  # the workers, started after this, inherit it
        folder = tempfile.mkdtemp(prefix="fleet-test-groups-")
        atexit.register(shutil.rmtree, folder, True)
        os.environ[GROUPS_ENV] = str(Path(folder) / "groups.json")


@pytest.hookimpl(optionalhook=True)  # known only when xdist is loaded (not under -p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getoption("dist") == "loadgroup":
        return GroupScheduling(config, log)
    return None


class GroupScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with this suite's groups as the scopes: a group's tests run on one worker,
    the groups in the order collection left them (the longest first)."""

    def __init__(self, config: pytest.Config, log=None) -> None:
        super().__init__(config, log)
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # read once every worker has collected (and so written it)
            self._groups = json.loads(Path(os.environ[GROUPS_ENV]).read_text())
        return self._groups.get(nodeid) or nodeid


def tiers_of(fixturenames: list[str]) -> list[str]:
    """The cost markers of a test that uses ``fixturenames``."""
    return sorted({COST_FIXTURES[f] for f in fixturenames if f in COST_FIXTURES})


def group_of(item: pytest.Item) -> str | None:
    """The xdist group of ``item``: its shared server or home, else its module if it uses a fixture built
    once per module, else none (the test goes wherever a process is free)."""
    for fixture, group in SHARED_GROUPS.items():
        if fixture in item.fixturenames:
            return group
    info = getattr(item, "_fixtureinfo", None)  # pytest keeps the resolved fixtures there
    scopes = {d.scope for defs in (info.name2fixturedefs.values() if info else ()) for d in defs}
    return item.nodeid.split("::", 1)[0] if scopes & {"module", "class", "package"} else None


@pytest.hookimpl(tryfirst=True)  # the markers must be there before -m deselects by them
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups: dict[str, str] = {}
    for item in items:
        tiers = tiers_of(item.fixturenames)
        for name in tiers:
            item.add_marker(name)
        if tiers:
            item.add_marker("slow")
        groups[item.nodeid] = group_of(item) or item.nodeid
    items[:] = longest_first(items, groups, recorded_seconds())
    if hasattr(config, "workerinput") and os.environ.get(GROUPS_ENV):
        out = Path(os.environ[GROUPS_ENV])
        part = out.with_name(f"{config.workerinput['workerid']}.json")
        part.write_text(json.dumps(groups))
        part.replace(out)  # whole or absent: every worker writes the same


def recorded_seconds(path: Path = DURATIONS) -> dict[str, float]:
    try:
        return {node: row["s"] for node, row in json.loads(path.read_text()).items()}
    except (OSError, ValueError):
        return {}


def longest_first(items: list[pytest.Item], groups: dict[str, str], seconds: dict[str, float]) -> list:
    """``items`` with the groups that took longest last time first (a test not recorded counts 1 s), so the
    processes start on the long poles; a group's tests stay together, in their order."""
    total: dict[str, float] = defaultdict(float)
    for item in items:
        total[groups[item.nodeid]] += seconds.get(item.nodeid, 1.0)
    first = {}
    for i, item in enumerate(items):
        first.setdefault(groups[item.nodeid], i)
    return sorted(items, key=lambda it: (-total[groups[it.nodeid]], first[groups[it.nodeid]]))


def base_nodeid(nodeid: str) -> str:
    """The test's id without the ``@group`` suffix xdist's loadgroup adds."""
    return nodeid.rsplit("@", 1)[0] if "@" in nodeid.rsplit("::", 1)[-1] else nodeid


class _Recorder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.seconds: dict[str, float] = defaultdict(float)
        self.tiers: dict[str, list[str]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = base_nodeid(report.nodeid)
        self.seconds[node] += report.duration
        self.tiers[node] = sorted(k for k in report.keywords if k in COST_MARKERS)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.seconds:
            return
        rows = {
            n: {"s": round(s, 2), "tiers": self.tiers.get(n, [])} for n, s in sorted(self.seconds.items())
        }
        self.path.write_text(json.dumps(rows, indent=1) + "\n")


def summary(rows: dict[str, dict]) -> str:
    """Seconds per tier (a test counts in each tier it has; 'fast' is none) and the slowest tests."""
    per: dict[str, list[float]] = defaultdict(list)
    for row in rows.values():
        for tier in row["tiers"] or ["fast"]:
            per[tier].append(row["s"])
    lines = [f"{len(rows)} tests, {sum(r['s'] for r in rows.values()) / 60:.1f} min in one process"]
    for tier, secs in sorted(per.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"  {tier:<10} {len(secs):4d} tests {sum(secs) / 60:6.1f} min")
    lines.append("slowest:")
    for node, row in sorted(rows.items(), key=lambda kv: -kv[1]["s"])[:25]:
        lines.append(f"  {row['s']:7.1f} s  {','.join(row['tiers']) or 'fast':<20} {node}")
    fast_slow = [n for n, r in rows.items() if not r["tiers"] and r["s"] > 10]
    if fast_slow:
        lines.append("fast tier tests over 10 s (give them the fixture that says why):")
        lines += [f"  {rows[n]['s']:7.1f} s  {n}" for n in fast_slow]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(json.loads(Path(sys.argv[1] if len(sys.argv) > 1 else DURATIONS).read_text())))
