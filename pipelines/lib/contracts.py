"""Table contracts: schemas/*.yaml is the single source of truth for every table's columns.

From one contract this module derives the pyarrow schema the lake writes, the polars schema, the
validator that decides which landing rows are accepted and which are quarantined (with a reason), the
conformance check of a written partition; pipelines/defs/metadata.py derives the Dagster column schema.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import yaml

from pipelines.lib import paths

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
    min: float | dt.datetime | None = None  # a timestamp's bounds are datetimes (UTC)
    max: float | dt.datetime | None = None
    enum: tuple[str, ...] | None = None
    # one sentence per enum member, in enum order (``enum_descriptions`` in the contract), when declared
    enum_descriptions: tuple[str, ...] | None = None
    pattern: str | None = None
    references: str | None = None
    origin: str = "landing"
    finite: bool = True  # float64: NaN and infinities are refused (not_finite) unless declared otherwise
    resource: bool = False  # a utilisation resource (utilisation_samples): analyses iterate these

    @property
    def arrow_type(self) -> pa.DataType:
        return ARROW_TYPES[self.type]

    @property
    def described_values(self) -> dict[str, str]:
        """Each allowed value -> what it means (empty when the contract describes none)."""
        if not self.enum or not self.enum_descriptions:
            return {}
        return dict(zip(self.enum, self.enum_descriptions, strict=True))

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
    def resources(self) -> tuple[str, ...]:
        """Short names of the resource columns (``cpu`` for ``cpu_util``), in contract order."""
        return tuple(c.name.removesuffix("_util") for c in self.columns if c.resource)

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
        "enum_descriptions",
        "pattern",
        "references",
        "origin",
        "finite",
        "resource",
    }
    if unknown_keys:
        raise ContractError(f"{table}.{spec.get('name')}: unknown keys {sorted(unknown_keys)}")
    if spec.get("type") not in ARROW_TYPES:
        raise ContractError(
            f"{table}.{spec.get('name')}: type {spec.get('type')!r} is not one of {sorted(ARROW_TYPES)}"
        )
    if not spec.get("description"):
        raise ContractError(f"{table}.{spec.get('name')}: every column needs a description")
    bounds = {k: spec.get(k) for k in ("min", "max")}
    if spec["type"] == "timestamp":  # bounds of a timestamp are ISO-8601 UTC texts
        try:
            bounds = {k: v if v is None else dt.datetime.fromisoformat(v) for k, v in bounds.items()}
        except (TypeError, ValueError) as exc:
            raise ContractError(
                f"{table}.{spec['name']}: timestamp bounds must be ISO-8601 texts ({exc})"
            ) from None
    return Column(
        name=spec["name"],
        type=spec["type"],
        nullable=bool(spec.get("nullable", False)),
        description=spec["description"],
        unit=spec.get("unit"),
        min=bounds["min"],
        max=bounds["max"],
        enum=tuple(spec["enum"]) if spec.get("enum") else None,
        enum_descriptions=_enum_descriptions(spec, table),
        pattern=spec.get("pattern"),
        references=spec.get("references"),
        origin=spec.get("origin", "landing"),
        finite=bool(spec.get("finite", True)),
        resource=bool(spec.get("resource", False)),
    )


def _enum_descriptions(spec: Mapping[str, Any], table: str) -> tuple[str, ...] | None:
    """``enum_descriptions: {value: sentence}`` in enum order; every member described, nothing else, so a
    new value cannot ship without its meaning."""
    given = spec.get("enum_descriptions")
    if given is None:
        return None
    where = f"{table}.{spec.get('name')}: enum_descriptions"
    if not isinstance(given, Mapping) or not spec.get("enum"):
        raise ContractError(f"{where} must map each value of the column's enum to a sentence")
    enum = [str(v) for v in spec["enum"]]
    lacking, extra = [v for v in enum if v not in given], sorted(set(given) - set(enum))
    if lacking or extra:
        raise ContractError(
            f"{where}: no description for {lacking}" if lacking else f"{where}: {extra} not in enum"
        )
    blank = [v for v in enum if not isinstance(given[v], str) or not given[v].strip()]
    if blank:
        raise ContractError(f"{where}: {blank} need a sentence, not {[given[v] for v in blank]!r}")
    return tuple(" ".join(given[v].split()) for v in enum)


def _read(path: Path) -> dict[str, Any]:
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if data.get("name") != path.stem:
        raise ContractError(f"{path}: name {data.get('name')!r} must equal the file name {path.stem!r}")
    return data


def _resource_columns(spec: Mapping[str, Any], source: Contract, table: str) -> list[dict[str, Any]]:
    """``{resources_of: T, description: "Mean {description}"}``: one column per resource column of T, with
    its name, type, bounds and unit, nullable, described by the template."""
    unknown = set(spec) - {"resources_of", "description"}
    if unknown:
        raise ContractError(f"{table}: a resources_of entry has unknown keys {sorted(unknown)}")
    template = spec.get("description", "{description}")
    out = []
    for col in source.columns:
        if col.resource:
            out.append(
                {
                    "name": col.name,
                    "type": col.type,
                    "nullable": True,
                    "min": col.min,
                    "max": col.max,
                    "unit": col.unit,
                    "description": template.format(description=col.description),
                }
            )
    return out


def load_contract(path: Path, resolve: Callable[[str], Contract] | None = None) -> Contract:
    """Parse one contract file (YAML safe loader: plain data only). References to another contract's
    resource columns (``enum: {resources_of: T}`` and a ``{resources_of: T}`` entry among the columns,
    which expands to one column per resource) are resolved through ``resolve``, so a resource column is
    declared once, in T."""
    data = _read(path)
    name = data["name"]

    def source(spec: Mapping[str, Any]) -> Contract:
        if resolve is None:
            raise ContractError(f"{name}: resources_of needs the other contracts (load with contracts())")
        return resolve(spec["resources_of"])

    specs: list[Mapping[str, Any]] = []
    for spec in data["columns"]:
        if "resources_of" in spec:
            specs.extend(_resource_columns(spec, source(spec), name))
            continue
        if isinstance(spec.get("enum"), Mapping):
            spec = {**spec, "enum": list(source(spec["enum"]).resources)}
        specs.append(spec)
    columns = tuple(_parse_column(c, name) for c in specs)
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
def _contracts_in(schemas_dir: Path) -> dict[str, Contract]:
    paths = {p.stem: p for p in sorted(schemas_dir.glob("*.yaml"))}
    loaded: dict[str, Contract] = {}
    loading: set[str] = set()

    def get(name: str) -> Contract:
        if name not in loaded:
            if name not in paths:
                raise ContractError(f"resources_of names no contract: {name!r}")
            if name in loading:
                raise ContractError(f"contracts refer to each other in a cycle through {name!r}")
            loading.add(name)
            loaded[name] = load_contract(paths[name], get)
        return loaded[name]

    return {name: get(name) for name in paths}


def contracts(schemas_dir: Path | None = None) -> dict[str, Contract]:
    """Every contract in ``schemas/`` (``paths.SCHEMAS_DIR``, read when called), by table name."""
    return _contracts_in(schemas_dir or paths.SCHEMAS_DIR)


def resources() -> tuple[str, ...]:
    """The utilisation resources (``cpu``, ``mem_cap``, ...): utilisation_samples' resource columns
    without their ``_util`` suffix, in contract order. Every resource list derives from this one."""
    return contract("utilisation_samples").resources


def contract(name: str) -> Contract:
    try:
        return contracts()[name]
    except KeyError:
        raise KeyError(f"no contract schemas/{name}.yaml (known: {sorted(contracts())})") from None


# ---------------------------------------------------------------- validation of landing rows


ERROR_COLUMNS = ("reason_code", "field", "message")


def _fmt(v: Any) -> str:
    if isinstance(v, dt.datetime):
        return v.strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{v:g}" if isinstance(v, float) else str(v)


PRIMARY_TIMESTAMP = TIMESTAMP_FORMATS[0]


def _first_parse(col: Column, x: pl.Expr) -> pl.Expr:
    """The first parse of text into the column's type; what it leaves null (and is not null) gets the
    type's fallback (``_FALLBACKS``) after."""
    if col.type == "string":
        return x
    if col.type == "timestamp":
        return x.str.to_datetime(PRIMARY_TIMESTAMP, time_unit="us", time_zone="UTC", strict=False)
    if col.type == "float64" or col.type in INT_RANGES:
        return x.cast(pl.Float64, strict=False)
    if col.type == "bool":
        low = x.str.strip_chars().str.to_lowercase()
        return (
            pl.when(low.is_in(TRUE_WORDS)).then(True).when(low.is_in(FALSE_WORDS)).then(False).otherwise(None)
        )
    if col.type == "date":
        return x.str.strip_chars().str.to_date("%Y-%m-%d", strict=False)
    raise ContractError(f"no parser for type {col.type}")


