"""A day read in slices and merged equals the day read in one pass: every table, every ledger and
quarantine row, whatever the slices (one source each, or one file each), with files and sample keys
repeated across slices, faulty rows, gzip, Parquet, CSV and Prometheus exporters in the same day."""

from __future__ import annotations

import dataclasses
import datetime as dt
import gzip
import json
import os
import shutil

import polars as pl
import pytest

from pipelines.lib.analysis import analytics
from pipelines.lib.analysis.analytics import LakeFiles
from pipelines.lib.analysis.partials import part_id
from pipelines.lib.contracts import contract
from pipelines.lib.ingest import day_handoff, ingest_day, split
from pipelines.lib.ingest.split import (
    Slice,
    SliceFailed,
    ingest_slice,
    merge_day,
    plan_slices,
    read_task,
    settle_day,
    write_tasks,
)
from pipelines.lib.settings import DEFAULT_LIMITS
from pipelines.lib.storage.landing import day_files
from synthetic_fleet.sampler import sample_day
from synthetic_fleet.writers import write_day
from tests.support.homes import DAY
from tests.support.lake_state import assert_same

NOW = dt.datetime(2026, 11, 21, 2, 0, tzinfo=dt.UTC)


def split_ingest(home, platforms, slice_bytes: int):
    limits = dataclasses.replace(DEFAULT_LIMITS, slice_bytes=slice_bytes)
    slices = settle_day(home, DAY, platforms, limits, now=NOW)
    assert slices, "the day was not split"
    parts = [ingest_slice(home, s) for s in slices]
    return slices, merge_day(home, slices[0].root, parts)


def _frames(r) -> dict[str, pl.DataFrame]:
    out = r.frames()
    for name, frame in out.items():
        if name not in ("ingest_ledger", "quarantine"):  # these two keep the day's file order
            out[name] = frame.sort(frame.columns, nulls_last=True)
    return out


@pytest.fixture
def busy_day(home, hw, models, small_day):
    """Four sources delivering interleaved in time, in four formats, with repeats across sources."""
    write_day(small_day, home.landing, source="alpha", fmt="jsonl")
    write_day(sample_day(DAY, 6, 23, hw, models), home.landing, source="bravo", fmt="parquet")
    write_day(sample_day(DAY, 5, 31, hw, models), home.landing, source="charlie", fmt="csv", gzip_level=1)
    # two one-server GPU runs: every exporter has series (DCGM too), in 9 MB rather than 4 CPU runs' 108 MB
    write_day(sample_day(DAY, 2, 35, hw, models), home.landing, source="delta", fmt="openmetrics", hw=hw)
    alpha = home.landing / "alpha" / DAY / "utilisation_samples.jsonl"
    repeats = home.landing / "able" / DAY
    repeats.mkdir(parents=True)
    shutil.copyfile(alpha, repeats / "utilisation_samples.jsonl")  # a whole file delivered twice
    lines = alpha.read_bytes().splitlines(keepends=True)
    # some of alpha's samples again (their keys repeat across slices), a broken line, a new sample
    (repeats / "utilisation_samples-late.jsonl.gz").write_bytes(
        gzip.compress(b"".join(lines[5:40]) + b'{"run_id": 1}\n' + lines[41].replace(b":00Z", b":07Z"))
    )
    # delivery order is not the order of the sources: "able" (first by name) delivers last
    t0 = 1_700_000_000
    for k, lf in enumerate(sorted(day_files(home, DAY), key=lambda lf: lf.relpath)):
        late = 100 if lf.relpath.startswith("able") else 0
        os.utime(lf.path, (t0 + k + late, t0 + k + late))
    return home


@pytest.mark.parametrize("slice_bytes", [1, 300_000])  # every file a slice; sources cut into pieces
def test_a_split_day_equals_the_day_read_in_one_pass(busy_day, hw, slice_bytes):
    whole = ingest_day(busy_day, DAY, hw.platforms, now=NOW)
    want = _frames(whole)
    whole.discard()
    slices, split = split_ingest(busy_day, hw.platforms, slice_bytes)
    got = _frames(split)
    assert len(slices) >= 4 and len(split.samples_paths) >= 4
    for name in want:
        assert got[name].equals(want[name]), name
    assert split.samples_rows == whole.samples_rows and split.samples_duplicated == 0
    assert split.samples_violations == whole.samples_violations == []
    assert split.notes == whole.notes
    # the case is real: a file and sample keys repeat across slices, a row is bad, Prometheus is in it
    q = want["quarantine"]
    assert {"file_duplicate", "duplicate_key"} <= set(q["reason_code"])
    assert q.filter(pl.col("reason_code") == "file_duplicate")["source_file"].to_list() == [
        f"able/{DAY}/utilisation_samples.jsonl"
    ]
    assert want["metric_samples"].height > 0
    split.discard()
    assert not slices[0].root.exists()


