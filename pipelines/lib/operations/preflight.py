"""Checks of what a user hands the product (a data home, its catalogs, query parameters, a workload file),
done before any work starts so that a mistake is reported in one line instead of a traceback from deep inside.
"""

from __future__ import annotations

import errno
import math
import os
import re
import shutil
from pathlib import Path

import duckdb

from pipelines.lib import safe_yaml
from pipelines.lib.errors import Unavailable, UsageError
from pipelines.lib.fileio import causes, engine_error, full_disk, size_text
from pipelines.lib.paths import DataHome
from pipelines.lib.settings import INT64_MAX, whole_number
from pipelines.lib.storage.landing import is_day

# DuckDB's read_parquet and Polars' scans expand these in a path, so a home holding them reads no files.
GLOB_CHARS = "*?[]{}"


def check_home(home: DataHome) -> None:
    """The data home must be a folder (or not exist yet) whose path holds no file-pattern characters."""
    bad = "".join(c for c in GLOB_CHARS if c in str(home.root))
    if bad:
        raise UsageError(
            f"data home {home.root} contains {bad!r}, which the lake's readers take as a file pattern; "
            "choose a folder without * ? [ ] { } (--home or FLEET_HOME)"
        )
    if home.root.exists() and not home.root.is_dir():
        raise UsageError(
            f"data home {home.root} is a file, not a folder; give a folder (--home or FLEET_HOME)"
        )


def check_lake(home: DataHome) -> None:
    """A lake on object storage answers before any work starts (a local lake is checked by writing)."""
    if not home.remote_lake:
        return
    from pipelines.lib.storage.lake import s3

    try:
        s3.probe(home.lake_uri)
    except Exception as exc:  # botocore's and s3fs's errors alike: one line, no credentials
        raise Unavailable(
            f"cannot reach the lake {home.lake_uri}: {_one_line(s3.redact(str(exc)))}; check "
            "AWS_ENDPOINT_URL, AWS_REGION and the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
            "or a profile)"
        ) from None


def check_user_catalogs(home: DataHome, lenient: bool = False) -> None:
    """The user's hardware.yaml, models.yaml and prometheus.yaml (the Prometheus mapping) in the data home,
    if present, load and validate. With ``lenient`` (the planning commands), only the catalog files
    themselves must be readable: an invalid entry is left out by the command, which names it, and the other
    entries stay usable."""
    from pipelines.lib.ingest.prometheus.mapping import MappingError, load_mapping, user_file
    from workload_model.catalog import CatalogError, load_hardware, load_models

    for name, section in (("hardware.yaml", "platforms"), ("models.yaml", "models")):
        path = home.user_catalog_dir / name
        if not path.exists():
            continue
        fix = f"fix {path} or move it away"
        try:
            data = safe_yaml.load_file(path)
        except safe_yaml.YamlLimitError as exc:
            raise UsageError(f"user catalog {exc}; {fix}") from None
        entries = (data or {}).get(section) if isinstance(data, dict) else None
        if data and (not isinstance(data, dict) or not isinstance(entries or {}, dict)):
            raise UsageError(f"user catalog {path}: expected '{section}:' mapping names to fields; {fix}")
        for key, spec in (entries or {}).items():
            if not lenient and not isinstance(spec, dict):
                raise UsageError(
                    f"user catalog {path}: {section[:-1]} {key!r} is not a mapping of fields; {fix}"
                )
    try:
        hw = load_hardware(home.user_catalog_dir / "hardware.yaml", lenient)
        load_models(home.user_catalog_dir / "models.yaml", lenient)
    except CatalogError as exc:
        raise UsageError(f"user catalog {_one_line(str(exc))}; fix or move that file") from None
    if user_file(home).exists():
        try:
            load_mapping(home, frozenset(hw.platforms))
        except MappingError as exc:
            raise UsageError(f"Prometheus mapping {_one_line(str(exc))}; fix or move that file") from None


