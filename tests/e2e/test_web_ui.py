"""The real web UI: `dagster dev` on a free loopback port, queried over GraphQL, stopped cleanly by its
pid."""

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from pipelines.lib.paths import PROJECT_ROOT
from tests.support.cli import BIN
from tests.support.deadruns import dead_run_home
from tests.support.homes import DAY

pytestmark = pytest.mark.usefixtures("fleet_cli")  # every test crosses the process boundary
LOCATION = "fleet_telemetry"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(port: int, query: str) -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        body = json.loads(resp.read())
    assert "errors" not in body, body
    return body["data"]


@pytest.fixture
def dagster_dev(landed, tmp_path):
    # The instance starts with both slots of the run queue (limit 2) held by runs that SIGKILLed
    # `fleet run`s left STARTED: the daemon must recover the queue by itself.
    dh, killed = dead_run_home(tmp_path, 2)
    # The landed day's samples in two files, each a slice: the day is read as steps of its run.
    samples = landed.landing / "synthetic" / DAY / "utilisation_samples.jsonl"
    lines = samples.read_bytes().splitlines(keepends=True)
    for k, part in enumerate((lines[: len(lines) // 2], lines[len(lines) // 2 :])):
        (samples.parent / f"utilisation_samples-{k}.jsonl").write_bytes(b"".join(part))
    samples.unlink()
    port = _free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(dh),
        "FLEET_HOME": str(landed.root),
        "FLEET_SLICE_BYTES": "1",
        "DAGSTER_DISABLE_TELEMETRY": "1",
    }
    log = open(tmp_path / "dagster_dev.log", "w")  # noqa: SIM115 - open while the server runs, closed below
    # Reset SIGINT/SIGTERM: started from a shell without job control they are ignored, and dagster dev
    # would then ignore SIGTERM as well and never stop.
    proc = subprocess.Popen(
        [str(BIN / "dagster"), "dev", "-h", "127.0.0.1", "-p", str(port)],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: (
            signal.signal(signal.SIGINT, signal.SIG_DFL),
            signal.signal(signal.SIGTERM, signal.SIG_DFL),
        ),
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, (tmp_path / "dagster_dev.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "dagster dev did not answer /server_info within 120 s"
            time.sleep(0.5)
        yield port, proc, landed, killed
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def test_ui_serves_graph_schedule_and_sensor_and_sensor_launches_one_run(dagster_dev):
    port, proc, home, killed = dagster_dev
    selector = f'{{repositoryName: "__repository__", repositoryLocationName: "{LOCATION}"}}'
    nodes = _graphql(port, "{ assetNodes { assetKey { path } groupName isPartitioned } }")["assetNodes"]
    keys = {"/".join(n["assetKey"]["path"]): n for n in nodes}
    for table in (
        "runs",
        "utilisation_samples",
        "run_role_stats",
        "util_distribution",
        "trainer_vs_ps",
        "recommendations",
        "analyst_catalog",
        "fleet_report",
    ):
        assert table in keys
    assert keys["runs"]["isPartitioned"] and keys["runs"]["groupName"] == "raw"
    schedules = _graphql(
        port,
        f"{{ schedulesOrError(repositorySelector: {selector}) {{ ... on Schedules {{ results "
        "{ name cronSchedule scheduleState { status } } } } }",
    )
    assert {
        (s["name"], s["cronSchedule"], s["scheduleState"]["status"])
        for s in schedules["schedulesOrError"]["results"]
    } == {("nightly_schedule", "0 2 * * *", "RUNNING")}
    sensors = _graphql(
        port,
        f"{{ sensorsOrError(repositorySelector: {selector}) {{ ... on Sensors {{ results "
        "{ name sensorState { status } } } } }",
    )
    assert {(s["name"], s["sensorState"]["status"]) for s in sensors["sensorsOrError"]["results"]} == {
        ("landing_sensor", "RUNNING"),
        ("dead_run_sensor", "RUNNING"),
        ("nightly_failure_alert", "RUNNING"),
        ("nightly_check_alert", "RUNNING"),
    }

    # The daemon ticks the sensor: the landed day gets exactly one run, and it succeeds.
    query = (
        '{ runsOrError(filter: {tags: [{key: "fleet/trigger", value: "landing_sensor"}]}) '
        "{ ... on Runs { results { runId status tags { key value } } } } }"
    )
    deadline, runs = time.monotonic() + 240, []
    while time.monotonic() < deadline:
        runs = _graphql(port, query)["runsOrError"]["results"]
        if runs and all(r["status"] in ("SUCCESS", "FAILURE", "CANCELED") for r in runs):
            break
        time.sleep(2)
    assert len(runs) == 1, runs
    statuses = _graphql(port, "{ runsOrError { ... on Runs { results { runId status jobName } } } }")
    by_id = {r["runId"]: r for r in statuses["runsOrError"]["results"]}
    assert [by_id[k]["status"] for k in killed] == ["FAILURE", "FAILURE"]  # the dead runs, released
    assert {r["jobName"] for r in by_id.values()} == {"nightly"}
    tags = {t["key"]: t["value"] for t in runs[0]["tags"]}
    assert tags["dagster/partition"] == DAY and runs[0]["status"] == "SUCCESS"
    # The day was read in two slices, each a step of the run the UI shows, with its own status and timing.
    steps = _graphql(
        port,
        f'{{ runOrError(runId: "{runs[0]["runId"]}") {{ ... on Run {{ stepStats '
        "{ stepKey status startTime endTime } } } }",
    )["runOrError"]["stepStats"]
    by_key = {s["stepKey"]: s for s in steps}
    sliced = sorted(k for k in by_key if k.startswith("raw_ingest.read_slice["))
    assert sliced == [f"raw_ingest.read_slice[s00{k}_synthetic]" for k in (0, 1)], by_key
    for key in [*sliced, "raw_ingest.settle_day_slices", "raw_ingest.promote_raw_day"]:
        assert by_key[key]["status"] == "SUCCESS" and by_key[key]["endTime"] >= by_key[key]["startTime"]
    assert home.catalog_path.exists() and home.report_path.exists()

    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 0 or proc.returncode in (0, -signal.SIGINT, 130)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)


def _with_environ(marker: str) -> list[int]:
    """Pids of processes whose environment holds ``marker`` (this test's unique DAGSTER_HOME)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if marker.encode() in f.read():
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_fleet_ui_stops_its_whole_process_group_on_a_signal(landed, tmp_path, sig):
    dh = tmp_path / "dagster_home_ui"
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(dh), "DAGSTER_DISABLE_TELEMETRY": "1"}
    log = open(tmp_path / "fleet_ui.log", "w")  # noqa: SIM115 - open while the UI runs, closed below

    def _log() -> str:
        return (tmp_path / "fleet_ui.log").read_text()

    proc = subprocess.Popen(
        [str(BIN / "fleet"), "ui", "--home", str(landed.root), "--port", str(port)],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        # as a service manager or a script without job control would start it: SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN) if sig == signal.SIGTERM else None,
    )
    try:
        deadline = time.monotonic() + 120
        while not _answers(port):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.5)
        assert len(_with_environ(str(dh))) >= 3  # fleet ui, dagster dev, webserver, daemon, code server
        # The UI opens on the graph, not on the "Join the Dagster community" dialog.
        assert _graphql(port, "{ shouldShowNux }")["shouldShowNux"] is False
        # The printed link to the job's graph names a job that this UI serves.
        link = re.search(r"every group open: http://127\.0\.0\.1:\d+/locations/(\w+)/jobs/(\w+)", _log())
        assert link, _log()
        location, job = link.groups()
        found = _graphql(
            port,
            f'{{ pipelineOrError(params: {{repositoryName: "__repository__", repositoryLocationName: '
            f'"{location}", pipelineName: "{job}"}}) {{ __typename }} }}',
        )
        assert found["pipelineOrError"]["__typename"] == "Pipeline"
        proc.send_signal(sig)
        proc.wait(timeout=90)
        assert proc.returncode == 128 + sig
        deadline = time.monotonic() + 30
        while _with_environ(str(dh)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _with_environ(str(dh)) == []
        assert not _answers(port)
        printed = _log()
        assert "Dagster UI on http://127.0.0.1" in printed and "SupersessionWarning" not in printed
    finally:
        log.close()
        if proc.poll() is None:
            proc.kill()
        for pid in _with_environ(str(dh)):
            os.kill(pid, signal.SIGKILL)
