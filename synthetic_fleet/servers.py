"""The draws every server of a day's runs starts from: the day's generator (repeating with a period of
DAY_CYCLE days) and each server's multiplier, straggler flag, noise and power range. The sampler draws the
samples after them; the waste truth replays them to know what the sampler made."""

from __future__ import annotations

import datetime as dt
import hashlib

import numpy as np
import polars as pl

from workload_model.catalog import HardwareCatalog
from workload_model.model import MODELLED

SAMPLE_INTERVAL_S = 300
ROLE_NOISE = {"trainer": 0.015, "sparse_ps": 0.06, "dense_ps": 0.05, "reader": 0.04}  # sample-to-sample
# Server-to-server spread: parameter servers hold shards of power-law-accessed tables (hot shards).
ROLE_SKEW = {"trainer": 0.03, "sparse_ps": 0.5, "dense_ps": 0.3, "reader": 0.15}
STRAGGLER_SHARE = {"trainer": 0.01, "sparse_ps": 0.0, "dense_ps": 0.0, "reader": 0.02}
STRAGGLER_SLOWDOWN = 0.5  # a straggler's utilisation against its peers'
DAY_CYCLE = 5  # = the demo's --days default
CYCLE_EPOCH = dt.date(2026, 11, 1)  # days in [epoch, epoch + DAY_CYCLE) draw under their own name


def day_rng(seed: int, day: str) -> np.random.Generator:
    """The generator of ``day``'s draws: depends on the seed and on the day's place in the cycle only."""
    offset = (dt.date.fromisoformat(day) - CYCLE_EPOCH).days % DAY_CYCLE
    canonical = CYCLE_EPOCH + dt.timedelta(days=offset)
    digest = hashlib.sha256(f"{seed}:{canonical.isoformat()}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def server_draws(
    runs: pl.DataFrame, rng: np.random.Generator, hw: HardwareCatalog, noise_scale: float = 1.0
) -> pl.DataFrame:
    """Every server of every run with its role means (from the model), its draws and its power range:
    ``_mult`` (server-to-server multiplier: lognormal skew, times STRAGGLER_SLOWDOWN for a straggler),
    ``_straggler``, ``_sd`` (sample-to-sample noise, times ``noise_scale``), ``_idle_w`` and ``_peak_w``.
    Draws the first numbers of ``rng``; the samples are drawn after them."""
    counts = {
        "trainer": "n_trainers",
        "sparse_ps": "n_sparse_ps",
        "dense_ps": "n_dense_ps",
        "reader": "n_readers",
    }
    servers = pl.concat(
        [
            runs.select(
                "run_id",
                "start_ts",
                "end_ts",
                "platform",
                pl.lit(role).alias("role"),
                pl.int_ranges(0, pl.col(n_col)).alias("idx"),
                *[
                    pl.col(f"{role}_{res}_util").alias(res)
                    if f"{role}_{res}_util" in runs.columns
                    else pl.lit(None, pl.Float64).alias(res)
                    for res in MODELLED
                ],
            )
            .explode("idx")
            .drop_nulls("idx")
            for role, n_col in counts.items()
        ],
        how="vertical_relaxed",
    )
    servers = servers.with_columns(
        pl.format("{}-{}-{}", pl.col("run_id"), pl.col("role"), pl.col("idx")).alias("server_id"),
        ((pl.col("end_ts") - pl.col("start_ts")).dt.total_seconds() // SAMPLE_INTERVAL_S).alias("n_samples"),
    )
    # GPU utilisation only where the server has GPUs (trainers of GPU platforms).
    has_gpu = (pl.col("role") == "trainer") & (pl.col("platform") != "cpu")
    servers = servers.with_columns(
        [pl.when(has_gpu).then(pl.col(r)).otherwise(None).alias(r) for r in ("gpu", "gpu_mem")]
    )
    n_srv = servers.height
    skew = servers.get_column("role").replace_strict(ROLE_SKEW, return_dtype=pl.Float64).to_numpy()
    noise_sd = servers.get_column("role").replace_strict(ROLE_NOISE, return_dtype=pl.Float64).to_numpy()
    # Server-level multiplier: lognormal, right-skewed for parameter servers (hot shards), plus rare
    # stragglers.
    straggler = servers.get_column("role").replace_strict(STRAGGLER_SHARE, return_dtype=pl.Float64).to_numpy()
    spread = rng.lognormal(0.0, skew, n_srv)
    slowed = rng.random(n_srv) < straggler
    server_mult = spread * np.where(slowed, STRAGGLER_SLOWDOWN, 1.0)
    # Power per server from its platform's idle/peak watts (trainers of GPU runs are GPU servers; the rest
    # CPU servers).
    server_platform = (
        pl.when(pl.col("role") == "trainer").then(pl.col("platform")).otherwise(pl.lit(hw.remote_ps_platform))
    )
    watts = {p: (float(v.idle_w or 0), float(v.peak_w or 0)) for p, v in hw.platforms.items()}
    return servers.with_columns(
        pl.Series("_mult", server_mult),
        pl.Series("_straggler", slowed),
        pl.Series("_sd", noise_sd * noise_scale),
        server_platform.replace_strict({p: w[0] for p, w in watts.items()}, return_dtype=pl.Float64).alias(
            "_idle_w"
        ),
        server_platform.replace_strict({p: w[1] for p, w in watts.items()}, return_dtype=pl.Float64).alias(
            "_peak_w"
        ),
    )
