"""The lake on object storage (a real S3-compatible server on 127.0.0.1) behaves as the local lake: the same
night, atomic day replaces, concurrent writers, and credentials that never show."""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal

from pipelines.lib.paths import PROJECT_ROOT, DataHome
from pipelines.lib.query.warehouse import publish_catalog
from pipelines.lib.storage import lake
from pipelines.lib.storage.lake.copies import CACHE_KEEP_S
from synthetic_fleet.writers import write_day
from tests.support import lake_writers
from tests.support.cli import BIN
from tests.support.homes import DAY
from tests.support.lake_state import assert_same as _assert_same
from tests.support.lake_state import state as _state
from tests.support.lake_writers import hist_rows

NIGHT_DAYS = ["2026-11-20", "2026-11-21"]


def _night_landing(home: DataHome, hw, models) -> None:
    """Two synthetic days and a runs file to quarantine."""
    from synthetic_fleet.sampler import sample_day

    for i, day in enumerate(NIGHT_DAYS):
        write_day(sample_day(day, 10, 40 + i, hw, models), home.landing, source="synthetic", fmt="jsonl")
    bad = home.landing / "acme/2026-11-21/runs.jsonl"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"run_id": "broken"}\nnot json\n')


@pytest.fixture(scope="module")
def local_night(tmp_path_factory, hw, models) -> dict:
    """The tables of the night on a local lake: what every night on the store must give."""
    from pipelines.orchestrate import run_pipeline

    local = DataHome.resolve(tmp_path_factory.mktemp("local") / "home")
    _night_landing(local, hw, models)
    run_pipeline(local, NIGHT_DAYS, progress=lambda _: None)
    return _state(local)


@pytest.mark.parametrize("cache_bytes", ["0", str(8 << 30)], ids=["store-read-directly", "local-copies"])
def test_the_night_on_object_storage_gives_the_local_nights_tables(
    tmp_path, s3_lake, hw, models, cache_bytes, monkeypatch, local_night
):
    from pipelines.orchestrate import run_pipeline

    monkeypatch.setenv("FLEET_LAKE_CACHE_BYTES", cache_bytes)
    remote = DataHome(tmp_path / "remote", s3_lake)
    _night_landing(remote, hw, models)
    run_pipeline(remote, NIGHT_DAYS, progress=lambda _: None)
    want, got = local_night, _state(remote)
    for t in want:
        _assert_same(got[t], want[t], t)
    assert want["runs"].height == 20 and want["quarantine"].height > 0
    copies = list((remote.root / "cache" / "lake").rglob("*.parquet"))
    assert bool(copies) == (cache_bytes != "0")  # the day's files were read from local copies, or not at all
    # The analyst catalog's views read the object store through the product's registered filesystem.
    con = duckdb.connect(str(remote.catalog_path), read_only=True)
    try:
        lake.store(remote).duckdb(con)
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 20
    finally:
        con.close()


def _store(tmp_path: Path, s3_lake: str, backend: str) -> lake.Lake:
    """A local lake, a lake on the S3 server read directly, or one read through local copies."""
    if backend == "local":
        return lake.Lake(str(tmp_path / "lake"))
    return lake.Lake(s3_lake, tmp_path / "cache", 1 << 30) if backend == "s3-cached" else lake.Lake(s3_lake)


@pytest.mark.parametrize("backend", ["local", "s3", "s3-cached"])
def test_writers_of_different_days_commit_together_of_the_same_day_one_at_a_time(tmp_path, s3_lake, backend):
    store = _store(tmp_path, s3_lake, backend)
    table = "server_count_hist"
    store.publish_day(table, "2026-11-01", lake.to_arrow(hist_rows(1), table))  # the table exists
    writers = {"a": ("2026-11-02", 2), "b": ("2026-11-03", 3), "c": ("2026-11-04", 4), "d": ("2026-11-04", 5)}
    barrier = threading.Barrier(len(writers))
    results: dict[str, object] = {}

    def writer(name: str, day: str, rows: int) -> None:
        frame = lake.to_arrow(hist_rows(rows), table)
        barrier.wait()
        try:
            results[name] = store.publish_day(table, day, frame)
        except BaseException as exc:
            results[name] = exc

    threads = [threading.Thread(target=writer, args=(n, *w)) for n, w in writers.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert results == {"a": 2, "b": 3, "c": 4, "d": 5}, results  # every writer committed
    counts = store.row_counts(table)
    assert counts["2026-11-02"] == 2 and counts["2026-11-03"] == 3
    # the two writers of one day replaced it one after the other: it holds one writer's rows, never both
    assert counts["2026-11-04"] in (4, 5), counts
    assert len(store.files(table, "2026-11-04")) == 1
    assert store.version(table) == 5


@pytest.mark.usefixtures("fleet_cli")  # the writers are processes of their own, as two nights' are
@pytest.mark.parametrize("backend", ["local", "s3"])
def test_two_processes_replacing_50_days_each_in_one_table_land_every_commit(tmp_path, s3_lake, backend):
    # Delta judges an overwrite against every file of the snapshot it read, so a writer of another day
    # that commits first used to fail it ("a concurrent transaction deleted data this operation read").
    store = _store(tmp_path, s3_lake, backend)
    table = lake_writers.TABLE
    store.publish_day(table, "2026-01-01", lake.to_arrow(hist_rows(1), table))  # the table exists
    start_at = time.time() + 3  # both interpreters are up by then
    firsts = ["2026-02-01", "2026-05-01"]
    writers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.support.lake_writers", store.uri, first, "50", str(start_at)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=PROJECT_ROOT,
        )
        for first in firsts
    ]
    said = [json.loads(w.communicate(timeout=600)[0]) for w in writers]
    assert [s["errors"] for s in said] == [[], []] and [s["landed"] for s in said] == [100, 100], said
    counts = store.row_counts(table)
    for first in firsts:  # every day holds its replace, in one file
        for day in lake_writers.days(first, 50):
            assert counts[day] == 3, day
    assert len(store.files(table)) == 1 + 100
    assert store.version(table) == 1 + 200  # the creation, the first day, and every writer's commit


