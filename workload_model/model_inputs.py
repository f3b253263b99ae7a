"""The workload model's inputs: a frame's workload, system and platform as arrays.

The fit of the tables in each row's memory tier (``fit_frame``), each row's platform figures (``Hw``), the
per-example quantities of each distinct workload shape, and the rows as arrays (``Rows``) that the model's
stages (workload_model/stages.py) read. The software stack a row does not state is its platform's
(workload_model/stack.py).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import polars as pl

from workload_model import defaults, stack
from workload_model.catalog import HardwareCatalog, Platform
from workload_model.coefficients import Coefficients

BYTES_FP32 = 4
BYTES_HALF = 2
BYTES_INDEX = 8
BWD_FACTOR = 3.0  # forward gather + backward scatter + optimizer update (TorchRec: 1 + 2)
HALF_PRECISIONS = ("fp16", "bf16")
# Operators an iteration issues: per MLP layer (forward GEMM, bias and activation, two backward GEMMs,
# activation gradient, weight update), per table in an eager framework (lookup and pooling, backward
# scatter, optimizer update; once for all tables when fused), and per iteration (input copy,
# interaction forward and backward, loss, all-to-all forward and backward, all-reduce, step).
OPS_PER_LAYER = 6
OPS_PER_TABLE = 3
OPS_PER_ITERATION = 8
GB = 1e9  # bytes per GB (the catalogs' GB and GB/s are 10^9)
TERA = 1e12  # FLOP/s per TFLOP/s
TINY = 1e-12  # guards divisions by rates and sizes that may be zero in masked branches


def optimizer_state(optimizer: Any, embedding_dim: Any) -> Any:
    """Optimizer state bytes per table byte (TorchRec's multipliers): SGD keeps none, Adagrad one value per
    weight, row-wise Adagrad one per row (1/dim), Adam two per weight. Works on scalars, arrays and
    polars expressions."""
    if isinstance(optimizer, pl.Expr):
        return (
            pl.when(optimizer == "rowwise_adagrad")
            .then(1.0 / embedding_dim.cast(pl.Float64))
            .otherwise(
                optimizer.replace_strict(_STATE, default=_STATE[_PAPER_OPTIMIZER], return_dtype=pl.Float64)
            )
        )
    rowwise = 1.0 / np.maximum(embedding_dim, 1)
    if isinstance(optimizer, str):
        return rowwise if optimizer == "rowwise_adagrad" else _STATE.get(optimizer, _STATE[_PAPER_OPTIMIZER])
    opt = np.asarray(optimizer).astype(str)
    flat = pl.Series(opt).replace_strict(_STATE, default=_STATE[_PAPER_OPTIMIZER], return_dtype=pl.Float64)
    return np.where(opt == "rowwise_adagrad", rowwise, flat.to_numpy())


_STATE = {k: (0.0 if isinstance(v, str) else float(v)) for k, v in defaults.OPTIMIZER_STATE.items()}
_PAPER_OPTIMIZER = defaults.PAPER_STACK["optimizer"]


def required_gb(
    embedding_gb: Any, optimizer: Any = defaults.PAPER_STACK["optimizer"], embedding_dim: Any = 1
) -> Any:
    """Bytes (GB) a table set needs in any memory tier: the tables and their optimizer state. The one
    definition used by the fit check, PS sizing, PS memory utilisation and the sampler."""
    return embedding_gb * (1 + optimizer_state(optimizer, embedding_dim))


@dataclass(frozen=True)
class Hw:
    """Each row's platform figures, one array per numeric field of catalog.Platform (same names)."""

    sockets: np.ndarray
    cores: np.ndarray
    gpus: np.ndarray
    cpu_fp32_tflops: np.ndarray
    cpu_fp16_tflops: np.ndarray
    dram_gb: np.ndarray
    dram_bw_gb_per_s: np.ndarray
    host_pooling: np.ndarray
    hbm_gb_per_gpu: np.ndarray
    hbm_bw_gb_per_s_per_gpu: np.ndarray
    gpu_fp32_tflops: np.ndarray
    gpu_tf32_tflops: np.ndarray
    gpu_fp16_tflops: np.ndarray
    gpu_link_gb_per_s: np.ndarray
    pcie_gb_per_s: np.ndarray
    nic_gb_per_s: np.ndarray
    idle_w: np.ndarray
    peak_w: np.ndarray
    cpu_matrix_tflops: np.ndarray
    pcie_switches: np.ndarray
    pcie_uplink_gb_per_s: np.ndarray
    gpudirect_rdma: np.ndarray  # 1.0 = yes
    local_storage_gb_per_s: np.ndarray
    peers_p2p: np.ndarray  # 1.0 = gpu_peers: pcie_p2p
    peers_host: np.ndarray  # 1.0 = gpu_peers: host (or links without a link rate)
    input_local: np.ndarray  # 1.0 = input_from: local_storage


HW_KEYS = tuple(f.name for f in fields(Hw))


def _figures(p: Platform) -> dict[str, float]:
    """A platform's figures as numbers (its text choices as 0/1 flags)."""
    flags = {
        "peers_p2p": p.gpu_peers == "pcie_p2p",
        "peers_host": p.gpu_peers == "host" or (p.gpu_peers == "links" and not p.gpu_link_gb_per_s),
        "input_local": p.input_from == "local_storage",
    }
    return {k: float(flags[k] if k in flags else (getattr(p, k) or 0)) for k in HW_KEYS}


def _platform_columns(hw: HardwareCatalog) -> pl.DataFrame:
    rows = [
        {"platform": p.name, **{f"hw_{k}": v for k, v in _figures(p).items()}}
        for p in hw.platforms.values()
        if p.modelled
    ]
    return pl.DataFrame(rows, schema={"platform": pl.String, **{f"hw_{k}": pl.Float64 for k in HW_KEYS}})


def with_hardware(frame: pl.DataFrame, hw: HardwareCatalog) -> pl.DataFrame:
    """Each row's platform figures as ``hw_*`` columns; a row's ``gpus`` (GPUs per server, when asked
    about) replaces its platform's."""
    out = frame.join(_platform_columns(hw), on="platform", how="left")
    if "gpus" in frame.columns:
        out = out.with_columns(
            pl.coalesce(pl.col("gpus").cast(pl.Float64), pl.col("hw_gpus")).alias("hw_gpus")
        )
    return out


def with_defaults(frame: pl.DataFrame) -> pl.DataFrame:
    """The model-only workload columns a frame may lack, with their defaults (workload_model.defaults; the
    software stack is resolved per platform by workload_model.stack)."""
    fill = {
        "lookup_power_law_alpha": defaults.LOOKUP_POWER_LAW_ALPHA,
        "dcn_layers": defaults.DCN_LAYERS,
        "dcn_rank": defaults.DCN_RANK,
    }
    return frame.with_columns(
        (pl.col(k).fill_null(v) if k in frame.columns else pl.lit(v)).alias(k) for k, v in fill.items()
    )


def fit_frame(frame: pl.DataFrame, hw: HardwareCatalog) -> pl.DataFrame:
    """Fit check of the tables with their optimizer state (``required_gb``) in the memory tier of each
    row's platform x placement.

    Adds tier, required_gb, capacity_gb, headroom (1 - required/capacity; negative when short), fits,
    shortfall_gb and min_servers (remote PS needed for capacity alone). Capacity counts every server of the
    row (``n_trainers`` servers) after the catalog's reserve. Unknown platforms get nulls.
    """
    ps_gb = hw.ps_server_gb
    f = with_hardware(with_defaults(stack.resolve(frame, hw)), hw)
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
        required_gb(
            pl.col("embedding_gb").cast(pl.Float64), pl.col("optimizer"), pl.col("embedding_dim")
        ).alias("required_gb"),
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


def harmonic(n_tables: np.ndarray, alpha: np.ndarray, head: int = 16) -> np.ndarray:
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


def _gemm_work(widths: pl.Expr, half: float) -> pl.Expr:
    """Sum over consecutive widths of (w_i + half)(w_{i+1} + half): a layer's multiply-adds per example
    over its shape efficiency in K and N (w / (w + half) each), so narrow layers cost more than their
    FLOPs."""
    pair = (pl.element() + half) * (pl.element().shift(-1) + half)
    return widths.list.eval(pair.sum()).list.first().cast(pl.Float64)


# The workload columns per-example quantities depend on (nothing of the system)
WORKLOAD_SHAPE = (
    "bottom_mlp",
    "top_mlp",
    "n_sparse_features",
    "n_tables",
    "embedding_dim",
    "mean_lookups_per_table",
    "n_dense_features",
    "interaction",
    "dcn_layers",
    "dcn_rank",
    "kernels",
)


def per_example(base: pl.DataFrame, coef: Coefficients) -> pl.DataFrame:
    """``_per_workload`` of each row, computed once per distinct workload shape (sweeps and sizing searches
    evaluate one or a few workloads on many systems) and gathered back in the rows' order."""
    key = pl.struct(WORKLOAD_SHAPE)
    first = base.select(key.is_first_distinct()).to_series()
    if first.all():
        return _per_workload(base, coef)
    rank = base.select((key.rank("dense") - 1).cast(pl.Int64)).to_series()  # equal shapes, equal rank
    shapes = _per_workload(base.filter(first), coef).drop(base.columns)
    by_rank = shapes[np.argsort(rank.filter(first).to_numpy())]
    return pl.concat([base, by_rank[rank]], how="horizontal")


def _per_workload(base: pl.DataFrame, coef: Coefficients) -> pl.DataFrame:
    """Per-example quantities of each row's workload: FLOPs and shape-weighted GEMM work (CPU and GPU
    tiles), dense parameters, operators per iteration, bytes gathered, pooled, indexed and read. Lookups
    and pooled vectors follow features; table bytes follow tables."""
    bottom = pl.col("bottom_mlp").str.split("-").list.eval(pl.element().cast(pl.Float64))
    top = pl.col("top_mlp").str.split("-").list.eval(pl.element().cast(pl.Float64))
    n_f = pl.coalesce(pl.col("n_sparse_features"), pl.col("n_tables")).cast(pl.Float64)
    d = pl.col("embedding_dim").cast(pl.Float64)
    lookups = n_f * pl.col("mean_lookups_per_table")
    f_vec = n_f + 1
    dot, dcn = pl.col("interaction") == "dot", pl.col("interaction") == "dcn"
    concat = n_f * d + bottom.list.last()
    top_in = pl.when(dot).then(f_vec * (f_vec - 1) / 2 + bottom.list.last()).otherwise(concat)
    layers, rank = pl.col("dcn_layers").cast(pl.Float64), pl.col("dcn_rank").cast(pl.Float64)

    def work(half: float) -> pl.Expr:
        """GEMM work per example at a tile half-width: MLPs, the dot interaction's batched GEMM, and the
        DCNv2 cross layers (two low-rank GEMMs each). The batched GEMM's rows are examples x features, so
        only its output width (the features) pays the tile penalty; its K is the embedding dimension."""
        mlp = _gemm_work(bottom, half) + _gemm_work(top, half) + (top_in + half) * (top.list.first() + half)
        inter = pl.when(dot).then(f_vec * (f_vec + half) * d / 2).otherwise(0.0)
        cross = pl.when(dcn).then(2 * layers * (concat + half) * (rank + half)).otherwise(0.0)
        return 6.0 * (mlp + inter + cross)

    n_layers = bottom.list.len() - 1 + top.list.len() + pl.when(dcn).then(layers).otherwise(0.0)
    per_table = pl.col("kernels") == "per_table"
    return base.with_columns(
        (
            _layer_products(bottom)
            + _layer_products(top)
            + top_in * top.list.first()
            + pl.when(dcn).then(layers * (2 * concat * rank + concat)).otherwise(0.0)
        ).alias("dense_params"),
        pl.when(dot).then(f_vec * f_vec * d / 2).otherwise(0.0).alias("interaction_flops"),
        (bottom.list.sum() + top.list.sum() + top_in).alias("activations"),
        work(coef.gemm_half_cpu).alias("mlp_work_cpu"),
        work(coef.gemm_half_gpu).alias("mlp_work_gpu"),
        (OPS_PER_LAYER * n_layers + OPS_PER_ITERATION).alias("ops_per_iteration"),
        (OPS_PER_TABLE * pl.when(per_table).then(pl.col("n_tables").cast(pl.Float64)).otherwise(1.0)).alias(
            "table_ops"
        ),
    ).with_columns(
        (6.0 * (pl.col("dense_params") + pl.col("interaction_flops"))).alias("flops_per_example"),
        (lookups * d * BYTES_FP32).alias("gather_bytes_per_example"),
        (n_f * d * BYTES_FP32).alias("pooled_bytes_per_example"),
        (lookups * BYTES_INDEX).alias("index_bytes_per_example"),
        (pl.col("n_dense_features").cast(pl.Float64) * BYTES_FP32 + lookups * BYTES_INDEX).alias(
            "input_bytes_per_example"
        ),
    )


def _layer_products(widths: pl.Expr) -> pl.Expr:
    """Sum of w_i * w_{i+1} over a list of layer widths."""
    return widths.list.eval((pl.element() * pl.element().shift(-1)).sum()).list.first().cast(pl.Float64)


@dataclass(frozen=True)
class Rows:
    """Each row's workload and system as arrays: counts, batch, per-example work and bytes, link rates."""

    n: int
    placement: np.ndarray  # str
    precision: np.ndarray  # str
    is_gpu: np.ndarray  # bool
    remote: np.ndarray  # bool: remote_ps
    local: np.ndarray  # bool: system_memory
    kernels: np.ndarray  # str: per_table | fused | compiled | graph (how the framework issues operators)
    n_srv: np.ndarray  # servers of the trainer platform (n_trainers)
    n_ps: np.ndarray
    n_dps: np.ndarray
    n_rd: np.ndarray
    n_tab: np.ndarray
    batch: np.ndarray  # global batch (GPU) or per trainer (CPU)
    gpus: np.ndarray  # GPUs over all servers (>= 1)
    alpha: np.ndarray
    required_gb: np.ndarray
    flops: np.ndarray  # FLOPs per example
    mlp_work_cpu: np.ndarray  # shape-weighted GEMM work per example (CPU tiles)
    mlp_work_gpu: np.ndarray  # the same with GPU tiles
    ops: np.ndarray  # operators per iteration outside the embeddings
    table_ops: np.ndarray  # embedding operators per iteration (per table, or one set when fused)
    dense_bytes: np.ndarray  # fp32 dense weights
    comm_bytes: np.ndarray  # bytes per communicated value (2 at 16-bit precision, else 4)
    act_bytes: np.ndarray  # activations kept for backward, per example
    gather_bytes: np.ndarray
    pooled_bytes: np.ndarray
    input_bytes: np.ndarray
    train_bytes: np.ndarray  # gather + scatter + update bytes per example
    remote_bytes: np.ndarray  # indices out, pooled vectors back, pooled gradients out
    nic: np.ndarray  # usable NIC of one server, bytes/s
    host_locality: np.ndarray
    cores: np.ndarray  # CPU cores of one server (stated, else sockets x defaults.CORES_PER_SOCKET)


ARRAY_COLUMNS = (
    "flops_per_example",
    "mlp_work_cpu",
    "mlp_work_gpu",
    "ops_per_iteration",
    "table_ops",
    "dense_params",
    "gather_bytes_per_example",
    "pooled_bytes_per_example",
    "index_bytes_per_example",
    "input_bytes_per_example",
    "activations",
    "required_gb",
    "batch_size",
    "n_tables",
    "n_trainers",
    "n_sparse_ps",
    "n_dense_ps",
    "n_readers",
    "lookup_power_law_alpha",
)


def rows_of(x: pl.DataFrame, hw: Hw, coef: Coefficients) -> Rows:
    """The stages' inputs from the per-example frame."""
    texts = ("placement", "precision", "kernels")
    got = x.select(
        *(pl.col(k).cast(pl.Float64).fill_null(np.nan) for k in ARRAY_COLUMNS),
        *(pl.col(k).fill_null("") for k in texts),
    )
    c = {k: got.get_column(k).to_numpy() for k in ARRAY_COLUMNS}
    text = {k: got.get_column(k).to_numpy().astype(str) for k in texts}
    n_srv = np.maximum(np.nan_to_num(c["n_trainers"], nan=1.0), 1)
    placement = text["placement"]
    return Rows(
        n=x.height,
        placement=placement,
        precision=text["precision"],
        is_gpu=hw.gpus > 0,
        remote=placement == "remote_ps",
        local=placement == "system_memory",
        kernels=text["kernels"],
        n_srv=n_srv,
        n_ps=np.nan_to_num(c["n_sparse_ps"]),
        n_dps=np.nan_to_num(c["n_dense_ps"]),
        n_rd=np.nan_to_num(c["n_readers"]),
        n_tab=np.nan_to_num(c["n_tables"], nan=1.0),
        batch=np.maximum(c["batch_size"], 1),
        gpus=np.maximum(hw.gpus * n_srv, 1),
        alpha=np.nan_to_num(c["lookup_power_law_alpha"], nan=defaults.LOOKUP_POWER_LAW_ALPHA),
        required_gb=c["required_gb"],
        flops=c["flops_per_example"],
        mlp_work_cpu=c["mlp_work_cpu"],
        mlp_work_gpu=c["mlp_work_gpu"],
        ops=c["ops_per_iteration"],
        table_ops=c["table_ops"],
        dense_bytes=c["dense_params"] * BYTES_FP32,
        comm_bytes=np.where(np.isin(text["precision"], HALF_PRECISIONS), BYTES_HALF, BYTES_FP32),
        act_bytes=c["activations"] * BYTES_FP32 * 2,  # forward activations kept for backward
        gather_bytes=c["gather_bytes_per_example"],
        pooled_bytes=c["pooled_bytes_per_example"],
        input_bytes=c["input_bytes_per_example"],
        train_bytes=BWD_FACTOR * c["gather_bytes_per_example"],
        remote_bytes=c["index_bytes_per_example"] + 2 * c["pooled_bytes_per_example"],
        nic=hw.nic_gb_per_s * GB * coef.eta_net,
        host_locality=1.0 / (1.0 + c["required_gb"] / n_srv / coef.cpu_locality_gb),
        cores=np.where(hw.cores > 0, hw.cores, np.maximum(hw.sockets, 1) * defaults.CORES_PER_SOCKET),
    )
