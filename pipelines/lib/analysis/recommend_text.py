"""The words of a recommendation: each option's one-sentence explanation and the flags beside it (too
close to call), over the rows of several workloads told apart by ``GROUP``."""

from __future__ import annotations

from typing import Any

import polars as pl

from workload_model.alternatives import thousands
from workload_model.bottlenecks import BOTTLENECKS

GROUP = "_w"  # which of the workloads a row of a batch answers


def too_close(objective: str) -> pl.Expr:
    """Options whose P10-P90 band overlaps the recommended option's of their workload (under the
    objective): the model cannot tell them apart. The recommended option is flagged when any other option
    overlaps it."""
    per_w = objective == "perf_per_watt"
    lo = pl.col("p10_throughput_eps") / (pl.col("provisioned_w") if per_w else 1)
    hi = pl.col("p90_throughput_eps") / (pl.col("provisioned_w") if per_w else 1)
    best_lo = lo.filter(pl.col("recommended")).first().over(GROUP)
    best_hi = hi.filter(pl.col("recommended")).first().over(GROUP)
    others = pl.col("fits") & ~pl.col("recommended") & ~pl.col("same_as_gpu_hbm")
    overlaps = (others & (lo <= best_hi) & (hi >= best_lo)).fill_null(False)
    return (pl.when(pl.col("recommended")).then(overlaps.any().over(GROUP)).otherwise(overlaps)).alias(
        "too_close_to_call"
    )


SERVER_NOUNS = (
    ("n_trainers", ("trainer", "trainers")),
    ("n_sparse_ps", ("sparse PS", "sparse PS")),
    ("n_dense_ps", ("dense PS", "dense PS")),
    ("n_readers", ("reader", "readers")),
)


def _count(column: str, noun: tuple[str, str]) -> pl.Expr:
    """ "1 trainer", "3 trainers"."""
    return pl.format(
        "{} {}", column, pl.when(pl.col(column) == 1).then(pl.lit(noun[0])).otherwise(pl.lit(noun[1]))
    )


def _counterfactual_text(workloads: list[dict[str, Any]]) -> pl.Expr:
    """What would relieve each option's bottleneck, in its workload's words (its table count)."""
    tables = {i: str(w.get("n_tables", "")) for i, w in enumerate(workloads)}
    texts = {
        f"{k}|{n}": b.counterfactual.format(n_tables=n)
        for k, b in BOTTLENECKS.items()
        for n in set(tables.values())
    }
    key = pl.concat_str(
        [pl.col("_cf_kind"), pl.col(GROUP).replace_strict(tables, return_dtype=pl.String)], separator="|"
    )
    return key.replace_strict(texts, default="", return_dtype=pl.String)


def _against_best(fits_text: pl.Expr, score: str) -> pl.Expr:
    """The recommended option's sentence marked so, every other fitting one's with its share of the best
    option of its workload (the recommended one: a workload with an option that fits has one)."""
    best = pl.col("recommended")
    rel = pl.col(score) / pl.col(score).filter(best).first().over(GROUP)
    best_name = (pl.col("platform") + "/" + pl.col("placement")).filter(best).first().over(GROUP)
    return (
        pl.when(pl.col("recommended"))
        .then(pl.concat_str([pl.lit("Recommended. "), fits_text, pl.lit(".")]))
        .otherwise(
            pl.concat_str(
                [
                    fits_text,
                    pl.lit("; "),
                    (rel * 100).round(0).cast(pl.Int64).cast(pl.String),
                    # the best of every option ranked, which a comparison of two platforms may not show
                    pl.lit("% of the best option ("),
                    best_name,
                    pl.lit(")."),
                ]
            )
        )
    )


def explain(score: str, workloads: list[dict[str, Any]]) -> pl.Expr:
    """One sentence per option: throughput with its band and the band's measured coverage, perf/W, the
    bottleneck and its counterfactual, the server counts, and why drawn power may exceed provisioned."""
    cf_text = _counterfactual_text(workloads)
    coverage = (
        pl.when(pl.col("band_coverage").is_not_null())
        .then(
            pl.format("covers {}% of held-out runs", (pl.col("band_coverage") * 100).round(0).cast(pl.Int64))
        )
        .otherwise(pl.lit("coefficient spread, coverage not measured"))
    )
    gain = pl.col("counterfactual_gain").round(2)
    relief = (
        pl.when(gain > 1.0)  # a change that would not speed it up (1.0x) is no advice
        .then(pl.format("; {} would give {}x", cf_text, gain))
        .otherwise(pl.lit(""))
    )
    fits_text = pl.format(
        "{}/{}: {} ex/s (P10-P90 {}-{}, {}), {} ex/s/W; limited by {}{}; {}, {}, {}, {}",
        "platform",
        "placement",
        thousands(pl.col("p50_throughput_eps")),
        thousands(pl.col("p10_throughput_eps")),
        thousands(pl.col("p90_throughput_eps")),
        coverage,
        pl.col("eps_per_w").round(1),
        pl.col("bottleneck").replace_strict(
            {k: b.explanation for k, b in BOTTLENECKS.items()}, default=pl.col("bottleneck")
        ),
        relief,
        *(_count(c, noun) for c, noun in SERVER_NOUNS),
    )
    drawn = (
        pl.when(pl.col("power_w") > pl.col("provisioned_w"))
        .then(
            pl.format(
                "; drawn {} W exceeds provisioned {} W: its {} readers draw power but are not provisioned "
                "(a shared input tier, as the paper counts power)",
                thousands(pl.col("power_w")),
                thousands(pl.col("provisioned_w")),
                "n_readers",
            )
        )
        .otherwise(pl.lit(""))
    )
    close = (
        pl.when(pl.col("too_close_to_call") & pl.col("recommended"))
        .then(pl.lit("; too close to call: another option's P10-P90 band overlaps this one's"))
        .when(pl.col("too_close_to_call"))
        .then(pl.lit("; too close to call with the recommended option (P10-P90 bands overlap)"))
        .when(pl.col("same_as_gpu_hbm"))
        .then(pl.lit("; the same as gpu_hbm here: the tables fit in HBM, so hybrid keeps them all there"))
        .otherwise(pl.lit(""))
    )
    fits_text = pl.concat_str([fits_text, drawn, close])
    fits_text = _against_best(fits_text, score)
    no_fit = pl.format(
        "{}/{}: the tables with optimizer state ({} GB) do not fit {} ({} GB usable); {} GB short.",
        "platform",
        "placement",
        pl.col("required_gb").round(1),
        "tier",
        pl.col("capacity_gb").round(1),
        pl.col("shortfall_gb").round(1),
    )
    return pl.when(pl.col("fits")).then(fits_text).otherwise(no_fit).alias("explanation")
