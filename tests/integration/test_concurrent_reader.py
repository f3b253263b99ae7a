"""An analyst holding the catalog open read-only is never blocked by a republish, and vice versa."""

import duckdb

from pipelines.lib.ingest import ingest_partition
from pipelines.lib.query.warehouse import publish_catalog
from pipelines.lib.storage import lake
from tests.support.homes import DAY


def test_republish_while_an_analyst_reads(landed, hw, small_day):
    ingest_partition(landed, DAY, hw.platforms)
    publish_catalog(landed)
    analyst = duckdb.connect(str(landed.catalog_path), read_only=True)
    try:
        before = analyst.execute("SELECT count(*) FROM runs").fetchone()[0]
        assert before == small_day.runs.height
        # The pipeline adds a day and republishes while the analyst's session is open.
        lake.write_partition(landed, "runs", "2026-11-21", lake.read_partition(landed, "runs", DAY).head(3))
        counts = publish_catalog(landed)
        assert counts["runs"] == before + 3
        # The open session answers from the old catalog file over the old snapshot (the vacuum keeps it).
        assert analyst.execute("SELECT count(*) FROM runs").fetchone()[0] == before
        assert (
            analyst.execute("SELECT count(*) FROM utilisation_samples").fetchone()[0]
            == small_day.samples.height
        )
    finally:
        analyst.close()
    fresh = duckdb.connect(str(landed.catalog_path), read_only=True)
    try:
        assert fresh.execute("SELECT count(*) FROM runs").fetchone()[0] == before + 3
    finally:
        fresh.close()
    assert not list(landed.warehouse.glob("*.building*"))
