"""Analytical workload model (roofline style, ../shared/notes/perf-model-anchors.md §5), vectorised over runs.

Input: a polars frame with the runs contract's workload and system columns, one row per configuration.
Output: the same rows with the fit check of the placement's memory tier, per-iteration time terms,
throughput (null where the tables do not fit), the bottleneck, mean utilisation per role and resource,
and power. Every term is a column expression over all rows at once: no per-row Python.

This is the first, uncalibrated version: coefficients are round priors from the anchors note, not yet
fitted to the paper's targets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from synthetic_fleet.catalog import HardwareCatalog

ROLES = ("trainer", "sparse_ps", "dense_ps", "reader")
RESOURCES = ("cpu", "mem_cap", "mem_bw", "net_bw", "gpu", "gpu_mem")
BYTES_FP32 = 4
BYTES_INDEX = 8


@dataclass(frozen=True)
class Coefficients:
    """Free coefficients of the model (priors; calibration fits them)."""

    eta_c_cpu: float = 0.08          # achieved share of CPU FP32 peak on MLPs (DLRM benchmark: ~5%)
    eta_c_gpu: float = 0.10          # achieved share of V100 FP32 peak (DLRM benchmark: ~3%; larger batches)
    eta_hbm: float = 0.6             # achieved share of HBM bandwidth on embedding gathers
    eta_dram: float = 0.5            # achieved share of DRAM bandwidth on host-side lookups
    eta_net: float = 0.7             # achieved share of NIC line rate
    eta_pcie: float = 0.5            # achieved share of PCIe bandwidth (fine-grained UVM is worse)
    kappa: float = 0.3               # 0 = perfect overlap of terms, 1 = serial
    gpu_iter_overhead_s: float = 0.004   # kernel launch and framework overhead per iteration
    ps_gamma: float = 3.0            # PS DRAM traffic per looked-up byte (gather + read-modify-write)
    reader_eps_per_server: float = 30_000.0
    trainer_saturation: float = 40.0     # trainer count at which async scaling efficiency halves
    dense_sync_batches: float = 20.0     # CPU trainers sync dense parameters with the dense PS every N batches


DEFAULT = Coefficients()


def _layer_products(widths: pl.Expr) -> pl.Expr:
    """Sum of w_i * w_{i+1} over a list of layer widths."""
    return widths.list.eval((pl.element() * pl.element().shift(-1)).sum()).list.first().cast(pl.Float64)


def _platform_columns(hw: HardwareCatalog) -> pl.DataFrame:
    rows = [{"platform": p.name, **{f"hw_{k}": None if getattr(p, k) is None else float(getattr(p, k)) for k in (
        "cpu_fp32_tflops", "dram_gb", "dram_bw_gb_per_s", "gpus", "hbm_gb_per_gpu", "hbm_bw_gb_per_s_per_gpu",
        "gpu_fp32_tflops", "gpu_link_gb_per_s", "pcie_gb_per_s", "nic_gb_per_s", "idle_w", "peak_w")}}
            for p in hw.platforms.values() if p.modelled]
    return pl.DataFrame(rows, schema={"platform": pl.String, **{k: pl.Float64 for k in rows[0] if k != "platform"}})


def fit_frame(frame: pl.DataFrame, hw: HardwareCatalog) -> pl.DataFrame:
    """Fit check of ``embedding_gb`` in the memory tier of each row's platform x placement.

    Adds tier, required_gb, capacity_gb, headroom, fits, shortfall_gb, min_servers (remote PS needed
    for capacity alone). Rows whose platform is not in the catalog get nulls.
    """
    ps_gb = hw.ps_server_gb
    f = frame.join(_platform_columns(hw), on="platform", how="left")
    hbm = pl.col("hw_gpus") * pl.col("hw_hbm_gb_per_gpu") * (1 - hw.hbm_reserve) * pl.col("n_trainers").cast(pl.Float64)
    dram = pl.col("hw_dram_gb") * (1 - hw.dram_reserve) * pl.col("n_trainers").cast(pl.Float64)
    remote = pl.lit(ps_gb * hw.remote_ps_max_servers)
    placement = pl.col("placement")
    capacity = (pl.when(placement == "gpu_hbm").then(hbm)
                .when(placement == "system_memory").then(dram)
                .when(placement == "hybrid").then(hbm + dram)
                .when(placement == "remote_ps").then(remote))
    tier = (pl.when(placement == "gpu_hbm").then(pl.lit("gpu_hbm"))
            .when(placement == "system_memory").then(pl.lit("host_dram"))
            .when(placement == "hybrid").then(pl.lit("gpu_hbm+host_dram"))
            .when(placement == "remote_ps").then(pl.lit("remote_ps_dram")))
    required = pl.col("embedding_gb").cast(pl.Float64)
    out = f.with_columns(tier.alias("tier"), required.alias("required_gb"), capacity.alias("capacity_gb"))
    out = out.with_columns(
        pl.when(pl.col("capacity_gb") > 0).then(1 - pl.col("required_gb") / pl.col("capacity_gb")).otherwise(-1.0).alias("headroom"),
        (pl.col("required_gb") <= pl.col("capacity_gb")).alias("fits"),
        (pl.col("required_gb") - pl.col("capacity_gb")).clip(lower_bound=0).alias("shortfall_gb"),
        pl.when(placement == "remote_ps").then((pl.col("required_gb") / ps_gb).ceil().clip(lower_bound=1).cast(pl.Int32))
        .otherwise(None).alias("min_servers"),
    )
    return out.drop([c for c in out.columns if c.startswith("hw_")])


def predict_frame(frame: pl.DataFrame, hw: HardwareCatalog, coef: Coefficients = DEFAULT) -> pl.DataFrame:
    """Predict throughput, bottleneck, per-role utilisation and power for every row of ``frame``."""
    base = fit_frame(frame, hw).join(_platform_columns(hw), on="platform", how="left")
    bottom = pl.col("bottom_mlp").str.split("-").list.eval(pl.element().cast(pl.Float64))
    top = pl.col("top_mlp").str.split("-").list.eval(pl.element().cast(pl.Float64))
    n_t = pl.col("n_tables").cast(pl.Float64)
    d = pl.col("embedding_dim").cast(pl.Float64)
    f_vec = n_t + 1
    top_in = pl.when(pl.col("interaction") == "dot").then(f_vec * (f_vec - 1) / 2 + d).otherwise(f_vec * d)
    x = base.with_columns(
        (6.0 * (_layer_products(bottom) + _layer_products(top) + top_in * top.list.first() + f_vec * f_vec * d / 2)).alias("flops_per_example"),
        (_layer_products(bottom) + _layer_products(top) + top_in * top.list.first()).alias("dense_params"),
        (3.0 * n_t * pl.col("mean_lookups_per_table") * d * BYTES_FP32).alias("emb_bytes_per_example"),
        (n_t * d * BYTES_FP32).alias("pooled_bytes_per_example"),
        (n_t * pl.col("mean_lookups_per_table") * BYTES_INDEX).alias("index_bytes_per_example"),
    )
    c = {k: x.get_column(k).to_numpy().astype(float) for k in (
        "flops_per_example", "dense_params", "emb_bytes_per_example", "pooled_bytes_per_example", "index_bytes_per_example",
        "hw_cpu_fp32_tflops", "hw_dram_gb", "hw_dram_bw_gb_per_s", "hw_gpus", "hw_hbm_gb_per_gpu", "hw_hbm_bw_gb_per_s_per_gpu",
        "hw_gpu_fp32_tflops", "hw_gpu_link_gb_per_s", "hw_pcie_gb_per_s", "hw_nic_gb_per_s", "hw_idle_w", "hw_peak_w",
        "embedding_gb", "batch_size", "n_trainers", "n_sparse_ps", "n_dense_ps", "n_readers")}
    placement = x.get_column("placement").to_numpy()
    fits = x.get_column("fits").fill_null(False).to_numpy()
    ps = hw.platform(hw.remote_ps_platform)
    with np.errstate(divide="ignore", invalid="ignore"):  # masked branches of np.where/np.select
        terms, util, thr, bottleneck = _throughput(c, placement, ps, coef)
        thr = np.where(fits, thr, np.nan)
        power = _power(c, util, ps)
    cols = {f"t_{k}_s": np.where(fits, v, np.nan) for k, v in terms.items()}
    cols.update({f"{role}_{res}_util": np.where(fits, v, np.nan) for (role, res), v in util.items()})
    out = x.with_columns(
        pl.Series("throughput_eps", thr).fill_nan(None),
        pl.Series("bottleneck", np.where(fits, bottleneck, None), dtype=pl.String),
        pl.Series("power_w", np.where(fits, power, np.nan)).fill_nan(None),
        *[pl.Series(k, v).fill_nan(None) for k, v in cols.items()],
    ).with_columns((pl.col("throughput_eps") / pl.col("power_w")).alias("eps_per_w"))
    return out.drop([k for k in out.columns if k.startswith("hw_")])


def _throughput(c: dict[str, np.ndarray], placement: np.ndarray, ps, coef: Coefficients):
    n = len(placement)
    inf = np.full(n, np.inf)
    is_gpu = c["hw_gpus"] > 0
    n_tr = np.maximum(c["n_trainers"], 1)
    n_ps, n_dps, n_rd = c["n_sparse_ps"], c["n_dense_ps"], c["n_readers"]
    batch = np.maximum(c["batch_size"], 1)
    flops, emb, pooled, idx = c["flops_per_example"], c["emb_bytes_per_example"], c["pooled_bytes_per_example"], c["index_bytes_per_example"]
    dense_bytes = c["dense_params"] * BYTES_FP32
    remote = placement == "remote_ps"
    nic_tr = c["hw_nic_gb_per_s"] * 1e9 * coef.eta_net
    bytes_remote = idx + 2 * pooled  # indices out, pooled rows back, pooled gradients out

    # --- CPU cluster: per-trainer example rate, then the slowest of the cluster's stages.
    r_compute = np.where(is_gpu, inf, c["hw_cpu_fp32_tflops"] * 1e12 * coef.eta_c_cpu / flops)
    t_cpu_net = (bytes_remote + 2 * dense_bytes / (batch * coef.dense_sync_batches)) / nic_tr
    per_trainer = 1 / (np.maximum(1 / r_compute, t_cpu_net) + coef.kappa * np.minimum(1 / r_compute, t_cpu_net))
    scaling = 1 / (1 + n_tr / coef.trainer_saturation)

    # --- GPU server(s): per-iteration terms for a global batch over all GPUs.
    n_gpu = np.maximum(c["hw_gpus"] * n_tr, 1)
    t_mlp_gpu = batch * flops / (n_gpu * c["hw_gpu_fp32_tflops"].clip(1e-9) * 1e12 * coef.eta_c_gpu)
    hbm_bw = n_gpu * c["hw_hbm_bw_gb_per_s_per_gpu"] * 1e9 * coef.eta_hbm
    pcie_bw = n_gpu * c["hw_pcie_gb_per_s"] * 1e9 * coef.eta_pcie
    dram_bw = n_tr * c["hw_dram_bw_gb_per_s"] * 1e9 * coef.eta_dram
    host_side = c["hw_dram_bw_gb_per_s"] >= 512  # big-memory hosts pool on the CPU; others read rows over UVM
    t_emb_sys = np.where(host_side, batch * emb / dram_bw + batch * 2 * pooled / pcie_bw, batch * emb / pcie_bw)
    hbm_share = np.clip((c["hw_gpus"] * c["hw_hbm_gb_per_gpu"] * n_tr * 0.85) / np.maximum(c["embedding_gb"], 1e-9), 0, 1)
    t_emb_gpu = np.select(
        [placement == "gpu_hbm", placement == "system_memory", placement == "hybrid", remote],
        [batch * emb / hbm_bw, t_emb_sys, hbm_share * batch * emb / hbm_bw + (1 - hbm_share) * t_emb_sys,
         batch * bytes_remote / (n_tr * nic_tr)],
        default=np.inf,
    )
    link = n_gpu * c["hw_gpu_link_gb_per_s"].clip(1e-9) * 1e9
    a2a = np.where(np.isin(placement, ["gpu_hbm", "hybrid"]), 2 * batch * pooled * (n_gpu - 1) / n_gpu, 0.0)
    t_comm_gpu = a2a / link + 2 * (n_gpu - 1) / n_gpu * dense_bytes / (c["hw_gpu_link_gb_per_s"].clip(1e-9) * 1e9)
    lo = np.maximum.reduce([t_mlp_gpu, t_emb_gpu, t_comm_gpu])
    hi = t_mlp_gpu + t_emb_gpu + t_comm_gpu
    t_iter = lo + coef.kappa * (hi - lo) + coef.gpu_iter_overhead_s
    r_gpu_servers = batch / t_iter

    # --- Stages shared by both: remote sparse PS, dense PS, readers.
    ps_lookup_bytes = coef.ps_gamma * emb / 3
    r_ps_mem = np.where(remote, n_ps * ps.dram_bw_gb_per_s * 1e9 * coef.eta_dram / ps_lookup_bytes, inf)
    r_ps_net = np.where(remote, n_ps * ps.nic_gb_per_s * 1e9 * coef.eta_net / bytes_remote, inf)
    r_ps_mem = np.where(remote & (n_ps == 0), 0.0, r_ps_mem)
    sync_examples = batch * coef.dense_sync_batches  # examples a trainer processes between dense syncs
    r_dps = np.where((n_dps > 0) & ~is_gpu, n_dps * ps.nic_gb_per_s * 1e9 * coef.eta_net * sync_examples / (2 * dense_bytes), inf)
    r_readers = np.where(n_rd > 0, n_rd * coef.reader_eps_per_server, 0.0)

    r_trainers = np.where(is_gpu, r_gpu_servers, n_tr * per_trainer * scaling)
    stages = np.vstack([r_trainers, r_ps_mem, r_ps_net, r_dps, r_readers])
    thr = stages.min(axis=0)
    which = stages.argmin(axis=0)
    gpu_term = np.vstack([t_mlp_gpu, t_emb_gpu, t_comm_gpu]).argmax(axis=0)
    gpu_names = np.array(["mlp_compute", "embedding_memory", "gpu_communication"])
    cpu_names = np.where(1 / r_compute >= t_cpu_net, "mlp_compute", "trainer_network")
    trainer_name = np.where(is_gpu, gpu_names[gpu_term], cpu_names)
    names = np.vstack([trainer_name, np.full(n, "ps_memory_bandwidth"), np.full(n, "ps_network"),
                       np.full(n, "dense_ps_network"), np.full(n, "readers")])
    bottleneck = names[which, np.arange(n)]

    # Per-iteration terms, in seconds per global batch, for explanation.
    t_iter_cpu = batch / np.maximum(thr, 1e-9)
    terms = {
        "mlp": np.where(is_gpu, t_mlp_gpu, batch / np.maximum(n_tr * r_compute * scaling, 1e-9)),
        "embedding": np.where(is_gpu, t_emb_gpu, batch / np.minimum(r_ps_mem, inf).clip(1e-9)),
        "network": np.where(is_gpu, t_comm_gpu, batch * t_cpu_net / n_tr),
        "reader": batch / np.maximum(r_readers, 1e-9),
        "iteration": np.where(is_gpu, batch / np.maximum(thr, 1e-9), t_iter_cpu),
    }

    # --- Mean utilisation per role and resource (demand over capacity, clipped to [0, 1]).
    load = lambda r: np.clip(thr / np.maximum(r, 1e-9), 0, 1)  # noqa: E731
    gpu_busy = np.clip((t_mlp_gpu + np.where(np.isin(placement, ["gpu_hbm", "hybrid"]), t_emb_gpu, 0)) / t_iter, 0, 1)
    tr_net = np.where(remote, thr * bytes_remote / (n_tr * c["hw_nic_gb_per_s"].clip(1e-9) * 1e9),
                      np.where(is_gpu, 0.05 + 0.1 * (n_tr > 1), thr * t_cpu_net / n_tr))
    host_work = np.select([placement == "system_memory", remote, placement == "hybrid"], [0.55, 0.45, 0.35], 0.2)
    util = {
        ("trainer", "cpu"): np.where(is_gpu, host_work * np.clip(thr / r_gpu_servers, 0, 1) + 0.1,
                                     np.clip(thr / np.maximum(n_tr * r_compute, 1e-9), 0, 1) * 0.9 + 0.05),
        ("trainer", "mem_cap"): np.where(is_gpu & (placement == "system_memory"),
                                         np.clip(c["embedding_gb"] / (n_tr * c["hw_dram_gb"]), 0, 1), 0.25),
        ("trainer", "mem_bw"): np.where(is_gpu & (placement == "system_memory") & host_side,
                                        load(batch / np.maximum(batch * emb / dram_bw, 1e-12)), 0.15),
        ("trainer", "net_bw"): np.clip(tr_net, 0, 1),
        ("trainer", "gpu"): np.where(is_gpu, gpu_busy, np.nan),
        ("trainer", "gpu_mem"): np.where(is_gpu, np.where(np.isin(placement, ["gpu_hbm", "hybrid"]),
                                         np.clip(c["embedding_gb"] / (n_gpu * c["hw_hbm_gb_per_gpu"].clip(1e-9)), 0, 1) * 0.9 + 0.08, 0.2), np.nan),
        ("sparse_ps", "cpu"): 0.1 + 0.6 * load(np.minimum(r_ps_mem, r_ps_net)),
        ("sparse_ps", "mem_cap"): np.clip(c["embedding_gb"] / (np.maximum(n_ps, 1) * ps.dram_gb), 0, 1),
        ("sparse_ps", "mem_bw"): load(r_ps_mem),
        ("sparse_ps", "net_bw"): load(r_ps_net),
        ("dense_ps", "cpu"): 0.05 + 0.4 * load(r_dps),
        ("dense_ps", "mem_cap"): np.clip(0.05 + dense_bytes * 3 / (ps.dram_gb * 1e9), 0, 1),
        ("dense_ps", "mem_bw"): 0.05 + 0.3 * load(r_dps),
        ("dense_ps", "net_bw"): load(r_dps),
        ("reader", "cpu"): load(r_readers),
        ("reader", "mem_cap"): np.full(n, 0.3),
        ("reader", "mem_bw"): 0.1 + 0.3 * load(r_readers),
        ("reader", "net_bw"): 0.8 * load(r_readers),
    }
    util = {k: np.clip(v, 0, 1) for k, v in util.items()}
    return terms, util, thr, bottleneck


def _power(c: dict[str, np.ndarray], util: dict[tuple[str, str], np.ndarray], ps) -> np.ndarray:
    """Total watts: idle + utilisation x (peak - idle), summed over every server of every role."""
    is_gpu = c["hw_gpus"] > 0
    tr_busy = np.where(is_gpu, np.nan_to_num(util[("trainer", "gpu")]) * 0.7 + util[("trainer", "cpu")] * 0.3, util[("trainer", "cpu")])
    trainer_w = c["n_trainers"] * (c["hw_idle_w"] + tr_busy * (c["hw_peak_w"] - c["hw_idle_w"]))
    cpu_w = lambda busy: ps.idle_w + busy * (ps.peak_w - ps.idle_w)  # noqa: E731
    return (trainer_w + c["n_sparse_ps"] * cpu_w(util[("sparse_ps", "cpu")])
            + c["n_dense_ps"] * cpu_w(util[("dense_ps", "cpu")]) + c["n_readers"] * cpu_w(util[("reader", "cpu")]))
