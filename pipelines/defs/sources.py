"""External input: the landing folder producers deliver into (observed by the landing sensor)."""

import dagster as dg

from pipelines.defs.metadata import OWNERS

landing_files = dg.AssetSpec(
    "landing_files",
    group_name="landing",
    kinds={"jsonl", "csv", "parquet"},
    owners=OWNERS,
    description="Files producers deliver to <data home>/landing/<source>/<YYYY-MM-DD>/ "
    "(runs*, utilisation_samples*; "
    "JSON Lines, CSV or Parquet, optionally gzipped). Not materialised here: the raw layer reads them.",
)
