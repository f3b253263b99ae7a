"""Table contracts: schemas/*.yaml is the single source of truth for every table's columns.

From one contract this module derives the pyarrow schema the lake writes, the polars schema and the
conformance check of a written partition; pipelines/lib/ingest/validation.py derives the validator that
decides which landing rows are accepted and which are quarantined (with a reason), pipelines/defs/metadata.py
the Dagster column schema.
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
            problems.append(f"{n}: values outside {list(col.enum or ())}")
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
