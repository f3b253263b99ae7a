"""Table contracts: schemas/*.yaml is the single source of truth for every table's columns.

From one contract this module derives the pyarrow schema the lake writes, the polars schema, the
validator that decides which landing rows are accepted and which are quarantined (with a reason), the
conformance check of a written partition, and the Dagster column schema (see ``table_schema``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import yaml

from pipelines.lib.paths import SCHEMAS_DIR

ARROW_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}
POLARS_TYPES: dict[str, pl.DataType] = {
    "string": pl.String(),
    "int16": pl.Int16(),
    "int32": pl.Int32(),
    "int64": pl.Int64(),
    "float64": pl.Float64(),
    "bool": pl.Boolean(),
    "date": pl.Date(),
    "timestamp": pl.Datetime("us", "UTC"),
}
INT_RANGES = {"int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
# Accepted timestamp spellings, tried in order; every result is UTC.
TIMESTAMP_FORMATS = (
    "%Y-%m-%dT%H:%M:%S%.fZ",
    "%Y-%m-%dT%H:%M:%S%.f%:z",
    "%Y-%m-%d %H:%M:%S%.f%:z",
    "%Y-%m-%dT%H:%M:%S%.f",
    "%Y-%m-%d %H:%M:%S%.f",
)
TRUE_WORDS = ("true", "1", "yes")
FALSE_WORDS = ("false", "0", "no")


class ContractError(ValueError):
    """A contract file is malformed."""


@dataclass(frozen=True)
class Column:
    """One declared column."""

    name: str
    type: str
    nullable: bool
    description: str
    unit: str | None = None
    min: float | None = None
    max: float | None = None
    enum: tuple[str, ...] | None = None
    pattern: str | None = None
    references: str | None = None
    origin: str = "landing"

    @property
    def arrow_type(self) -> pa.DataType:
        return ARROW_TYPES[self.type]

    @property
    def polars_type(self) -> pl.DataType:
        return POLARS_TYPES[self.type]


@dataclass(frozen=True)
class RowRule:
    """A cross-field rule, a polars SQL expression that must hold on a parsed row."""

    id: str
    expr: str
    field: str
    reason: str
    message: str


@dataclass(frozen=True)
class Contract:
    """A table contract loaded from ``schemas/<name>.yaml``."""

    name: str
    layer: str
    description: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    partitioned_by: str | None = None
    row_rules: tuple[RowRule, ...] = ()
    parameters: Mapping[str, Any] = field(default_factory=dict)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def landing_columns(self) -> list[Column]:
        """Columns a producer delivers (the rest are set by ingest)."""
        return [c for c in self.columns if c.origin == "landing"]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.name} has no column {name!r}")

    def arrow_schema(self) -> pa.Schema:
        """The Parquet schema of the table (nullability included)."""
        return pa.schema(
            [
                pa.field(c.name, c.arrow_type, nullable=c.nullable, metadata={"description": c.description})
                for c in self.columns
            ],
            metadata={"contract": self.name},
        )

    def polars_schema(self) -> dict[str, pl.DataType]:
        return {c.name: c.polars_type for c in self.columns}

    def empty_frame(self) -> pl.DataFrame:
        return pl.DataFrame(schema=self.polars_schema())

    def conform(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Select the contract's columns in order with the declared dtypes (strict cast)."""
        missing = [c for c in self.column_names if c not in frame.columns]
        if missing:
            raise ContractError(f"{self.name}: frame lacks columns {missing}")
        return frame.select([pl.col(c.name).cast(c.polars_type, strict=True) for c in self.columns])


def _parse_column(spec: Mapping[str, Any], table: str) -> Column:
    unknown_keys = set(spec) - {
        "name",
        "type",
        "nullable",
        "description",
        "unit",
        "min",
        "max",
        "enum",
        "pattern",
        "references",
        "origin",
    }
    if unknown_keys:
        raise ContractError(f"{table}.{spec.get('name')}: unknown keys {sorted(unknown_keys)}")
    if spec.get("type") not in ARROW_TYPES:
        raise ContractError(
            f"{table}.{spec.get('name')}: type {spec.get('type')!r} is not one of {sorted(ARROW_TYPES)}"
        )
    if not spec.get("description"):
        raise ContractError(f"{table}.{spec.get('name')}: every column needs a description")
    return Column(
        name=spec["name"],
        type=spec["type"],
        nullable=bool(spec.get("nullable", False)),
        description=spec["description"],
        unit=spec.get("unit"),
        min=spec.get("min"),
        max=spec.get("max"),
        enum=tuple(spec["enum"]) if spec.get("enum") else None,
        pattern=spec.get("pattern"),
        references=spec.get("references"),
        origin=spec.get("origin", "landing"),
    )


