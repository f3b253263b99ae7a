"""What an ingest summary says to fix first, from the ledger and the quarantine: columns no contract knows
(with the column they were probably meant to be), required fields missing from every row of a file (a
column named differently, or not exported), one example per reason, and for a sample whose run is
unknown, the run row of that day that was refused."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import polars as pl

from pipelines.lib.contracts import contract

CLOSE = 0.6  # difflib's similarity above which a name is offered as "did you mean"


def _meant(name: str, known: Sequence[str]) -> str | None:
    """The known column ``name`` is most probably a misspelling of, if any is close."""
    hit = difflib.get_close_matches(name.lower(), known, n=1, cutoff=CLOSE)
    return hit[0] if hit else None


def per_table_counts(ledger: pl.DataFrame) -> dict[str, dict[str, int]]:
    """Per table fed: landing files, rows read, accepted and quarantined (what its asset shows)."""
    sums = (
        ledger.filter(pl.col("table_name").is_not_null())
        .group_by("table_name")
        .agg(pl.len().alias("landing_files"), pl.col("rows_in", "rows_accepted", "rows_quarantined").sum())
    )
    return {r.pop("table_name"): {k: int(v) for k, v in r.items()} for r in sums.iter_rows(named=True)}


def unknown_columns(ledger: pl.DataFrame) -> list[str]:
    """One line per file with columns its table's contract does not know (kept in extra_fields)."""
    lines = []
    files = ledger.filter(pl.col("extra_columns").is_not_null() & pl.col("table_name").is_not_null())
    for source_file, table, extra in files.select("source_file", "table_name", "extra_columns").iter_rows():
        known = [c.name for c in contract(table).landing_columns]
        named = []
        for column in extra.split(","):
            meant = _meant(column, known)
            named.append(f"'{column}' (did you mean '{meant}'?)" if meant else f"'{column}'")
        lines.append(
            f"{source_file}: column(s) {', '.join(named)} not in the {table} contract "
            f"(schemas/{table}.yaml); their values are kept in table extra_fields, not in the lake's columns"
        )
    return lines


def missing_everywhere(ledger: pl.DataFrame, quarantine: pl.DataFrame) -> list[str]:
    """One line per file whose every row lacks a required field: one fix, not one per row."""
    missing = (
        quarantine.filter(pl.col("reason_code") == "missing_required")
        .group_by("source_file", "field")
        .len()
        .join(ledger.select("source_file", "rows_in", "extra_columns"), on="source_file")
        .filter(pl.col("len") == pl.col("rows_in"))
        .sort("source_file", "field")
    )
    lines = []
    for source_file, column, rows, extra in missing.select(
        "source_file", "field", "rows_in", "extra_columns"
    ).iter_rows():
        meant = _meant(column, (extra or "").split(","))
        hint = f"; the file has '{meant}': rename it to '{column}'" if meant else ""
        lines.append(f"{source_file}: required field '{column}' is missing from all {rows:,} rows{hint}")
    return lines


def examples(quarantine: pl.DataFrame) -> dict[str, str]:
    """One example entry per reason code (the first by file and row): where, which field, what is wrong;
    a sample of an unknown run also names the refused run row of that day, if one had its run_id."""
    first = (
        quarantine.sort("source_file", "row_number")
        .group_by("reason_code", maintain_order=True)
        .first()
        .select("reason_code", "day", "source_file", "row_number", "field", "message")
    )
    out = {}
    for reason, day, source_file, row, column, message in first.iter_rows():
        where = f"{source_file} row {row}" if row else source_file
        text = f"{where}" + (f", {column}" if column else "") + f": {message}"
        if reason == "unknown_run":
            text += _refused_run(quarantine, day, message)
        out[reason] = text
    return out


def _refused_run(quarantine: pl.DataFrame, day, message: str) -> str:
    run_id = message.split()[1] if message.startswith("run_id ") else None
    if run_id is None:
        return ""
    refused = quarantine.filter(
        (pl.col("day") == day)
        & (pl.col("table_name") == "runs")
        & pl.col("raw_record").str.contains(run_id, literal=True).fill_null(False)
    ).sort("source_file", "row_number")
    if not refused.height:
        return ""
    r = refused.row(0, named=True)
    where = f"{r['source_file']} row {r['row_number']}"
    return f" (its run row was refused: {where}, {r['reason_code']}: {r['message']})"
