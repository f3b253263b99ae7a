"""What a deployment sets, in one typed object: where the data lives, where days run, how long to wait.

Each field is resolved once, flag first, then its environment variable, then the default; a bad value is a
``ValueError`` that names the variable (or flag) and what is expected.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pipelines.lib.paths import DEFAULT_HOME, DataHome, lake_uri

Executor = Literal["in_process", "celery"]
EXECUTORS: tuple[Executor, ...] = ("in_process", "celery")
_MEMORY = re.compile(r"^\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$", re.ASCII)
_WHOLE = re.compile(r"[0-9](_?[0-9])*", re.ASCII)  # not str.isdigit: it takes "²", which int() refuses
INT64_MAX = 2**63 - 1  # what DuckDB and Arrow hold
DUCKDB_MEMORY = "512MB"


_USERINFO = re.compile(r"^(?P<head>[a-z][a-z0-9+.-]*://[^:/@]*:)(?P<password>.*)@", re.IGNORECASE)
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&]password=)(?P<password>[^&#]*)", re.IGNORECASE)


def shown(url: str) -> str:
    """``url`` without its password (in the user info, even unencoded, or as ``?password=``), for
    messages and logs."""
    url = _USERINFO.sub(lambda m: f"{m['head']}***@" if m["password"] else m[0], url)
    return _QUERY_PASSWORD.sub(lambda m: f"{m['head']}***", url)


def scrubbed(error: object, url: str) -> str:
    """``error`` as one line of at most 300 characters, with ``url``'s password masked if it shows."""
    text = " ".join(str(error).split())[:300] or type(error).__name__
    for pattern in (_USERINFO, _QUERY_PASSWORD):
        m = pattern.search(url)
        if m and m["password"]:
            text = text.replace(m["password"], "***")
    return text


def check_broker(broker: str) -> str:
    """``broker`` if it is a Redis URL; ``ValueError`` naming what is expected otherwise."""
    if not broker:
        raise ValueError("the celery executor needs a broker: --broker redis://HOST:6379/0 or $FLEET_BROKER")
    if not broker.startswith(("redis://", "rediss://")):
        raise ValueError(f"broker {shown(broker)!r}: expected redis://HOST:PORT/DB (or rediss://)")
    return broker


# Set in a `fleet worker`'s processes: the broker, where a split day it runs offers its slices.
WORKER_BROKER_ENV = "FLEET_WORKER_BROKER"


@dataclass(frozen=True)
class IngestLimits:
    """What one landing file may do to the ingest ($FLEET_<FIELD> in capitals, bytes and counts as
    integers). ``batch_rows`` rows are read, validated and written at once: the unit of memory and of a
    Parquet row group (OpenMetrics text is judged 16 MiB at a time instead); JSON Lines' fast tiers also
    cut a batch at ``batch_bytes``. A record (JSON Lines or OpenMetrics line, Parquet text value, CSV
    header) above ``max_record_bytes`` refuses its file; a CSV data row may be up to the larger of that
    and 8 MiB (pyarrow's parse block), a Prometheus API series up to 16 MiB. A file that expands (gzip,
    Parquet pages) beyond ``max_expanded_bytes``, or beyond ``max_expansion_ratio`` times its size once
    past 16 MiB, is refused. A file's first ``max_rejects_per_file`` row rejects are quarantined one by
    one, the rest counted; a rejected row's original text is kept up to ``raw_record_max_bytes`` (marked
    as cut past it). The ingest's DuckDB side steps (repeated Prometheus samples, the derivation of runs)
    keep within ``duckdb_memory`` and spill past it. A day whose utilisation-sample files hold more than
    ``slice_bytes`` (0: never) is split into slices of about that size (by source, then in landing order),
    read ``slice_processes`` at a time (0: one per core of the machine that runs the day) in processes of
    their own and merged. Off by default: one pass already keeps 1.3 cores busy, and on 2 cores a split
    day took 1.2-1.9x as long. An exact p50/p95 holds every value of its groups in memory (DuckDB cannot
    spill it), so the day's analyses take them over batches of runs of about ``quantile_values`` sample
    values (about 10 bytes each; a run above it is a batch alone)."""

    batch_rows: int = 200_000
    batch_bytes: int = 64 << 20
    max_record_bytes: int = 1 << 20
    max_expanded_bytes: int = 64 << 30
    max_expansion_ratio: int = 200
    max_rejects_per_file: int = 1000
    raw_record_max_bytes: int = 64 << 10
    slice_bytes: int = 0
    slice_processes: int = 0
    quantile_values: int = 64_000_000
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
            elif (number := whole_number(text)) is not None:
                values[name] = number
            else:
                raise ValueError(f"${var}={text!r}: expected a whole number (0-9, at most {INT64_MAX:,})")
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
    "slice_bytes": 0,
    "slice_processes": 0,
    "quantile_values": 1_000,
}
DEFAULT_LIMITS = IngestLimits()


