"""`fleet run` over awkward days: a day not over yet is reported and skipped, the days it runs become
partitions, and the rest of the run proceeds and publishes (issue: unknown partitions used to crash the
whole run)."""

import datetime as dt
import json
import shutil

import dagster as dg
import polars as pl
import pytest

from pipelines.lib.ingest.delivery import ingest_days
from pipelines.lib.storage import lake
from pipelines.orchestrate import run_pipeline
from tests.support.homes import DAY

pytestmark = pytest.mark.usefixtures("night")  # whole nights, in-process
NEXT = "2026-11-21"


def test_future_days_are_skipped_and_the_days_run_become_partitions(landed):
    tomorrow = (dt.datetime.now(dt.UTC).date() + dt.timedelta(days=1)).isoformat()
    shutil.copytree(landed.landing / "synthetic" / DAY, landed.landing / "synthetic" / tomorrow)
    notes: list[str] = []
    with dg.instance_for_test() as instance:
        result = run_pipeline(landed, [DAY, tomorrow], instance=instance, progress=notes.append)
        runs = [instance.get_run_by_id(r) for r in result.run_ids]
        assert instance.get_dynamic_partitions("landing_days") == [DAY]
    assert result.days == [DAY]
    assert any(f"added 1 landed day(s) as partitions ({DAY} .. {DAY})" in n for n in notes)
    assert any(tomorrow in n and "skipped" in n for n in notes)
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
    assert lake.table_files(landed, "runs", DAY)
    assert not lake.table_files(landed, "runs", tomorrow)
    assert landed.catalog_path.exists() and landed.report_path.exists()


def test_unchanged_days_are_skipped_and_named_and_force_redoes_them(landed):
    """`fleet run` after another source's delivery: the days whose landing files, code and catalogs did not
    change since a successful run of theirs are skipped (each said so), the merge only when nothing changed;
    a changed file redoes its day; ``force`` redoes every day."""
    second = "2026-11-21"
    shutil.copytree(landed.landing / "synthetic" / DAY, landed.landing / "other" / second)
    days = [DAY, second]
    with dg.instance_for_test() as instance:

        def run(force: bool = False) -> tuple:
            notes: list[str] = []
            return run_pipeline(landed, days, instance=instance, progress=notes.append, force=force), notes

        first, _ = run()
        assert first.days == days and first.unchanged == {} and first.merged

        again, notes = run()
        assert again.days == [] and set(again.unchanged) == set(days) and not again.merged
        for day in days:
            said = [n for n in notes if day in n and "unchanged" in n]
            assert said and "skipped (--force redoes it)" in said[0]
            assert again.unchanged[day][:8] in said[0]  # names the run that did it
        assert any("nothing changed since run" in n for n in notes)

        f = next((landed.landing / "other" / second).iterdir())  # a re-delivered file: a new mtime
        f.touch()
        changed, _ = run()
        assert changed.days == [second] and list(changed.unchanged) == [DAY] and changed.merged

        forced, _ = run(force=True)
        assert forced.days == days and forced.unchanged == {} and forced.merged
        statuses = {instance.get_run_by_id(r).status for r in forced.run_ids}
    assert statuses == {dg.DagsterRunStatus.SUCCESS}


def _late_copy_of_a_run(home) -> tuple[str, int]:
    """One run of DAY delivered again, late, with the next day (its files and all its samples); the run id
    and its sample count."""
    src = home.landing / "synthetic" / DAY
    run_id = json.loads((src / "runs.jsonl").read_text().splitlines()[0])["run_id"]
    late = home.landing / "late" / NEXT
    late.mkdir(parents=True)
    for name in ("runs.jsonl", "utilisation_samples.jsonl"):
        (late / name).write_text("".join(f"{x}\n" for x in _lines_of(src / name, run_id)))
    return run_id, len(_lines_of(src / "utilisation_samples.jsonl", run_id))


def _lines_of(path, run_id: str) -> list[str]:
    return [x for x in path.read_text().splitlines() if f'"run_id":"{run_id}"' in x]


def _correct_day(home, run_id: str) -> None:
    """The producer corrects DAY: the run was not one of its runs."""
    for name in ("runs.jsonl", "utilisation_samples.jsonl"):
        path = home.landing / "synthetic" / DAY / name
        path.write_text("".join(f"{x}\n" for x in path.read_text().splitlines() if f'"{run_id}"' not in x))


def _kept_once_on_next(home, run_id: str, samples: int) -> None:
    runs = lake.read_table(home, "runs").filter(pl.col("run_id") == run_id)
    assert runs["day"].cast(pl.String).to_list() == [NEXT]
    kept = lake.read_table(home, "utilisation_samples").filter(pl.col("run_id") == run_id)
    assert kept.height == samples and set(kept["day"].cast(pl.String)) == {NEXT}
    q = lake.read_table(home, "quarantine")
    assert q.filter(pl.col("message").str.contains(run_id, literal=True)).height == 0


def test_a_corrected_day_reads_again_the_unchanged_days_that_deferred_to_it(landed):
    # A run delivered on DAY and again, late, on NEXT (NEXT's copy quarantined: already accepted on DAY);
    # the producer then removes it from DAY. `fleet run` redid DAY and skipped NEXT as unchanged: the run
    # was in no table, and the quarantine still said "already accepted on DAY".
    run_id, samples = _late_copy_of_a_run(landed)
    with dg.instance_for_test() as instance:
        run_pipeline(landed, [DAY, NEXT], instance=instance, progress=lambda _: None)
        q = lake.read_table(landed, "quarantine").filter(pl.col("day").cast(pl.String) == NEXT)
        assert (
            q.filter(
                pl.col("message") == f"run_id {run_id} was already accepted on {DAY}; the first "
                "delivery is kept"
            ).height
            == 1
        )
        _correct_day(landed, run_id)
        notes: list[str] = []
        again = run_pipeline(landed, [DAY, NEXT], instance=instance, progress=notes.append)
    assert again.days == [DAY, NEXT] and again.unchanged == {}
    said = f"  [~] {NEXT}: unchanged, but it kept out deliveries as already accepted on {DAY}, which is read "
    assert said + "again: read again after it" in notes
    _kept_once_on_next(landed, run_id, samples)


def test_ingesting_a_corrected_day_reads_again_the_days_that_deferred_to_it(landed):
    run_id, samples = _late_copy_of_a_run(landed)
    ingest_days(landed, [DAY, NEXT])
    _correct_day(landed, run_id)
    said: list[str] = []
    summary = ingest_days(landed, [DAY], progress=said.append)  # `fleet ingest --from DAY`
    assert summary.days == [DAY, NEXT] and said[0].startswith(f"  [~] {NEXT}: it kept out deliveries")
    _kept_once_on_next(landed, run_id, samples)