def load_contract(path: Path) -> Contract:
    """Parse one contract file (``yaml.safe_load``)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    name = data.get("name")
    if name != path.stem:
        raise ContractError(f"{path}: name {name!r} must equal the file name {path.stem!r}")
    columns = tuple(_parse_column(c, name) for c in data["columns"])
    names = [c.name for c in columns]
    if len(set(names)) != len(names):
        raise ContractError(f"{name}: duplicate column names")
    pk = tuple(data.get("primary_key", ()))
    if not set(pk) <= set(names):
        raise ContractError(f"{name}: primary key {pk} names unknown columns")
    rules = tuple(RowRule(**r) for r in data.get("row_rules", ()))
    return Contract(
        name=name,
        layer=data["layer"],
        description=" ".join(str(data["description"]).split()),
        columns=columns,
        primary_key=pk,
        partitioned_by=data.get("partitioned_by"),
        row_rules=rules,
        parameters=data.get("parameters", {}),
    )


@cache
def contracts(schemas_dir: Path = SCHEMAS_DIR) -> dict[str, Contract]:
    """Every contract in ``schemas/``, by table name."""
    return {p.stem: load_contract(p) for p in sorted(schemas_dir.glob("*.yaml"))}


def contract(name: str) -> Contract:
    try:
        return contracts()[name]
    except KeyError:
        raise KeyError(f"no contract schemas/{name}.yaml (known: {sorted(contracts())})") from None


def table_schema(name: str):  # -> dg.TableSchema; dagster imported lazily to keep lib Dagster-free
    """The Dagster column schema of a table, for ``dagster/column_schema`` metadata."""
    import dagster as dg

    c = contract(name)
    cols = []
    for col in c.columns:
        desc = col.description + (f" [{col.unit}]" if col.unit else "")
        constraints = dg.TableColumnConstraints(
            nullable=col.nullable,
            unique=(c.primary_key == (col.name,)),
            other=[
                s
                for s in (
                    f">= {col.min}" if col.min is not None else None,
                    f"<= {col.max}" if col.max is not None else None,
                    f"in {list(col.enum)}" if col.enum else None,
                    f"matches {col.pattern}" if col.pattern else None,
                    f"references {col.references}" if col.references else None,
                )
                if s
            ],
        )
        cols.append(dg.TableColumn(name=col.name, type=col.type, description=desc, constraints=constraints))
    return dg.TableSchema(
        columns=cols, constraints=dg.TableConstraints(other=[f"primary key {list(c.primary_key)}"])
    )


# ---------------------------------------------------------------- validation of landing rows


ERROR_COLUMNS = ("reason_code", "field", "message")


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _parse_expr(col: Column, raw: pl.Expr) -> pl.Expr:
    """Parse a String expression into the column's type; unparseable values become null."""
    s = raw.str.strip_chars()
    if col.type == "string":
        return raw
    if col.type == "float64":
        return s.cast(pl.Float64, strict=False)
    if col.type in INT_RANGES:
        f = s.cast(pl.Float64, strict=False)
        lo, hi = INT_RANGES[col.type]
        ok = f.is_finite() & (f == f.round(0)) & (f >= lo) & (f <= hi)
        return pl.when(ok).then(f).otherwise(None).cast(col.polars_type)
    if col.type == "bool":
        low = s.str.to_lowercase()
        return (
            pl.when(low.is_in(TRUE_WORDS)).then(True).when(low.is_in(FALSE_WORDS)).then(False).otherwise(None)
        )
    if col.type == "date":
        return s.str.to_date("%Y-%m-%d", strict=False)
    if col.type == "timestamp":
        return pl.coalesce(
            [s.str.to_datetime(f, time_unit="us", time_zone="UTC", strict=False) for f in TIMESTAMP_FORMATS]
        )
    raise ContractError(f"no parser for type {col.type}")


