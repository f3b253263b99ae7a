"""Seeded fleet sampler: runs with fleet-level shapes, and per-server utilisation time series.

Everything is drawn with numpy over whole arrays (runs, servers, samples); one day's draws depend only
on (seed, day), so days are independent and the same seed gives the same fleet. The draws repeat with a
period of DAY_CYCLE days, so any DAY_CYCLE consecutive days (the demo's) hold the same fleet whatever the
date they fall on: the demo's figures, and the calibration computed on that fleet, do not depend on when
the demo runs.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import polars as pl

from synthetic_fleet.servers import CYCLE_EPOCH, SAMPLE_INTERVAL_S, day_rng, server_draws
from synthetic_fleet.truth import WasteTruth, waste_truth
from workload_model import defaults, fields
from workload_model.catalog import HardwareCatalog, ModelSpec, load_hardware, load_models
from workload_model.model import MODELLED, ROLES, predict_frame
from workload_model.model_inputs import required_gb
from workload_model.quality import normalized_entropy

PLATFORM_SHARES = {"cpu": 0.6, "big_basin": 0.25, "zion": 0.15}
CPU_TRAINER_COUNTS = np.array([4, 8, 12, 16, 20, 24, 32, 48])
CPU_TRAINER_PROBS = np.array([0.04, 0.08, 0.10, 0.50, 0.10, 0.08, 0.06, 0.04])  # modal 16 (paper: >40% share)
FAILED_SHARE = 0.04


@dataclass(frozen=True)
class DayFleet:
    """One day of synthetic telemetry, in the landing shape (before ingest), and optionally the truth of
    the waste the sampler made (written beside the landing files, never ingested)."""

    day: str
    runs: pl.DataFrame
    samples: pl.DataFrame
    truth: WasteTruth | None = None


def _choose(rng: np.random.Generator, keys: list[str], probs: np.ndarray, n: int) -> np.ndarray:
    return np.asarray(keys, dtype=object)[rng.choice(len(keys), size=n, p=probs / probs.sum())]


def sample_runs(
    day: str, n_runs: int, seed: int, hw: HardwareCatalog, models: dict[str, ModelSpec]
) -> pl.DataFrame:
    """Draw ``n_runs`` runs for ``day``: workload, system, timing and predicted outcomes (the random draws
    in one order: each helper takes its draws from ``rng`` in turn)."""
    rng = day_rng(seed, day)
    model, platform, plats, drawn, joined = _draw_workloads(rng, n_runs, hw, models)
    spec = lambda field: joined.get_column(field).to_numpy()  # noqa: E731

    # Feature experiments: sparse features and table sizes drift around the production shape.
    emb_gb = np.round(spec("embedding_gb") * rng.uniform(0.8, 1.2, n_runs), 3)
    n_sparse = np.maximum(1, spec("n_sparse_features") + rng.integers(-4, 5, n_runs))
    lookups = np.round(spec("mean_lookups_per_table") * rng.uniform(0.9, 1.1, n_runs), 2)
    batch = (
        joined.select(
            pl.coalesce([pl.when(pl.col("platform") == p).then(pl.col(f"batch_{p}")) for p in plats])
        )
        .to_series()
        .to_numpy()
    )

    placement = _placements(rng, platform, emb_gb, drawn, plats, hw)
    is_cpu = platform == "cpu"
    trainers, sparse_ps, dense_ps, readers = _server_counts(rng, is_cpu, placement, emb_gb, hw)
    start, duration_s, failed = _timing(rng, day, n_runs)
    runs = pl.DataFrame(
        {
            "run_id": pl.select(
                pl.format(
                    "{}-{}", pl.lit(day.replace("-", "")), pl.int_range(n_runs).cast(pl.String).str.zfill(5)
                )
            ).to_series(),
            "start_ts": start.astype("datetime64[us]"),
            "end_ts": (start + duration_s.astype("timedelta64[s]")).astype("datetime64[us]"),
            "status": np.where(failed, "failed", "succeeded"),
            "model_name": model.astype(str),
            "n_dense_features": spec("n_dense_features").astype(np.int32),
            "n_sparse_features": n_sparse.astype(np.int32),
            "n_tables": n_sparse.astype(np.int32),
            "embedding_dim": spec("embedding_dim").astype(np.int32),
            "embedding_gb": emb_gb,
            "mean_lookups_per_table": lookups,
            "bottom_mlp": spec("bottom_mlp").astype(str),
            "top_mlp": spec("top_mlp").astype(str),
            "interaction": spec("interaction").astype(str),
            "batch_size": batch.astype(np.int32),
            "platform": platform.astype(str),
            "placement": placement.astype(str),
            "n_trainers": trainers.astype(np.int32),
            "n_sparse_ps": sparse_ps.astype(np.int32),
            "n_dense_ps": dense_ps.astype(np.int32),
            "n_readers": readers.astype(np.int32),
        }
    ).with_columns(pl.col("start_ts", "end_ts").dt.replace_time_zone("UTC"))

    runs = runs.with_columns(
        pl.Series("lookup_power_law_alpha", spec("lookup_power_law_alpha").astype(float))
    )
    runs = _size_parameter_servers(runs, rng, hw)
    return _with_outcomes(runs, rng, hw, joined, model, batch, failed).with_columns(pl.lit(day).alias("_day"))


def _draw_workloads(
    rng: np.random.Generator, n_runs: int, hw: HardwareCatalog, models: dict[str, ModelSpec]
) -> tuple[np.ndarray, np.ndarray, list[str], pl.DataFrame, pl.DataFrame]:
    """Each run's model (by its share) and platform, and the catalog's shape and batch joined to them."""
    names = [m for m in models if models[m].share > 0] or list(models)
    model = _choose(rng, names, np.array([models[m].share or 1.0 for m in names]), n_runs)
    plats = [p for p in PLATFORM_SHARES if p in hw.platforms]
    platform = _choose(rng, plats, np.array([PLATFORM_SHARES[p] for p in plats]), n_runs)
    catalog = pl.DataFrame(
        [
            {
                "model_name": m.name,
                **{f: getattr(m, f) for f in fields.shape_fields() if f != "n_tables"},
                **{
                    f"batch_{p}": defaults.batch_for(dict(m.batch_size), p, hw.platforms[p].gpus)
                    for p in plats
                },
            }
            for m in models.values()
        ]
    )
    drawn = pl.DataFrame({"model_name": model.astype(str), "platform": platform.astype(str)}).with_row_index(
        "_i"
    )
    joined = drawn.join(catalog, on="model_name", how="left").sort("_i")
    return model, platform, plats, drawn, joined


def _placements(
    rng: np.random.Generator,
    platform: np.ndarray,
    emb_gb: np.ndarray,
    drawn: pl.DataFrame,
    plats: list[str],
    hw: HardwareCatalog,
) -> np.ndarray:
    """The default placement for the platform; big tables go to remote PS on Big Basin."""
    n_runs = len(platform)
    hbm_by_platform = {p: hw.platforms[p].hbm_gb * (1 - hw.hbm_reserve) for p in plats}
    hbm_cap = (
        drawn.select(pl.col("platform").replace_strict(hbm_by_platform, return_dtype=pl.Float64))
        .to_series()
        .to_numpy()
    )
    fits_hbm = required_gb(emb_gb) <= hbm_cap
    alt = rng.random(n_runs)
    placement = np.where(
        platform == "cpu",
        "remote_ps",
        np.where(
            platform == "big_basin",
            np.where(fits_hbm, np.where(alt < 0.1, "hybrid", "gpu_hbm"), "remote_ps"),
            np.where(fits_hbm & (alt < 0.15), "gpu_hbm", "system_memory"),
        ),
    )
    return placement


def _server_counts(
    rng: np.random.Generator,
    is_cpu: np.ndarray,
    placement: np.ndarray,
    emb_gb: np.ndarray,
    hw: HardwareCatalog,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Trainers, sparse and dense PS, and readers of each run."""
    n_runs = len(is_cpu)
    trainers = np.where(
        is_cpu,
        rng.choice(CPU_TRAINER_COUNTS, size=n_runs, p=CPU_TRAINER_PROBS),
        np.where(rng.random(n_runs) < 0.9, 1, 2),
    )
    uses_ps = placement == "remote_ps"
    # PS counts follow memory needs: tables plus optimizer state at a fill each team picks (wide, like the
    # paper's Fig. 9), so they are more dispersed than trainer counts.
    fill = rng.uniform(0.12, 0.6, n_runs)
    sparse_ps = np.where(uses_ps, np.ceil(required_gb(emb_gb) / (hw.ps_server_gb * fill)), 0).astype(int)
    dense_ps = np.where(is_cpu, rng.integers(1, 5, n_runs), 0)
    readers = np.where(
        is_cpu,
        np.maximum(2, np.round(trainers * rng.uniform(0.5, 1.2, n_runs))),
        rng.integers(16, 41, n_runs) * trainers,
    ).astype(int)
    return trainers, sparse_ps, dense_ps, readers


