"""The `fleet` command and the Dagster CLI, as a user runs them."""

import os
import re
import shlex
import signal
import socket
import subprocess
import time
import urllib.request

import duckdb
import pytest

from pipelines.lib.paths import PROJECT_ROOT
from tests.support.cli import BIN, run

pytestmark = pytest.mark.usefixtures("fleet_cli")  # every test crosses the process boundary


def test_fleet_demo_end_to_end(demo_home):
    home, p = demo_home
    home = home.root
    out = p.stdout
    assert f"report:  {home}/reports/fleet_report.html" in out
    assert f"catalog: {home}/warehouse/fleet.duckdb" in out
    assert "runs 30 · samples" in out and "quarantined rows 0" in out
    assert "[2/2]" in out  # progress per day
    ran = re.findall(r"\[(\d)/2\] (\d{4}-\d\d-\d\d): raw", out)  # two days at once (workers), told in order
    assert [n for n, _ in ran] == ["1", "2"] and [d for _, d in ran] == sorted(d for _, d in ran)
    assert f"fleet sql --home {home}`" in out  # the SQL shell that opens this catalog
    con = duckdb.connect(str(home / "warehouse" / "fleet.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 30
        assert con.execute("SELECT count(DISTINCT day) FROM utilisation_samples").fetchone()[0] == 2
    finally:
        con.close()
    # The demo's runs are recorded in the data home's Dagster instance (what `fleet ui` opens).
    assert (home / "dagster_home" / "dagster.yaml").exists()
    assert (home / "dagster_home" / "history").is_dir()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _shell(command: str, **kw) -> subprocess.Popen:
    """``command`` as a user pastes it into a shell in the repository root."""
    env = {**os.environ, "DAGSTER_HOME": "", "DAGSTER_DISABLE_TELEMETRY": "1"}
    return subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=PROJECT_ROOT, env=env, text=True, **kw)


def _serves(command: str) -> None:
    """`fleet ui` as printed (on a free port: 3000 may be taken here) answers, and stops on SIGTERM."""
    port = _free_port()
    proc = _shell(
        f"{command} --host 127.0.0.1 --port {port}", stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            assert proc.poll() is None, proc.stdout.read()[-3000:]
            assert time.monotonic() < deadline, "the printed `fleet ui` did not answer within 120 s"
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def test_the_demos_next_commands_run_as_printed(demo_home):
    """Pasted from the demo's last line into a shell in the repository root, each runs: the `fleet` the
    demo ran as (.venv/bin/fleet when not on PATH), with the data home the demo was given."""
    home, p = demo_home
    line = next(x for x in p.stdout.splitlines() if x.startswith("next: "))
    commands = re.findall(r"`([^`]+)`", line)
    assert [shlex.split(c)[1] for c in commands] == ["ui", "query", "sql"]
    for c in commands:
        assert f"--home {home.root}" in c
        if " ui " in c:
            _serves(c)
            continue
        proc = _shell(c, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = proc.communicate("SELECT count(*) AS runs FROM runs;", timeout=120)
        assert proc.returncode == 0, (c, err)
        assert "30" in out if " sql " in c else "quarantine_by_reason" in out


def test_fleet_run_without_landing_data_says_what_to_do(tmp_path):
    p = run([str(BIN / "fleet"), "run", "--home", str(tmp_path)])
    assert p.returncode == 2
    assert "no landing days" in p.stderr and "fleet synth" in p.stderr


def test_bad_cli_arguments_are_named(tmp_path):
    p = run([str(BIN / "fleet"), "synth", "--start", "2026-13-01", "--out", str(tmp_path)])
    assert p.returncode != 0 and "--start '2026-13-01' is not a date" in p.stderr


def test_dagster_definitions_validate_from_repo_root(tmp_path):
    p = run([str(BIN / "dagster"), "definitions", "validate"], env={"DAGSTER_HOME": ""})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]


def test_fleet_run_says_what_did_not_arrive_and_what_it_did_not_read(tmp_path, small_day):
    """The operator sees it where they look: the CLI summary, the report header (and the Dagster UI,
    tests/integration): runs without samples, and landing entries that belong to no day."""
    from pipelines.lib.paths import DataHome
    from synthetic_fleet.writers import write_day
    from tests.support.homes import DAY

    home = DataHome.resolve(tmp_path / "home")
    write_day(small_day, home.landing, source="synthetic", fmt="jsonl")
    samples = home.landing / "synthetic" / DAY / "utilisation_samples.jsonl"
    kept = set(small_day.runs["run_id"].head(6).to_list())
    lines = [
        line for line in samples.read_text().splitlines() if line.split('"run_id":"')[1].split('"')[0] in kept
    ]
    samples.write_text("\n".join(lines) + "\n")
    (home.landing / "synthetic" / "latest").mkdir()
    (home.landing / "synthetic" / "latest" / "runs.jsonl").write_text("{}\n")
    (home.landing / ".eu-west" / DAY).mkdir(parents=True)
    p = run([str(BIN / "fleet"), "run", "--home", str(home.root)])
    assert p.returncode == 0, p.stderr[-2000:]
    missing = small_day.runs.height - 6
    assert (
        f"check did not pass: utilisation_samples/volume_matches_runs (error): synthetic: {missing} of"
        in p.stdout
    )
    assert f"CHECK {DAY} utilisation_samples/volume_matches_runs (error): synthetic: {missing} of" in p.stdout
    assert (
        "WARNING: 2 landing entries are read by no day: .eu-west/ (hidden), synthetic/latest/runs.jsonl"
        in p.stdout
    )
    report = home.report_path.read_text()
    assert "samples arrived" in report and f"NO on 1 day(s): {DAY}: synthetic: {missing} of" in report