@pytest.mark.parametrize("backend", ["local", "s3", "s3-cached"])
def test_a_reader_polling_during_replaces_sees_the_old_or_the_new_day_only(tmp_path, s3_lake, backend):
    store = _store(tmp_path, s3_lake, backend)
    table = "server_count_hist"
    small, big = lake.to_arrow(hist_rows(2), table), lake.to_arrow(hist_rows(7), table)
    store.publish_day(table, DAY, small)
    stop = threading.Event()
    seen: set[int] = set()
    errors: list[BaseException] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                seen.add(store.read(table, DAY).height)
            except BaseException as exc:  # a reader must never fail while a writer replaces the day
                errors.append(exc)
                return

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(12):
            store.publish_day(table, DAY, big if i % 2 == 0 else small)
    finally:
        stop.set()
        t.join(timeout=60)
    assert not errors, errors
    assert seen <= {2, 7} and len(seen) >= 1, seen


def test_local_copies_of_the_stores_files_read_as_the_store_and_stay_within_their_bound(tmp_path, s3_lake):
    table = "server_count_hist"
    cache = tmp_path / "cache"
    writer = lake.Lake(s3_lake, cache, 1 << 30)
    staged = tmp_path / "staged.parquet"
    pq.write_table(lake.to_arrow(hist_rows(3), table), staged)
    writer.publish_day(table, "2026-11-02", staged)  # a staged day: uploaded, then kept as the copy
    writer.publish_day(table, "2026-11-03", lake.to_arrow(hist_rows(4), table))  # a frame: the same
    uris = writer.files(table)
    paths = writer.readable(uris)
    assert not staged.exists() and len(paths) == 2
    assert all(Path(p).is_file() and Path(p).is_relative_to(cache) for p in paths)
    assert not list(cache.rglob("*.part"))
    direct = lake.Lake(s3_lake)  # no copies: the store itself
    assert direct.readable(uris) == uris
    assert_frame_equal(
        writer.read(table).sort("day", "n_servers"), direct.read(table).sort("day", "n_servers")
    )
    # another machine's data home has no copies yet: the first read fetches them, the next reads them
    other = lake.Lake(s3_lake, tmp_path / "other", 1 << 30)
    assert_frame_equal(other.read(table, "2026-11-03"), direct.read(table, "2026-11-03"))
    fetched = sorted((tmp_path / "other").rglob("*.parquet"))
    assert (
        len(fetched) == 1
        and fetched[0].read_bytes()
        == Path(writer.readable(direct.files(table, "2026-11-03"))[0]).read_bytes()
    )
    # over the bound, the least recently used copies go, but never one used within CACHE_KEEP_S
    small = lake.Lake(s3_lake, cache, 1)
    old, recent = sorted(paths)
    long_ago = time.time() - CACHE_KEEP_S - 60
    os.utime(old, (long_ago, long_ago))
    assert small.prune_cache() == [Path(old)]
    assert not Path(old).exists() and Path(recent).exists()
    assert small.read(table).height == 7  # a dropped copy is fetched again when read
    assert Path(old).exists()