def test_slices_follow_sources_and_cut_a_large_source_in_delivery_order(busy_day, hw):
    files = day_files(busy_day, DAY)
    tables = [
        "runs" if lf.path.name.startswith("runs") else "utilisation_samples" for lf in files
    ]  # (delta's exporters count as samples here: only the plan is tested)
    sizes = {i: lf.signature[1] for i, lf in enumerate(files)}
    assert plan_slices(files, tables, sum(sizes.values())) == []  # fits one pass
    assert plan_slices(files, tables, 0) == []  # splitting is off
    cut = plan_slices(files, tables, 200_000)
    flat = [i for s in cut for i in s]
    assert sorted(flat) == [i for i, t in enumerate(tables) if t != "runs"]
    for s in cut:
        assert len({files[i].source for i in s}) == 1 and s == sorted(s)
        assert len(s) == 1 or sum(sizes[i] for i in s) <= 200_000


@pytest.mark.parametrize("slice_bytes", [0, 1 << 40])  # splitting off (the default); the day fits a slice
def test_a_day_that_is_not_split_stages_nothing(busy_day, hw, slice_bytes):
    limits = dataclasses.replace(DEFAULT_LIMITS, slice_bytes=slice_bytes)
    assert settle_day(busy_day, DAY, hw.platforms, limits, now=NOW) == []
    assert not list(busy_day.staging.glob("split-*"))


def test_a_retried_slice_starts_again_and_the_merge_is_unchanged(busy_day, hw):
    limits = dataclasses.replace(DEFAULT_LIMITS, slice_bytes=1)
    slices = settle_day(busy_day, DAY, hw.platforms, limits, now=NOW)
    parts = [ingest_slice(busy_day, s) for s in slices]
    again = ingest_slice(busy_day, slices[1])  # a worker died after it, Dagster ran it again
    assert again == parts[1]
    merged = merge_day(busy_day, slices[0].root, parts)
    whole = ingest_day(busy_day, DAY, hw.platforms, now=NOW)
    assert merged.ingest_ledger.equals(whole.ingest_ledger)
    assert merged.samples_rows == whole.samples_rows
    merged.discard()
    whole.discard()


def test_slices_read_from_their_task_files_give_the_same_day(busy_day, hw):
    """As a step reads a slice wherever the executor runs it: from its task file alone."""
    whole = ingest_day(busy_day, DAY, hw.platforms, now=NOW)
    want = _frames(whole)
    whole.discard()
    limits = dataclasses.replace(DEFAULT_LIMITS, slice_bytes=300_000)
    slices = settle_day(busy_day, DAY, hw.platforms, limits, now=NOW)
    tasks = write_tasks(busy_day, slices)
    merged = merge_day(busy_day, slices[0].root, [read_task(t, f"step {k}") for k, t in enumerate(tasks)])
    assert [s["read_by"] for s in merged.slices] == [f"step {k}" for k in range(len(slices))]
    got = _frames(merged)
    merged.discard()
    for name in want:
        assert got[name].equals(want[name]), name


def test_a_failing_slice_names_itself_its_files_and_its_error(busy_day, hw):
    limits = dataclasses.replace(DEFAULT_LIMITS, slice_bytes=1)
    slices = settle_day(busy_day, DAY, hw.platforms, limits, now=NOW)
    tasks = write_tasks(busy_day, slices)
    (slices[2].root / "slice-2").write_text("")  # its folder cannot be made
    with pytest.raises(SliceFailed) as err:
        read_task(tasks[2], "r")
    text = str(err.value)
    assert f"day {DAY}: slice {slices[2].key} (1 files of source {slices[2].source}: " in text
    assert "could not be read; nothing of the day was written: FileExistsError" in text
    assert "slice-2" in text
    shutil.rmtree(slices[0].root)


