"""Publish layer: the analyst catalog (views only, swapped in atomically) and the offline HTML report."""


import dagster as dg
import polars as pl

from dashboards.report import ReportInputs, write_report
from pipelines.defs.metadata import OWNERS
from pipelines.defs.resources import FleetHome
from pipelines.lib import lake
from pipelines.lib.catalog import publish_catalog
from pipelines.lib.contracts import contracts

ALL_TABLES = sorted(contracts())


@dg.asset(
    name="analyst_catalog", group_name="publish", deps=ALL_TABLES, kinds={"duckdb"}, owners=OWNERS, pool="warehouse",
    description="DuckDB file of views only (one per lake table, named like it, documented from schemas/); "
                "rebuilt aside and swapped in, so analysts are never blocked.",
    tags={"layer": "publish"},
)
def analyst_catalog(fleet: FleetHome) -> dg.MaterializeResult:
    """Rebuild <home>/warehouse/fleet.duckdb with a view per table over absolute lake paths."""
    home = fleet.data_home()
    counts = publish_catalog(home, ALL_TABLES)
    return dg.MaterializeResult(metadata={
        "path": dg.MetadataValue.path(str(home.catalog_path)), "views": len(counts),
        "rows_per_view": dg.MetadataValue.json(counts),
        "open_with": dg.MetadataValue.text(f"duckdb -readonly {home.catalog_path}")})


def report_summary(home) -> dict[str, str]:
    """Headline counts for the report, from the lake."""
    runs = lake.read_table(home, "runs")
    ledger = lake.read_table(home, "ingest_ledger")
    days = sorted(set(runs["day"].cast(pl.String).to_list())) if runs.height else []
    return {
        "days": f"{len(days)} ({days[0]} .. {days[-1]})" if days else "0",
        "runs": f"{runs.height:,}",
        "samples accepted": f"{int(ledger.filter(pl.col('table_name') == 'utilisation_samples')['rows_accepted'].sum()):,}",
        "rows quarantined": f"{int(ledger['rows_quarantined'].sum()):,}" if ledger.height else "0",
        "platforms": ", ".join(sorted(set(runs["platform"].drop_nulls().to_list()))) if runs.height else "-",
    }


@dg.asset(
    name="fleet_report", group_name="publish", deps=["util_distribution", "server_count_hist", "hardware_fit",
                                                     "trainer_vs_ps", "recommendations"],
    kinds={"altair", "html"}, owners=OWNERS, tags={"layer": "publish"},
    description="Self-contained offline HTML report (Vega inlined) of every analysis.",
)
def fleet_report(fleet: FleetHome) -> dg.MaterializeResult:
    """Render the Altair report to <home>/reports/fleet_report.html."""
    home = fleet.data_home()
    inputs = ReportInputs(
        util_distribution=lake.read_table(home, "util_distribution"),
        server_count_hist=lake.read_table(home, "server_count_hist"),
        hardware_fit=lake.read_table(home, "hardware_fit"),
        trainer_vs_ps=lake.read_table(home, "trainer_vs_ps"),
        recommendations=lake.read_table(home, "recommendations"),
        summary=report_summary(home),
    )
    path = write_report(inputs, home.report_path)
    return dg.MaterializeResult(metadata={"path": dg.MetadataValue.path(str(path)),
                                          "size_kb": round(path.stat().st_size / 1024, 1)})
