"""Safety: nothing outside landing is read, hostile values are plain data, YAML is loaded safely."""

import json

import duckdb
import polars as pl
import pytest

from pipelines.lib.ingest import ingest_day, ingest_partition
from pipelines.lib.query.warehouse import publish_catalog
from tests.support.homes import DAY
from workload_model.catalog import CatalogError, load_hardware


def test_symlinks_out_of_landing_are_quarantined_unread(landed, hw, tmp_path):
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"run_id": "stolen"}\n')
    (landed.landing / "synthetic" / DAY / "runs-link.jsonl").symlink_to(secret)
    outside_day = tmp_path / "elsewhere"
    outside_day.mkdir()
    (outside_day / "runs.jsonl").write_text('{"run_id": "stolen-2"}\n')
    (landed.landing / "evil").mkdir()
    (landed.landing / "evil" / DAY).symlink_to(outside_day, target_is_directory=True)
    r = ingest_day(landed, DAY, hw.platforms)
    q = r.quarantine.filter(pl.col("reason_code") == "file_outside_landing")
    # the linked day folder is one entry: nothing under it is listed, nor read
    assert sorted(q["source_file"]) == [f"evil/{DAY}/", f"synthetic/{DAY}/runs-link.jsonl"]
    assert "outside the landing folder" in q["message"][0]
    assert "stolen" not in r.runs["run_id"].to_list() and "stolen-2" not in r.runs["run_id"].to_list()


def test_hostile_values_are_stored_as_plain_data(landed, hw, small_day):
    hostile = "x'); DROP TABLE runs; --\"\\"
    run = json.loads(
        small_day.runs.head(1)
        .with_columns(pl.col("start_ts", "end_ts").dt.to_string("%Y-%m-%dT%H:%M:%SZ"))
        .write_ndjson()
        .splitlines()[0]
    )
    run.update(run_id=hostile, model_name="M1'prod")
    path = landed.landing / "hostile" / DAY / "runs.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(run) + "\n")
    ingest_partition(landed, DAY, hw.platforms)
    publish_catalog(landed)
    con = duckdb.connect(str(landed.catalog_path), read_only=True)
    try:
        rows = con.execute("SELECT run_id, model_name FROM runs WHERE run_id = ?", [hostile]).fetchall()
        total = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        con.close()
    assert rows == [(hostile, "M1'prod")]
    assert total == small_day.runs.height + 1


def test_catalog_yaml_is_loaded_safely(tmp_path):
    evil = tmp_path / "hardware.yaml"
    evil.write_text('platforms: !!python/object/apply:os.system ["echo pwned > /tmp/fleet-pwned"]\n')
    with pytest.raises(CatalogError, match="not valid YAML"):
        load_hardware(evil)


def test_user_catalog_errors_name_the_file_and_field(tmp_path):
    bad = tmp_path / "hardware.yaml"
    bad.write_text("platforms:\n  my_box:\n    gpus: 8\n    dram_gb: -1\n")
    with pytest.raises(
        CatalogError, match=r"hardware.yaml: platform 'my_box' field dram_gb must be a non-negative number"
    ):
        load_hardware(bad)
    bad.write_text("platforms:\n  my_box:\n    gpus: 8\n    placements: [gpu_hbm]\n")
    with pytest.raises(CatalogError, match="lists placements but lacks"):
        load_hardware(bad)