def _number_fallback(s: pl.Series) -> pl.Series:
    return s.str.strip_chars().cast(pl.Float64, strict=False)


def _parse_texts(texts: list[tuple[Column, pl.Series]]) -> dict[str, pl.Series]:
    """Text columns parsed into their types (unparseable -> null): the first attempts of every column in
    one select (polars spreads the columns over the cores), then fallbacks (surrounding spaces, other
    timestamp spellings) only for the values a first attempt could not parse."""
    if not texts:
        return {}
    frame = pl.DataFrame([s for _, s in texts])
    firsts = frame.select(_first_parse(col, pl.col(s.name)).alias(s.name) for col, s in texts)
    out = {}
    for col, s in texts:
        parsed = firsts.get_column(s.name)
        fallback = _FALLBACKS.get(col.type)
        # a null stays null, so more nulls after than before means some text did not parse
        if fallback is not None and parsed.null_count() > s.null_count():
            idx = (parsed.is_null() & s.is_not_null()).arg_true()
            parsed = parsed.scatter(idx, fallback(s.gather(idx)))
        out[s.name] = _integral(col, parsed) if col.type in INT_RANGES else parsed
    return out


def _parse_text(col: Column, s: pl.Series) -> pl.Series:
    """Parse text into the column's type; unparseable values become null."""
    return _parse_texts([(col, s)])[s.name]


