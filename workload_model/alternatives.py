"""What an answer would be under each alternative to the software inputs it took from a default.

An answer whose workload did not state its precision or kernel mode rests on its platform's stack
(workload_model.stack). Each row is evaluated again under every other value its hardware runs for each
such input, one input at a time and with the same server counts: the range of those throughputs is the
answer's range, and an option that would be chosen under one of them instead of the chosen one is a flip.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import polars as pl

from workload_model import stack
from workload_model.catalog import HardwareCatalog
from workload_model.coefficients import DEFAULT, Coefficients
from workload_model.model import predict_frame

TIE = 1e-9  # relative margin under which two options' scores are equal


@dataclass(frozen=True)
class Alternatives:
    """Each row's throughput under each scenario (field, value); a row the scenario does not apply to keeps
    its own answer there. ``applies`` marks where it does."""

    scenarios: list[tuple[str, str]]
    throughput: np.ndarray  # (scenarios, rows)
    applies: np.ndarray  # (scenarios, rows) bool

    def labels(self) -> list[str]:
        return [f"{f}={v}" for f, v in self.scenarios]


def evaluate(
    frame: pl.DataFrame, base: np.ndarray, hw: HardwareCatalog, coef: Coefficients = DEFAULT
) -> Alternatives:
    """``frame`` (rows as answered, with their resolved stack and ``defaulted_inputs``) under every
    scenario; ``base`` is each row's answered throughput. One model evaluation for all scenarios."""
    rows = frame if stack.DEFAULTED in frame.columns else stack.resolve(frame, hw)
    scenarios = stack.scenarios(rows, hw)
    applies = np.array([stack.applies(rows, hw, f, v) for f, v in scenarios]).reshape(
        len(scenarios), rows.height
    )
    out = np.tile(np.asarray(base, dtype=float), (len(scenarios), 1))
    picks = [(j, np.flatnonzero(applies[j])) for j in range(len(scenarios))]
    parts = [
        rows[idx].with_columns(pl.lit(scenarios[j][1]).alias(scenarios[j][0])) for j, idx in picks if idx.size
    ]
    if parts:
        thr = predict_frame(pl.concat(parts, how="vertical_relaxed"), hw, coef)["throughput_eps"]
        got, at = thr.fill_null(np.nan).to_numpy(), 0
        for j, idx in picks:
            out[j, idx], at = got[at : at + idx.size], at + idx.size
    return Alternatives(scenarios, out, applies)


def thousands(x: pl.Expr) -> pl.Expr:
    """A non-negative number rounded to a whole one, with thousands separators: 1234567.8 -> "1,234,568"."""
    digits = x.round(0).cast(pl.Int64).cast(pl.String).str.reverse()
    return digits.str.replace_all(r"(\d{3})", "$1,").str.strip_chars_end(",").str.reverse()


def summary(alt: Alternatives, base: np.ndarray) -> pl.DataFrame:
    """Per row: the lowest and highest throughput over its answer and its scenarios, and the scenarios
    that apply to it as text ("kernels=graph 31,200,000; precision=fp32 9,800,000")."""
    every = np.vstack([np.asarray(base, dtype=float)[None, :], np.where(alt.applies, alt.throughput, np.nan)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows that do not fit are all-NaN
        low, high = np.nanmin(every, axis=0), np.nanmax(every, axis=0)
    n = every.shape[1]
    long = pl.DataFrame(
        {
            "_row": np.tile(np.arange(n), len(alt.scenarios)),
            "_label": np.repeat(alt.labels(), n) if alt.scenarios else np.array([], dtype=str),
            "_eps": alt.throughput.ravel(),
            "_on": alt.applies.ravel(),
        },
        schema={"_row": pl.Int64, "_label": pl.String, "_eps": pl.Float64, "_on": pl.Boolean},
    ).filter(pl.col("_on") & pl.col("_eps").is_not_nan())
    text = long.group_by("_row", maintain_order=True).agg(
        pl.format("{} {}", "_label", thousands(pl.col("_eps"))).str.join("; ").alias("text")
    )
    joined = pl.DataFrame({"_row": np.arange(n, dtype=np.int64)}).join(text, on="_row", how="left")
    return pl.DataFrame(
        {
            "throughput_low_eps": pl.Series(low).fill_nan(None),
            "throughput_high_eps": pl.Series(high).fill_nan(None),
            "stack_alternatives": joined["text"],
        }
    )


def flips(
    alt: Alternatives,
    groups: np.ndarray,
    chosen: np.ndarray,
    eligible: np.ndarray,
    per: np.ndarray,
    names: np.ndarray,
) -> pl.Series:
    """Per row: for a chosen row, each scenario under which another eligible row of its group scores more
    (throughput over ``per``: 1, or watts), with that row's name ("kernels=graph: big_basin/gpu_hbm");
    null elsewhere and where no scenario changes the choice."""
    n = len(groups)
    if not alt.scenarios or not chosen.any():
        return pl.Series("stack_flips", [None] * n, dtype=pl.String)
    score = np.nan_to_num(np.where(eligible[None, :], alt.throughput / per[None, :], -np.inf), nan=-np.inf)
    rows = pl.DataFrame({"g": groups, "row": np.arange(n), "name": names, "chosen": chosen})
    found = []
    for j, label in enumerate(alt.labels()):  # a handful of scenarios, each over every row at once
        scored = rows.with_columns(pl.Series("s", score[j]))
        best = scored.sort("s", descending=True, maintain_order=True).group_by("g").first()
        mine = scored.filter("chosen").select("g", "row", pl.col("s").alias("own"))
        found.append(
            mine.join(best.select("g", pl.col("row").alias("top"), "s", "name"), on="g")
            .filter((pl.col("top") != pl.col("row")) & (pl.col("s") > pl.col("own") * (1 + TIE) + TIE))
            .select("row", pl.format("{}: {}", pl.lit(label), "name").alias("note"))
        )
    notes = pl.concat(found).group_by("row", maintain_order=True).agg(pl.col("note").str.join("; "))
    out = pl.DataFrame({"row": np.arange(n)}).join(notes, on="row", how="left", maintain_order="left")
    return out["note"].alias("stack_flips")