def test_a_slice_is_read_only_as_the_day_would(busy_day, hw):
    """Read on another machine, a slice whose files differ there, or by other ingest code, is refused."""
    limits = dataclasses.replace(DEFAULT_LIMITS, slice_bytes=1)
    slices = settle_day(busy_day, DAY, hw.platforms, limits, now=NOW)
    tasks = write_tasks(busy_day, slices[:2])
    settled = day_handoff.load_settled(busy_day, slices[0].root / split.SETTLED)
    changed = settled.book.files[slices[0].files[0]].lf
    os.utime(changed.path, ns=(1, 1))  # changed since the day's machine listed it
    with pytest.raises(SliceFailed, match=f"{changed.relpath} differs here or cannot be read"):
        read_task(tasks[0], "r")
    day_handoff.save_task(tasks[1], busy_day, dataclasses.replace(slices[1], code="0" * 16))
    with pytest.raises(SliceFailed, match="the ingest code here differs from the day's"):
        read_task(tasks[1], "r")
    assert not (slices[0].root / "slice-0").exists() and not (slices[1].root / "slice-1").exists()
    shutil.rmtree(slices[0].root)


def test_slice_keys_name_their_source(tmp_path):
    assert Slice(DAY, tmp_path, 7, (1, 2), "team a/b", 10).key == "s007_team_a_b"


def test_states_cross_processes_as_plain_versioned_data(busy_day, hw):
    """The settled day and a read slice are JSON manifests with Parquet beside them: what is read back is
    written again unchanged, no pickle is left in the split's folder, and another version is refused."""
    limits = dataclasses.replace(DEFAULT_LIMITS, slice_bytes=1)
    slices = settle_day(busy_day, DAY, hw.platforms, limits, now=NOW)
    root = slices[0].root
    settled = root / split.SETTLED
    again = root / "again.json"
    day_handoff.save_settled(day_handoff.load_settled(busy_day, settled), again)
    first, second = json.loads(settled.read_text()), json.loads(again.read_text())
    assert {k: v for k, v in first.items() if k != "side"} == {k: v for k, v in second.items() if k != "side"}
    for name, rel in first["side"].items():
        assert pl.read_parquet(root / rel).equals(pl.read_parquet(root / second["side"][name])), name
    assert any(f["rejects"]["total"] for f in first["files"]) and first["staged"]["metrics"]["rows"]
    part = ingest_slice(busy_day, slices[0])
    read = day_handoff.load_slice(part, limits)
    assert read.files and read.parts and read.slices[0]["slice"] == slices[0].key
    (task,) = write_tasks(busy_day, slices[1:2])
    suffixes = {p.suffix for p in root.rglob("*") if p.is_file()}
    assert suffixes <= {".json", ".parquet"}, suffixes
    first["version"] = day_handoff.VERSION + 1
    settled.write_text(json.dumps(first))
    with pytest.raises(
        day_handoff.HandoffVersion, match=f"this code reads 'settled-day' version {day_handoff.VERSION}"
    ):
        day_handoff.load_settled(busy_day, settled)
    body = json.loads(task.read_text())
    task.write_text(json.dumps({**body, "version": 0}))
    with pytest.raises(day_handoff.HandoffVersion):
        read_task(task, "r")
    task.write_bytes(b"\x80\x04K\x01.")  # a pickle is data that does not parse, never code that runs
    with pytest.raises(ValueError):
        read_task(task, "r")
    shutil.rmtree(root)


def _analyses(day, cache):
    """The three analyses that scan a day's samples, over a staged day's files."""
    samples = LakeFiles(tuple(str(p) for p in day.samples_paths))
    runs = contract("runs").conform(day.runs)
    windows = analytics.server_windows(samples, DAY, cache)
    stats = analytics.run_role_stats(runs, samples, DAY, windows, cache)
    return windows, stats, analytics.util_distribution(runs, samples, stats, DAY, cache)


