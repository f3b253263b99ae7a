"""Plain, Dagster-free logic of the product: paths, contracts, lake, ingest, analytics, catalog."""