def _to_ts(s: pl.Series, fmt: str) -> pl.Series:
    return s.str.to_datetime(fmt, time_unit="us", time_zone="UTC", strict=False)


def _ts_fallback(s: pl.Series) -> pl.Series:
    s = s.str.strip_chars()
    return pl.select(pl.coalesce([_to_ts(s, f) for f in TIMESTAMP_FORMATS])).to_series()


_FALLBACKS = {"timestamp": _ts_fallback, "float64": _number_fallback} | dict.fromkeys(
    INT_RANGES, _number_fallback
)


def _integral_expr(col: Column, f: pl.Expr) -> pl.Expr:
    """``f`` (float) as the column's integer type where it holds a whole number in range, else null."""
    lo, hi = INT_RANGES[col.type]
    ok = f.is_finite() & (f == f.round(0)) & (f >= lo) & (f <= hi)
    return pl.when(ok).then(f).otherwise(None).cast(col.polars_type)


def _integral(col: Column, f: pl.Series) -> pl.Series:
    return f.to_frame().select(_integral_expr(col, pl.col(f.name))).to_series().alias(f.name)


def _typed(col: Column, dtype: pl.DataType, x: pl.Expr) -> pl.Expr | None:
    """How typed input (Parquet, JSON numbers) of ``dtype`` becomes the column's type: numbers are cast,
    timestamps normalised to UTC microseconds; None when its values must be parsed as text."""
    if col.type == "timestamp" and isinstance(dtype, pl.Datetime):
        utc = x.dt.convert_time_zone("UTC") if dtype.time_zone else x.dt.replace_time_zone("UTC")
        return utc.dt.cast_time_unit("us")
    if col.type == "string" and not dtype.is_temporal():
        return x.cast(pl.String)
    if col.type == "float64" and dtype.is_numeric():
        return x.cast(pl.Float64)
    if col.type in INT_RANGES and dtype.is_numeric():
        return _integral_expr(col, x.cast(pl.Float64))
    if (col.type, dtype) in (("bool", pl.Boolean), ("date", pl.Date)):
        return x
    return None


def _as_text(s: pl.Series) -> pl.Series:
    if isinstance(s.dtype, pl.Datetime):
        return s.dt.to_string("%Y-%m-%dT%H:%M:%S%.6f" + ("Z" if s.dtype.time_zone else ""))
    return s.cast(pl.String)


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
    if col.type == "float64" and col.finite:
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
    """Result of validating rows against a contract."""

    accepted: pl.DataFrame  # carried columns + typed landing columns
    rejected: pl.DataFrame  # carried columns + reason_code, field, message, raw_record


