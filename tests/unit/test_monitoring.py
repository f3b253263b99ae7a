"""Landing inventory, change detection and the trailing-week row-count anomaly rule."""

import os

from pipelines.lib.operations.monitoring import changed_days, landing_inventory, row_count_anomaly


def test_inventory_skips_hidden_and_non_day_folders(home):
    for rel in (
        "a/2026-11-20/runs.jsonl",
        "a/2026-11-20/.runs.jsonl.tmp",
        "a/notes/readme.txt",
        "b/2026-11-21/runs.csv",
    ):
        p = home.landing / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x")
    assert sorted(landing_inventory(home)) == ["a/2026-11-20/runs.jsonl", "b/2026-11-21/runs.csv"]


def test_changes_are_grouped_by_day_with_stable_run_keys(home):
    p = home.landing / "a" / "2026-11-20" / "runs.jsonl"
    p.parent.mkdir(parents=True)
    p.write_text("1")
    first = landing_inventory(home)
    changes = changed_days({}, first)
    assert [c.day for c in changes] == ["2026-11-20"]
    assert changed_days(first, first) == []
    assert changed_days({}, first)[0].run_key == changes[0].run_key  # same change, same key
    os.utime(p, ns=(1, 1))  # re-delivered: new mtime
    again = changed_days(first, landing_inventory(home))
    assert len(again) == 1 and again[0].run_key != changes[0].run_key
    p.unlink()
    removed = changed_days(first, landing_inventory(home))
    assert removed[0].files[0].endswith("@removed")


def test_row_count_anomaly_needs_history_and_flags_drops_and_spikes():
    history = {f"2026-11-{d:02d}": 100 for d in range(10, 20)}
    assert row_count_anomaly({}, "2026-11-20", 5).passed  # nothing to compare with
    ok = row_count_anomaly(history, "2026-11-20", 120)
    assert ok.passed and ok.baseline == 100 and ok.days_compared == 7
    low = row_count_anomaly(history, "2026-11-20", 30)
    assert not low.passed and "0.30x" in low.message
    assert not row_count_anomaly(history, "2026-11-20", 250).passed
    # only the trailing week counts
    assert row_count_anomaly({"2026-10-01": 1000, **history}, "2026-11-20", 100).baseline == 100