def _timing(rng: np.random.Generator, day: str, n_runs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each run's start, duration (s) and whether it failed (a failed run stops early)."""
    duration_s = (rng.integers(12, 73, n_runs) * SAMPLE_INTERVAL_S).astype(np.int64)
    day0 = dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC)
    start = np.datetime64(day0.replace(tzinfo=None), "s") + rng.integers(
        0, 18 * 3600 // 60, n_runs
    ) * np.timedelta64(60, "s")
    failed = rng.random(n_runs) < FAILED_SHARE
    # A failed run stops early: its time series ends with it.
    duration_s = (
        np.where(
            failed,
            (duration_s * rng.uniform(0.1, 0.6, n_runs)) // SAMPLE_INTERVAL_S * SAMPLE_INTERVAL_S,
            duration_s,
        )
        .astype(np.int64)
        .clip(min=2 * SAMPLE_INTERVAL_S)
    )
    return start, duration_s, failed


def _with_outcomes(
    runs: pl.DataFrame,
    rng: np.random.Generator,
    hw: HardwareCatalog,
    joined: pl.DataFrame,
    model: np.ndarray,
    batch: np.ndarray,
    failed: np.ndarray,
) -> pl.DataFrame:
    """The model's predicted throughput, power and normalized entropy, with noise, and per-role mean
    utilisation (kept for the sample generator, not part of the landing rows)."""
    n_runs, is_cpu = runs.height, runs.get_column("platform").to_numpy() == "cpu"
    pred = predict_frame(runs, hw)
    noise = rng.lognormal(0.0, 0.08, n_runs)
    thr = pred.get_column("throughput_eps").to_numpy() * noise
    power = pred.get_column("power_w").to_numpy() * rng.normal(1.0, 0.03, n_runs)
    # Normalized entropy (paper Fig. 15): GPU runs at fixed tuning regress with batch size against the CPU
    # batch.
    cpu_batch = (
        joined.get_column("batch_cpu").to_numpy()
        if "batch_cpu" in joined.columns
        else np.full(n_runs, defaults.BATCH_CPU)
    )
    ne = normalized_entropy(model.astype(str), ~is_cpu, batch, cpu_batch) * (
        1 + rng.normal(0, 0.0005, n_runs)
    )
    runs = runs.with_columns(
        pl.Series("throughput_eps", np.where(failed, np.nan, np.round(thr, 2))).fill_nan(None),
        pl.Series("power_w", np.round(power, 1)).fill_nan(None),
        pl.Series(
            "normalized_entropy", np.where(failed | (model == "M3prod"), np.nan, np.round(ne, 5))
        ).fill_nan(None),
    )
    # Per-role mean utilisation from the model, kept for the sample generator (not part of the landing rows).
    util_cols = [f"{r}_{res}_util" for r in ROLES for res in MODELLED if f"{r}_{res}_util" in pred.columns]
    return runs.with_columns(pred.select(util_cols))