def _error(reason: str, field_name: str, message: pl.Expr) -> pl.Expr:
    return pl.struct(
        pl.lit(reason).alias("reason_code"), pl.lit(field_name).alias("field"), message.alias("message")
    )


def _column_errors(
    col: Column, raw: pl.Expr, parsed: pl.Expr, allowed: Mapping[str, frozenset[str]]
) -> list[tuple[pl.Expr, pl.Expr]]:
    """(condition, error struct) pairs for one column, in priority order."""
    name = col.name
    unit = f" {col.unit}" if col.unit and col.unit not in ("count", "UTC") else ""
    shown = raw.str.slice(0, 80)
    blank = raw.is_null() | (raw.str.strip_chars() == "")
    out: list[tuple[pl.Expr, pl.Expr]] = []
    if not col.nullable:
        out.append(
            (blank, _error("missing_required", name, pl.lit(f"required field '{name}' is missing or empty")))
        )
    expected = {
        "timestamp": "an ISO-8601 timestamp (e.g. 2026-11-20T00:05:00Z)",
        "date": "a date YYYY-MM-DD",
        "bool": "true or false",
    }.get(col.type, f"a value of type {col.type}")
    out.append(
        (
            ~blank & parsed.is_null(),
            _error("wrong_type", name, pl.format(f"'{name}' = {{}} is not {expected}", shown)),
        )
    )
    if col.type == "float64":
        out.append(
            (
                parsed.is_not_null() & ~parsed.is_finite(),
                _error("not_finite", name, pl.format(f"'{name}' = {{}} is not a finite number", shown)),
            )
        )
    if col.min is not None:
        out.append(
            (
                parsed < col.min,
                _error(
                    "out_of_bounds",
                    name,
                    pl.format(f"'{name}' = {{}} is below the minimum {_fmt(col.min)}{unit}", shown),
                ),
            )
        )
    if col.max is not None:
        out.append(
            (
                parsed > col.max,
                _error(
                    "out_of_bounds",
                    name,
                    pl.format(f"'{name}' = {{}} is above the maximum {_fmt(col.max)}{unit}", shown),
                ),
            )
        )
    if col.enum:
        out.append(
            (
                parsed.is_not_null() & ~parsed.is_in(list(col.enum)),
                _error(
                    "unknown_value",
                    name,
                    pl.format(f"'{name}' = {{}} is not one of {', '.join(col.enum)}", shown),
                ),
            )
        )
    if col.references and col.references in allowed:
        keys = sorted(allowed[col.references])
        out.append(
            (
                parsed.is_not_null() & ~parsed.is_in(keys),
                _error(
                    "unknown_value",
                    name,
                    pl.format(
                        f"'{name}' = {{}} is not in the {col.references} (known: {', '.join(keys)})", shown
                    ),
                ),
            )
        )
    if col.pattern:
        out.append(
            (
                parsed.is_not_null() & ~parsed.str.contains(col.pattern),
                _error(
                    "bad_pattern", name, pl.format(f"'{name}' = {{}} does not match {col.pattern}", shown)
                ),
            )
        )
    return out


@dataclass
class Validated:
    """Result of validating string rows against a contract."""

    accepted: pl.DataFrame  # typed landing columns + carried columns
    rejected: pl.DataFrame  # carried columns + reason_code, field, message, raw_record


