"""Ingest: landing files of a day -> validated, staged, checked and promoted lake partitions.

One module per responsibility: ``day`` (the day's files, read and validated as they stream),
``day_state`` (what a day's ingest holds and hands on), ``readers`` (one module per format and the
registry that recognises them), ``entries`` (ledger and quarantine entries), ``cross_row`` (rules across
rows), ``dedupe`` (nothing twice), ``staging`` (the staged files), ``line_texts`` (rejected lines' text)
and ``promote`` (checks, locks and promotion). Prometheus samples (metric_samples) are turned into runs
and utilisation samples by ``pipelines.lib.ingest.prometheus.derive`` once the day's samples are read.
"""

from pipelines.lib.ingest.cross_row import SAMPLE_KEY
from pipelines.lib.ingest.day import LANDING_TABLES, ingest_day, reconciliation, table_for, table_of
from pipelines.lib.ingest.day_state import METRICS, DayIngest
from pipelines.lib.ingest.promote import (
    CheckOutcome,
    PartitionOutcome,
    blocking_checks,
    ingest_partition,
)

__all__ = [
    "LANDING_TABLES",
    "METRICS",
    "SAMPLE_KEY",
    "CheckOutcome",
    "DayIngest",
    "PartitionOutcome",
    "blocking_checks",
    "ingest_day",
    "ingest_partition",
    "reconciliation",
    "table_for",
    "table_of",
]
