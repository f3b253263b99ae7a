"""What a deployment sets, in one typed object: where the data lives, where days run, how long to wait.

Each field is resolved once, flag first, then its environment variable, then the default; a bad value is a
``ValueError`` that names the variable (or flag) and what is expected. Every setting is declared once, as a
``Setting`` record (variable, flag, default, meaning): resolution reads it, and the docs site's settings
page (pipelines/reference/settings.py) lists every record of ``SETTINGS``, so the two cannot disagree.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pipelines.lib.paths import DEFAULT_HOME, HOME_ENV, LAKE_ENV, DataHome, lake_uri

Executor = Literal["in_process", "celery"]
EXECUTORS: tuple[Executor, ...] = ("in_process", "celery")
_MEMORY = re.compile(r"^\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$", re.ASCII)
_WHOLE = re.compile(r"[0-9](_?[0-9])*", re.ASCII)  # not str.isdigit: it takes "²", which int() refuses
INT64_MAX = 2**63 - 1  # what DuckDB and Arrow hold
DUCKDB_MEMORY = "512MB"


@dataclass(frozen=True)
class Setting:
    """One setting: the environment variable it is read from, the `fleet` flag that overrides it (if any),
    its default and what it means, in one sentence or two."""

    env: str
    default: Any
    meaning: str
    flag: str = ""
    unit: str = ""  # "bytes" or "s": how the reference page shows the default
    shown_default: str = ""  # the default in words, where the value alone would not say it


HOME = Setting(
    HOME_ENV,
    DEFAULT_HOME,
    "The data home: the folder that holds everything the product writes (landing files, lake, analyst "
    "catalog, reports, the Dagster instance).",
    flag="--home",
    shown_default="./data",
)
LAKE = Setting(
    LAKE_ENV,
    "",
    "Where the lake is: a local folder, or s3://bucket/prefix on S3-compatible storage (reached the standard "
    "AWS way: AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...).",
    shown_default="<home>/lake",
)
EXECUTOR = Setting(
    "FLEET_EXECUTOR",
    "in_process",
    "Where day runs execute: in processes of this machine (in_process) or on `fleet worker`s over Celery "
    "(celery; the merge still runs where `fleet run` does).",
    flag="--executor",
)
BROKER = Setting(
    "FLEET_BROKER",
    "",
    "The Celery workers' Redis broker, redis://HOST:PORT/DB (rediss:// for TLS), needed by the celery "
    "executor and `fleet worker`; its password is never shown.",
    flag="--broker",
    shown_default="(none)",
)
POOL_WAIT_S = Setting(
    "FLEET_POOL_WAIT_S",
    600.0,
    "The longest wait for the analyst catalog's writer slot (the `warehouse` pool); past it `fleet run` "
    "exits 1 naming the run that holds it, having published nothing.",
    unit="s",
)
WORKER_WAIT_S = Setting(
    "FLEET_WORKER_WAIT_S",
    600.0,
    "The longest wait for a worker to take a day while none of the night's days runs; past it the days "
    "still queued are canceled.",
    unit="s",
)
WORKER_SILENCE_S = Setting(
    "FLEET_WORKER_SILENCE_S",
    60.0,
    "How long a worker holding a day may leave the broker's pings unanswered before its day is marked "
    "failed.",
    unit="s",
)
WORKER_NAME = Setting(
    "FLEET_WORKER_NAME",
    "",
    "Set by `fleet worker` (its name) for the day runs and steps it executes, where a split day's `slices` "
    "metadata names who read each slice; not for users to set.",
    shown_default="(the host's name)",
)
LAKE_CACHE = Setting(
    "FLEET_LAKE_CACHE_BYTES",
    8 << 30,
    "The local copies of an object-store lake's files a data home keeps in <home>/cache/lake/ "
    "(0: none, the store is read every time).",
    unit="bytes",
)
ALERT_WEBHOOK = Setting(
    "FLEET_ALERT_WEBHOOK_URL",
    "",
    "A Slack-compatible incoming webhook that failed nightly runs and failed error checks are posted to; "
    "a secret, never logged or printed. Unset: no alerts.",
    shown_default="(none: no alerts)",
)
# The ingest's limits, by IngestLimits field; each is read from its variable by IngestLimits.resolve.
LIMITS: dict[str, Setting] = {
    "batch_rows": Setting(
        "FLEET_BATCH_ROWS",
        200_000,
        "Rows read, validated and written at once: the unit of memory and of a Parquet row group "
        "(OpenMetrics text is judged 16 MiB at a time instead).",
    ),
    "batch_bytes": Setting(
        "FLEET_BATCH_BYTES",
        64 << 20,
        "... and at most this much data per batch (JSON Lines' fast tiers).",
        unit="bytes",
    ),
    "max_record_bytes": Setting(
        "FLEET_MAX_RECORD_BYTES",
        1 << 20,
        "The largest record (JSON Lines or OpenMetrics line, Parquet text value, CSV header); a file with a "
        "larger one is refused. A CSV data row may be up to the larger of this and 8 MiB (pyarrow's parse "
        "block), a Prometheus API series up to 16 MiB.",
        unit="bytes",
    ),
    "max_expanded_bytes": Setting(
        "FLEET_MAX_EXPANDED_BYTES",
        64 << 30,
        "A file that expands (gzip, Parquet pages) beyond this is refused.",
        unit="bytes",
    ),
    "max_expansion_ratio": Setting(
        "FLEET_MAX_EXPANSION_RATIO",
        200,
        "... or beyond this many times its size, once past 16 MiB.",
    ),
    "max_rejects_per_file": Setting(
        "FLEET_MAX_REJECTS_PER_FILE",
        1000,
        "A file's first row rejects quarantined one by one; the rest are counted in one rejects_capped "
        "entry.",
    ),
    "raw_record_max_bytes": Setting(
        "FLEET_RAW_RECORD_MAX_BYTES",
        64 << 10,
        "A rejected row's original text is kept up to this size (marked as cut past it).",
        unit="bytes",
    ),
    "slice_bytes": Setting(
        "FLEET_SLICE_BYTES",
        0,
        "A day whose utilisation-sample files hold more than this is split into slices of about this size "
        "(by source, then in landing order), each read as a step of the day's run and merged (0: never). "
        "Off by default: one pass already keeps 1.3 cores busy, and on 2 cores a split day took 1.2-1.9x as "
        "long.",
        unit="bytes",
    ),
    "quantile_values": Setting(
        "FLEET_QUANTILE_VALUES",
        64_000_000,
        "Sample values one exact p50/p95 query holds (DuckDB cannot spill it; about 10 bytes a value): past "
        "it, the day's quantiles are taken over batches of whole runs of about this many values (a run above "
        "it is a batch alone), each scanning the part again (for runs spanning parts, every part of the "
        "day).",
    ),
    "duckdb_memory": Setting(
        "FLEET_DUCKDB_MEMORY",
        DUCKDB_MEMORY,
        "Memory of the ingest's DuckDB side steps (repeated Prometheus samples, the derivation of runs); "
        "they spill to disk past it. A size such as 512MB or 2GB.",
    ),
}


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


@dataclass(frozen=True)
class IngestLimits:
    """What one landing file may do to the ingest, and how a day is read: one field per record of
    ``LIMITS`` (its variable $FLEET_<FIELD>, default and meaning); bytes and counts are whole numbers."""

    batch_rows: int = LIMITS["batch_rows"].default
    batch_bytes: int = LIMITS["batch_bytes"].default
    max_record_bytes: int = LIMITS["max_record_bytes"].default
    max_expanded_bytes: int = LIMITS["max_expanded_bytes"].default
    max_expansion_ratio: int = LIMITS["max_expansion_ratio"].default
    max_rejects_per_file: int = LIMITS["max_rejects_per_file"].default
    raw_record_max_bytes: int = LIMITS["raw_record_max_bytes"].default
    slice_bytes: int = LIMITS["slice_bytes"].default
    quantile_values: int = LIMITS["quantile_values"].default
    duckdb_memory: str = LIMITS["duckdb_memory"].default

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
        values: dict[str, Any] = {}  # checked field by field in __post_init__
        for name, setting in LIMITS.items():
            var = setting.env
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
    "quantile_values": 1_000,
}
DEFAULT_LIMITS = IngestLimits()


LAKE_CACHE_BYTES: int = LAKE_CACHE.default


def lake_cache_bytes(environ: Mapping[str, str]) -> int:
    """How many bytes of local copies of an object-store lake's files a data home keeps
    ($FLEET_LAKE_CACHE_BYTES; 0 reads the store directly every time)."""
    text = environ.get(LAKE_CACHE.env, "").strip()
    if not text:
        return LAKE_CACHE_BYTES
    number = whole_number(text)
    if number is None:
        raise ValueError(f"${LAKE_CACHE.env}={text!r}: expected a whole number of bytes (0 for none)")
    return number


def whole_number(text: str) -> int | None:
    """``text`` as a whole number (ASCII digits, ``_`` between them) that fits 64 bits, else None."""
    text = text.strip()
    if not _WHOLE.fullmatch(text):
        return None
    number = int(text)
    return number if number <= INT64_MAX else None


def executor_named(name: str) -> Executor:
    """One of EXECUTORS, by its name."""
    for known in EXECUTORS:
        if name == known:
            return known
    raise ValueError(f"executor {name!r}: expected one of {', '.join(EXECUTORS)}")


@dataclass(frozen=True)
class Settings:
    """``home``: the data home and its lake (``HOME``, ``LAKE``); ``executor`` and ``broker``: where day runs
    execute; ``pool_wait_s``, ``worker_wait_s``, ``worker_silence_s``: how long to wait; ``ingest``: the
    limits of the ingest (``IngestLimits``); ``lake_cache_bytes``: the local copies of an object-store
    lake's files (see ``pipelines.lib.storage.lake``). Each field's variable, default and meaning: its
    ``Setting``."""

    home: DataHome
    executor: Executor = EXECUTOR.default
    broker: str = field(default=BROKER.default, repr=False)  # may hold a password
    pool_wait_s: float = POOL_WAIT_S.default
    worker_wait_s: float = WORKER_WAIT_S.default
    worker_silence_s: float = WORKER_SILENCE_S.default
    ingest: IngestLimits = IngestLimits()
    lake_cache_bytes: int = LAKE_CACHE_BYTES

    def __post_init__(self) -> None:
        executor_named(self.executor)
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

        def pick(flag, setting: Setting):
            return flag if flag not in (None, "") else (env.get(setting.env, "").strip() or setting.default)

        def seconds(setting: Setting) -> float:
            text = env.get(setting.env, "").strip()
            if not text:
                return setting.default
            try:
                return float(text)
            except ValueError:
                raise ValueError(f"${setting.env}={text!r}: expected seconds (e.g. 600)") from None

        root = Path(pick(home, HOME)).expanduser().resolve()
        return cls(
            home=DataHome(root, lake_uri(pick(lake, LAKE), root)),
            executor=executor_named(pick(executor, EXECUTOR)),
            broker=pick(broker, BROKER),
            pool_wait_s=seconds(POOL_WAIT_S),
            worker_wait_s=seconds(WORKER_WAIT_S),
            worker_silence_s=seconds(WORKER_SILENCE_S),
            ingest=IngestLimits.resolve(env),
            lake_cache_bytes=lake_cache_bytes(env),
        )


def reader_name() -> str:
    """Who this process is, in words for a day's record: its `fleet worker`'s name, else its host, and its
    pid."""
    return f"{os.environ.get(WORKER_NAME.env) or socket.gethostname()} (process {os.getpid()})"


# Every setting, in the order the reference page lists them.
SETTINGS: tuple[Setting, ...] = (
    HOME,
    LAKE,
    EXECUTOR,
    BROKER,
    POOL_WAIT_S,
    WORKER_WAIT_S,
    WORKER_SILENCE_S,
    WORKER_NAME,
    LAKE_CACHE,
    *LIMITS.values(),
    ALERT_WEBHOOK,
)