def check_catalog_readable(catalog: Path) -> None:
    """The analyst catalog exists and a read-only session can open it now."""
    if not catalog.exists():
        raise UsageError(
            f"no analyst catalog at {catalog}; build it with `fleet run` (or `fleet demo`) first"
        )
    try:
        duckdb.connect(str(catalog), read_only=True).close()
    except duckdb.IOException as exc:
        text = str(exc)
        if "lock" not in text.lower():
            raise UsageError(
                f"cannot open the analyst catalog {catalog}: {_one_line(text)}; rebuild it with `fleet run`"
            ) from None
        pid = re.search(r"PID (\d+)", text)
        holder = f"process {pid.group(1)}" if pid else "another process"
        raise UsageError(
            f"the analyst catalog {catalog} is open for writing in {holder}; close that session "
            "(analysts open it read-only: `fleet sql`, `duckdb.connect(path, read_only=True)`) and retry"
        ) from None


def check_query_params(query, params: dict[str, str]) -> None:
    """No parameter sets a constant of the stored data (a histogram's bin count); values of known
    parameters have the type of their default: integer parameters are counts and at least 1, date
    parameters are YYYY-MM-DD. Unknown names are left to the query runner to refuse."""
    from pipelines.lib.query.queries import fixed_parameter

    defaults = query.defaults
    for key in params:
        if key in query.constants:
            raise UsageError(f"--param {fixed_parameter(query, key)}")
    for key, value in params.items():
        default = defaults.get(key)
        if isinstance(default, int) and not isinstance(default, bool):
            number = whole_number(value)
            if number is None or number < 1:
                raise UsageError(
                    f"--param {key}={value!r}: expected a whole number from 1 to {INT64_MAX:,} "
                    f"(default {default})"
                )
        elif isinstance(default, str) and is_day(default.strip()) and not is_day(value.strip()):
            raise UsageError(f"--param {key}={value!r}: expected a date YYYY-MM-DD (default {default})")


def check_workload_config(path: Path) -> None:
    """A workload file is small, plain YAML or JSON, a mapping, with finite numbers only."""
    if not path.is_file():
        raise UsageError(f"--config {path} does not exist; give a workload YAML or JSON file")
    try:
        data = safe_yaml.load_file(path)
    except safe_yaml.YamlLimitError as exc:
        raise UsageError(f"--config {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"--config {path}: expected a mapping of workload fields (field: value per line)")
    for key, value in data.items():
        if not is_finite_or_text(value):
            raise UsageError(f"--config {path}: {key}: {value!r} is not a finite number")


def is_finite_or_text(value: object) -> bool:
    """False for numbers, or text reading as a number, that are infinite or not a number."""
    if isinstance(value, bool):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        try:
            return math.isfinite(float(value))
        except ValueError:
            return True
    return True


# Below this much free space, a storage engine's vague I/O error (SQLite's "disk I/O error") is taken for
# a full disk.
NEARLY_FULL_BYTES = 16 * 2**20
# What this product's commands that stage a day can say of a full disk (cf. ``disk_full``).
STAGED_NOTHING_KEPT = (
    "What this run staged was removed and the lake's published views still show the last complete night"
)


def _vague_io_error(exc: BaseException) -> bool:
    """SQLite's or DuckDB's I/O error, or EIO: what a full disk can look like from a storage engine."""
    return any(
        (isinstance(e, OSError) and e.errno == errno.EIO)
        or (engine_error(e)[0] in ("sqlite3", "duckdb") and "i/o error" in str(e).lower())
        for e in causes(exc)
    )


def _usage(where: Path):
    probe = where
    try:
        while not os.path.exists(probe) and probe != probe.parent:
            probe = probe.parent
        return shutil.disk_usage(probe)
    except OSError:
        return None


def disk_full(exc: BaseException, where: Path, then: str = "") -> str | None:
    """If ``exc`` (or an error behind it) says a disk is full, one line saying which, how full it is now,
    ``then`` (what stays as it was, said by the caller who knows) and what to do; None for any other error.
    A storage engine's vague I/O error counts only when the disk is nearly full."""
    named = full_disk(exc)
    if named is None and not _vague_io_error(exc):
        return None
    if isinstance(named, OSError) and named.filename:
        where = Path(os.fsdecode(named.filename))
    usage = _usage(where)
    if named is None and (usage is None or usage.free >= NEARLY_FULL_BYTES):
        return None
    shown = named or exc
    cause = _one_line(f"{type(shown).__name__}: {shown}")[:240]
    room = f" (now {size_text(usage.free)} free of {size_text(usage.total)})" if usage else ""
    then = f"{then}; " if then else ""
    return f"the disk holding {where} filled up{room}: {cause}. {then}free some space and run again"


def _one_line(text: str) -> str:
    return " ".join(text.split())
