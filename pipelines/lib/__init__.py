"""Plain, Dagster-free logic of the product, grouped by domain; each package imports only those below it.

- ``operations``: what operators see and check (preflight, monitoring, alerts);
- ``ingest``: landing files and public traces to validated lake partitions (and Prometheus);
- ``analysis``: the day's statistics, right-sizing, waste, the model's fit and recommendations;
- ``query``: SQL files, canned queries, the analyst catalog and its shell;
- ``storage``: the Delta lake, the landing folder, the result cache.

Beneath them, modules every domain shares: paths, contracts, settings, errors and exit codes, atomic
file writes, safe YAML, typed frames, named processes.
"""