@pytest.mark.usefixtures("big_input")
def test_a_large_hostile_day_read_in_slices_equals_one_pass(home, hw, models):
    """Hundreds of thousands of samples in 8 files of one source: a bad line 5 lines from the end of the
    7th file (the fast tiers' late-failure case), the last 1,000 samples of the 3rd file delivered again
    at the end of the 8th (keys repeated across slices), read in 8 slices."""
    write_day(sample_day(DAY, 240, 57, hw, models), home.landing, source="fleet", fmt="jsonl")
    folder = home.landing / "fleet" / DAY
    whole_file = folder / "utilisation_samples.jsonl"
    lines = whole_file.read_bytes().splitlines(keepends=True)
    whole_file.unlink()
    cut = [len(lines) * k // 8 for k in range(9)]
    files = [lines[cut[k] : cut[k + 1]] for k in range(8)]
    files[6].insert(len(files[6]) - 5, b'{"run_id": "r", "server_id": "s"}\n')
    files[7] += files[2][-1000:]
    t0 = 1_700_000_000
    for k, chunk in enumerate(files):
        path = folder / f"utilisation_samples-{k + 1}.jsonl"
        path.write_bytes(b"".join(chunk))
        os.utime(path, (t0 + k, t0 + k))
    whole = ingest_day(home, DAY, hw.platforms, now=NOW)
    want = _frames(whole)
    want_analyses = _analyses(whole, None)
    whole.discard()
    limits = dataclasses.replace(DEFAULT_LIMITS, slice_bytes=1)
    slices = settle_day(home, DAY, hw.platforms, limits, now=NOW)
    assert len(slices) == 8
    merged = merge_day(home, slices[0].root, [ingest_slice(home, s) for s in slices])
    got = _frames(merged)
    assert merged.samples_rows == whole.samples_rows > 500_000
    # the day's analyses over the 8 parts, taking the slices' aggregates, equal them over the one file
    kept = analytics.partial_cache(home, DAY)
    got_analyses = _analyses(merged, kept)
    assert kept.hits >= 3 * 7  # the 8th part was rewritten by the merge (keys repeated), so computed again
    # and with every exact p50/p95 query holding batches of runs of about 50,000 values (dozens of them)
    parts = LakeFiles(tuple(str(p) for p in merged.samples_paths))
    runs = contract("runs").conform(merged.runs)
    batched = analytics.run_role_stats(runs, parts, DAY, got_analyses[0], quantile_values=50_000)
    merged.discard()
    assert_same(batched, want_analyses[1], "run_role_stats over batches of runs")
    for name in want:
        assert got[name].equals(want[name]), name
    for name, g, w in zip(
        ("server_windows", "run_role_stats", "util_distribution"), got_analyses, want_analyses, strict=True
    ):
        assert_same(g, w, name)
    reasons = want["quarantine"]["reason_code"].value_counts().sort("reason_code")
    assert dict(reasons.iter_rows()) == {"duplicate_key": 1000, "missing_required": 1}


def test_slices_leave_their_aggregates_and_the_analyses_take_only_current_ones(busy_day, hw):
    slices, merged = split_ingest(busy_day, hw.platforms, 1)
    samples = LakeFiles(tuple(str(p) for p in merged.samples_paths))
    runs = contract("runs").conform(merged.runs)

    want = _analyses(merged, None)
    kept = analytics.partial_cache(busy_day, DAY)
    got = _analyses(merged, kept)
    for name, g, w in zip(("server_windows", "run_role_stats", "util_distribution"), got, want, strict=True):
        assert_same(g, w, name)
    stored = {p.name for p in kept.folder.iterdir()}
    ids = [part_id(p) for p in merged.samples_paths]
    taken = [i for i in ids if i in stored]
    assert kept.hits == 3 * len(taken) and len(taken) >= 3
    # the part the merge rewrote (sample keys repeated across slices) and the Prometheus-derived one are
    # new files: computed, never taken from the slices' older aggregates
    assert len(taken) < len(ids)
    # other runs (a run moved to another platform): the slices' histograms no longer apply
    first = pl.int_range(pl.len()) == 0
    moved = runs.with_columns(
        pl.when(first).then(pl.lit("elsewhere")).otherwise("platform").alias("platform")
    )
    again = analytics.partial_cache(busy_day, DAY)
    dist = analytics.util_distribution(moved, samples, want[1], DAY, again)
    assert again.hits == 0
    assert_same(dist, analytics.util_distribution(moved, samples, want[1], DAY), "util_distribution")
    analytics.prune_partials(samples, again)
    assert {p.name for p in kept.folder.iterdir()} == set(taken)
    merged.discard()