# Text that starts with ASCII whitespace and holds nothing but (Unicode) whitespace: one anchored regex,
# which stops at the first character of an ordinary value.
_BLANK_TEXT = r"^[ \t\r\n\x0b\x0c]\s*$"


def _blank(col: Column, s: pl.Series, parsed: pl.Series) -> pl.Series:
    """Missing or only whitespace. Text that parsed to a number or a time is not blank, so the
    whitespace test runs only on the values that could be."""
    if s.dtype != pl.String:
        return s.is_null()
    if col.enum:  # blank text is not one of the allowed values: rejected anyway
        return s.is_null()
    if col.type == "string":
        lowest = s.min()
        # Empty or whitespace-led text starts with a byte at or below " ", so it sorts before "!": when
        # the smallest value does not, no value can be blank (one cheap pass instead of a regex per row).
        if lowest is None or lowest >= "!":
            return s.is_null()
        return s.is_null() | (s.str.len_bytes() == 0) | s.str.contains(_BLANK_TEXT).fill_null(False)
    if parsed.null_count() == s.null_count():  # every value parsed; empty text never does
        return s.is_null()
    blank = s.is_null() | (s.str.len_bytes() == 0)
    maybe = parsed.is_null() & s.is_not_null()
    if maybe.any():
        idx = maybe.arg_true()
        blank = blank.scatter(idx, ~s.gather(idx).str.contains(r"\S"))
    return blank


def _violates(col: Column, allowed: Mapping[str, frozenset[str]]) -> pl.Expr:
    """Rows where the column breaks its contract (the cheap test; messages are built only for these).
    Evaluated over the given value (``<name>``) and the parsed one (``_p_<name>``)."""
    p = pl.col(f"_p_{col.name}")
    blank = pl.col(f"_b_{col.name}")
    bad = ~blank & p.is_null()
    if not col.nullable:
        bad = bad | blank
    if col.type == "float64" and col.finite:
        bad = bad | ~p.is_finite()
    if col.min is not None:
        bad = bad | (p < col.min)
    if col.max is not None:
        bad = bad | (p > col.max)
    if col.enum:
        bad = bad | (p.is_not_null() & ~p.is_in(list(col.enum)))
    if col.references and col.references in allowed:
        bad = bad | (p.is_not_null() & ~p.is_in(sorted(allowed[col.references])))
    if col.pattern:
        bad = bad | (p.is_not_null() & ~p.str.contains(col.pattern))
    return bad.fill_null(False)


def _clean_columns(both: pl.DataFrame, cols: tuple[Column, ...]) -> set[str]:
    """Columns that certainly hold no violation in this batch, from one pass of column statistics: every
    value parsed or blank, blanks only where allowed, extremes finite and within the bounds. Their
    row-by-row test (``_violates``) is skipped; any doubt (a NaN or an infinity, an enum, a reference, a
    pattern) leaves the column to it."""
    verdicts = []
    for col in cols:
        if col.enum or col.references or col.pattern:
            continue
        p, b = pl.col(f"_p_{col.name}"), pl.col(f"_b_{col.name}")
        ok = (~b & p.is_null()).sum() == 0
        if not col.nullable:
            ok = ok & (b.sum() == 0)
        lo, hi = p.min(), p.max()  # null when every value is; a float's skip NaN...
        if col.type == "float64":  # ... so: the sum is finite only without NaN and infinities
            ok = ok & p.sum().is_finite()
        if col.min is not None:
            ok = ok & (lo >= pl.lit(col.min)).fill_null(True)
        if col.max is not None:
            ok = ok & (hi <= pl.lit(col.max)).fill_null(True)
        verdicts.append(ok.alias(col.name))
    if not verdicts:
        return set()
    row = both.select(verdicts).row(0, named=True)
    return {name for name, ok in row.items() if ok}