LAKE_CACHE_BYTES = 8 << 30


def lake_cache_bytes(environ: Mapping[str, str]) -> int:
    """How many bytes of local copies of an object-store lake's files a data home keeps
    ($FLEET_LAKE_CACHE_BYTES; 0 reads the store directly every time)."""
    text = environ.get("FLEET_LAKE_CACHE_BYTES", "").strip()
    if not text:
        return LAKE_CACHE_BYTES
    number = whole_number(text)
    if number is None:
        raise ValueError(f"$FLEET_LAKE_CACHE_BYTES={text!r}: expected a whole number of bytes (0 for none)")
    return number


def whole_number(text: str) -> int | None:
    """``text`` as a whole number (ASCII digits, ``_`` between them) that fits 64 bits, else None."""
    text = text.strip()
    if not _WHOLE.fullmatch(text):
        return None
    number = int(text)
    return number if number <= INT64_MAX else None


@dataclass(frozen=True)
class Settings:
    """``home``: the data home and its lake ($FLEET_HOME, $FLEET_LAKE). ``executor``: where day runs execute,
    in processes of this machine (``in_process``) or on Celery workers (``celery``, $FLEET_EXECUTOR) reached
    over ``broker`` (redis://HOST:PORT/DB, $FLEET_BROKER). ``pool_wait_s``: the longest wait for the analyst
    catalog's writer slot ($FLEET_POOL_WAIT_S); ``worker_wait_s``: the longest wait for a worker to take a
    day ($FLEET_WORKER_WAIT_S); ``worker_silence_s``: how long a worker holding a day may leave the
    broker's pings unanswered before its day is marked failed ($FLEET_WORKER_SILENCE_S). ``ingest``: the
    limits of the ingest (``IngestLimits``). ``lake_cache_bytes``: the local copies of an object-store
    lake's files a data home keeps ($FLEET_LAKE_CACHE_BYTES, see ``pipelines.lib.lake``)."""

    home: DataHome
    executor: Executor = "in_process"
    broker: str = field(default="", repr=False)  # may hold a password
    pool_wait_s: float = 600.0
    worker_wait_s: float = 600.0
    worker_silence_s: float = 60.0
    ingest: IngestLimits = IngestLimits()
    lake_cache_bytes: int = LAKE_CACHE_BYTES

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

        root = Path(pick(home, "FLEET_HOME", DEFAULT_HOME)).expanduser().resolve()
        return cls(
            home=DataHome(root, lake_uri(pick(lake, "FLEET_LAKE", ""), root)),
            executor=pick(executor, "FLEET_EXECUTOR", "in_process"),
            broker=pick(broker, "FLEET_BROKER", ""),
            pool_wait_s=seconds("FLEET_POOL_WAIT_S", 600.0),
            worker_wait_s=seconds("FLEET_WORKER_WAIT_S", 600.0),
            worker_silence_s=seconds("FLEET_WORKER_SILENCE_S", 60.0),
            ingest=IngestLimits.resolve(env),
            lake_cache_bytes=lake_cache_bytes(env),
        )
