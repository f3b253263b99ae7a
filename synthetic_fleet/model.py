"""Analytical workload model (roofline style, after Acun et al., HPCA 2021, §IV-§V), vectorised over rows.

Input: a polars frame with the runs contract's workload and system columns, one row per configuration.
Output: the same rows plus, per row, the fit of the placement's memory tier (headroom or shortfall), the
per-iteration time terms, throughput between the perfect-overlap and serial bounds (null where the tables
do not fit), the bottleneck, mean utilisation per role and resource, and power (drawn and provisioned).
Every term is an array expression over all rows: no per-row Python.

Systems. A CPU cluster (platform without GPUs) runs asynchronous trainers, each on its own mini-batch
(``batch_size`` is per trainer there), with sparse parameter servers holding the tables (remote_ps) or the
tables sharded over the trainers' own DRAM (system_memory), dense parameter servers syncing the MLPs and
readers feeding examples. A GPU platform runs synchronous data-parallel MLPs over all the GPUs of its
``n_trainers`` servers with a global ``batch_size`` and the tables where the placement says; traffic
between servers goes through their NICs.

Shape of a workload: tables hold the bytes (``embedding_gb``, rows x dim x 4 bytes; with the optimizer
state, ``required_gb``), features make the lookups (``n_sparse_features`` x ``mean_lookups_per_table``
rows gathered per example, one pooled vector per feature); several features may share a table.

Evaluation runs in stages (sparse PS, CPU trainers, GPU iteration, throughput, utilisation, power). The
fitted coefficients live in ``Coefficients`` with the calibration target each one serves
(synthetic_fleet/calibration.py checks every target; ``fleet calibrate`` prints them); the fixed shape
constants of the utilisation and power estimates live in ``UtilisationShape``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import polars as pl

from synthetic_fleet import defaults
from synthetic_fleet.catalog import HardwareCatalog, Platform

ROLES = ("trainer", "sparse_ps", "dense_ps", "reader")
# The resources the model predicts: a subset of the contract's (pipelines.lib.contracts.resources(), the one
# list of every resource); it says nothing of the others (tensor-core activity, NVLink, PCIe).
MODELLED = ("cpu", "mem_cap", "mem_bw", "net_bw", "gpu", "gpu_mem")
UTIL_RESOURCES = {
    "sparse_ps": MODELLED[:4],
    "dense_ps": MODELLED[:4],
    "reader": MODELLED[:4],
    "trainer": MODELLED,
}
BYTES_FP32 = 4
BYTES_INDEX = 8
BWD_FACTOR = 3.0  # forward gather + backward scatter + optimizer update (TorchRec: 1 + 2)
HALF_PRECISIONS = ("fp16", "bf16")
GB = 1e9  # bytes per GB (the catalogs' GB and GB/s are 10^9)
TERA = 1e12  # FLOP/s per TFLOP/s
TINY = 1e-12  # guards divisions by rates and sizes that may be zero in masked branches


@dataclass(frozen=True)
class Coefficients:
    """Free coefficients; each line names the targets (calibration_targets.yaml ids) it serves."""

    eta_c_cpu: float = 0.08  # share of CPU peak on MLPs (DLRM benchmark ~5%; kept as a prior): t1, t3
    eta_c_gpu: float = 0.0463  # share of GPU peak on MLPs (fitted; DLRM benchmark ~3%): t1
    gpu_table_overhead_s: float = 1.50e-4  # GPU kernels per table per iter, fwd+bwd+update: t3, t21, t22
    a2a_message_s: float = 2.4e-5  # latency of one table's pooled exchange with one peer GPU: t24
    host_table_overhead_s: float = 1.0e-5  # host per-table work per iteration (CPU pooling, PS requests): t10
    gpu_iter_overhead_s: float = 2.0e-3  # GPU per-iteration launch, sync and input copy: t23
    cpu_iter_overhead_s: float = 1.0e-3  # CPU trainer per-mini-batch framework overhead: t23
    eta_hbm: float = 0.6  # share of HBM bandwidth on random row gathers: t20
    eta_dram: float = 0.7  # share of DRAM bandwidth on in-process host-side gathers (Zion): t11, t12
    eta_ps_dram: float = 0.2  # the same for a PS serving hash-map lookups over RPC: t5, t16
    eta_uvm: float = 0.15  # share of PCIe bandwidth for GPU-side reads of host rows: t11
    eta_net: float = 0.7  # share of NIC line rate: t5
    remote_rtt_s: float = 1.0e-3  # network round trip to the PS tier, paid fwd and bwd per iteration: t11
    host_copy_gbps: float = 3.52  # GB/s a GPU host moves between NIC and GPUs, remote PS (fitted): t5
    ps_gamma: float = 3.0  # PS DRAM bytes per gathered byte (gather + read-modify-write): t5, t16
    hot_table_split: float = 8.0  # PS shards a hot table is split over row-wise: t16, t19
    ps_copy_factor: float = 4.0  # PS DRAM bytes per network byte (NIC DMA, kernel/user copies, serde): t16
    gpu_locality_gb: float = 8.0  # table GB per GPU at which random-gather efficiency halves (TLB reach): t24
    cpu_locality_gb: float = 4000.0  # the same for a CPU host's DRAM (huge pages, deeper caches): t24
    kappa: float = 0.3  # 0 = perfect overlap of terms, 1 = serial: t19, t23
    trainer_saturation: float = 40.0  # CPU trainers at which async scaling efficiency halves: t19
    dense_sync_batches: float = 20.0  # CPU trainers sync dense weights every N mini-batches: t16
    batch_knee_cpu: float = 5.0e7  # cache bytes over activation bytes per example -> CPU batch knee: t23
    batch_knee_gpu: float = 2.0e9  # HBM working set over activation bytes per example -> GPU batch knee: t23
    batch_penalty_cpu: float = 1.5  # extra MLP cost per example once a CPU batch far outgrows caches: t23
    batch_penalty_gpu: float = 1.0  # the same on a GPU (activations spill L2/HBM locality): t23
    reader_gbps: float = 0.6  # GB/s of raw features one reader server decodes and ships: t18
    trainer_mem_base: float = 0.55  # trainer memory share for the dense model, activations, input queues: t16
    ps_mem_base: float = 0.15  # PS memory share for the OS, request buffers and row caches: t16
    optimizer_state: float = 1.0  # optimizer bytes per embedding byte (Adagrad: 1), in every tier: t8, t16


DEFAULT = Coefficients()


@dataclass(frozen=True)
class UtilisationShape:
    """Fixed shape constants of the mean-utilisation and power estimates (not fitted; chosen so that role
    means look like the paper's fleet figures, §III Figs. 5-8). Each is a share of the resource."""

    gpu_trainer_cpu_base: float = 0.08  # GPU server's CPUs when idle of embedding work (input, launches)
    gpu_trainer_cpu_span: float = 0.85  # ... plus this share of the host's embedding-side busy time
    cpu_trainer_cpu_base: float = 0.05  # CPU trainer cores outside the mini-batch compute
    cpu_trainer_cpu_span: float = 0.9  # ... plus this share of the compute-busy time
    cpu_trainer_mem_bw_base: float = 0.08  # CPU trainer DRAM bandwidth at rest
    cpu_trainer_mem_bw_span: float = 0.35  # ... plus this share of the compute-busy time
    gpu_overhead_busy: float = 0.5  # share of per-iteration kernel overhead that keeps the GPU busy
    host_busy_system_memory: float = 0.8  # host share of the host-side embedding time (system_memory)
    host_busy_hybrid: float = 0.4  # the same for hybrid (part of the tables are on the GPUs)
    host_busy_other: float = 0.1  # GPU host busy share for placements without host embedding work
    mem_headroom: float = 0.1  # memory in use beyond the tables (buffers, runtime) on trainers
    gpu_net_base: float = 0.03  # GPU server NIC at rest (control, metrics)
    cpu_net_base: float = 0.05  # CPU trainer NIC at rest
    other_bw: float = 0.1  # GPU server DRAM bandwidth when the tables are not in host memory
    weights_copies: float = 4.0  # dense weights, gradients and optimizer state copies in trainer memory
    activation_copies: float = 4.0  # activation buffers (forward, backward, input queue) in trainer memory
    ps_cpu_base: float = 0.05  # sparse PS cores at rest
    ps_cpu_per_load: float = 1.5  # sparse PS cores per unit of its busiest memory-bandwidth or network load
    dps_cpu_base: float = 0.05  # dense PS: cores at rest ...
    dps_cpu_per_net: float = 0.4  # ... and per unit of network load
    dps_mem_bw_base: float = 0.02  # dense PS: DRAM bandwidth at rest ...
    dps_mem_bw_per_net: float = 0.3  # ... and per unit of network load
    dps_mem_base: float = 0.05  # dense PS memory at rest ...
    dps_weights_copies: float = 3.0  # ... plus weights, gradients and optimizer state
    reader_mem_cap: float = 0.25  # reader memory (decode buffers)
    reader_mem_bw_base: float = 0.05  # reader DRAM bandwidth at rest ...
    reader_mem_bw_per_cpu: float = 0.3  # ... and per unit of CPU load
    reader_net_base: float = 0.05  # reader NIC at rest ...
    reader_net_per_cpu: float = 0.7  # ... and per unit of CPU load
    gpu_power_share: float = 0.75  # GPU server power follows GPU busy time for this share, CPUs the rest


SHAPE = UtilisationShape()


def coefficient_docs() -> dict[str, str]:
    """Coefficient name -> its comment (the target it serves), read from this module's source."""
    src = inspect.getsource(Coefficients)
    out = {}
    for f in fields(Coefficients):
        line = next((ln for ln in src.splitlines() if ln.strip().startswith(f.name + ":")), "")
        out[f.name] = line.split("#", 1)[1].strip() if "#" in line else ""
    return out


def required_gb(embedding_gb: Any, coef: Coefficients = DEFAULT) -> Any:
    """Bytes (GB) a table set needs in any memory tier: the tables and their optimizer state. The one
    definition used by the fit check, PS sizing, PS memory utilisation and the sampler."""
    return embedding_gb * (1 + coef.optimizer_state)


def _layer_products(widths: pl.Expr) -> pl.Expr:
    """Sum of w_i * w_{i+1} over a list of layer widths."""
    return widths.list.eval((pl.element() * pl.element().shift(-1)).sum()).list.first().cast(pl.Float64)


HW_KEYS = (
    "cpu_fp32_tflops",
    "cpu_fp16_tflops",
    "dram_gb",
    "dram_bw_gb_per_s",
    "host_pooling",
    "gpus",
    "hbm_gb_per_gpu",
    "hbm_bw_gb_per_s_per_gpu",
    "gpu_fp32_tflops",
    "gpu_tf32_tflops",
    "gpu_fp16_tflops",
    "gpu_link_gb_per_s",
    "pcie_gb_per_s",
    "nic_gb_per_s",
    "idle_w",
    "peak_w",
)


def _platform_columns(hw: HardwareCatalog) -> pl.DataFrame:
    rows = [
        {"platform": p.name, **{f"hw_{k}": float(getattr(p, k)) for k in HW_KEYS}}
        for p in hw.platforms.values()
        if p.modelled
    ]
    return pl.DataFrame(rows, schema={"platform": pl.String, **{f"hw_{k}": pl.Float64 for k in HW_KEYS}})


def fit_frame(frame: pl.DataFrame, hw: HardwareCatalog, coef: Coefficients = DEFAULT) -> pl.DataFrame:
    """Fit check of the tables with their optimizer state (``required_gb``) in the memory tier of each
    row's platform x placement.

    Adds tier, required_gb, capacity_gb, headroom (1 - required/capacity; negative when short), fits,
    shortfall_gb and min_servers (remote PS needed for capacity alone). Capacity counts every server of the
    row (``n_trainers`` servers) after the catalog's reserve. Unknown platforms get nulls.
    """
    ps_gb = hw.ps_server_gb
    f = frame.join(_platform_columns(hw), on="platform", how="left")
    servers = pl.col("n_trainers").cast(pl.Float64)
    hbm = pl.col("hw_gpus") * pl.col("hw_hbm_gb_per_gpu") * (1 - hw.hbm_reserve) * servers
    dram = pl.col("hw_dram_gb") * (1 - hw.dram_reserve) * servers
    remote = pl.lit(ps_gb) * pl.when(pl.col("n_sparse_ps") > 0).then(pl.col("n_sparse_ps")).otherwise(
        hw.remote_ps_max_servers
    )
    placement = pl.col("placement")
    tiers = {
        "gpu_hbm": ("gpu_hbm", hbm),
        "system_memory": ("host_dram", dram),
        "hybrid": ("gpu_hbm+host_dram", hbm + dram),
        "remote_ps": ("remote_ps_dram", remote),
    }
    tier, capacity = pl.when(pl.lit(False)).then(None), pl.when(pl.lit(False)).then(None)
    for name, (label, cap) in tiers.items():
        tier = tier.when(placement == name).then(pl.lit(label))
        capacity = capacity.when(placement == name).then(cap)
    out = f.with_columns(
        tier.alias("tier"),
        required_gb(pl.col("embedding_gb").cast(pl.Float64), coef).alias("required_gb"),
        capacity.cast(pl.Float64).alias("capacity_gb"),
    )
    out = out.with_columns(
        pl.when(pl.col("capacity_gb") > 0)
        .then(1 - pl.col("required_gb") / pl.col("capacity_gb"))
        .otherwise(-1.0)
        .alias("headroom"),
        (pl.col("required_gb") <= pl.col("capacity_gb")).alias("fits"),
        (pl.col("required_gb") - pl.col("capacity_gb")).clip(lower_bound=0).alias("shortfall_gb"),
        pl.when(placement == "remote_ps")
        .then((pl.col("required_gb") / ps_gb).ceil().clip(lower_bound=1).cast(pl.Int32))
        .otherwise(None)
        .alias("min_servers"),
    )
    return out.drop([c for c in out.columns if c.startswith("hw_")])


def _harmonic(n_tables: np.ndarray, alpha: np.ndarray, head: int = 16) -> np.ndarray:
    """sum_{t=1..T} t^-alpha, for the hottest table's share: the first ``head`` terms exactly, the rest by
    Euler-Maclaurin (relative error < 1e-5), in memory independent of T."""
    t_max = np.maximum(np.nan_to_num(n_tables, nan=1.0), 1.0)
    a = np.nan_to_num(alpha, nan=defaults.LOOKUP_POWER_LAW_ALPHA)
    k = np.arange(1, head + 1, dtype=float)
    exact = ((k[None, :] ** -a[:, None]) * (k[None, :] <= t_max[:, None])).sum(axis=1)
    lo, hi = head + 1.0, t_max
    near_one = np.abs(a - 1.0) < TINY
    safe = np.where(near_one, 2.0, a)
    integral = np.where(near_one, np.log(hi / lo), (hi ** (1 - safe) - lo ** (1 - safe)) / (1 - safe))
    tail = integral + 0.5 * (lo**-a + hi**-a) + a / 12 * (lo ** (-a - 1) - hi ** (-a - 1))
    return exact + np.where(t_max >= lo, tail, 0.0)


def _per_example(base: pl.DataFrame) -> pl.DataFrame:
    """Per-example quantities of each row's workload: FLOPs, dense parameters, bytes gathered, pooled,
    indexed and read. Lookups and pooled vectors follow features; table bytes follow tables."""
    bottom = pl.col("bottom_mlp").str.split("-").list.eval(pl.element().cast(pl.Float64))
    top = pl.col("top_mlp").str.split("-").list.eval(pl.element().cast(pl.Float64))
    n_f = pl.coalesce(pl.col("n_sparse_features"), pl.col("n_tables")).cast(pl.Float64)
    d = pl.col("embedding_dim").cast(pl.Float64)
    lookups = n_f * pl.col("mean_lookups_per_table")
    f_vec = n_f + 1
    top_in = (
        pl.when(pl.col("interaction") == "dot")
        .then(f_vec * (f_vec - 1) / 2 + bottom.list.last())
        .otherwise(n_f * d + bottom.list.last())
    )
    return base.with_columns(
        (_layer_products(bottom) + _layer_products(top) + top_in * top.list.first()).alias("dense_params"),
        (pl.when(pl.col("interaction") == "dot").then(f_vec * f_vec * d / 2).otherwise(0.0)).alias(
            "interaction_flops"
        ),
        (bottom.list.sum() + top.list.sum() + top_in).alias("activations"),
    ).with_columns(
        (6.0 * (pl.col("dense_params") + pl.col("interaction_flops"))).alias("flops_per_example"),
        (lookups * d * BYTES_FP32).alias("gather_bytes_per_example"),
        (n_f * d * BYTES_FP32).alias("pooled_bytes_per_example"),
        (lookups * BYTES_INDEX).alias("index_bytes_per_example"),
        (pl.col("n_dense_features").cast(pl.Float64) * BYTES_FP32 + lookups * BYTES_INDEX).alias(
            "input_bytes_per_example"
        ),
    )


ARRAY_COLUMNS = (
    "flops_per_example",
    "dense_params",
    "gather_bytes_per_example",
    "pooled_bytes_per_example",
    "index_bytes_per_example",
    "input_bytes_per_example",
    "activations",
    "embedding_gb",
    "required_gb",
    "batch_size",
    "n_tables",
    "n_trainers",
    "n_sparse_ps",
    "n_dense_ps",
    "n_readers",
    "lookup_power_law_alpha",
)


def predict_frame(frame: pl.DataFrame, hw: HardwareCatalog, coef: Coefficients = DEFAULT) -> pl.DataFrame:
    """Predict throughput, bottleneck, per-role utilisation and power for every row of ``frame``.

    ``lookup_power_law_alpha`` and ``precision`` are optional columns (defaults in synthetic_fleet.defaults).
    """
    base = fit_frame(frame, hw, coef).join(_platform_columns(hw), on="platform", how="left")
    for col, value in (
        ("lookup_power_law_alpha", defaults.LOOKUP_POWER_LAW_ALPHA),
        ("precision", defaults.PRECISION),
    ):
        if col not in base.columns:
            base = base.with_columns(pl.lit(value).alias(col))
    x = _per_example(base)
    names = (*ARRAY_COLUMNS, *[c for c in x.columns if c.startswith("hw_")])
    c = {k: x.get_column(k).cast(pl.Float64).fill_null(np.nan).to_numpy() for k in names}
    c["lookup_power_law_alpha"] = np.nan_to_num(
        c["lookup_power_law_alpha"], nan=defaults.LOOKUP_POWER_LAW_ALPHA
    )
    text = {
        k: x.get_column(k).fill_null(v).to_numpy().astype(str)
        for k, v in (("placement", ""), ("precision", defaults.PRECISION))
    }
    fits = x.get_column("fits").fill_null(False).to_numpy()
    ps = hw.platform(hw.remote_ps_platform)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # masked branches of np.where
        out = _evaluate(c, text["placement"], text["precision"], ps, coef, hw.hbm_reserve)
    keep = fits & np.isfinite(out["throughput_eps"]) & (out["throughput_eps"] > 0)
    cols = [
        pl.Series(k, np.where(keep & np.isfinite(v), v, np.nan)).fill_nan(None)
        for k, v in out.items()
        if k != "bottleneck"
    ]
    cols.append(
        pl.when(pl.Series(keep))
        .then(pl.Series(out["bottleneck"].astype(str)))
        .otherwise(None)
        .alias("bottleneck")
    )
    res = x.with_columns(cols).with_columns(
        (pl.col("throughput_eps") / pl.col("provisioned_w")).alias("eps_per_w"),
        (pl.col("throughput_eps") / pl.col("power_w")).alias("eps_per_drawn_w"),
    )
    return res.drop([k for k in res.columns if k.startswith("hw_")])


def _batch_penalty(b: np.ndarray, knee: np.ndarray, ceiling: float) -> np.ndarray:
    """Per-example MLP cost multiplier as the batch outgrows caches: 1 well below the knee, rising to
    1 + ``ceiling`` far above it. Bounded, so throughput rises with batch, peaks, then levels off (paper
    Fig. 11) instead of collapsing."""
    return 1.0 + ceiling * b / (b + knee)


def _common(c: dict[str, np.ndarray], placement: np.ndarray, coef: Coefficients) -> dict[str, Any]:
    """Quantities every stage uses: counts, batch, per-example bytes, NIC rates."""
    n_srv = np.maximum(np.nan_to_num(c["n_trainers"], nan=1.0), 1)
    return {
        "n": len(placement),
        "is_gpu": c["hw_gpus"] > 0,
        "remote": placement == "remote_ps",
        "local": placement == "system_memory",
        "n_srv": n_srv,
        "n_ps": np.nan_to_num(c["n_sparse_ps"]),
        "n_dps": np.nan_to_num(c["n_dense_ps"]),
        "n_rd": np.nan_to_num(c["n_readers"]),
        "n_tab": np.nan_to_num(c["n_tables"], nan=1.0),
        "batch": np.maximum(c["batch_size"], 1),
        "dense_bytes": c["dense_params"] * BYTES_FP32,
        "act_bytes": c["activations"] * BYTES_FP32 * 2,  # forward activations kept for backward
        "train_bytes": BWD_FACTOR * c["gather_bytes_per_example"],
        # indices out, pooled vectors back, pooled gradients out
        "remote_bytes": c["index_bytes_per_example"] + 2 * c["pooled_bytes_per_example"],
        "nic": c["hw_nic_gb_per_s"] * GB * coef.eta_net,  # usable NIC of one server, bytes/s
        "host_locality": 1.0 / (1.0 + c["required_gb"] / n_srv / coef.cpu_locality_gb),
    }


def _sparse_ps_stage(c: dict, k: dict, ps: Platform, coef: Coefficients) -> dict[str, np.ndarray]:
    """Remote sparse parameter servers: DRAM and network rates, with the hottest table's imbalance."""
    n_ps = k["n_ps"]
    # Hottest table's share under power-law lookups: the busiest PS carries at least its row-wise slice.
    hot_share = 1.0 / _harmonic(k["n_tab"], c["lookup_power_law_alpha"])
    imbalance = np.maximum(1.0, np.maximum(n_ps, 1) * hot_share / coef.hot_table_split)
    locality = 1.0 / (1.0 + c["required_gb"] / np.maximum(n_ps, 1) / coef.cpu_locality_gb)
    dram_bytes = coef.ps_gamma * c["gather_bytes_per_example"] + coef.ps_copy_factor * k["remote_bytes"]
    rate_mem = n_ps * ps.dram_bw_gb_per_s * GB * coef.eta_ps_dram * locality / (dram_bytes * imbalance)
    ps_nic = ps.nic_gb_per_s * GB * coef.eta_net
    rate_net = n_ps * ps_nic / (k["remote_bytes"] * imbalance)
    # A tier with no servers is not a separate constraint: 0 sparse PS means "as many as needed" (as in
    # fit_frame), 0 readers means trainers read their own data, 0 dense PS means trainers sync directly.
    r_ps = np.where(k["remote"] & (n_ps > 0), np.minimum(rate_mem, rate_net), np.inf)
    r_rd = np.where(k["n_rd"] > 0, k["n_rd"] * coef.reader_gbps * GB / c["input_bytes_per_example"], np.inf)
    return {"imbalance": imbalance, "rate_mem": rate_mem, "rate_net": rate_net, "r_ps": r_ps, "r_rd": r_rd}


def _cpu_peak(c: dict, precision: np.ndarray) -> np.ndarray:
    """CPU peak FLOP/s at the workload's precision (16-bit where the CPUs have matrix units)."""
    return (
        np.where(np.isin(precision, HALF_PRECISIONS), c["hw_cpu_fp16_tflops"], c["hw_cpu_fp32_tflops"]) * TERA
    )


def _gpu_peak(c: dict, precision: np.ndarray) -> np.ndarray:
    """GPU peak FLOP/s at the workload's precision (tf32 and 16-bit on tensor cores)."""
    return (
        np.select(
            [precision == "tf32", np.isin(precision, HALF_PRECISIONS)],
            [c["hw_gpu_tf32_tflops"], c["hw_gpu_fp16_tflops"]],
            default=c["hw_gpu_fp32_tflops"],
        )
        * TERA
    )


def _cpu_trainer_stage(c: dict, k: dict, precision: np.ndarray, ps: Platform, coef: Coefficients) -> dict:
    """Asynchronous CPU trainers (batch per trainer). remote_ps: lookups go to the PS over the NIC;
    system_memory: the tables are sharded over the trainers' DRAM, each trainer gathers its shard's rows
    from DRAM and exchanges the other shards' pooled vectors over the NIC."""
    batch, n_srv = k["batch"], k["n_srv"]
    cpu_peak = _cpu_peak(c, precision) * coef.eta_c_cpu
    knee = coef.batch_knee_cpu / k["act_bytes"]
    t_mlp = batch * c["flops_per_example"] / cpu_peak * _batch_penalty(batch, knee, coef.batch_penalty_cpu)
    dram = c["hw_dram_bw_gb_per_s"] * GB * coef.eta_dram * k["host_locality"]
    t_gather = np.where(k["local"], batch * k["train_bytes"] / dram, 0.0)
    t_compute = coef.cpu_iter_overhead_s + t_mlp + t_gather  # one mini-batch
    lookup_net = np.where(
        k["remote"], k["remote_bytes"], np.where(k["local"], k["remote_bytes"] * (n_srv - 1) / n_srv, 0.0)
    )
    t_net = batch * (lookup_net + 2 * k["dense_bytes"] / (batch * coef.dense_sync_batches)) / k["nic"]
    t_batch = np.maximum(t_compute, t_net) + coef.kappa * np.minimum(t_compute, t_net)
    scaling = 1.0 / (1.0 + n_srv / coef.trainer_saturation)
    ps_nic = ps.nic_gb_per_s * GB * coef.eta_net
    r_dps = np.where(
        k["n_dps"] > 0, k["n_dps"] * ps_nic * batch * coef.dense_sync_batches / (2 * k["dense_bytes"]), np.inf
    )
    name = np.where(
        t_compute >= t_net, np.where(t_gather > t_mlp, "embedding_lookup", "mlp_compute"), "trainer_network"
    )
    return {
        "t_compute": t_compute,
        "t_gather": t_gather,
        "t_net": t_net,
        "t_batch": t_batch,
        "scaling": scaling,
        "rate": n_srv * batch / t_batch * scaling,
        "r_dps": r_dps,
        "name": name,
    }


def _gpu_embedding(c: dict, k: dict, placement: np.ndarray, coef: Coefficients, hbm_reserve: float) -> dict:
    """Embedding time of one global batch on GPU servers, by placement."""
    batch, n_srv, gpus = k["batch"], k["n_srv"], k["gpus"]
    pooled, train_bytes = c["pooled_bytes_per_example"], k["train_bytes"]
    hbm_usable_per_gpu = c["hw_hbm_gb_per_gpu"] * (1 - hbm_reserve)
    # GPUs the tables span: a table set that fits one GPU is replicated (no exchange); else it is sharded.
    span = np.clip(np.ceil(c["required_gb"] / np.maximum(hbm_usable_per_gpu, TINY)), 1, gpus)
    gpu_locality = 1.0 / (
        1.0 + np.minimum(c["required_gb"] / span, hbm_usable_per_gpu) / coef.gpu_locality_gb
    )
    hbm_bw = gpus * c["hw_hbm_bw_gb_per_s_per_gpu"] * GB * coef.eta_hbm * gpu_locality
    pcie = gpus * c["hw_pcie_gb_per_s"] * GB
    dram_bw = n_srv * c["hw_dram_bw_gb_per_s"] * GB * coef.eta_dram * k["host_locality"]
    host_pools = c["hw_host_pooling"] > 0  # declared per platform (schemas/catalog/hardware.yaml)
    # Host tables are sharded over the servers' DRAM: pooled vectors (and their gradients) of rows on
    # other servers cross the NICs.
    cross_host = 2 * batch * pooled * (n_srv - 1) / n_srv / (n_srv * k["nic"])
    t_sys = cross_host + np.where(
        host_pools,
        batch * train_bytes / dram_bw + batch * 2 * pooled / pcie,
        batch * train_bytes / (pcie * coef.eta_uvm),
    )
    hbm_usable = c["hw_gpus"] * hbm_usable_per_gpu * n_srv
    hbm_share = np.clip(hbm_usable / np.maximum(c["required_gb"], TINY), 0, 1)
    # Remote PS: the GPU server's host moves indices out and pooled rows in, and issues per-table requests.
    remote_net = batch * k["remote_bytes"] / (n_srv * k["nic"])
    remote_host = (
        batch * k["remote_bytes"] / (coef.host_copy_gbps * GB * n_srv)
        + k["n_tab"] * coef.host_table_overhead_s
        + 2 * coef.remote_rtt_s
    )
    t_emb = np.select(
        [placement == "gpu_hbm", placement == "system_memory", placement == "hybrid", k["remote"]],
        [
            batch * train_bytes / hbm_bw,
            t_sys,
            hbm_share * batch * train_bytes / hbm_bw + (1 - hbm_share) * t_sys,
            np.maximum(remote_net, remote_host),
        ],
        default=np.inf,
    )
    emb_name = np.where(
        k["remote"],
        np.where(remote_host >= remote_net, "host_copy", "trainer_network"),
        "embedding_lookup",
    )
    host_side = np.isin(placement, ["system_memory", "hybrid"])
    nic_bytes = np.where(k["remote"], batch * k["remote_bytes"] / n_srv, 0.0) + np.where(
        host_side, 2 * batch * pooled * (n_srv - 1) / n_srv / n_srv, 0.0
    )
    return {
        "t_emb": t_emb,
        "t_sys": t_sys,
        "remote_host": remote_host,
        "span": span,
        "dram_bw": dram_bw,
        "hbm_usable": hbm_usable,
        "host_pools": host_pools,
        "emb_name": emb_name,
        "nic_bytes": nic_bytes,
    }


def _gpu_communication(c: dict, k: dict, placement: np.ndarray, span: np.ndarray, coef: Coefficients) -> dict:
    """All-to-all of sharded tables and the dense all-reduce: over the GPU links inside a server, over the
    NICs between servers (hierarchical all-reduce: a ring inside each server, then one across servers)."""
    batch, n_srv, gpus = k["batch"], k["n_srv"], k["gpus"]
    per_server = np.maximum(c["hw_gpus"], 1)
    # GPU-GPU link; without one (0), traffic goes through the host over PCIe.
    link = np.where(c["hw_gpu_link_gb_per_s"] > 0, c["hw_gpu_link_gb_per_s"], c["hw_pcie_gb_per_s"])
    link = link.clip(TINY) * GB
    sharded = np.isin(placement, ["gpu_hbm", "hybrid"]) & (span > 1)
    # Each GPU sends its share of every sharded table's pooled output to every other GPU, fwd and bwd.
    a2a_gpu = np.where(sharded, 2 * (batch / gpus) * c["pooled_bytes_per_example"] * (gpus - 1) / gpus, 0.0)
    off_server = (gpus - per_server) / np.maximum(gpus - 1, 1)  # share of peers on other servers
    a2a_nic = a2a_gpu * off_server * per_server  # bytes through one server's NIC
    t_messages = np.where(sharded, 2 * k["n_tab"] * (span - 1) * coef.a2a_message_s, 0.0)
    dense = k["dense_bytes"]
    ring_nic = np.where(n_srv > 1, 2 * (n_srv - 1) / n_srv * dense, 0.0)
    t_links = a2a_gpu * (1 - off_server) / link
    t_links = t_links + np.where(per_server > 1, 2 * (per_server - 1) / per_server * dense / link, 0.0)
    t_nic = (a2a_nic + ring_nic) / k["nic"]
    # The label names the largest part: NICs between servers, per-table messages, or GPU-link bytes.
    parts = np.vstack([t_nic, t_messages, t_links])
    names = np.array(["trainer_network", "exchange_latency", "gpu_communication"])
    return {
        "t_comm": parts.sum(axis=0),
        "comm_name": names[parts.argmax(axis=0)],
        "nic_bytes": a2a_nic + ring_nic,
    }


def _gpu_iteration_stage(
    c: dict, k: dict, placement: np.ndarray, precision: np.ndarray, coef: Coefficients, hbm_reserve: float
) -> dict:
    """Synchronous data-parallel GPU servers over all their GPUs with one global batch."""
    batch = k["batch"]
    k["gpus"] = np.maximum(c["hw_gpus"] * k["n_srv"], 1)
    gpu_peak = _gpu_peak(c, precision) * coef.eta_c_gpu
    knee = coef.batch_knee_gpu / k["act_bytes"]
    t_mlp = (
        batch
        * c["flops_per_example"]
        / (k["gpus"] * gpu_peak)
        * _batch_penalty(batch / k["gpus"], knee, coef.batch_penalty_gpu)
    )
    emb = _gpu_embedding(c, k, placement, coef, hbm_reserve)
    comm = _gpu_communication(c, k, placement, emb["span"], coef)
    # Embedding kernels on the GPUs cost per table; host-side pooling and remote PS move that work to CPUs.
    gpu_side = np.isin(placement, ["gpu_hbm", "hybrid"]) | (k["local"] & ~emb["host_pools"])
    per_table = np.where(gpu_side, coef.gpu_table_overhead_s, coef.host_table_overhead_s)
    t_ovh = coef.gpu_iter_overhead_s + per_table * k["n_tab"]
    terms = np.vstack([t_mlp, emb["t_emb"], comm["t_comm"], t_ovh])
    lo, hi = terms[:3].max(axis=0), terms[:3].sum(axis=0)
    t_iter = lo + coef.kappa * (hi - lo) + t_ovh
    names = np.vstack(
        [
            np.full(k["n"], "mlp_compute"),
            emb["emb_name"],
            comm["comm_name"],
            np.full(k["n"], "kernel_overhead"),
        ]
    )
    return {
        **emb,
        "t_mlp": t_mlp,
        "t_comm": comm["t_comm"],
        "t_ovh": t_ovh,
        "lo": lo,
        "hi": hi,
        "rate": batch / t_iter,
        "name": names[terms.argmax(axis=0), np.arange(k["n"])],
        "nic_bytes": emb["nic_bytes"] + comm["nic_bytes"],
    }


def _evaluate(
    c: dict[str, np.ndarray],
    placement: np.ndarray,
    precision: np.ndarray,
    ps: Platform,
    coef: Coefficients,
    hbm_reserve: float,
) -> dict[str, np.ndarray]:
    """Every stage over all rows; throughput is the slowest stage."""
    k = _common(c, placement, coef)
    sps = _sparse_ps_stage(c, k, ps, coef)
    cpu = _cpu_trainer_stage(c, k, precision, ps, coef)
    gpu = _gpu_iteration_stage(c, k, placement, precision, coef, hbm_reserve)
    is_gpu = k["is_gpu"]
    stages = np.vstack([np.where(is_gpu, gpu["rate"], cpu["rate"]), sps["r_ps"], cpu["r_dps"], sps["r_rd"]])
    thr = stages.min(axis=0)
    ps_name = np.where(sps["rate_mem"] <= sps["rate_net"], "ps_memory_bandwidth", "ps_network")
    labels = np.vstack(
        [
            np.where(is_gpu, gpu["name"], cpu["name"]),
            ps_name,
            np.full(k["n"], "dense_ps_network"),
            np.full(k["n"], "readers"),
        ]
    )
    util = _utilisation(c, k, sps, cpu, gpu, placement, thr, ps, coef)
    return {
        "throughput_eps": thr,
        **_terms(k, sps, cpu, gpu, thr),
        **_power(c, k, util, ps),
        **{
            f"{role}_{res}_util": util[(role, res)]
            for role in ROLES
            for res in UTIL_RESOURCES[role]
            if (role, res) in util
        },
        "bottleneck": labels[stages.argmin(axis=0), np.arange(k["n"])],
    }


def _terms(k: dict, sps: dict, cpu: dict, gpu: dict, thr: np.ndarray) -> dict[str, np.ndarray]:
    """Per-iteration terms in seconds for one global batch (CPU: one mini-batch of each trainer)."""
    is_gpu, batch, n_srv = k["is_gpu"], k["batch"], k["n_srv"]
    per_iter = batch * np.where(is_gpu, 1.0, n_srv)
    cpu_emb = np.where(
        k["remote"],
        batch * n_srv / np.minimum(sps["rate_mem"], sps["rate_net"]),
        np.where(k["local"], cpu["t_gather"], np.nan),
    )
    return {
        "t_mlp_s": np.where(is_gpu, gpu["t_mlp"], cpu["t_compute"] - cpu["t_gather"]),
        "t_embedding_s": np.where(is_gpu, gpu["t_emb"], cpu_emb),
        "t_network_s": np.where(is_gpu, gpu["t_comm"], cpu["t_net"]),
        "t_overhead_s": np.where(is_gpu, gpu["t_ovh"], 0.0),
        "t_reader_s": per_iter / np.maximum(sps["r_rd"], TINY),
        "t_iteration_s": per_iter / np.maximum(thr, TINY),
        "t_lower_bound_s": np.where(
            is_gpu, gpu["lo"] + gpu["t_ovh"], np.maximum(cpu["t_compute"], cpu["t_net"])
        ),
        "t_upper_bound_s": np.where(is_gpu, gpu["hi"] + gpu["t_ovh"], cpu["t_compute"] + cpu["t_net"]),
    }


def _utilisation(
    c: dict,
    k: dict,
    sps: dict,
    cpu: dict,
    gpu: dict,
    placement: np.ndarray,
    thr: np.ndarray,
    ps: Platform,
    coef: Coefficients,
) -> dict[tuple[str, str], np.ndarray]:
    """Mean utilisation per role and resource: demand over capacity (shape constants in SHAPE)."""
    util = {
        **_trainer_utilisation(c, k, cpu, gpu, placement, thr, coef),
        **_server_utilisation(c, k, sps, cpu, thr, ps, coef),
    }
    return {key: np.clip(v, 0, 1) for key, v in util.items()}


def _trainer_utilisation(
    c: dict, k: dict, cpu: dict, gpu: dict, placement: np.ndarray, thr: np.ndarray, coef: Coefficients
) -> dict[tuple[str, str], np.ndarray]:
    """Trainers: CPU, memory, network and (GPU platforms) GPU busy shares."""
    is_gpu, batch, n_srv, remote = k["is_gpu"], k["batch"], k["n_srv"], k["remote"]
    s = SHAPE
    busy = lambda t: np.clip(thr * t / batch, 0, 1)  # noqa: E731
    per_trainer = thr / n_srv
    cpu_busy = np.clip(
        np.minimum(per_trainer * cpu["t_batch"] / (batch * cpu["scaling"]), 1)
        * cpu["t_compute"]
        / cpu["t_batch"],
        0,
        1,
    )
    on_gpus = np.isin(placement, ["gpu_hbm", "hybrid"])
    gpu_busy = busy(gpu["t_mlp"] + np.where(on_gpus, gpu["t_emb"], 0) + gpu["t_ovh"] * s.gpu_overhead_busy)
    host_busy = np.select(
        [k["local"], remote, placement == "hybrid"],
        [
            busy(gpu["t_sys"]) * s.host_busy_system_memory,
            busy(gpu["remote_host"]),
            busy(gpu["t_sys"]) * s.host_busy_hybrid,
        ],
        s.host_busy_other,
    )
    dram_gb = c["hw_dram_gb"]
    dense_bytes = k["dense_bytes"]
    nic_raw = k["nic"] / coef.eta_net
    util = {
        # Async trainers stay busy (scaling losses are stale work, not idle time): busy = compute share.
        ("trainer", "cpu"): np.where(
            is_gpu,
            s.gpu_trainer_cpu_base + s.gpu_trainer_cpu_span * host_busy,
            s.cpu_trainer_cpu_base + s.cpu_trainer_cpu_span * cpu_busy,
        ),
        ("trainer", "mem_cap"): np.where(
            k["local"],
            np.clip(c["required_gb"] / (n_srv * dram_gb), 0, 1) + s.mem_headroom,
            coef.trainer_mem_base
            + (dense_bytes * s.weights_copies + batch * k["act_bytes"] * s.activation_copies)
            / (dram_gb * GB),
        ),
        ("trainer", "mem_bw"): np.where(
            is_gpu,
            np.where(
                k["local"],
                np.clip(thr * k["train_bytes"] / np.maximum(gpu["dram_bw"], TINY), 0, 1),
                s.other_bw,
            ),
            s.cpu_trainer_mem_bw_base + s.cpu_trainer_mem_bw_span * cpu_busy,
        ),
        ("trainer", "net_bw"): np.where(
            is_gpu,
            thr / batch * gpu["nic_bytes"] / nic_raw + s.gpu_net_base,
            per_trainer * cpu["t_net"] / batch * coef.eta_net + s.cpu_net_base,
        ),
        ("trainer", "gpu"): np.where(is_gpu, gpu_busy, np.nan),
        ("trainer", "gpu_mem"): np.where(
            is_gpu,
            np.where(on_gpus, np.minimum(c["required_gb"], gpu["hbm_usable"]), 0.0)
            / (k["gpus"] * c["hw_hbm_gb_per_gpu"])
            + s.mem_headroom,
            np.nan,
        ),
    }
    return util


def _server_utilisation(
    c: dict, k: dict, sps: dict, cpu: dict, thr: np.ndarray, ps: Platform, coef: Coefficients
) -> dict[tuple[str, str], np.ndarray]:
    """Sparse PS, dense PS and readers: load on the binding resource, the rest following it."""
    remote, s = k["remote"], SHAPE
    load = lambda rate: np.clip(thr / np.maximum(rate, TINY), 0, 1)  # noqa: E731
    util = {
        ("sparse_ps", "mem_bw"): np.where(remote, load(sps["rate_mem"] * sps["imbalance"]), 0.0),
        ("sparse_ps", "net_bw"): np.where(remote, load(sps["rate_net"] * sps["imbalance"]), 0.0),
        ("sparse_ps", "mem_cap"): np.where(
            remote, coef.ps_mem_base + c["required_gb"] / (np.maximum(k["n_ps"], 1) * ps.dram_gb), 0.0
        ),
        ("dense_ps", "net_bw"): load(cpu["r_dps"]),
        ("dense_ps", "mem_cap"): s.dps_mem_base + k["dense_bytes"] * s.dps_weights_copies / (ps.dram_gb * GB),
        ("reader", "cpu"): load(sps["r_rd"]),
        ("reader", "mem_cap"): np.full(k["n"], s.reader_mem_cap),
    }
    ps_load = np.maximum(util[("sparse_ps", "mem_bw")], util[("sparse_ps", "net_bw")])
    util[("sparse_ps", "cpu")] = s.ps_cpu_base + s.ps_cpu_per_load * ps_load
    util[("dense_ps", "cpu")] = s.dps_cpu_base + s.dps_cpu_per_net * util[("dense_ps", "net_bw")]
    util[("dense_ps", "mem_bw")] = s.dps_mem_bw_base + s.dps_mem_bw_per_net * util[("dense_ps", "net_bw")]
    util[("reader", "mem_bw")] = s.reader_mem_bw_base + s.reader_mem_bw_per_cpu * util[("reader", "cpu")]
    util[("reader", "net_bw")] = s.reader_net_base + s.reader_net_per_cpu * util[("reader", "cpu")]
    return util


def _power(c: dict, k: dict, util: dict, ps: Platform) -> dict[str, np.ndarray]:
    """Drawn power (idle + busy share of the dynamic range, every server) and provisioned power."""
    busy = np.where(
        k["is_gpu"],
        np.nan_to_num(util[("trainer", "gpu")]) * SHAPE.gpu_power_share
        + util[("trainer", "cpu")] * (1 - SHAPE.gpu_power_share),
        util[("trainer", "cpu")],
    )
    trainer_w = k["n_srv"] * (c["hw_idle_w"] + busy * (c["hw_peak_w"] - c["hw_idle_w"]))
    cpu_w = lambda u: ps.idle_w + u * (ps.peak_w - ps.idle_w)  # noqa: E731
    drawn = (
        trainer_w
        + k["n_ps"] * cpu_w(util[("sparse_ps", "cpu")])
        + k["n_dps"] * cpu_w(util[("dense_ps", "cpu")])
        + k["n_rd"] * cpu_w(util[("reader", "cpu")])
    )
    # Provisioned power counts trainers and parameter servers (the paper's power-capacity comparison,
    # Table III); readers are a shared input tier and appear in the drawn power only, so drawn power can
    # exceed provisioned power where many readers serve few trainers.
    provisioned = k["n_srv"] * c["hw_peak_w"] + (k["n_ps"] + k["n_dps"]) * ps.peak_w
    return {"power_w": drawn, "provisioned_w": provisioned}