def validate_strings(
    frame: pl.DataFrame,
    c: Contract,
    *,
    carry: tuple[str, ...] = (),
    allowed: Mapping[str, frozenset[str]] | None = None,
    raw_column: str | None = None,
) -> Validated:
    """Validate rows whose landing columns are all strings (missing columns may be absent).

    Every row ends in exactly one of the two outputs. A rejected row carries the first failure in
    column order (missing, type, finiteness, bounds, enum, references, pattern; then row rules), and
    its original content: ``raw_column`` if given (e.g. the JSONL line), else its fields as JSON.
    ``carry`` columns (e.g. file and row number) pass through untouched.
    """
    allowed = allowed or {}
    cols = c.landing_columns
    raw_names = [n for n in frame.columns if n not in carry and n != raw_column]
    present = frame.with_columns(
        [pl.lit(None, dtype=pl.String).alias(col.name) for col in cols if col.name not in frame.columns]
    )
    parsed = {col.name: _parse_expr(col, pl.col(col.name).cast(pl.String)) for col in cols}
    conditions: list[tuple[pl.Expr, pl.Expr]] = []
    for col in cols:
        conditions.extend(_column_errors(col, pl.col(col.name).cast(pl.String), parsed[col.name], allowed))
    chain = None
    for cond, err in conditions:
        chain = (
            pl.when(cond.fill_null(False)).then(err)
            if chain is None
            else chain.when(cond.fill_null(False)).then(err)
        )
    error_expr = (chain.otherwise(None) if chain is not None else pl.lit(None)).alias("_error")

    staged = present.with_columns(
        error_expr,
        (
            pl.col(raw_column)
            if raw_column
            else pl.struct([pl.col(n) for n in raw_names]).struct.json_encode()
            if raw_names
            else pl.lit(None, pl.String)
        ).alias("raw_record"),
        *[expr.alias(f"_p_{name}") for name, expr in parsed.items()],
    )
    # Row rules run on parsed values, only where the fields themselves are valid.
    for rule in c.row_rules:
        expr = pl.sql_expr(rule.expr)
        renamed = (
            staged.select([pl.col(f"_p_{col.name}").alias(col.name) for col in cols])
            .select(expr.alias("_ok"))
            .to_series()
        )
        staged = staged.with_columns(
            pl.when(pl.col("_error").is_null() & renamed.eq(False).fill_null(False))
            .then(
                pl.struct(
                    pl.lit(rule.reason).alias("reason_code"),
                    pl.lit(rule.field).alias("field"),
                    pl.lit(rule.message).alias("message"),
                )
            )
            .otherwise(pl.col("_error"))
            .alias("_error")
        )
    good = staged.filter(pl.col("_error").is_null())
    bad = staged.filter(pl.col("_error").is_not_null())
    accepted = good.select(
        [pl.col(n) for n in carry]
        + [pl.col(f"_p_{col.name}").cast(col.polars_type).alias(col.name) for col in cols]
    )
    rejected = bad.select(
        [pl.col(n) for n in carry]
        + [pl.col("_error").struct.field(f) for f in ERROR_COLUMNS]
        + [pl.col("raw_record")]
    )
    return Validated(accepted=accepted, rejected=rejected)


def conformance_violations(frame: pl.DataFrame, c: Contract) -> list[str]:
    """What in a frame breaks its contract: columns, dtypes, nulls, finiteness, bounds, enums (keys: see key_duplicates)."""
    problems: list[str] = []
    expected = c.polars_schema()
    if list(frame.columns) != list(expected):
        problems.append(f"columns {frame.columns} != contract {list(expected)}")
        return problems
    for col in c.columns:
        s = frame.get_column(col.name)
        if s.dtype != col.polars_type:
            problems.append(f"{col.name}: dtype {s.dtype} != {col.polars_type}")
            continue
        if not col.nullable and s.null_count():
            problems.append(f"{col.name}: {s.null_count()} nulls in a non-nullable column")
        if col.type == "float64" and (~s.drop_nulls().is_finite()).any():
            problems.append(f"{col.name}: non-finite values")
        if col.min is not None and (s.drop_nulls() < col.min).any():
            problems.append(f"{col.name}: values below {col.min}")
        if col.max is not None and (s.drop_nulls() > col.max).any():
            problems.append(f"{col.name}: values above {col.max}")
        if col.enum and (~s.drop_nulls().is_in(list(col.enum))).any():
            problems.append(f"{col.name}: values outside {list(col.enum)}")
    return problems


def key_duplicates(frame: pl.DataFrame, c: Contract) -> int:
    """Rows whose primary key occurs more than once (every copy counts)."""
    if not c.primary_key or not frame.height:
        return 0
    return int(frame.select(c.primary_key).is_duplicated().sum())