def validate_rows(
    frame: pl.DataFrame,
    c: Contract,
    *,
    carry: tuple[str, ...] = (),
    allowed: Mapping[str, frozenset[str]] | None = None,
    raw_column: str | None = None,
    raw_records: bool = True,
) -> Validated:
    """Validate rows of text (CSV, JSON) or typed values (Parquet); missing columns may be absent.

    Each column is parsed once. Every row ends in exactly one of the two outputs. A rejected row carries
    the first failure in column order (missing, type, finiteness, bounds, enum, references, pattern; then
    row rules), and its original content: ``raw_column`` if given (e.g. the JSONL line), else its fields
    as JSON (none when ``raw_records`` is False: the caller recovers them). ``carry`` columns (e.g. file
    and row number) pass through untouched. Messages are built only
    for the rejected rows, so a clean batch costs a parse and a few comparisons per column.
    """
    allowed = allowed or {}
    cols = c.landing_columns
    n = frame.height
    given = {
        col.name: frame[col.name]
        if col.name in frame.columns
        else pl.repeat(None, n, dtype=pl.String, eager=True).alias(col.name)
        for col in cols
    }
    texts = _parse_texts(
        [(col, s) for col in cols if (s := given[col.name]).dtype == pl.String and s.null_count() < n]
    )
    # typed and missing columns: converted, and their blanks (nulls) found, in one select over the columns
    exprs: dict[str, pl.Expr] = {}
    for col in cols:
        s = given[col.name]
        if col.name in texts:
            continue
        if s.dtype == pl.Null or s.null_count() == n:
            exprs[col.name] = pl.repeat(None, pl.len(), dtype=col.polars_type)
        elif s.dtype != pl.String and (typed_expr := _typed(col, s.dtype, pl.col(col.name))) is not None:
            exprs[col.name] = typed_expr
    converted = (
        pl.DataFrame(list(given.values())).select(
            *(e.alias(name) for name, e in exprs.items()),
            *(pl.col(name).is_null().alias(f"_b_{name}") for name in exprs),
        )
        if exprs
        else None
    )
    values, blanks = {}, {}
    for col in cols:
        if col.name in exprs:
            values[col.name] = converted.get_column(col.name)
            blanks[col.name] = converted.get_column(f"_b_{col.name}")
            continue
        # typed values no conversion reads as this type (a time for a number, say): parsed as their text
        values[col.name] = (
            texts[col.name] if col.name in texts else _parse_text(col, _as_text(given[col.name]))
        )
        blanks[col.name] = _blank(col, given[col.name], values[col.name])
    parsed = pl.DataFrame([values[col.name].alias(col.name) for col in cols])
    both = pl.DataFrame(
        [blanks[col.name].alias(f"_b_{col.name}") for col in cols]
        + [parsed[col.name].alias(f"_p_{col.name}") for col in cols]
    )
    clean = _clean_columns(both, cols)
    checks = [_violates(col, allowed) for col in cols if col.name not in clean]
    bad = (
        both.select(pl.any_horizontal(checks).alias("bad")).to_series()
        if checks
        else pl.repeat(False, n, eager=True)
    )
    rule_ok = [parsed.select(pl.sql_expr(rule.expr).alias("ok")).to_series() for rule in c.row_rules]
    for ok in rule_ok:
        bad = bad | ok.eq(False).fill_null(False)
    typed = pl.concat([frame.select(carry), parsed], how="horizontal")
    if not bad.any():
        return Validated(accepted=typed, rejected=_empty_rejects(frame, carry))
    accepted = typed.filter(~bad)
    sub = frame.filter(bad)
    text = pl.DataFrame([_as_text(given[col.name].filter(bad)).alias(col.name) for col in cols])
    staged = pl.concat(
        [sub.select(carry), text, parsed.filter(bad).rename(lambda x: f"_p_{x}")], how="horizontal"
    )
    chain = None
    for col in cols:
        for cond, err in _column_errors(col, pl.col(col.name), pl.col(f"_p_{col.name}"), allowed):
            cond = cond.fill_null(False)
            chain = pl.when(cond).then(err) if chain is None else chain.when(cond).then(err)
    for rule, ok in zip(c.row_rules, rule_ok, strict=True):
        err = _error(rule.reason, rule.field, pl.lit(rule.message))
        cond = pl.Series(ok.filter(bad)).eq(False).fill_null(False)
        chain = pl.when(cond).then(err) if chain is None else chain.when(cond).then(err)
    raw_names = [x for x in sub.columns if x not in carry and x != raw_column]
    if not raw_records:
        raw = pl.lit(None, pl.String)
    elif raw_column:
        raw = pl.col(raw_column) if raw_column in sub.columns else pl.lit(None, pl.String)
        staged = staged.with_columns(sub[raw_column]) if raw_column in sub.columns else staged
    elif raw_names:
        staged = staged.with_columns(_json_of(sub.select(raw_names)).alias("__raw"))
        raw = pl.col("__raw")
    else:
        raw = pl.lit(None, pl.String)
    # one chunk per column: polars 2.1 panics evaluating the messages over columns of several chunks
    rejected = (
        staged.rechunk()
        .select(
            *[pl.col(x) for x in carry],
            chain.otherwise(None).alias("_error"),
            raw.alias("raw_record"),
        )
        .select(
            *[pl.col(x) for x in carry],
            *[pl.col("_error").struct.field(f) for f in ERROR_COLUMNS],
            "raw_record",
        )
    )
    return Validated(accepted=accepted, rejected=rejected)


