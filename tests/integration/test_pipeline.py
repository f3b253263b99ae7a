"""The whole Dagster graph on one partition, on a temporary instance and a temporary data home (materialised
once for the session: tests/conftest.py)."""

import re

import duckdb
import polars as pl

from pipelines.lib.storage import lake
from tests.support.homes import DAY

VIEWS = [
    "runs",
    "utilisation_samples",
    "ingest_ledger",
    "quarantine",
    "run_role_stats",
    "util_distribution",
    "util_summary",
    "trainer_vs_ps",
    "server_count_hist",
    "hardware_fit",
    "recommendations",
    "server_windows",
    "run_efficiency",
    "server_outliers",
    "waste_summary",
]


def test_every_asset_materialises_and_every_check_passes(materialized_home):
    home, r1, r2 = materialized_home
    assert r1.success and r2.success
    checks = r1.get_asset_check_evaluations()
    assert {(c.asset_key.to_user_string(), c.check_name) for c in checks} == {
        ("ingest_ledger", "reconciles"),
        ("runs", "conforms_to_contract"),
        ("utilisation_samples", "conforms_to_contract"),
        ("runs", "unique_key"),
        ("utilisation_samples", "unique_key"),
        ("runs", "row_count_vs_trailing_week"),
        ("utilisation_samples", "row_count_vs_trailing_week"),
        ("utilisation_samples", "volume_matches_runs"),
        ("ingest_ledger", "every_landing_entry_read"),
    }
    assert all(c.passed for c in checks)
    materialised_keys = {m.asset_key.to_user_string() for m in r1.get_asset_materialization_events()} | {
        m.asset_key.to_user_string() for m in r2.get_asset_materialization_events()
    }
    assert set(VIEWS) | {"analyst_catalog", "fleet_report"} <= materialised_keys


def test_samples_in_equal_accepted_plus_quarantined(materialized_home, small_day):
    home, *_ = materialized_home
    ledger = lake.read_partition(home, "ingest_ledger", DAY)
    samples = ledger.filter(pl.col("table_name") == "utilisation_samples")
    assert int(samples["rows_in"].sum()) == small_day.samples.height
    assert int(samples["rows_in"].sum()) == int(samples["rows_accepted"].sum()) + int(
        samples["rows_quarantined"].sum()
    )
    assert lake.read_partition(home, "utilisation_samples", DAY).height == int(samples["rows_accepted"].sum())


def test_every_view_answers_sql_read_only(materialized_home):
    home, *_ = materialized_home
    con = duckdb.connect(str(home.catalog_path), read_only=True)
    try:
        counts = {v: con.execute(f"SELECT count(*) FROM {v}").fetchone()[0] for v in VIEWS}
        kinds = {r[0] for r in con.execute("SELECT table_type FROM information_schema.tables").fetchall()}
        comment = con.execute("SELECT comment FROM duckdb_views() WHERE view_name = 'runs'").fetchone()[0]
    finally:
        con.close()
    assert kinds == {"VIEW"}  # the catalog holds views only
    assert counts["runs"] == 12 and counts["utilisation_samples"] > 0 and counts["quarantine"] == 0
    assert all(counts[v] > 0 for v in VIEWS if v != "quarantine")
    assert "One row per training run" in comment


def test_views_use_absolute_paths(materialized_home, tmp_path, monkeypatch):
    home, *_ = materialized_home
    monkeypatch.chdir(tmp_path)  # another working directory must see the same data
    con = duckdb.connect(str(home.catalog_path), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 12
    finally:
        con.close()


def test_report_is_self_contained(materialized_home):
    home, *_ = materialized_home
    html = home.report_path.read_text()
    assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.IGNORECASE)  # no external script at all
    assert not re.search(r"<link[^>]*\bhref\s*=\s*[\"']https?:", html, re.IGNORECASE)
    assert "cdn.jsdelivr" not in html
    assert "vegaEmbed" in html and "Fleet telemetry report" in html and "data freshness" in html
