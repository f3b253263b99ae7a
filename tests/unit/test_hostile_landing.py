"""A hostile producer and a careless operator: every landing entry is accounted for, nothing outside the
landing folder is read, nothing is accepted twice across days, and concurrent writers of a day queue."""

from __future__ import annotations

import builtins
import os
import shutil
import threading

import polars as pl

from pipelines.lib.ingest import ingest_day, ingest_partition, reconciliation
from pipelines.lib.storage import lake, landing
from tests.support.homes import DAY

NEXT_DAY = "2026-11-21"


def _copy_day(home, source: str, day: str) -> None:
    src = home.landing / "synthetic" / DAY
    dst = home.landing / source / day
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        shutil.copy2(f, dst / f.name)


def test_the_same_files_delivered_on_two_days_are_accepted_once(landed, hw, small_day):
    ingest_partition(landed, DAY, hw.platforms)
    _copy_day(landed, "synthetic", NEXT_DAY)  # the same bytes under another day's folder
    again = ingest_partition(landed, NEXT_DAY, hw.platforms)
    q = again.result.quarantine
    assert set(q["reason_code"]) == {"file_duplicate"} and q["row_number"].to_list() == [0, 0]
    assert "already accepted on 2026-11-20" in q["message"][0]
    assert lake.read_partition(landed, "runs", NEXT_DAY).height == 0
    assert lake.read_partition(landed, "utilisation_samples", NEXT_DAY).height == 0
    assert reconciliation(again.result.ingest_ledger).height == 0
    total = pl.concat([lake.read_partition(landed, "runs", d) for d in (DAY, NEXT_DAY)])
    assert total.height == small_day.runs.height and total["run_id"].is_unique().all()


def test_runs_and_samples_redelivered_on_another_day_in_new_files_are_duplicates(landed, hw, small_day):
    ingest_partition(landed, DAY, hw.platforms)
    _copy_day(landed, "other", NEXT_DAY)
    for f in (landed.landing / "other" / NEXT_DAY).iterdir():  # different bytes, same records
        f.write_bytes(f.read_bytes() + b"\n")
    r = ingest_partition(landed, NEXT_DAY, hw.platforms).result
    assert set(r.quarantine["reason_code"]) == {"duplicate_key", "rejects_capped"}  # 1,000 listed per file
    assert r.ingest_ledger["rows_quarantined"].sum() == small_day.runs.height + small_day.samples.height
    assert "already accepted on 2026-11-20" in r.quarantine["message"][0]
    assert r.runs.height == 0 and r.samples_rows == 0
    assert reconciliation(r.ingest_ledger).height == 0


def test_every_entry_outside_the_day_layout_is_reported(landed, hw):
    root = landed.landing
    (root / "synthetic" / "latest").mkdir()
    (root / "synthetic" / "latest" / "runs.jsonl").write_text("{}\n")
    (root / "synthetic" / "20261023").mkdir()
    (root / "synthetic" / "20261023" / "runs.jsonl").write_text("{}\n")
    (root / "synthetic" / "2026-02-30").mkdir()
    (root / "synthetic" / "2026-02-30" / "runs.jsonl").write_text("{}\n")
    (root / "synthetic" / DAY / "nested").mkdir()
    (root / "synthetic" / DAY / "nested" / "runs.jsonl").write_text("{}\n")
    (root / "synthetic" / "runs.jsonl").write_text("{}\n")
    (root / "runs.jsonl").write_text("{}\n")
    for hidden in (".eu-west", "..."):  # source folders whose names start with a dot
        (root / hidden / DAY).mkdir(parents=True)
        (root / hidden / DAY / "runs.jsonl").write_text("{}\n")
    (root / "synthetic" / DAY / ".runs.jsonl.tmp").write_text("{}\n")  # a writer's file in progress
    not_read = {f.relpath: f.problem[0] for f in landing.not_read(landed)}
    assert not_read == {
        ".eu-west/": "file_hidden",
        ".../": "file_hidden",
        f"synthetic/{DAY}/.runs.jsonl.tmp": "file_hidden",
        "synthetic/latest/runs.jsonl": "file_bad_location",
        "synthetic/20261023/runs.jsonl": "file_bad_location",
        "synthetic/2026-02-30/runs.jsonl": "file_bad_location",
        f"synthetic/{DAY}/nested/runs.jsonl": "file_bad_location",
        "synthetic/runs.jsonl": "file_bad_location",
        "runs.jsonl": "file_bad_location",
    }
    assert landing.landing_days(landed) == [DAY]
    r = ingest_day(landed, DAY, hw.platforms)  # the day itself is unaffected
    assert r.quarantine.height == 0
    warning = landing.not_read_warning(landing.not_read(landed))
    assert warning.startswith("9 landing entries are read by no day: ")
    assert ".eu-west/ (hidden)" in warning and "and 4 more" in warning