def _json_of(frame: pl.DataFrame) -> pl.Series:
    shown = frame.select(
        [_as_text(frame[x]) if frame[x].dtype.is_temporal() else frame[x] for x in frame.columns]
    )
    return shown.select(pl.struct(pl.all()).struct.json_encode()).to_series()


def _empty_rejects(frame: pl.DataFrame, carry: tuple[str, ...]) -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            **{x: frame.schema[x] for x in carry},
            **dict.fromkeys(ERROR_COLUMNS, pl.String),
            "raw_record": pl.String,
        }
    )


def conformance_violations(frame: pl.DataFrame, c: Contract) -> list[str]:
    """What in a frame breaks its contract: columns, dtypes, nulls, finiteness, bounds, enums (keys: see
    key_duplicates). Every statistic is computed in one pass over the frame."""
    expected = c.polars_schema()
    if list(frame.columns) != list(expected):
        return [f"columns {frame.columns} != contract {list(expected)}"]
    problems = [
        f"{col.name}: dtype {frame.schema[col.name]} != {col.polars_type}"
        for col in c.columns
        if frame.schema[col.name] != col.polars_type
    ]
    if problems:
        return problems
    exprs = []
    for col in c.columns:
        x = pl.col(col.name)
        if not col.nullable:
            exprs.append(x.null_count().alias(f"{col.name}|nulls"))
        if col.type == "float64" and col.finite:
            exprs.append((x.is_nan() | x.is_infinite()).sum().alias(f"{col.name}|nonfinite"))
        if col.min is not None:
            exprs.append((x < col.min).sum().alias(f"{col.name}|below"))
        if col.max is not None:
            exprs.append((x > col.max).sum().alias(f"{col.name}|above"))
        if col.enum:
            exprs.append((~x.is_in(list(col.enum))).sum().alias(f"{col.name}|outside"))
    stats = frame.select(exprs).row(0, named=True) if exprs else {}
    for col in c.columns:
        n = col.name
        if stats.get(f"{n}|nulls"):
            problems.append(f"{n}: {stats[f'{n}|nulls']} nulls in a non-nullable column")
        if stats.get(f"{n}|nonfinite"):
            problems.append(f"{n}: non-finite values")
        if stats.get(f"{n}|below"):
            problems.append(f"{n}: values below {col.min}")
        if stats.get(f"{n}|above"):
            problems.append(f"{n}: values above {col.max}")
        if stats.get(f"{n}|outside"):
            problems.append(f"{n}: values outside {list(col.enum)}")
    return problems


class ConformanceProfile:
    """Conformance of a table written batch by batch: each batch is profiled once (null counts, ranges,
    finiteness, enum members) and ``violations`` reports what ``conformance_violations`` would on the
    whole."""

    def __init__(self, c: Contract):
        self.c = c
        self.problems: dict[str, str] = {}

    def update(self, frame: pl.DataFrame) -> None:
        for problem in conformance_violations(frame.select(self.c.column_names), self.c):
            self.problems.setdefault(problem.split(":", 1)[0], problem)

    def violations(self) -> list[str]:
        return list(self.problems.values())


def key_duplicates(frame: pl.DataFrame, c: Contract) -> int:
    """Rows whose primary key occurs more than once (every copy counts)."""
    if not c.primary_key or not frame.height:
        return 0
    return int(frame.select(c.primary_key).is_duplicated().sum())
