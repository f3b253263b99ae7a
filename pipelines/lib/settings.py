"""What a deployment sets, in one typed object: where the data lives, where days run, how long to wait.

Each field is resolved once, flag first, then its environment variable, then the default; a bad value is a
``ValueError`` that names the variable (or flag) and what is expected.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from pipelines.lib.paths import DEFAULT_HOME, DataHome

Executor = Literal["in_process", "celery"]
EXECUTORS: tuple[Executor, ...] = ("in_process", "celery")
_MEMORY = re.compile(r"^\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")
DUCKDB_MEMORY = "512MB"


def shown(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:" if parts.username else ":"
    return parts._replace(netloc=f"{user}***@{netloc}").geturl()


def check_broker(broker: str) -> str:
    """``broker`` if it is a Redis URL; ``ValueError`` naming what is expected otherwise."""
    if not broker:
        raise ValueError("the celery executor needs a broker: --broker redis://HOST:6379/0 or $FLEET_BROKER")
    if not broker.startswith(("redis://", "rediss://")):
        raise ValueError(f"broker {shown(broker)!r}: expected redis://HOST:PORT/DB (or rediss://)")
    return broker


@dataclass(frozen=True)
class IngestLimits:
    """What one landing file may do to the ingest ($FLEET_<FIELD> in capitals, bytes and counts as
    integers). ``batch_rows`` rows (at most ``batch_bytes`` of data) are read, validated and written at
    once: the unit of memory and of a Parquet row group. A record (JSON Lines line, CSV row, Parquet
    value, OpenMetrics line) above ``max_record_bytes`` refuses its file, and so does a file that expands
    (gzip, Parquet pages) beyond ``max_expanded_bytes`` or ``max_expansion_ratio`` times its size. A file's
    first ``max_rejects_per_file`` row rejects are quarantined one by one, the rest counted; a rejected
    row's original text is kept up to ``raw_record_max_bytes`` (marked as cut past it). The ingest's
    DuckDB side steps (repeated Prometheus samples, the derivation of runs) keep within ``duckdb_memory``
    and spill past it."""

    batch_rows: int = 200_000
    batch_bytes: int = 64 << 20
    max_record_bytes: int = 1 << 20
    max_expanded_bytes: int = 64 << 30
    max_expansion_ratio: int = 200
    max_rejects_per_file: int = 1000
    raw_record_max_bytes: int = 64 << 10
    duckdb_memory: str = DUCKDB_MEMORY

    def __post_init__(self) -> None:
        for name, least in LEAST.items():
            value = getattr(self, name)
            if not isinstance(value, int) or value < least:
                raise ValueError(f"{name} {value!r}: expected a whole number >= {least:,}")
        if not _MEMORY.match(self.duckdb_memory):
            raise ValueError(f"duckdb_memory {self.duckdb_memory!r}: expected a size such as 512MB or 2GB")

    @classmethod
    def resolve(cls, environ: Mapping[str, str]) -> IngestLimits:
        """The defaults, each overridden by its $FLEET_<FIELD> when set."""
        values: dict[str, int | str] = {}
        for name in (*LEAST, "duckdb_memory"):
            var = f"FLEET_{name.upper()}"
            text = environ.get(var, "").strip()
            if not text:
                continue
            if name == "duckdb_memory":
                values[name] = text
            elif text.replace("_", "").isdigit():
                values[name] = int(text.replace("_", ""))
            else:
                raise ValueError(f"${var}={text!r}: expected a whole number")
        return cls(**values)


# The least value of each limit: below it, ordinary telemetry would be refused or batches would be tiny.
LEAST = {
    "batch_rows": 1_000,
    "batch_bytes": 1 << 20,
    "max_record_bytes": 4 << 10,
    "max_expanded_bytes": 1 << 20,
    "max_expansion_ratio": 2,
    "max_rejects_per_file": 1,
    "raw_record_max_bytes": 1 << 10,
}
DEFAULT_LIMITS = IngestLimits()


@dataclass(frozen=True)
class Settings:
    """``home``: the data home and its lake ($FLEET_HOME, $FLEET_LAKE). ``executor``: where day runs execute,
    in processes of this machine (``in_process``) or on Celery workers (``celery``, $FLEET_EXECUTOR) reached
    over ``broker`` (redis://HOST:PORT/DB, $FLEET_BROKER). ``pool_wait_s``: the longest wait for the analyst
    catalog's writer slot ($FLEET_POOL_WAIT_S); ``worker_wait_s``: the longest wait for a worker to take a
    day ($FLEET_WORKER_WAIT_S); ``worker_silence_s``: how long a worker holding a day may leave the
    broker's pings unanswered before its day is marked failed ($FLEET_WORKER_SILENCE_S). ``ingest``: the
    limits of the ingest (``IngestLimits``)."""

    home: DataHome
    executor: Executor = "in_process"
    broker: str = ""
    pool_wait_s: float = 600.0
    worker_wait_s: float = 600.0
    worker_silence_s: float = 60.0
    ingest: IngestLimits = IngestLimits()

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise ValueError(f"executor {self.executor!r}: expected one of {', '.join(EXECUTORS)}")
        if self.executor == "celery":
            check_broker(self.broker)
        for name in ("pool_wait_s", "worker_wait_s", "worker_silence_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} {getattr(self, name)!r}: expected seconds > 0")

    @classmethod
    def resolve(
        cls,
        home: str | os.PathLike[str] | None = None,
        lake: str | None = None,
        executor: str | None = None,
        broker: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Settings:
        """Flags (the arguments) over the environment over the defaults."""
        env = os.environ if environ is None else environ

        def pick(flag, var: str, default):
            return flag if flag not in (None, "") else (env.get(var, "").strip() or default)

        def seconds(var: str, default: float) -> float:
            text = env.get(var, "").strip()
            if not text:
                return default
            try:
                return float(text)
            except ValueError:
                raise ValueError(f"${var}={text!r}: expected seconds (e.g. 600)") from None

        return cls(
            home=DataHome.resolve(pick(home, "FLEET_HOME", DEFAULT_HOME), pick(lake, "FLEET_LAKE", None)),
            executor=pick(executor, "FLEET_EXECUTOR", "in_process"),
            broker=pick(broker, "FLEET_BROKER", ""),
            pool_wait_s=seconds("FLEET_POOL_WAIT_S", 600.0),
            worker_wait_s=seconds("FLEET_WORKER_WAIT_S", 600.0),
            worker_silence_s=seconds("FLEET_WORKER_SILENCE_S", 60.0),
            ingest=IngestLimits.resolve(env),
        )
