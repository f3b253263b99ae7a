"""Analytical workload model (roofline style, ../shared/notes/perf-model-anchors.md §5), vectorised over rows.

Input: a polars frame with the runs contract's workload and system columns, one row per configuration.
Output: the same rows plus, per row, the fit of the placement's memory tier (headroom or shortfall), the
per-iteration time terms, throughput between the perfect-overlap and serial bounds (null where the tables
do not fit), the bottleneck, mean utilisation per role and resource, and power (drawn and provisioned).
Every term is an array expression over all rows: no per-row Python.

Systems. A CPU cluster (platform without GPUs; placement remote_ps) runs asynchronous trainers, each on its
own mini-batch (``batch_size`` is per trainer there), with sparse parameter servers holding the tables,
dense parameter servers syncing the MLPs and readers feeding examples. A GPU platform runs synchronous
data-parallel MLPs over all its GPUs with a global ``batch_size`` and the tables where the placement says.

The free coefficients live in ``Coefficients`` with the calibration target each one serves
(synthetic_fleet/calibration.py checks every target; ``fleet calibrate`` prints them).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import polars as pl

from synthetic_fleet.catalog import HardwareCatalog

ROLES = ("trainer", "sparse_ps", "dense_ps", "reader")
RESOURCES = ("cpu", "mem_cap", "mem_bw", "net_bw", "gpu", "gpu_mem")
UTIL_RESOURCES = {
    "sparse_ps": RESOURCES[:4],
    "dense_ps": RESOURCES[:4],
    "reader": RESOURCES[:4],
    "trainer": RESOURCES,
}
BYTES_FP32 = 4
BYTES_INDEX = 8
BWD_FACTOR = 3.0  # forward gather + backward scatter + optimizer update (TorchRec: 1 + 2)
WORKLOAD_COLUMNS = (
    "model_name",
    "n_dense_features",
    "n_sparse_features",
    "n_tables",
    "embedding_dim",
    "embedding_gb",
    "mean_lookups_per_table",
    "bottom_mlp",
    "top_mlp",
    "interaction",
    "batch_size",
)
SYSTEM_COLUMNS = ("platform", "placement", "n_trainers", "n_sparse_ps", "n_dense_ps", "n_readers")


@dataclass(frozen=True)
class Coefficients:
    """Free coefficients; each line names the targets (calibration-targets.yaml ids) it serves."""

    eta_c_cpu: float = 0.08  # share of CPU FP32 peak on MLPs (DLRM benchmark ~5%; kept as a prior): t1, t3
    eta_c_gpu: float = 0.0593  # share of V100 FP32 peak on MLPs (fitted; DLRM benchmark ~3%): t1
    gpu_table_overhead_s: float = 2.78e-4  # GPU kernels per table per iter, fwd+bwd+update: t3, t21, t22
    a2a_message_s: float = 3.0e-5  # latency of one table's pooled exchange with one peer GPU: t24
    host_table_overhead_s: float = 1.0e-5  # host per-table work per iteration (CPU pooling, PS requests): t10
    gpu_iter_overhead_s: float = 2.0e-3  # GPU per-iteration launch, sync and input copy: t23
    cpu_iter_overhead_s: float = 1.0e-3  # CPU trainer per-mini-batch framework overhead: t23
    eta_hbm: float = 0.6  # share of HBM bandwidth on random row gathers: t20
    eta_dram: float = 0.7  # share of DRAM bandwidth on in-process host-side pooling (Zion): t11, t12
    eta_ps_dram: float = 0.2  # the same for a PS serving hash-map lookups over RPC: t5, t16
    eta_uvm: float = 0.15  # share of PCIe bandwidth for GPU-side reads of host rows: t11
    eta_net: float = 0.7  # share of NIC line rate: t5
    remote_rtt_s: float = 1.0e-3  # network round trip to the PS tier, paid fwd and bwd per iteration: t11
    host_copy_gbps: float = 3.18  # GB/s a GPU host moves between NIC and GPUs, remote PS (fitted): t5
    ps_gamma: float = 3.0  # PS DRAM bytes per gathered byte (gather + read-modify-write): t5, t16
    hot_table_split: float = 8.0  # PS shards a hot table is split over row-wise: t16, t19
    ps_copy_factor: float = 4.0  # PS DRAM bytes per network byte (NIC DMA, kernel/user copies, serde): t16
    gpu_locality_gb: float = 8.0  # table GB per GPU at which random-gather efficiency halves (TLB reach): t24
    cpu_locality_gb: float = 2000.0  # the same for a CPU host's DRAM (huge pages, deeper caches): t24
    kappa: float = 0.3  # 0 = perfect overlap of terms, 1 = serial: t19, t23
    trainer_saturation: float = 40.0  # CPU trainers at which async scaling efficiency halves: t19
    dense_sync_batches: float = 20.0  # CPU trainers sync dense weights every N mini-batches: t16
    batch_knee_cpu: float = 5.0e7  # cache bytes over activation bytes per example -> CPU batch knee: t23
    batch_knee_gpu: float = 2.0e9  # HBM working set over activation bytes per example -> GPU batch knee: t23
    reader_gbps: float = 0.6  # GB/s of raw features one reader server decodes and ships: t18
    trainer_mem_base: float = 0.55  # trainer memory share for the dense model, activations, input queues: t16
    ps_mem_base: float = 0.15  # PS memory share for the OS, request buffers and row caches: t16
    optimizer_state: float = 1.0  # optimizer state per embedding weight (Adagrad 1): t16 (PS memory)


DEFAULT = Coefficients()


def coefficient_docs() -> dict[str, str]:
    """Coefficient name -> its comment (the target it serves), read from this module's source."""
    import inspect

    src = inspect.getsource(Coefficients)
    out = {}
    for f in fields(Coefficients):
        line = next((ln for ln in src.splitlines() if ln.strip().startswith(f.name + ":")), "")
        out[f.name] = line.split("#", 1)[1].strip() if "#" in line else ""
    return out


