"""Publish layer: the analyst catalog (views only, swapped in atomically) and the offline HTML report."""

import dagster as dg

from dashboards.report import write_report
from pipelines.defs.metadata import OWNERS
from pipelines.defs.resources import FleetHome
from pipelines.lib.query.warehouse import catalog_tables, publish_catalog

ALL_TABLES = catalog_tables()


@dg.asset(
    name="analyst_catalog",
    group_name="publish",
    deps=ALL_TABLES,
    kinds={"duckdb"},
    owners=OWNERS,
    pool="warehouse",
    description="DuckDB file of views only (one per lake table, named like it, documented from schemas/); "
    "rebuilt aside and swapped in, so analysts are never blocked.",
    tags={"layer": "publish"},
)
def analyst_catalog(fleet: FleetHome) -> dg.MaterializeResult:
    """Rebuild <home>/warehouse/fleet.duckdb with a view per table over absolute lake paths."""
    home = fleet.data_home()
    counts = publish_catalog(home, ALL_TABLES)
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(home.catalog_path)),
            "views": len(counts),
            "rows_per_view": dg.MetadataValue.json(counts),
            "open_with": dg.MetadataValue.text(
                f"fleet sql --home {home.root}; in Python: "
                f"duckdb.connect('{home.catalog_path}', read_only=True)"
            ),
        }
    )


@dg.asset(
    name="fleet_report",
    group_name="publish",
    # after the catalog: a run stopped while it waits for the catalog's pool has then published nothing, and
    # the report shows the day the catalog serves
    deps=[
        "analyst_catalog",
        "util_distribution",
        "server_count_hist",
        "hardware_fit",
        "trainer_vs_ps",
        "recommendations",
        "run_role_stats",
        "ingest_ledger",
        "run_efficiency",
        "server_outliers",
        "waste_summary",
    ],
    kinds={"altair", "html"},
    owners=OWNERS,
    tags={"layer": "publish"},
    description="Self-contained offline HTML report (Vega inlined) of every analysis, "
    "and each chart as PNG and SVG.",
)
def fleet_report(fleet: FleetHome) -> dg.MaterializeResult:
    """Render the report to <home>/reports/fleet_report.html and <home>/reports/charts/."""
    home = fleet.data_home()
    art = write_report(home, home.reports)
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(art.html)),
            "size_kb": round(art.html.stat().st_size / 1024, 1),
            "charts": len(art.pngs),
            "png": dg.MetadataValue.json([str(p) for p in art.pngs]),
            "svg": dg.MetadataValue.json([str(p) for p in art.svgs]),
        }
    )