def test_fifos_and_undecodable_names_are_quarantined_not_read(landed, hw, small_day):
    day_dir = landed.landing / "synthetic" / DAY
    os.mkfifo(day_dir / "runs-pipe.jsonl")  # reading it would block forever
    bad_name = os.fsencode(str(day_dir)) + b"/runs-\xff\xfe.jsonl"
    with open(bad_name, "wb") as fh:
        fh.write(b'{"run_id": "x"}\n')
    done: list = []
    t = threading.Thread(target=lambda: done.append(ingest_day(landed, DAY, hw.platforms)), daemon=True)
    t.start()
    t.join(timeout=60)
    assert done, "ingest blocked on a FIFO"
    q = dict(done[0].quarantine.select("source_file", "reason_code").iter_rows())
    assert q[f"synthetic/{DAY}/runs-pipe.jsonl"] == "file_not_regular"
    assert q[f"synthetic/{DAY}/runs-\\xff\\xfe.jsonl"] == "file_bad_name"
    assert done[0].runs.height == small_day.runs.height
    assert reconciliation(done[0].ingest_ledger).height == 0


def test_an_unreadable_file_is_quarantined_and_the_rest_proceeds(landed, hw, small_day, monkeypatch):
    bad = landed.landing / "synthetic" / DAY / "runs-locked.jsonl"
    bad.write_text('{"run_id": "locked"}\n')
    real_open = builtins.open

    def refusing(file, *args, **kwargs):  # root reads through permission bits, so the refusal is simulated
        if str(file) == str(bad):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", refusing)
    r = ingest_day(landed, DAY, hw.platforms)
    q = r.quarantine.filter(pl.col("source_file").str.ends_with("runs-locked.jsonl")).row(0, named=True)
    assert q["reason_code"] == "file_unreadable" and "Permission denied" in q["message"]
    assert r.runs.height == small_day.runs.height


def test_two_writers_of_one_day_queue_and_both_succeed(landed, hw, small_day):
    outcomes, errors = [], []

    def writer():
        try:
            outcomes.append(ingest_partition(landed, DAY, hw.platforms))
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and len(outcomes) == 2 and all(o.promoted for o in outcomes)
    assert lake.read_partition(landed, "utilisation_samples", DAY).height == small_day.samples.height
    assert not list(landed.staging.glob("*"))  # nothing left behind


def test_a_killed_writers_staging_is_swept_by_the_next_writer_of_that_day(landed, hw):
    stale = landed.staging / f"day={DAY}.deadbeef0000"
    stale.mkdir(parents=True)
    (stale / "utilisation_samples.parquet").write_bytes(b"half a file")
    ingest_partition(landed, DAY, hw.platforms)
    assert not stale.exists()


def test_delivering_a_folder_never_reads_through_links_or_fifos(tmp_path, home, hw):
    from pipelines.lib.ingest.delivery import deliver_tree, ingest_days

    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"run_id": "stolen"}\n')
    outside_day = tmp_path / "elsewhere"
    outside_day.mkdir()
    (outside_day / "runs.jsonl").write_text('{"run_id": "stolen-2"}\n')
    for sub in ("ssl", "ssl/certs", "cron.d"):  # a tree such as /etc: none of its names is listed
        (outside_day / sub).mkdir()
        (outside_day / sub / "private.key").write_text("secret\n")
    src = tmp_path / "delivery"
    day_dir = src / "acme" / DAY
    day_dir.mkdir(parents=True)
    (day_dir / "runs-link.jsonl").symlink_to(secret)
    os.mkfifo(day_dir / "runs-pipe.jsonl")
    (src / "evil").mkdir()
    (src / "evil" / DAY).symlink_to(outside_day, target_is_directory=True)
    (src / "acme" / "latest").mkdir()
    (src / "acme" / "latest" / "runs.jsonl").write_text("{}\n")
    assert deliver_tree(src, home) == [DAY]
    summary = ingest_days(home, [DAY])
    q = lake.read_partition(home, "quarantine", DAY)
    reasons = dict(q.select("source_file", "reason_code").iter_rows())
    assert reasons == {
        f"acme/{DAY}/runs-link.jsonl": "file_outside_landing",
        f"acme/{DAY}/runs-pipe.jsonl": "file_not_regular",
        f"evil/{DAY}/": "file_outside_landing",
    }
    assert "stolen" not in "".join(q["message"].to_list() + [r or "" for r in q["raw_record"].to_list()])
    ledger = lake.read_partition(home, "ingest_ledger", DAY)
    assert not any(
        "private.key" in x or "ssl" in x for x in ledger["source_file"].to_list() + q["message"].to_list()
    )
    linked = q.filter(pl.col("source_file") == f"evil/{DAY}/")["message"][0]
    assert linked.startswith(f"evil/{DAY}/: the day folder is a link to {outside_day.resolve()}, outside")
    assert summary.not_read == (
        "1 landing entry is read by no day: acme/latest/runs.jsonl (not in a <source>/<YYYY-MM-DD>/ folder); "
        "move each file into the folder of its day (a hidden name is a file still being written)"
    )


def test_the_same_delivery_in_two_days_ingested_at_once_is_accepted_once(landed, hw, small_day):
    _copy_day(landed, "synthetic", NEXT_DAY)
    threads = [
        threading.Thread(target=ingest_partition, args=(landed, d, hw.platforms)) for d in (DAY, NEXT_DAY)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    runs = pl.concat([lake.read_partition(landed, "runs", d) for d in (DAY, NEXT_DAY)])
    samples = sum(lake.read_partition(landed, "utilisation_samples", d).height for d in (DAY, NEXT_DAY))
    assert runs.height == small_day.runs.height and runs["run_id"].is_unique().all()
    assert samples == small_day.samples.height