def _layer_products(widths: pl.Expr) -> pl.Expr:
    """Sum of w_i * w_{i+1} over a list of layer widths."""
    return widths.list.eval((pl.element() * pl.element().shift(-1)).sum()).list.first().cast(pl.Float64)


def _platform_columns(hw: HardwareCatalog) -> pl.DataFrame:
    keys = (
        "cpu_fp32_tflops",
        "dram_gb",
        "dram_bw_gb_per_s",
        "gpus",
        "hbm_gb_per_gpu",
        "hbm_bw_gb_per_s_per_gpu",
        "gpu_fp32_tflops",
        "gpu_link_gb_per_s",
        "pcie_gb_per_s",
        "nic_gb_per_s",
        "idle_w",
        "peak_w",
        "cores",
    )
    rows = [
        {"platform": p.name, **{f"hw_{k}": float(getattr(p, k)) for k in keys}}
        for p in hw.platforms.values()
        if p.modelled
    ]
    return pl.DataFrame(rows, schema={"platform": pl.String, **{f"hw_{k}": pl.Float64 for k in keys}})


def fit_frame(frame: pl.DataFrame, hw: HardwareCatalog) -> pl.DataFrame:
    """Fit check of ``embedding_gb`` in the memory tier of each row's platform x placement.

    Adds tier, required_gb, capacity_gb, headroom (1 - required/capacity; negative when short), fits,
    shortfall_gb and min_servers (remote PS needed for capacity alone). Capacity counts every server of the
    row (``n_trainers`` GPU servers) after the catalog's reserve. Unknown platforms get nulls.
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
    capacity = (
        pl.when(placement == "gpu_hbm")
        .then(hbm)
        .when(placement == "system_memory")
        .then(dram)
        .when(placement == "hybrid")
        .then(hbm + dram)
        .when(placement == "remote_ps")
        .then(remote)
    )
    tier = (
        pl.when(placement == "gpu_hbm")
        .then(pl.lit("gpu_hbm"))
        .when(placement == "system_memory")
        .then(pl.lit("host_dram"))
        .when(placement == "hybrid")
        .then(pl.lit("gpu_hbm+host_dram"))
        .when(placement == "remote_ps")
        .then(pl.lit("remote_ps_dram"))
    )
    out = f.with_columns(
        tier.alias("tier"),
        pl.col("embedding_gb").cast(pl.Float64).alias("required_gb"),
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
    a = np.nan_to_num(alpha, nan=1.2)
    k = np.arange(1, head + 1, dtype=float)
    exact = ((k[None, :] ** -a[:, None]) * (k[None, :] <= t_max[:, None])).sum(axis=1)
    lo, hi = head + 1.0, t_max
    near_one = np.abs(a - 1.0) < 1e-9
    safe = np.where(near_one, 2.0, a)
    integral = np.where(near_one, np.log(hi / lo), (hi ** (1 - safe) - lo ** (1 - safe)) / (1 - safe))
    tail = integral + 0.5 * (lo**-a + hi**-a) + a / 12 * (lo ** (-a - 1) - hi ** (-a - 1))
    return exact + np.where(t_max >= lo, tail, 0.0)


def predict_frame(frame: pl.DataFrame, hw: HardwareCatalog, coef: Coefficients = DEFAULT) -> pl.DataFrame:
    """Predict throughput, bottleneck, per-role utilisation and power for every row of ``frame``."""
    base = fit_frame(frame, hw).join(_platform_columns(hw), on="platform", how="left")
    if "lookup_power_law_alpha" not in base.columns:
        base = base.with_columns(pl.lit(1.2).alias("lookup_power_law_alpha"))
    bottom = pl.col("bottom_mlp").str.split("-").list.eval(pl.element().cast(pl.Float64))
    top = pl.col("top_mlp").str.split("-").list.eval(pl.element().cast(pl.Float64))
    n_t = pl.col("n_tables").cast(pl.Float64)
    d = pl.col("embedding_dim").cast(pl.Float64)
    f_vec = n_t + 1
    top_in = (
        pl.when(pl.col("interaction") == "dot")
        .then(f_vec * (f_vec - 1) / 2 + bottom.list.last())
        .otherwise(n_t * d + bottom.list.last())
    )
    x = base.with_columns(
        (_layer_products(bottom) + _layer_products(top) + top_in * top.list.first()).alias("dense_params"),
        (pl.when(pl.col("interaction") == "dot").then(f_vec * f_vec * d / 2).otherwise(0.0)).alias(
            "interaction_flops"
        ),
        (bottom.list.sum() + top.list.sum() + top_in).alias("activations"),
    ).with_columns(
        (6.0 * (pl.col("dense_params") + pl.col("interaction_flops"))).alias("flops_per_example"),
        (n_t * pl.col("mean_lookups_per_table") * d * BYTES_FP32).alias("gather_bytes_per_example"),
        (n_t * d * BYTES_FP32).alias("pooled_bytes_per_example"),
        (n_t * pl.col("mean_lookups_per_table") * BYTES_INDEX).alias("index_bytes_per_example"),
        (
            pl.col("n_dense_features").cast(pl.Float64) * BYTES_FP32
            + n_t * pl.col("mean_lookups_per_table") * BYTES_INDEX
        ).alias("input_bytes_per_example"),
    )
    names = (
        "flops_per_example",
        "dense_params",
        "gather_bytes_per_example",
        "pooled_bytes_per_example",
        "index_bytes_per_example",
        "input_bytes_per_example",
        "activations",
        "embedding_gb",
        "batch_size",
        "n_tables",
        "n_trainers",
        "n_sparse_ps",
        "n_dense_ps",
        "n_readers",
        "lookup_power_law_alpha",
        *[c for c in x.columns if c.startswith("hw_")],
    )
    c = {k: x.get_column(k).cast(pl.Float64).fill_null(np.nan).to_numpy() for k in names}
    placement = x.get_column("placement").fill_null("").to_numpy().astype(str)
    fits = x.get_column("fits").fill_null(False).to_numpy()
    ps = hw.platform(hw.remote_ps_platform)
    with np.errstate(
        divide="ignore", invalid="ignore", over="ignore"
    ):  # masked branches of np.where/np.select
        out = _evaluate(c, placement, ps, coef, hw.hbm_reserve)
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


def _soft_knee(b: np.ndarray, knee: np.ndarray) -> np.ndarray:
    """Per-example cost multiplier as the batch outgrows caches: 1 below the knee, growing past it."""
    return 1.0 + b / knee


def _evaluate(
    c: dict[str, np.ndarray], placement: np.ndarray, ps, coef: Coefficients, hbm_reserve: float
) -> dict[str, np.ndarray]:
    n = len(placement)
    inf = np.full(n, np.inf)
    is_gpu = c["hw_gpus"] > 0
    remote = placement == "remote_ps"
    n_srv = np.maximum(np.nan_to_num(c["n_trainers"], nan=1.0), 1)
    n_ps, n_dps, n_rd = (np.nan_to_num(c[k]) for k in ("n_sparse_ps", "n_dense_ps", "n_readers"))
    batch = np.maximum(c["batch_size"], 1)
    flops, gather, pooled, idx = (
        c[k]
        for k in (
            "flops_per_example",
            "gather_bytes_per_example",
            "pooled_bytes_per_example",
            "index_bytes_per_example",
        )
    )
    dense_bytes = c["dense_params"] * BYTES_FP32
    act_bytes = c["activations"] * BYTES_FP32 * 2  # forward activations kept for backward
    train_bytes = BWD_FACTOR * gather
    remote_bytes = idx + 2 * pooled  # indices out, pooled vectors back, pooled gradients out
    nic = c["hw_nic_gb_per_s"] * 1e9 * coef.eta_net
    ps_nic = ps.nic_gb_per_s * 1e9 * coef.eta_net
    # Hottest table's share under power-law lookups: the busiest PS carries at least its row-wise slice of it.
    hot_share = 1.0 / _harmonic(
        np.nan_to_num(c["n_tables"], nan=1.0), np.nan_to_num(c["lookup_power_law_alpha"], nan=1.2)
    )
    imbalance = np.maximum(1.0, np.maximum(n_ps, 1) * hot_share / coef.hot_table_split)

    # ---- stages shared by every system: remote sparse PS, readers
    ps_locality = 1.0 / (1.0 + c["embedding_gb"] / np.maximum(n_ps, 1) / coef.cpu_locality_gb)
    ps_dram_bytes = coef.ps_gamma * gather + coef.ps_copy_factor * remote_bytes
    ps_rate_mem = (
        n_ps * ps.dram_bw_gb_per_s * 1e9 * coef.eta_ps_dram * ps_locality / (ps_dram_bytes * imbalance)
    )
    ps_rate_net = n_ps * ps_nic / (remote_bytes * imbalance)
    # A tier with no servers is not modelled as a separate constraint: 0 sparse PS means "as many as needed"
    # (as in fit_frame), 0 readers means trainers read their own data, 0 dense PS means trainers sync directly.
    r_ps = np.where(remote & (n_ps > 0), np.minimum(ps_rate_mem, ps_rate_net), inf)
    reader_rate_one = coef.reader_gbps * 1e9 / c["input_bytes_per_example"]
    r_rd = np.where(n_rd > 0, n_rd * reader_rate_one, inf)

    # ---- CPU cluster: asynchronous trainers, batch_size per trainer
    cpu_peak = c["hw_cpu_fp32_tflops"] * 1e12 * coef.eta_c_cpu
    knee_cpu = coef.batch_knee_cpu / act_bytes
    t_cpu_compute = coef.cpu_iter_overhead_s + batch * flops / cpu_peak * _soft_knee(
        batch, knee_cpu
    )  # one mini-batch
    t_cpu_net = batch * (remote_bytes + 2 * dense_bytes / (batch * coef.dense_sync_batches)) / nic
    t_cpu_batch = np.maximum(t_cpu_compute, t_cpu_net) + coef.kappa * np.minimum(t_cpu_compute, t_cpu_net)
    scaling = 1.0 / (1.0 + n_srv / coef.trainer_saturation)
    r_cpu_trainers = n_srv * batch / t_cpu_batch * scaling
    r_dps = np.where(n_dps > 0, n_dps * ps_nic * batch * coef.dense_sync_batches / (2 * dense_bytes), inf)

    # ---- GPU servers: synchronous data parallel over G GPUs, global batch
    gpus = np.maximum(c["hw_gpus"] * n_srv, 1)
    b_gpu = batch / gpus
    gpu_peak = c["hw_gpu_fp32_tflops"] * 1e12 * coef.eta_c_gpu
    knee_gpu = coef.batch_knee_gpu / act_bytes
    t_mlp = batch * flops / (gpus * gpu_peak) * _soft_knee(b_gpu, knee_gpu)
    hbm_usable_per_gpu = c["hw_hbm_gb_per_gpu"] * (1 - hbm_reserve)
    # GPUs the tables span: a table set that fits one GPU is replicated (no exchange); else it is sharded.
    span = np.clip(np.ceil(c["embedding_gb"] / np.maximum(hbm_usable_per_gpu, 1e-9)), 1, gpus)
    gpu_locality = 1.0 / (
        1.0 + np.minimum(c["embedding_gb"] / span, hbm_usable_per_gpu) / coef.gpu_locality_gb
    )
    hbm_bw = gpus * c["hw_hbm_bw_gb_per_s_per_gpu"] * 1e9 * coef.eta_hbm * gpu_locality
    pcie = gpus * c["hw_pcie_gb_per_s"] * 1e9
    host_locality = 1.0 / (1.0 + c["embedding_gb"] / n_srv / coef.cpu_locality_gb)
    dram_bw = n_srv * c["hw_dram_bw_gb_per_s"] * 1e9 * coef.eta_dram * host_locality
    host_pools = (
        c["hw_dram_bw_gb_per_s"] >= 512
    )  # big-memory hosts pool on the CPUs; others read rows over UVM
    t_emb_sys = np.where(
        host_pools,
        batch * train_bytes / dram_bw + batch * 2 * pooled / pcie,
        batch * train_bytes / (pcie * coef.eta_uvm),
    )
    hbm_usable = c["hw_gpus"] * hbm_usable_per_gpu * n_srv
    hbm_share = np.clip(hbm_usable / np.maximum(c["embedding_gb"], 1e-9), 0, 1)
    n_tab = np.nan_to_num(c["n_tables"], nan=1.0)
    # Remote PS: the GPU server's host moves indices out and pooled rows in, and issues per-table requests.
    remote_host_cpu = (
        batch * remote_bytes / (coef.host_copy_gbps * 1e9 * n_srv)
        + n_tab * coef.host_table_overhead_s
        + 2 * coef.remote_rtt_s
    )
    t_emb = np.select(
        [placement == "gpu_hbm", placement == "system_memory", placement == "hybrid", remote],
        [
            batch * train_bytes / hbm_bw,
            t_emb_sys,
            hbm_share * batch * train_bytes / hbm_bw + (1 - hbm_share) * t_emb_sys,
            np.maximum(batch * remote_bytes / (n_srv * nic), remote_host_cpu),
        ],
        default=np.inf,
    )
    # GPU-GPU link; without one (0), traffic goes through the host over PCIe.
    link = (
        np.where(c["hw_gpu_link_gb_per_s"] > 0, c["hw_gpu_link_gb_per_s"], c["hw_pcie_gb_per_s"]).clip(1e-9)
        * 1e9
    )
    exchanged = np.where(np.isin(placement, ["gpu_hbm", "hybrid"]) & (span > 1), (gpus - 1) / gpus, 0.0)
    # Sharded tables: each table's pooled output goes to every other GPU, forward and backward.
    t_a2a = 2 * batch * pooled * exchanged / (gpus * link) + np.where(
        exchanged > 0, 2 * n_tab * (span - 1) * coef.a2a_message_s, 0.0
    )
    t_allreduce = np.where(gpus > 1, 2 * (gpus - 1) / gpus * dense_bytes / link, 0.0)
    t_comm = t_a2a + t_allreduce
    # Embedding kernels on the GPUs cost per table; host-side pooling and remote PS move that work to CPUs.
    gpu_side = np.isin(placement, ["gpu_hbm", "hybrid"]) | ((placement == "system_memory") & ~host_pools)
    t_ovh = (
        coef.gpu_iter_overhead_s
        + np.where(gpu_side, coef.gpu_table_overhead_s, coef.host_table_overhead_s) * n_tab
    )
    lo = np.maximum.reduce([t_mlp, t_emb, t_comm])
    hi = t_mlp + t_emb + t_comm
    t_iter = lo + coef.kappa * (hi - lo) + t_ovh
    r_gpu = batch / t_iter

    # ---- throughput: the slowest stage
    r_trainers = np.where(is_gpu, r_gpu, r_cpu_trainers)
    stages = np.vstack([r_trainers, r_ps, r_dps, r_rd])
    thr = stages.min(axis=0)
    which = stages.argmin(axis=0)
    gpu_terms = np.vstack([t_mlp, t_emb, t_comm, t_ovh])
    gpu_names = np.array(["mlp_compute", "embedding_lookup", "gpu_communication", "kernel_overhead"])
    cpu_names = np.where(t_cpu_compute >= t_cpu_net, "mlp_compute", "trainer_network")
    trainer_name = np.where(is_gpu, gpu_names[gpu_terms.argmax(axis=0)], cpu_names)
    ps_name = np.where(ps_rate_mem <= ps_rate_net, "ps_memory_bandwidth", "ps_network")
    labels = np.vstack([trainer_name, ps_name, np.full(n, "dense_ps_network"), np.full(n, "readers")])
    bottleneck = labels[which, np.arange(n)]

    # Per-iteration terms in seconds for one global batch (CPU: one mini-batch of each trainer).
    terms = {
        "t_mlp_s": np.where(is_gpu, t_mlp, t_cpu_compute),
        "t_embedding_s": np.where(
            is_gpu, t_emb, np.where(remote, batch * n_srv / np.minimum(ps_rate_mem, ps_rate_net), np.nan)
        ),
        "t_network_s": np.where(is_gpu, t_comm, t_cpu_net),
        "t_overhead_s": np.where(is_gpu, t_ovh, 0.0),
        "t_reader_s": batch * np.where(is_gpu, 1.0, n_srv) / np.maximum(r_rd, 1e-12),
        "t_iteration_s": batch * np.where(is_gpu, 1.0, n_srv) / np.maximum(thr, 1e-12),
        "t_lower_bound_s": np.where(is_gpu, lo + t_ovh, np.maximum(t_cpu_compute, t_cpu_net)),
        "t_upper_bound_s": np.where(is_gpu, hi + t_ovh, t_cpu_compute + t_cpu_net),
    }

    # ---- mean utilisation per role and resource: demand over capacity
    load = lambda rate: np.clip(thr / np.maximum(rate, 1e-12), 0, 1)  # noqa: E731
    per_trainer = thr / n_srv
    cpu_train_busy = np.clip(
        np.minimum(per_trainer * t_cpu_batch / (batch * scaling), 1) * t_cpu_compute / t_cpu_batch, 0, 1
    )
    gpu_busy = np.clip(
        thr * (t_mlp + np.where(np.isin(placement, ["gpu_hbm", "hybrid"]), t_emb, 0) + t_ovh * 0.5) / batch,
        0,
        1,
    )
    host_busy = np.select(
        [placement == "system_memory", remote, placement == "hybrid"],
        [
            np.clip(thr * t_emb_sys / batch, 0, 1) * 0.8,
            np.clip(thr * remote_host_cpu / batch, 0, 1),
            np.clip(thr * t_emb_sys / batch, 0, 1) * 0.4,
        ],
        0.1,
    )
    util = {
        # Async trainers stay busy (scaling losses are stale work, not idle time): busy = compute share of a batch.
        ("trainer", "cpu"): np.where(is_gpu, 0.08 + 0.85 * host_busy, 0.05 + 0.9 * cpu_train_busy),
        ("trainer", "mem_cap"): np.where(
            is_gpu & (placement == "system_memory"),
            np.clip(c["embedding_gb"] / (n_srv * c["hw_dram_gb"]), 0, 1) + 0.1,
            coef.trainer_mem_base + (dense_bytes * 4 + batch * act_bytes * 4) / (c["hw_dram_gb"] * 1e9),
        ),
        ("trainer", "mem_bw"): np.where(
            is_gpu,
            np.where(
                placement == "system_memory",
                np.clip(thr * train_bytes / np.maximum(dram_bw, 1e-12), 0, 1),
                0.1,
            ),
            0.08 + 0.35 * cpu_train_busy,
        ),
        ("trainer", "net_bw"): np.clip(
            np.where(
                is_gpu,
                thr * np.where(remote, remote_bytes, 0.0) / (n_srv * nic / coef.eta_net) + 0.03,
                per_trainer * t_cpu_net / batch * coef.eta_net + 0.05,
            ),
            0,
            1,
        ),
        ("trainer", "gpu"): np.where(is_gpu, gpu_busy, np.nan),
        ("trainer", "gpu_mem"): np.where(
            is_gpu,
            np.clip(
                np.where(
                    np.isin(placement, ["gpu_hbm", "hybrid"]), np.minimum(c["embedding_gb"], hbm_usable), 0.0
                )
                / (gpus * c["hw_hbm_gb_per_gpu"])
                + 0.1,
                0,
                1,
            ),
            np.nan,
        ),
        ("sparse_ps", "mem_bw"): np.where(remote, load(ps_rate_mem * imbalance), 0.0),
        ("sparse_ps", "net_bw"): np.where(remote, load(ps_rate_net * imbalance), 0.0),
        ("sparse_ps", "mem_cap"): np.where(
            remote,
            coef.ps_mem_base
            + c["embedding_gb"] * (1 + coef.optimizer_state) / (np.maximum(n_ps, 1) * ps.dram_gb),
            0.0,
        ),
        ("dense_ps", "net_bw"): load(r_dps),
        ("dense_ps", "mem_cap"): np.clip(0.05 + dense_bytes * 3 / (ps.dram_gb * 1e9), 0, 1),
        ("reader", "cpu"): load(r_rd),
        ("reader", "mem_cap"): np.full(n, 0.25),
    }
    util[("sparse_ps", "cpu")] = 0.05 + 1.5 * np.maximum(
        util[("sparse_ps", "mem_bw")], util[("sparse_ps", "net_bw")]
    )
    util[("dense_ps", "cpu")] = 0.05 + 0.4 * util[("dense_ps", "net_bw")]
    util[("dense_ps", "mem_bw")] = 0.02 + 0.3 * util[("dense_ps", "net_bw")]
    util[("reader", "mem_bw")] = 0.05 + 0.3 * util[("reader", "cpu")]
    util[("reader", "net_bw")] = 0.05 + 0.7 * util[("reader", "cpu")]
    util = {k: np.clip(v, 0, 1) for k, v in util.items()}

    # ---- power: drawn (idle + busy share of the dynamic range) and provisioned (peak of every server)
    busy = np.where(
        is_gpu,
        np.nan_to_num(util[("trainer", "gpu")]) * 0.75 + util[("trainer", "cpu")] * 0.25,
        util[("trainer", "cpu")],
    )
    trainer_w = n_srv * (c["hw_idle_w"] + busy * (c["hw_peak_w"] - c["hw_idle_w"]))
    cpu_w = lambda u: ps.idle_w + u * (ps.peak_w - ps.idle_w)  # noqa: E731
    power = (
        trainer_w
        + n_ps * cpu_w(util[("sparse_ps", "cpu")])
        + n_dps * cpu_w(util[("dense_ps", "cpu")])
        + n_rd * cpu_w(util[("reader", "cpu")])
    )
    # Provisioned power counts trainers and parameter servers (the paper's power-capacity comparison); readers
    # are a shared input tier and appear in the drawn power only.
    provisioned = n_srv * c["hw_peak_w"] + (n_ps + n_dps) * ps.peak_w

    out = {
        "throughput_eps": thr,
        **terms,
        "power_w": power,
        "provisioned_w": provisioned,
        **{
            f"{role}_{res}_util": util[(role, res)]
            for role in ROLES
            for res in UTIL_RESOURCES[role]
            if (role, res) in util
        },
        "bottleneck": bottleneck,
    }
    return out
