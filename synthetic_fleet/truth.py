"""The sampler's ground truth of the waste it made: which servers it slowed (stragglers), which sparse
parameter servers it made hot (far above their run's median), and how many servers each run and role
needs. It is written beside the landing files (``writers.write_truth``) and never read by the analysis;
tests compare what the analysis finds in the telemetry with it.

It comes from what the sampler knows and the telemetry only hints at: every server's multiplier, and the
noise-free steady-state utilisation (role mean from the workload model x multiplier, no warm-up, no noise).
A run and role needs the smallest count, found by trying every count from one to what the run held, at
which the workload model keeps the throughput (``saturation`` of it) and every resource's steady-state p95,
scaled by the model's load per server at that count, stays at or under ``target_p95_util`` (a resource
already above it may not rise): the right-sizing rule of docs/how-to/right-sizing.md, applied to the truth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from synthetic_fleet.servers import day_rng, server_draws
from workload_model import fields
from workload_model.catalog import HardwareCatalog
from workload_model.model import ROLES, UTIL_RESOURCES, predict_frame

ROLE_COUNTS = dict(zip(ROLES, fields.SERVER_COUNTS, strict=True))  # role -> its count column in runs
P95 = 0.95
SLACK = 1e-9  # float noise when a scaled p95 equals its limit


@dataclass(frozen=True)
class WasteTruth:
    """servers: one row per server (run_id, server_id, role, multiplier, ratio_to_median, straggler,
    hot_shard); roles: one row per run and role with servers (run_id, role, n_servers, needed_servers,
    recoverable_servers, provisioned_w_recoverable)."""

    servers: pl.DataFrame
    roles: pl.DataFrame


def definitions() -> dict[str, float]:
    """The thresholds the truth shares with the analysis: the contracts' defaults and the recommender's
    saturation share (what "no throughput lost" means)."""
    from pipelines.lib.contracts import contract
    from workload_model.sizing import SATURATION

    return {
        "target_p95_util": float(contract("run_efficiency").parameters["target_p95_util"]),
        "hot_shard_ratio": float(contract("server_outliers").parameters["hot_shard_ratio"]),
        "saturation": SATURATION,
    }


def waste_truth(runs: pl.DataFrame, seed: int, day: str, hw: HardwareCatalog) -> WasteTruth:
    """The truth of one day's runs as ``sample_runs`` drew them (with the model's role means)."""
    d = definitions()
    servers = server_draws(runs, day_rng(seed + 1, day), hw)
    return WasteTruth(
        _server_truth(servers, d["hot_shard_ratio"]),
        _role_truth(runs, servers, hw, d["target_p95_util"], d["saturation"]),
    )


def _server_truth(servers: pl.DataFrame, hot_shard_ratio: float) -> pl.DataFrame:
    peers = ["run_id", "role"]
    ratio = pl.col("_mult") / pl.col("_mult").median().over(peers)
    return servers.select(
        "run_id",
        "server_id",
        "role",
        pl.col("_mult").alias("multiplier"),
        ratio.alias("ratio_to_median"),
        pl.col("_straggler").alias("straggler"),
        ((pl.col("role") == "sparse_ps") & (pl.len().over(peers) >= 2) & (ratio >= hot_shard_ratio)).alias(
            "hot_shard"
        ),
    )


def _steady_p95(servers: pl.DataFrame) -> pl.DataFrame:
    """Per run, role and resource: the p95 over samples of the noise-free steady state (every server's
    value repeated once per sample it reports, interpolated like the analysis's quantile)."""
    resources = sorted({r for rs in UTIL_RESOURCES.values() for r in rs})
    values = servers.select(
        "run_id", "role", "n_samples", *[(pl.col(r) * pl.col("_mult")).clip(0, 1).alias(r) for r in resources]
    )
    return (
        values.unpivot(
            resources, index=["run_id", "role", "n_samples"], variable_name="resource", value_name="v"
        )
        .drop_nulls("v")
        .select("run_id", "role", "resource", pl.col("v").repeat_by("n_samples"))
        .explode("v")
        .group_by("run_id", "role", "resource")
        .agg(pl.col("v").quantile(P95, "linear").alias("p95"))
    )


def _role_truth(
    runs: pl.DataFrame, servers: pl.DataFrame, hw: HardwareCatalog, target: float, saturation: float
) -> pl.DataFrame:
    system = runs.select([c for c in runs.columns if not c.endswith("_util") and not c.startswith("_")])
    now = predict_frame(system, hw).select(
        "run_id",
        pl.col("throughput_eps").alias("thr_now"),
        *[pl.col(f"{r}_{x}_util").alias(f"now_{r}_{x}") for r in ROLE_COUNTS for x in UTIL_RESOURCES[r]],
    )
    p95 = _steady_p95(servers)
    parts = []
    for role, col in ROLE_COUNTS.items():
        tried = (
            system.filter(pl.col(col) > 0)
            .with_columns(pl.col(col).alias("_held"), pl.int_ranges(1, pl.col(col) + 1).alias("_n"))
            .explode("_n")
            .with_columns(pl.col("_n").cast(pl.Int32).alias(col))
        )
        if tried.is_empty():
            continue
        pred = predict_frame(tried, hw).join(now, on="run_id")
        ok = [
            pl.col("throughput_eps").is_not_null()
            & (pl.col("throughput_eps") >= saturation * pl.col("thr_now"))
        ]
        for res in UTIL_RESOURCES[role]:
            seen = p95.filter((pl.col("role") == role) & (pl.col("resource") == res)).select(
                "run_id", pl.col("p95").alias(f"p95_{res}")
            )
            pred = pred.join(seen, on="run_id", how="left")
            after = pl.col(f"p95_{res}") * pl.col(f"{role}_{res}_util") / pl.col(f"now_{role}_{res}")
            limit = pl.max_horizontal(pl.lit(target), pl.col(f"p95_{res}")) + SLACK
            ok.append(
                pl.col(f"p95_{res}").is_null()
                | (pl.col(f"now_{role}_{res}").fill_null(0) <= 0)
                | (after <= limit)
            )
        needed = pred.group_by("run_id").agg(
            pl.col("_held").first().alias("n_servers"),
            pl.col("_n").filter(pl.all_horizontal(ok)).min().alias("needed_servers"),
        )
        parts.append(needed.with_columns(pl.lit(role).alias("role")))
    roles = pl.concat(parts).with_columns(pl.col("needed_servers").fill_null(pl.col("n_servers")))
    peak = {p: float(v.peak_w) if v.peak_w is not None else np.nan for p, v in hw.platforms.items()}
    server_platform = (
        pl.when(pl.col("role") == "trainer").then(pl.col("platform")).otherwise(pl.lit(hw.remote_ps_platform))
    )
    return (
        roles.join(runs.select("run_id", "platform"), on="run_id")
        .with_columns(
            (pl.col("n_servers") - pl.col("needed_servers")).cast(pl.Int32).alias("recoverable_servers")
        )
        .with_columns(
            (pl.col("recoverable_servers") * server_platform.replace_strict(peak, return_dtype=pl.Float64))
            .fill_nan(None)
            .alias("provisioned_w_recoverable")
        )
        .select(
            "run_id",
            "role",
            pl.col("n_servers").cast(pl.Int32),
            pl.col("needed_servers").cast(pl.Int32),
            "recoverable_servers",
            "provisioned_w_recoverable",
        )
        .sort("run_id", "role")
    )