def _size_parameter_servers(
    runs: pl.DataFrame, rng: np.random.Generator, hw: HardwareCatalog
) -> pl.DataFrame:
    """Sparse-PS counts as planners set them: enough memory for tables and optimizer state at the fill a team
    picks, and enough PS that their load on each resource (memory bandwidth, network) stays a fraction of
    the trainers' load on the same resource (so the PS tier is not the bottleneck). Counts therefore follow
    table size and trainer count: wider than trainer counts (t17), and PS run at a lower, more varied
    utilisation than trainers (t16)."""
    remote = runs.get_column("placement").to_numpy() == "remote_ps"
    ample = predict_frame(
        runs.with_columns(
            pl.when(pl.col("placement") == "remote_ps")
            .then(256)
            .otherwise(0)
            .cast(pl.Int32)
            .alias("n_sparse_ps")
        ),
        hw,
    )
    relative = np.exp(
        rng.uniform(np.log(0.2), np.log(0.95), runs.height)
    )  # PS load as a share of a trainer's
    by_bandwidth = np.zeros(runs.height)
    for res in ("net_bw", "mem_bw"):
        u_ps_at_256 = ample.get_column(f"sparse_ps_{res}_util").fill_null(0).to_numpy()
        u_trainer = ample.get_column(f"trainer_{res}_util").fill_null(0).to_numpy()
        need = np.ceil(u_ps_at_256 * 256 / np.maximum(relative * u_trainer, 1e-6))
        by_bandwidth = np.maximum(by_bandwidth, need)
    current = runs.get_column("n_sparse_ps").to_numpy()
    want = np.maximum(current, by_bandwidth)
    # A run that would want more than the cap gets a count in the top half of the fleet's range (spread by
    # its own draw), not the cap itself: clipping made the cap the modal count of the CPU fleet.
    cap = 2 * hw.remote_ps_max_servers
    spread = np.ceil(cap * (0.5 + 0.5 * (np.log(relative) - np.log(0.2)) / (np.log(0.95) - np.log(0.2))))
    n_ps = np.where(remote, np.where(want > cap, spread, np.maximum(want, 1)), 0).astype(np.int32)
    return runs.with_columns(pl.Series("n_sparse_ps", n_ps))


