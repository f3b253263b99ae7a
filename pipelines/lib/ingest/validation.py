"""Validation of landing rows against their contract: each text or typed column parsed and checked
(types, nulls, bounds, enums, row rules), every row either accepted (typed as the contract says) or
rejected with a reason code, the field and a one-line message, and its raw record kept for quarantine."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl
from polars.expr.whenthen import ChainedThen, Then

from pipelines.lib.contracts import Column, Contract, ContractError

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


EXPECTED = {
    "timestamp": "an ISO-8601 timestamp (e.g. 2026-11-20T00:05:00Z)",
    "date": "a date YYYY-MM-DD",
    "bool": "true or false",
}


def _column_errors(
    col: Column, raw: pl.Expr, parsed: pl.Expr, allowed: Mapping[str, frozenset[str]]
) -> list[tuple[pl.Expr, pl.Expr]]:
    """(condition, error struct) pairs for one column, in priority order."""
    name = col.name
    unit = f" {col.unit}" if col.unit and col.unit not in ("count", "UTC") else ""
    shown = raw.str.slice(0, 80)
    blank = raw.is_null() | (raw.str.strip_chars() == "")
    out: list[tuple[pl.Expr, pl.Expr]] = []

    def add(condition: pl.Expr, reason: str, says: str) -> None:  # says: the message after "'name' = value"
        out.append((condition, _error(reason, name, pl.format(f"'{name}' = {{}} {says}", shown))))

    if not col.nullable:
        missing = pl.lit(f"required field '{name}' is missing or empty")
        out.append((blank, _error("missing_required", name, missing)))
    add(
        ~blank & parsed.is_null(),
        "wrong_type",
        f"is not {EXPECTED.get(col.type, f'a value of type {col.type}')}",
    )
    if col.type == "float64" and col.finite:
        add(parsed.is_not_null() & ~parsed.is_finite(), "not_finite", "is not a finite number")
    if col.min is not None:
        add(parsed < col.min, "out_of_bounds", f"is below the minimum {_fmt(col.min)}{unit}")
    if col.max is not None:
        add(parsed > col.max, "out_of_bounds", f"is above the maximum {_fmt(col.max)}{unit}")
    if col.enum:
        add(
            parsed.is_not_null() & ~parsed.is_in(list(col.enum)),
            "unknown_value",
            f"is not one of {', '.join(col.enum)}",
        )
    if col.references and col.references in allowed:
        keys = sorted(allowed[col.references])
        known = f"is not in the {col.references} (known: {', '.join(keys)})"
        add(parsed.is_not_null() & ~parsed.is_in(keys), "unknown_value", known)
    if col.pattern:
        add(
            parsed.is_not_null() & ~parsed.str.contains(col.pattern),
            "bad_pattern",
            f"does not match {col.pattern}",
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
        if lowest is None or (isinstance(lowest, str) and lowest >= "!"):
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


def _clean_columns(both: pl.DataFrame, cols: Sequence[Column]) -> set[str]:
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
    parsed, both = _parse_columns(given, cols, n)
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
    sub = frame.filter(bad)
    text = pl.DataFrame([_as_text(given[col.name].filter(bad)).alias(col.name) for col in cols])
    staged = pl.concat(
        [sub.select(carry), text, parsed.filter(bad).rename(lambda x: f"_p_{x}")], how="horizontal"
    )
    chain = _first_error(c, allowed, [ok.filter(bad) for ok in rule_ok])
    rejected = _rejects(staged, sub, chain, carry, raw_column, raw_records)
    return Validated(accepted=typed.filter(~bad), rejected=rejected)


def _parse_columns(
    given: dict[str, pl.Series], cols: Sequence[Column], n: int
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every column parsed once: the parsed values, and beside them (``_b_<name>``, ``_p_<name>``) which
    are blank and what they parsed to."""
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
    converted = pl.DataFrame(list(given.values())).select(
        *(e.alias(name) for name, e in exprs.items()),
        *(pl.col(name).is_null().alias(f"_b_{name}") for name in exprs),
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
    return parsed, both


def _first_error(
    c: Contract, allowed: Mapping[str, frozenset[str]], rule_ok: list[pl.Series]
) -> Then | ChainedThen:
    """The error struct of a rejected row's first failure: the columns' checks in column order, then the
    row rules (``rule_ok``: each rule's verdict on the rejected rows)."""
    chain = None
    for col in c.landing_columns:
        for cond, err in _column_errors(col, pl.col(col.name), pl.col(f"_p_{col.name}"), allowed):
            cond = cond.fill_null(False)
            chain = pl.when(cond).then(err) if chain is None else chain.when(cond).then(err)
    for rule, ok in zip(c.row_rules, rule_ok, strict=True):
        err = _error(rule.reason, rule.field, pl.lit(rule.message))
        cond = pl.Series(ok).eq(False).fill_null(False)
        chain = pl.when(cond).then(err) if chain is None else chain.when(cond).then(err)
    assert chain is not None  # every column has a type check
    return chain


def _rejects(
    staged: pl.DataFrame,
    sub: pl.DataFrame,
    chain: Then | ChainedThen,
    carry: tuple[str, ...],
    raw_column: str | None,
    raw_records: bool,
) -> pl.DataFrame:
    """The rejected rows: carried columns, reason, field, message and the raw record."""
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
    return (
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