def test_the_vacuum_keeps_what_the_published_catalog_reads(landed, hw):
    from pipelines.lib.ingest import ingest_partition

    ingest_partition(landed, DAY, hw.platforms)
    publish_catalog(landed)
    store = lake.store(landed)
    catalog_version, read_by_catalog = store.snapshot("runs", DAY)
    ingest_partition(landed, DAY, hw.platforms)  # replaces the day: the catalog's file is now removed
    replaced = store.files("runs", DAY)
    ingest_partition(landed, DAY, hw.platforms)  # ... and that file too, which no catalog reads
    current = store.files("runs", DAY)
    store.vacuum("runs", keep_version=catalog_version, retention_hours=0)
    assert all(Path(f).exists() for f in read_by_catalog + current)
    assert not any(Path(f).exists() for f in replaced)
    analyst = duckdb.connect(str(landed.catalog_path), read_only=True)
    try:  # the published views still read
        assert analyst.execute("SELECT count(*) FROM runs").fetchone()[0] == 12
    finally:
        analyst.close()
    publish_catalog(landed)  # republished over the current files: within the retention, the old one stays
    assert all(Path(f).exists() for f in read_by_catalog)
    store.vacuum("runs", keep_version=store.snapshot("runs")[0], retention_hours=0)
    assert not any(Path(f).exists() for f in read_by_catalog) and all(Path(f).exists() for f in current)


@pytest.mark.usefixtures("fleet_cli")
def _lease_holder(s3_lake: str, name: str) -> subprocess.Popen:
    """A process of this machine that holds the lake's lock ``name``; returned once it holds it."""
    hold = (
        "import time; from pipelines.lib.storage import lake; "
        f"held = lake.Lake({s3_lake!r}).lock({name!r}, timeout_s=30); held.__enter__(); "
        "print('held', flush=True); time.sleep(600)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold], cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


@pytest.mark.usefixtures("fleet_cli")  # the holders are processes of their own
def test_a_lease_of_a_killed_process_of_this_machine_is_taken_at_once_a_live_one_is_named(s3_lake):
    # After an object-store outage killed a night, the next night waited without a word for the dead
    # night's leases to expire (up to 10 minutes), though their holder was a process of this machine.
    store, name = lake.Lake(s3_lake), "runs.day=2026-11-20"
    killed = _lease_holder(s3_lake, name)
    killed.kill()  # kill -9: its lease stays behind, unexpired
    killed.wait()
    started = time.monotonic()
    with store.lock(name, timeout_s=30):
        assert time.monotonic() - started < 5
    live = _lease_holder(s3_lake, name)
    said_while_waiting = logging.handlers.BufferingHandler(100)
    logging.getLogger("fleet.lake").addHandler(said_while_waiting)
    try:
        with pytest.raises(lake.locks.LockTimeout) as held, store.lock(name, timeout_s=4):
            pass
    finally:
        logging.getLogger("fleet.lake").removeHandler(said_while_waiting)
        live.kill()
        live.wait()
    said = str(held.value)
    who = f"process {live.pid} on {socket.gethostname()}"
    assert f"held for 4 s by {who} (its lease runs until" in said
    # the wait was said as it began, in one line naming the holder
    waits = [r.getMessage() for r in said_while_waiting.buffer]
    assert len(waits) == 1
    assert waits[0].startswith(f"waiting for the lake's lock {name!r}, held by {who} (its lease runs until")


def test_no_credential_appears_in_any_output(tmp_path, s3_store, s3_lake, small_day):
    home = DataHome(tmp_path / "home", s3_lake)
    write_day(small_day, home.landing, source="synthetic", fmt="jsonl")
    env = {"FLEET_LAKE": s3_lake, **s3_store.env}
    ok = subprocess.run(
        [str(BIN / "fleet"), "run", "--home", str(home.root)], env=_env(env), capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr[-3000:]
    wrong = {**env, "AWS_SECRET_ACCESS_KEY": "wrong-secret-" + uuid.uuid4().hex}
    bad = subprocess.run(
        [str(BIN / "fleet"), "run", "--home", str(home.root)], env=_env(wrong), capture_output=True, text=True
    )
    assert bad.returncode == 1 and "Traceback" not in bad.stderr, bad.stderr[-3000:]
    assert bad.stderr.startswith(f"fleet run: cannot reach the lake {s3_lake}: "), bad.stderr
    gone = subprocess.run(
        [str(BIN / "fleet"), "run", "--home", str(home.root)],
        env=_env({**env, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}),  # nothing listens there
        capture_output=True,
        text=True,
    )
    assert gone.returncode == 1 and len(gone.stderr.strip().splitlines()) == 1, gone.stderr[-3000:]
    assert "cannot reach the lake" in gone.stderr and "AWS_ENDPOINT_URL" in gone.stderr
    for secret in (s3_store.secret_key, wrong["AWS_SECRET_ACCESS_KEY"]):
        for text in (ok.stdout, ok.stderr, bad.stdout, bad.stderr, gone.stdout, gone.stderr):
            assert secret not in text
        for f in home.root.rglob("*"):  # the Dagster instance's event logs, the catalog, the report
            if f.is_file():
                assert secret.encode() not in f.read_bytes(), f


def _env(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **extra}