def sample_utilisation(
    runs: pl.DataFrame, seed: int, day: str, hw: HardwareCatalog, noise_scale: float = 1.0
) -> pl.DataFrame:
    """Per-server time series for every run: role means from the model, with warm-up, noise and stragglers.
    ``noise_scale`` multiplies the sample-to-sample noise (1: the fleet's own)."""
    rng = day_rng(seed + 1, day)
    servers = server_draws(runs, rng, hw, noise_scale)
    samples = servers.with_columns(pl.int_ranges(0, pl.col("n_samples")).alias("k")).explode("k")
    n = samples.height
    k = samples.get_column("k").to_numpy()
    # float32 for the draws (the bulk of the work); values are rounded to 4 decimals as float64 at the end.
    warmup = 1 - 0.6 * np.exp(-k.astype(np.float32))  # ramps up over the first ~10 minutes
    mult = samples.get_column("_mult").to_numpy().astype(np.float32) * warmup
    sd = samples.get_column("_sd").to_numpy().astype(np.float32)
    out = {}
    for res in MODELLED:
        base = samples.get_column(res).to_numpy().astype(np.float32)
        have = ~np.isnan(base)
        draw = np.full(n, np.nan, dtype=np.float32)
        m = int(have.sum())
        if m:
            b = base[have]
            noise = (
                rng.standard_normal(m, dtype=np.float32) * sd[have] * np.sqrt(np.maximum(b, np.float32(0.02)))
            )
            draw[have] = np.clip(b * mult[have] + noise, 0.0, 1.0)
        out[f"{res}_util"] = np.round(draw.astype(np.float64), 4)
    idle, peak = samples.get_column("_idle_w").to_numpy(), samples.get_column("_peak_w").to_numpy()
    busy = np.where(np.isnan(out["gpu_util"]), out["cpu_util"], 0.7 * out["gpu_util"] + 0.3 * out["cpu_util"])
    power = (idle + busy * (peak - idle)) * (1 + 0.02 * rng.standard_normal(n, dtype=np.float32))
    ts = samples.get_column("start_ts") + pl.Series(k.astype(np.int64) * SAMPLE_INTERVAL_S * 1_000_000).cast(
        pl.Duration("us")
    )
    return pl.DataFrame(
        {
            "run_id": samples.get_column("run_id"),
            "server_id": samples.get_column("server_id"),
            "role": samples.get_column("role"),
            "ts": ts,
            **{f"{res}_util": pl.Series(out[f"{res}_util"]).fill_nan(None) for res in MODELLED},
            "power_w": np.round(power.astype(np.float64), 1),
        }
    )


def sample_day(
    day: str,
    n_runs: int,
    seed: int,
    hw: HardwareCatalog,
    models: dict[str, ModelSpec],
    *,
    truth: bool = False,
    noise_scale: float = 1.0,
) -> DayFleet:
    """One day's runs (landing columns only) and their utilisation samples; with ``truth``, also the truth
    of the stragglers, hot shards and over-provisioning it made. ``noise_scale`` multiplies the
    sample-to-sample noise (the truth does not depend on it)."""
    runs = sample_runs(day, n_runs, seed, hw, models)
    samples = sample_utilisation(runs, seed, day, hw, noise_scale)
    landing_cols = [c for c in runs.columns if not c.endswith("_util") and not c.startswith("_")]
    made = None
    if truth:
        made = waste_truth(runs, seed, day, hw)
    return DayFleet(day=day, runs=runs.select(landing_cols), samples=samples, truth=made)


@lru_cache(maxsize=4)
def default_fleet(
    seed: int = 2021, days: int = 5, runs_per_day: int = 110
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The demo's fleet (same defaults as `fleet demo`): runs and samples of every day (the fleet the
    calibration's fleet-shape targets are measured on)."""
    hw, models = load_hardware(), load_models()
    fleets = [
        sample_day(str(CYCLE_EPOCH + dt.timedelta(days=i)), runs_per_day, seed, hw, models)
        for i in range(days)
    ]
    return pl.concat([f.runs for f in fleets]), pl.concat([f.samples for f in fleets])
