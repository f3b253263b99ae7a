"""One typed settings object: where the data lives, where the lake is, how runs execute, the ingest limits.

Read once from the environment (every field has a default that makes `make demo` work with nothing to
start) and passed on explicitly: to the Dagster resource, to ingest, to the storage layer.

    FLEET_HOME            the data home (landing, staging, warehouse, reports, the Dagster instance); ./data
    FLEET_LAKE            the lake: a local folder (default <home>/lake) or s3://bucket/prefix
    FLEET_EXECUTOR        in_process (default) or celery
    FLEET_BROKER_URL      the Celery broker (redis://127.0.0.1:6379/0)
    FLEET_POOL_WAIT_S     longest wait of `fleet run` for the analyst catalog's pool (600)
    FLEET_DUCKDB_MEMORY   DuckDB's memory limit for ingest's out-of-core steps (512MB)

Object storage is reached the standard AWS way (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, or a profile); credentials are never printed or logged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from pipelines.lib.paths import DataHome

EXECUTORS = ("in_process", "celery")


@dataclass(frozen=True)
class IngestLimits:
    """What one landing file may cost: the unit of memory and the refusals of hostile input."""

    batch_rows: int = 200_000  # rows per batch (and per Parquet row group)
    batch_bytes: int = 64 << 20  # ... and at most this much data, whatever the rows' width
    max_record_bytes: int = 1 << 20  # a record (JSONL line, CSV row, Parquet value) above it is refused
    max_expanded_bytes: int = 64 << 30  # a file expanding beyond this (gzip, Parquet pages) is refused
    max_expansion_ratio: int = 200  # ... and so is one expanding more than this once past the floor
    ratio_floor_bytes: int = 16 << 20
    max_rejects_per_file: int = 1000  # row rejects listed one by one; the rest are counted
    raw_record_max_bytes: int = 64 << 10  # a quarantined record's text is cut here
    max_reads: int = 3  # a file that changes while it is read is read again this many times


@dataclass(frozen=True)
class Settings:
    """Everything a run needs to know about where data lives and how it executes."""

    home: DataHome  # the data home and its lake
    executor: str = "in_process"
    broker_url: str = "redis://127.0.0.1:6379/0"
    pool_wait_s: float = 600.0
    duckdb_memory: str = "512MB"
    limits: IngestLimits = field(default_factory=IngestLimits)

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise ValueError(f"executor {self.executor!r}: expected one of {', '.join(EXECUTORS)}")

    @classmethod
    def load(
        cls, home: str | os.PathLike[str] | None = None, lake: str | None = None, executor: str | None = None
    ) -> Settings:
        """Settings from the arguments, else the environment, else the defaults."""
        env = os.environ
        return cls(
            home=DataHome.resolve(home, lake),
            executor=(executor or env.get("FLEET_EXECUTOR", "")).strip() or "in_process",
            broker_url=env.get("FLEET_BROKER_URL", "").strip() or "redis://127.0.0.1:6379/0",
            pool_wait_s=float(env.get("FLEET_POOL_WAIT_S", "") or 600),
            duckdb_memory=env.get("FLEET_DUCKDB_MEMORY", "").strip() or "512MB",
        )
