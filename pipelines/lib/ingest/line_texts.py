"""The original text of rejected rows, for formats whose rows are lines (CSV, JSON Lines): kept rejects get
their line back, and those a fast tier judged are judged again from it by the reference path."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import polars as pl

from pipelines.lib.contracts import Contract
from pipelines.lib.ingest.day_state import FileState
from pipelines.lib.ingest.entries import CROSS_ROW_REASONS, FILL, JUDGE, cap_raw
from pipelines.lib.ingest.readers.base import ROW, Inconsistent

Allowed = Mapping[str, frozenset[str]]  # values a column may take beyond its contract (the hardware catalog)


def finish_texts(f: FileState, c: Contract, allowed: Allowed, raw_max_bytes: int) -> None:
    """Kept rejects whose raw record is their line get it; those a fast tier judged are judged again
    from their line by the reference path (it must reject the same rows: else ``Inconsistent``).
    Lines are read back a group at a time, so a file of long lines holds one group in memory."""
    kept = f.rejects.kept
    pending = pl.col(FILL) | pl.col(JUDGE)
    todo = kept.filter(pending)
    fmt, src = f.opened()
    if not todo.height or fmt.line_texts is None or fmt.verdicts is None:
        return
    done = []
    with fmt.verdicts(src) as judge:
        for texts in fmt.line_texts(src, np.unique(todo[ROW].to_numpy())):
            part = todo.filter(pl.col(ROW).is_in(list(texts))).with_columns(
                pl.col(ROW).replace_strict(texts, return_dtype=pl.String).alias("__text")
            )
            judged = _judged(f, c, part, texts, judge, allowed)
            done.append(cap_raw(judged.drop("raw_record_cut"), raw_max_bytes).select(kept.columns))
    f.rejects.replace(pl.concat([kept.filter(~pending), *done]))


def _judged(
    f: FileState, c: Contract, part: pl.DataFrame, texts: dict[int, str], judge, allowed: Allowed
) -> pl.DataFrame:
    """``part`` (rejects with their line in ``__text``) as the reference path gives them."""
    cross = pl.col("reason_code").is_in(list(CROSS_ROW_REASONS))
    judged = part.filter(pl.col(JUDGE))
    if judged.height:
        ref = judge(c, {r: texts[r] for r in judged[ROW].to_list()}, allowed, f.lf.relpath)
        joined = judged.join(ref, on=ROW, how="left", suffix="_ref")
        if not joined.select((cross == pl.col("accepted")).all()).item():
            raise Inconsistent(f"{f.lf.relpath}: a fast tier and the reference disagree on a row")
        fields = ("reason_code", "field", "message", "raw_record")
        part = pl.concat(
            [
                part.filter(~pl.col(JUDGE)),
                joined.filter(cross).select(part.columns),
                joined.filter(~cross)
                .with_columns(pl.col(f"{x}_ref").alias(x) for x in fields)
                .select(part.columns),
            ]
        )
    return part.with_columns(
        pl.when(cross | pl.col(FILL))
        .then(pl.col("__text"))
        .otherwise(pl.col("raw_record"))
        .alias("raw_record"),
        pl.lit(False).alias(FILL),
        pl.lit(False).alias(JUDGE),
    ).drop("__text")


def finish_all_texts(files: Iterable[FileState], allowed: Allowed, raw_max_bytes: int) -> None:
    """Every file's kept rejects with their lines (``finish_texts``); each file's source closed after."""
    for f in files:
        if f.from_lines and f.entry.problem is None and f.src is not None:
            try:
                finish_texts(f, f.contract(), allowed, raw_max_bytes)
            finally:
                f.src.close()
