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
state of the workload's ``optimizer``, ``required_gb``), features make the lookups (``n_sparse_features``
x ``mean_lookups_per_table`` rows gathered per example, one pooled vector per feature; several features may
share a table, a feature may be multi-hot).

Physics. MLP time is each GEMM's multiply-adds at an achieved share of the peak of the workload's
precision that saturates with the GEMM's shape: in the layer widths, and in the batch rows per device (per
core on a CPU; on a GPU relative to its ridge point, peak FLOP/s over HBM bytes/s, so tensor cores need
larger batches). The per-iteration overhead is the operators the framework issues (per layer, and per table
for an eager per-table stack) at the cost per operator of the workload's kernel mode (an eager per-table
stack's dispatch, eager Python launches of fused kernels, a compiled runtime's launches, or a captured
graph's); a CPU trainer pays its own per-operator cost. The all-to-all of sharded tables is bytes over the
GPU links inside a server (staged through host memory where the GPUs have no links) and over the NICs
between servers, plus a latency per message to each peer (one message per peer for fused kernels, as
collective libraries aggregate them; one per table and peer for a per-table stack). Examples from a reader
tier cross the trainers' NICs, overlapping the iterations. Throughput therefore rises with the batch and
saturates; nothing caps it independently of the hardware.

Evaluation runs in stages (sparse PS, CPU trainers, GPU iteration, throughput, utilisation, power), each a
function of frozen dataclasses of arrays (``Hw``, ``Rows`` in; ``SparsePS``, ``CpuTrainers``,
``GpuIteration`` out). The fitted coefficients live in ``Coefficients`` with the calibration targets each
one serves (``t*``: the paper's, synthetic_fleet/calibration.py; ``b*``: the public benchmarks,
pipelines/lib/benchmarks.py); the fixed shape constants of the utilisation and power estimates live in
``UtilisationShape``; both in synthetic_fleet/coefficients.py.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import polars as pl

from synthetic_fleet import defaults, stack
from synthetic_fleet.catalog import HardwareCatalog, Platform
from synthetic_fleet.coefficients import DEFAULT, SHAPE, Coefficients

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


def _with_hardware(frame: pl.DataFrame, hw: HardwareCatalog) -> pl.DataFrame:
    """Each row's platform figures as ``hw_*`` columns; a row's ``gpus`` (GPUs per server, when asked
    about) replaces its platform's."""
    out = frame.join(_platform_columns(hw), on="platform", how="left")
    if "gpus" in frame.columns:
        out = out.with_columns(
            pl.coalesce(pl.col("gpus").cast(pl.Float64), pl.col("hw_gpus")).alias("hw_gpus")
        )
    return out


def _with_defaults(frame: pl.DataFrame) -> pl.DataFrame:
    """The model-only workload columns a frame may lack, with their defaults (synthetic_fleet.defaults; the
    software stack is resolved per platform by synthetic_fleet.stack)."""
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
    f = _with_hardware(_with_defaults(stack.resolve(frame, hw)), hw)
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


def _per_example(base: pl.DataFrame, coef: Coefficients) -> pl.DataFrame:
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


def _rows(x: pl.DataFrame, hw: Hw, coef: Coefficients) -> Rows:
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


# The coefficients the per-workload stage reads: coefficient sets equal in these share one preparation.
WORKLOAD_COEFFICIENTS = ("gemm_half_cpu", "gemm_half_gpu")


def _prepared(frame: pl.DataFrame, hw: HardwareCatalog, coef: Coefficients) -> tuple[pl.DataFrame, Hw]:
    """The rows with their fit, hardware and per-example quantities, and the hardware as arrays."""
    base = _with_hardware(fit_frame(frame, hw), hw)
    x = _per_example(_with_defaults(base), coef)
    figures = x.select(pl.col(f"hw_{k}").fill_null(np.nan) for k in HW_KEYS)  # one select, not one per column
    return x, Hw(**{k: figures.get_column(f"hw_{k}").to_numpy() for k in HW_KEYS})


def _evaluated(
    x: pl.DataFrame, arrays: Hw, hw: HardwareCatalog, coef: Coefficients
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every stage's outputs for prepared rows, and which rows have a prediction (they fit and run)."""
    fits = x.get_column("fits").fill_null(False).to_numpy()
    ps = hw.platform(hw.remote_ps_platform)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # masked branches of np.where
        out = _evaluate(_rows(x, arrays, coef), arrays, ps, coef, hw.hbm_reserve)
    return out, fits & np.isfinite(out["throughput_eps"]) & (out["throughput_eps"] > 0)


def throughput_draws(frame: pl.DataFrame, hw: HardwareCatalog, coefs: list[Coefficients]) -> np.ndarray:
    """(len(coefs), rows) throughput in examples/s under each coefficient set, NaN where predict_frame
    gives none: predict_frame's throughput, with the rows prepared once for all the sets (they may differ
    in anything but WORKLOAD_COEFFICIENTS)."""
    if not coefs:
        return np.empty((0, frame.height))
    differ = [k for k in WORKLOAD_COEFFICIENTS if len({getattr(c, k) for c in coefs}) > 1]
    if differ:
        raise ValueError(f"coefficient sets that differ in {', '.join(differ)} need a predict_frame each")
    x, arrays = _prepared(frame, hw, coefs[0])
    draws = []
    for coef in coefs:  # one vectorised evaluation per set
        out, keep = _evaluated(x, arrays, hw, coef)
        draws.append(np.where(keep, out["throughput_eps"], np.nan))
    return np.vstack(draws)


def predict_frame(frame: pl.DataFrame, hw: HardwareCatalog, coef: Coefficients = DEFAULT) -> pl.DataFrame:
    """Predict throughput, bottleneck, per-role utilisation and power for every row of ``frame``.

    The model-only workload columns (``lookup_power_law_alpha``, ``precision``, ``optimizer``,
    ``kernels``, ``dcn_layers``, ``dcn_rank``) are optional (defaults in synthetic_fleet.defaults).
    """
    x, arrays = _prepared(frame, hw, coef)
    out, keep = _evaluated(x, arrays, hw, coef)
    cols = [
        pl.Series(k, np.where(keep & np.isfinite(v), v, np.nan), nan_to_null=True)
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


def _mlp_time(
    work: np.ndarray, rows: np.ndarray, half: np.ndarray, peak: np.ndarray, eta: float
) -> np.ndarray:
    """Seconds for the MLPs of ``rows`` examples on one device: GEMM work at ``eta`` of the peak, with the
    batch dimension's efficiency rows / (rows + half). Saturating in the batch: the time per example falls
    toward work / (eta x peak) and never rises."""
    return work * (rows + half) / (peak * eta)


@dataclass(frozen=True)
class SparsePS:
    """Remote sparse parameter servers, readers and the trainers' intake of the readers' examples: rates in
    examples/s (inf = no constraint)."""

    imbalance: np.ndarray
    rate_mem: np.ndarray
    rate_net: np.ndarray
    r_ps: np.ndarray
    r_rd: np.ndarray
    r_in: np.ndarray


def _sparse_ps_stage(r: Rows, hw: Hw, ps: Platform, coef: Coefficients) -> SparsePS:
    """Remote sparse parameter servers: DRAM and network rates, with the hottest table's imbalance; readers
    and the trainers' intake of examples (over the NICs, or from local drives at their read rate)."""
    n_ps = r.n_ps
    # Hottest table's share under power-law lookups: the busiest PS carries at least its row-wise slice.
    hot_share = 1.0 / _harmonic(r.n_tab, r.alpha)
    imbalance = np.maximum(1.0, np.maximum(n_ps, 1) * hot_share / coef.hot_table_split)
    locality = 1.0 / (1.0 + r.required_gb / np.maximum(n_ps, 1) / coef.cpu_locality_gb)
    dram_bytes = coef.ps_gamma * r.gather_bytes + coef.ps_copy_factor * r.remote_bytes
    rate_mem = n_ps * ps.dram_bw_gb_per_s * GB * coef.eta_ps_dram * locality / (dram_bytes * imbalance)
    ps_nic = ps.nic_gb_per_s * GB * coef.eta_net
    rate_net = n_ps * ps_nic / (r.remote_bytes * imbalance)
    # A tier with no servers is not a separate constraint: 0 sparse PS means "as many as needed" (as in
    # fit_frame), 0 readers means readers sized to what the trainers consume, 0 dense PS means trainers
    # sync directly.
    r_ps = np.where(r.remote & (n_ps > 0), np.minimum(rate_mem, rate_net), np.inf)
    # Servers that read their examples from local drives need no reader tier and no NIC for them.
    local = hw.input_local > 0
    r_rd = np.where((r.n_rd > 0) & ~local, r.n_rd * coef.reader_gbps * GB / r.input_bytes, np.inf)
    # The readers' examples reach the trainers over the trainers' NICs (without a reader tier the data is
    # local); see _with_intake for how the intake overlaps the trainers' iterations.
    r_in = np.where(r.n_rd > 0, r.n_srv * r.nic / r.input_bytes, np.inf)
    r_in = np.where(local, r.n_srv * hw.local_storage_gb_per_s * GB / r.input_bytes, r_in)
    return SparsePS(imbalance, rate_mem, rate_net, r_ps, r_rd, r_in)


def _cpu_rate(hw: Hw, precision: np.ndarray, coef: Coefficients) -> np.ndarray:
    """FLOP/s a large GEMM reaches on a server's CPUs at the workload's precision: eta_mlp_cpu of the
    vector units' peak (16-bit where they have it), or at 16-bit eta_matrix_cpu of the matrix engines'
    peak where that is more."""
    half = np.isin(precision, HALF_PRECISIONS)
    vector = np.where(half, hw.cpu_fp16_tflops, hw.cpu_fp32_tflops) * coef.eta_mlp_cpu
    return np.where(half, np.maximum(vector, hw.cpu_matrix_tflops * coef.eta_matrix_cpu), vector) * TERA


def _gpu_peak(hw: Hw, precision: np.ndarray) -> np.ndarray:
    """GPU peak FLOP/s at the workload's precision (tf32 and 16-bit on tensor cores)."""
    return (
        np.select(
            [precision == "tf32", np.isin(precision, HALF_PRECISIONS)],
            [hw.gpu_tf32_tflops, hw.gpu_fp16_tflops],
            default=hw.gpu_fp32_tflops,
        )
        * TERA
    )


def _dispatch(ops: np.ndarray, r: Rows, coef: Coefficients) -> np.ndarray:
    """Seconds per iteration a GPU server spends issuing ``ops`` operators, at the cost per operator of the
    workload's kernel mode: the paper's eager per-table stack, eager Python launches of fused kernels, a
    compiled runtime's launches, or kernels launched from a captured graph."""
    cost = np.select(
        [r.kernels == "graph", r.kernels == "compiled", r.kernels == "fused"],
        [coef.graph_launch_s, coef.compiled_launch_s, coef.fused_launch_s],
        default=coef.dispatch_s,
    )
    return ops * cost


@dataclass(frozen=True)
class CpuTrainers:
    """CPU trainers: one mini-batch's terms (s) and the cluster's rates (examples/s)."""

    t_compute: np.ndarray
    t_mlp: np.ndarray
    t_gather: np.ndarray
    t_net: np.ndarray
    t_batch: np.ndarray
    scaling: np.ndarray
    rate: np.ndarray
    r_dps: np.ndarray
    name: np.ndarray


def _cpu_trainer_stage(r: Rows, hw: Hw, ps: Platform, coef: Coefficients) -> CpuTrainers:
    """CPU trainers (batch per trainer). remote_ps: asynchronous trainers; lookups go to the PS over the NIC
    and the dense weights sync with the dense PS every ``dense_sync_batches`` mini-batches. system_memory:
    the tables are sharded over the trainers' DRAM, so the trainers run as one synchronous job (every
    iteration needs every shard's pooled vectors): each gathers its shard's rows from DRAM, exchanges the
    other shards' pooled vectors over the NIC and all-reduces the dense gradients (a ring) every iteration."""
    batch, n_srv = r.batch, r.n_srv
    # Each core computes a slice of the batch: the GEMM rows per core set the achieved efficiency.
    half = coef.core_rows_cpu * r.cores
    t_mlp = _mlp_time(r.mlp_work_cpu, batch, half, _cpu_rate(hw, r.precision, coef), 1.0)
    dram = hw.dram_bw_gb_per_s * GB * coef.eta_dram * r.host_locality
    t_gather = np.where(r.local, batch * r.train_bytes / dram, 0.0)
    # CPU operators run on the cores that compute them: no launch or device sync per operator.
    t_compute = t_mlp + t_gather  # one mini-batch
    # Sharded tables: the other shards' pooled vectors and their gradients travel at the workload's
    # communication precision; so do the dense gradients of the synchronous all-reduce.
    others = (n_srv - 1) / n_srv
    exchange = r.remote_bytes - 2 * r.pooled_bytes * (1 - r.comm_bytes / BYTES_FP32)
    sync = batch * exchange * others + 2 * others * r.dense_bytes / BYTES_FP32 * r.comm_bytes
    asynchronous = (
        batch * np.where(r.remote, r.remote_bytes, 0.0) + 2 * r.dense_bytes / coef.dense_sync_batches
    )
    t_net = np.where(r.local, sync, asynchronous) / r.nic
    overlap = np.where(r.local, coef.kappa_cpu_sync, coef.kappa)
    t_batch = np.maximum(t_compute, t_net) + overlap * np.minimum(t_compute, t_net)
    # Asynchronous trainers lose to stale updates as they multiply; a synchronous job pays its exchange.
    scaling = np.where(r.local, 1.0, 1.0 / (1.0 + n_srv / coef.trainer_saturation))
    ps_nic = ps.nic_gb_per_s * GB * coef.eta_net
    # Only asynchronous trainers sync dense weights through dense PS; a synchronous job all-reduces them.
    r_dps = np.where(
        (r.n_dps > 0) & ~r.local,
        r.n_dps * ps_nic * batch * coef.dense_sync_batches / (2 * r.dense_bytes),
        np.inf,
    )
    name = np.where(
        t_compute >= t_net, np.where(t_gather > t_mlp, "embedding_lookup", "mlp_compute"), "trainer_network"
    )
    rate = n_srv * batch / t_batch * scaling
    return CpuTrainers(t_compute, t_mlp, t_gather, t_net, t_batch, scaling, rate, r_dps, name)


@dataclass(frozen=True)
class GpuEmbedding:
    """Embedding time of one global batch on GPU servers, by placement, and what it uses."""

    t_emb: np.ndarray
    t_sys: np.ndarray  # host-side (system memory) part
    remote_host: np.ndarray  # the GPU host's work for remote PS
    span: np.ndarray  # GPUs the tables span
    dram_bw: np.ndarray
    hbm_usable: np.ndarray
    host_pools: np.ndarray
    name: np.ndarray
    nic_bytes: np.ndarray  # bytes through one server's NIC per iteration


def _gpu_embedding(r: Rows, hw: Hw, coef: Coefficients, hbm_reserve: float) -> GpuEmbedding:
    """Embedding time of one global batch on GPU servers, by placement."""
    batch, n_srv, gpus, placement = r.batch, r.n_srv, r.gpus, r.placement
    hbm_usable_per_gpu = hw.hbm_gb_per_gpu * (1 - hbm_reserve)
    # GPUs the tables span: a table set that fits one GPU is replicated (no exchange); else it is sharded.
    span = np.clip(np.ceil(r.required_gb / np.maximum(hbm_usable_per_gpu, TINY)), 1, gpus)
    # Table GB each GPU gathers from: the whole set where it is replicated, an even shard where sharded.
    per_gpu = np.where(span > 1, r.required_gb / gpus, r.required_gb)
    gpu_locality = 1.0 / (1.0 + np.minimum(per_gpu, hbm_usable_per_gpu) / coef.gpu_locality_gb)
    hbm_bw = gpus * hw.hbm_bw_gb_per_s_per_gpu * GB * coef.eta_hbm * gpu_locality
    pcie = gpus * hw.pcie_gb_per_s * GB
    dram_bw = n_srv * hw.dram_bw_gb_per_s * GB * coef.eta_dram * r.host_locality
    host_pools = hw.host_pooling > 0  # declared per platform (schemas/catalog/hardware.yaml)
    # Host tables are sharded over the servers' DRAM: pooled vectors (and their gradients) of rows on
    # other servers cross the NICs.
    cross_host = 2 * batch * r.pooled_bytes * (n_srv - 1) / n_srv / (n_srv * r.nic)
    t_sys = cross_host + np.where(
        host_pools,
        batch * r.train_bytes / dram_bw + batch * 2 * r.pooled_bytes / pcie,
        batch * r.train_bytes / (pcie * coef.eta_uvm),
    )
    hbm_usable = hw.gpus * hbm_usable_per_gpu * n_srv
    hbm_share = np.clip(hbm_usable / np.maximum(r.required_gb, TINY), 0, 1)
    # Remote PS: the GPU server's host moves indices out and pooled rows in, and issues per-table requests.
    remote_net = batch * r.remote_bytes / (n_srv * r.nic)
    remote_host = (
        batch * r.remote_bytes / (coef.host_copy_gbps * GB * n_srv)
        + r.n_tab * coef.host_table_overhead_s
        + 2 * coef.remote_rtt_s
    )
    t_hbm = batch * r.train_bytes / hbm_bw
    t_emb = np.select(
        [placement == "gpu_hbm", r.local, placement == "hybrid", r.remote],
        [t_hbm, t_sys, hbm_share * t_hbm + (1 - hbm_share) * t_sys, np.maximum(remote_net, remote_host)],
        default=np.inf,
    )
    name = np.where(
        r.remote, np.where(remote_host >= remote_net, "host_copy", "trainer_network"), "embedding_lookup"
    )
    host_side = np.isin(placement, ["system_memory", "hybrid"])
    nic_bytes = np.where(r.remote, batch * r.remote_bytes / n_srv, 0.0) + np.where(
        host_side, 2 * batch * r.pooled_bytes * (n_srv - 1) / n_srv / n_srv, 0.0
    )
    return GpuEmbedding(t_emb, t_sys, remote_host, span, dram_bw, hbm_usable, host_pools, name, nic_bytes)


@dataclass(frozen=True)
class GpuComm:
    """All-to-all and all-reduce of one iteration: seconds, the largest part's label, NIC bytes."""

    t_comm: np.ndarray
    name: np.ndarray
    nic_bytes: np.ndarray


def _gpu_communication(r: Rows, hw: Hw, span: np.ndarray, coef: Coefficients) -> GpuComm:
    """All-to-all of sharded tables and the dense all-reduce, forward and backward, over the path the
    server is built with: to the GPUs of the same server over its GPU links, PCIe peer-to-peer or host
    memory (``_in_server_time``); to the GPUs of other servers over the NICs (a ring all-reduce inside each
    server, then one across servers). A latency per message to each peer GPU (NCCL's all-to-all is a send
    and a receive per peer): one per peer for fused kernels, as collective libraries aggregate every
    table's vectors; a per-table stack runs one all-to-all per table, each with its issue and
    synchronisation cost."""
    batch, n_srv, gpus = r.batch, r.n_srv, r.gpus
    per_server = np.maximum(hw.gpus, 1)
    # Tables that span GPUs are sharded over all of them (balanced), so every GPU exchanges with every peer.
    sharded = np.isin(r.placement, ["gpu_hbm", "hybrid"]) & (span > 1) & (gpus > 1)
    # Each GPU sends its share of every table's pooled output to every other GPU, fwd and bwd.
    pooled = r.pooled_bytes / BYTES_FP32 * r.comm_bytes
    a2a_gpu = np.where(sharded, 2 * (batch / gpus) * pooled * (gpus - 1) / gpus, 0.0)
    off_server = (gpus - per_server) / np.maximum(gpus - 1, 1)  # share of peers on other servers
    a2a_nic = a2a_gpu * off_server * per_server  # bytes through one server's NICs
    per_table = r.kernels == "per_table"
    collectives = np.where(per_table, r.n_tab, 1.0)
    messages = (per_server - 1) * coef.peer_latency_s + (gpus - per_server) * coef.nic_peer_latency_s
    per_collective = messages + np.where(per_table, coef.table_collective_s, 0.0)
    t_latency = np.where(sharded, 2 * collectives * per_collective, 0.0)
    dense = r.dense_bytes / BYTES_FP32 * r.comm_bytes
    ring_nic = np.where(n_srv > 1, 2 * (n_srv - 1) / n_srv * dense, 0.0)
    # Bytes one GPU moves inside its server: its all-to-all share for local peers and its ring share.
    ring = np.where(per_server > 1, 2 * (per_server - 1) / per_server * dense, 0.0)
    t_links = _in_server_time(a2a_gpu * (1 - off_server), ring, hw, coef)
    nic = hw.nic_gb_per_s * GB * np.where(hw.gpudirect_rdma > 0, coef.eta_rdma, coef.eta_net)
    t_nic = (a2a_nic + ring_nic) / nic
    # The label names the largest part: NICs between servers, per-peer messages, or in-server bytes.
    parts = np.vstack([t_nic, t_latency, t_links])
    names = np.array(["trainer_network", "exchange_latency", "gpu_communication"])
    return GpuComm(parts.sum(axis=0), names[parts.argmax(axis=0)], a2a_nic + ring_nic)


def _in_server_time(a2a: np.ndarray, ring: np.ndarray, hw: Hw, coef: Coefficients) -> np.ndarray:
    """Seconds for the bytes one GPU exchanges with the GPUs of its own server (``a2a`` spread evenly over
    its peers, ``ring`` to its ring neighbours), per direction, over the server's GPU peer path: its GPU
    links; PCIe peer-to-peer, each GPU at its own link rate and, between GPUs behind different PCIe
    switches, through the switches' uplinks (each carries its GPUs' traffic to the other switches and one
    ring crossing); or staged through host memory at the rate its host moves it (fitted: no spec sheet
    gives it), for all its GPUs at once."""
    per_server = np.maximum(hw.gpus, 1)
    own = a2a + ring
    links = own / (np.maximum(hw.gpu_link_gb_per_s, TINY) * GB * coef.eta_link)
    switches = np.maximum(hw.pcie_switches, 1)
    behind = per_server / switches  # GPUs behind one switch
    across = (per_server - behind) / np.maximum(per_server - 1, 1)  # share of peers behind other switches
    uplink = np.where(hw.pcie_switches > 1, behind * a2a * across + ring, 0.0)
    p2p = np.maximum(
        own / (hw.pcie_gb_per_s * GB * coef.eta_pcie),
        uplink / (np.maximum(hw.pcie_uplink_gb_per_s, TINY) * GB * coef.eta_pcie),
    )
    staged = own * per_server / (coef.host_stage_gbps * GB)
    return np.select([hw.peers_host > 0, hw.peers_p2p > 0], [staged, p2p], default=links)


@dataclass(frozen=True)
class GpuIteration:
    """One synchronous iteration of GPU servers: its terms (s), bounds, rate and bottleneck label."""

    emb: GpuEmbedding
    t_mlp: np.ndarray
    t_comm: np.ndarray
    t_ovh: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    rate: np.ndarray
    name: np.ndarray
    nic_bytes: np.ndarray


def _gpu_iteration_stage(r: Rows, hw: Hw, coef: Coefficients, hbm_reserve: float) -> GpuIteration:
    """Synchronous data-parallel GPU servers over all their GPUs with one global batch."""
    batch = r.batch
    # The per-iteration weight-side work (weights streamed by every GEMM, gradients, the optimizer's update)
    # costs more rows of compute on a GPU whose peak outruns its memory (its ridge point, FLOP per byte): a
    # tensor-core GPU needs larger batches than an fp32 one to reach its peak.
    peak = _gpu_peak(hw, r.precision)
    half = coef.ridge_rows_gpu * peak / np.maximum(hw.hbm_bw_gb_per_s_per_gpu * GB, TINY)
    t_mlp = _mlp_time(r.mlp_work_gpu, batch / r.gpus, half, peak, coef.eta_mlp_gpu)
    emb = _gpu_embedding(r, hw, coef, hbm_reserve)
    comm = _gpu_communication(r, hw, emb.span, coef)
    # Embedding kernels run on the GPUs unless host-side pooling or remote PS move that work to the CPUs.
    gpu_side = np.isin(r.placement, ["gpu_hbm", "hybrid"]) | (r.local & ~emb.host_pools)
    tables = np.where(gpu_side, _dispatch(r.table_ops, r, coef), r.n_tab * coef.host_table_overhead_s)
    t_ovh = _dispatch(r.ops, r, coef) + tables
    terms = np.vstack([t_mlp, emb.t_emb, comm.t_comm, t_ovh])
    lo, hi = terms[:3].max(axis=0), terms[:3].sum(axis=0)
    t_iter = lo + coef.kappa * (hi - lo) + t_ovh
    names = np.vstack([np.full(r.n, "mlp_compute"), emb.name, comm.name, np.full(r.n, "kernel_overhead")])
    return GpuIteration(
        emb,
        t_mlp,
        comm.t_comm,
        t_ovh,
        lo,
        hi,
        batch / t_iter,
        names[terms.argmax(axis=0), np.arange(r.n)],
        emb.nic_bytes + comm.nic_bytes,
    )


def _evaluate(r: Rows, hw: Hw, ps: Platform, coef: Coefficients, hbm_reserve: float) -> dict[str, np.ndarray]:
    """Every stage over all rows; throughput is the slowest stage."""
    sps = _sparse_ps_stage(r, hw, ps, coef)
    cpu = _cpu_trainer_stage(r, hw, ps, coef)
    gpu = _gpu_iteration_stage(r, hw, coef, hbm_reserve)
    trainers = _with_intake(np.where(r.is_gpu, gpu.rate, cpu.rate), sps.r_in, coef.kappa)
    stages = np.vstack([trainers, sps.r_ps, cpu.r_dps, sps.r_rd])
    thr = stages.min(axis=0)
    ps_name = np.where(sps.rate_mem <= sps.rate_net, "ps_memory_bandwidth", "ps_network")
    labels = np.vstack(
        [
            np.where(r.is_gpu, gpu.name, cpu.name),
            ps_name,
            np.full(r.n, "dense_ps_network"),
            np.full(r.n, "readers"),
        ]
    )
    # The trainers' stage is named by its intake where the intake is slower than their iterations.
    labels[0] = np.where(sps.r_in < np.where(r.is_gpu, gpu.rate, cpu.rate), "trainer_network", labels[0])
    util = _utilisation(r, hw, sps, cpu, gpu, thr, ps, coef)
    return {
        "throughput_eps": thr,
        **_terms(r, sps, cpu, gpu, thr),
        **_power(r, hw, util, ps),
        **{
            f"{role}_{res}_util": util[(role, res)]
            for role in ROLES
            for res in UTIL_RESOURCES[role]
            if (role, res) in util
        },
        "bottleneck": labels[stages.argmin(axis=0), np.arange(r.n)],
    }


def _with_intake(rate: np.ndarray, intake: np.ndarray, kappa: float) -> np.ndarray:
    """The trainers' rate with their intake of examples: receiving prefetched examples overlaps the
    iterations, except for the share ``kappa`` of the shorter one (the host's cores, memory and PCIe serve
    both), as the iteration's own terms overlap."""
    t_iter, t_in = 1.0 / np.maximum(rate, TINY), 1.0 / np.maximum(intake, TINY)
    return 1.0 / (np.maximum(t_iter, t_in) + kappa * np.minimum(t_iter, t_in))


def _terms(
    r: Rows, sps: SparsePS, cpu: CpuTrainers, gpu: GpuIteration, thr: np.ndarray
) -> dict[str, np.ndarray]:
    """Per-iteration terms in seconds for one global batch (CPU: one mini-batch of each trainer)."""
    is_gpu, batch, n_srv = r.is_gpu, r.batch, r.n_srv
    per_iter = batch * np.where(is_gpu, 1.0, n_srv)
    cpu_emb = np.where(
        r.remote,
        batch * n_srv / np.minimum(sps.rate_mem, sps.rate_net),
        np.where(r.local, cpu.t_gather, np.nan),
    )
    t_intake = per_iter / np.maximum(sps.r_in, TINY)
    return {
        "t_mlp_s": np.where(is_gpu, gpu.t_mlp, cpu.t_mlp),
        "t_embedding_s": np.where(is_gpu, gpu.emb.t_emb, cpu_emb),
        "t_network_s": np.where(is_gpu, gpu.t_comm, cpu.t_net),
        "t_overhead_s": np.where(is_gpu, gpu.t_ovh, 0.0),
        "t_reader_s": per_iter / np.maximum(sps.r_rd, TINY),
        "t_iteration_s": per_iter / np.maximum(thr, TINY),
        # Bounds of the trainers' stage: its iteration with the intake of examples overlapped or serial.
        "t_lower_bound_s": np.maximum(
            np.where(is_gpu, gpu.lo + gpu.t_ovh, np.maximum(cpu.t_compute, cpu.t_net)), t_intake
        ),
        "t_upper_bound_s": np.where(is_gpu, gpu.hi + gpu.t_ovh, cpu.t_compute + cpu.t_net) + t_intake,
    }


def _utilisation(
    r: Rows,
    hw: Hw,
    sps: SparsePS,
    cpu: CpuTrainers,
    gpu: GpuIteration,
    thr: np.ndarray,
    ps: Platform,
    coef: Coefficients,
) -> dict[tuple[str, str], np.ndarray]:
    """Mean utilisation per role and resource: demand over capacity (shape constants in SHAPE)."""
    util = {
        **_trainer_utilisation(r, hw, cpu, gpu, thr, coef),
        **_server_utilisation(r, sps, cpu, thr, ps, coef),
    }
    return {key: np.clip(v, 0, 1) for key, v in util.items()}


def _trainer_utilisation(
    r: Rows, hw: Hw, cpu: CpuTrainers, gpu: GpuIteration, thr: np.ndarray, coef: Coefficients
) -> dict[tuple[str, str], np.ndarray]:
    """Trainers: CPU, memory, network and (GPU platforms) GPU busy shares."""
    is_gpu, batch, n_srv, remote, placement = r.is_gpu, r.batch, r.n_srv, r.remote, r.placement
    s = SHAPE
    busy = lambda t: np.clip(thr * t / batch, 0, 1)  # noqa: E731
    per_trainer = thr / n_srv
    cpu_busy = np.clip(
        np.minimum(per_trainer * cpu.t_batch / (batch * cpu.scaling), 1) * cpu.t_compute / cpu.t_batch,
        0,
        1,
    )
    on_gpus = np.isin(placement, ["gpu_hbm", "hybrid"])
    gpu_busy = busy(gpu.t_mlp + np.where(on_gpus, gpu.emb.t_emb, 0) + gpu.t_ovh * s.gpu_overhead_busy)
    host_busy = np.select(
        [r.local, remote, placement == "hybrid"],
        [
            busy(gpu.emb.t_sys) * s.host_busy_system_memory,
            busy(gpu.emb.remote_host),
            busy(gpu.emb.t_sys) * s.host_busy_hybrid,
        ],
        s.host_busy_other,
    )
    dram_gb = hw.dram_gb
    dense_bytes = r.dense_bytes
    nic_raw = r.nic / coef.eta_net
    util = {
        # Async trainers stay busy (scaling losses are stale work, not idle time): busy = compute share.
        ("trainer", "cpu"): np.where(
            is_gpu,
            s.gpu_trainer_cpu_base + s.gpu_trainer_cpu_span * host_busy,
            s.cpu_trainer_cpu_base + s.cpu_trainer_cpu_span * cpu_busy,
        ),
        ("trainer", "mem_cap"): np.where(
            r.local,
            np.clip(r.required_gb / (n_srv * dram_gb), 0, 1) + s.mem_headroom,
            coef.trainer_mem_base
            + (dense_bytes * s.weights_copies + batch * r.act_bytes * s.activation_copies) / (dram_gb * GB),
        ),
        ("trainer", "mem_bw"): np.where(
            is_gpu,
            np.where(
                r.local,
                np.clip(thr * r.train_bytes / np.maximum(gpu.emb.dram_bw, TINY), 0, 1),
                s.other_bw,
            ),
            s.cpu_trainer_mem_bw_base + s.cpu_trainer_mem_bw_span * cpu_busy,
        ),
        ("trainer", "net_bw"): np.where(
            is_gpu,
            thr / batch * gpu.nic_bytes / nic_raw + s.gpu_net_base,
            per_trainer * cpu.t_net / batch * coef.eta_net + s.cpu_net_base,
        ),
        ("trainer", "gpu"): np.where(is_gpu, gpu_busy, np.nan),
        ("trainer", "gpu_mem"): np.where(
            is_gpu,
            np.where(on_gpus, np.minimum(r.required_gb, gpu.emb.hbm_usable), 0.0)
            / (r.gpus * hw.hbm_gb_per_gpu)
            + s.mem_headroom,
            np.nan,
        ),
    }
    return util


def _server_utilisation(
    r: Rows, sps: SparsePS, cpu: CpuTrainers, thr: np.ndarray, ps: Platform, coef: Coefficients
) -> dict[tuple[str, str], np.ndarray]:
    """Sparse PS, dense PS and readers: load on the binding resource, the rest following it."""
    remote, s = r.remote, SHAPE
    load = lambda rate: np.clip(thr / np.maximum(rate, TINY), 0, 1)  # noqa: E731
    util = {
        ("sparse_ps", "mem_bw"): np.where(remote, load(sps.rate_mem * sps.imbalance), 0.0),
        ("sparse_ps", "net_bw"): np.where(remote, load(sps.rate_net * sps.imbalance), 0.0),
        ("sparse_ps", "mem_cap"): np.where(
            remote, coef.ps_mem_base + r.required_gb / (np.maximum(r.n_ps, 1) * ps.dram_gb), 0.0
        ),
        ("dense_ps", "net_bw"): load(cpu.r_dps),
        ("dense_ps", "mem_cap"): s.dps_mem_base + r.dense_bytes * s.dps_weights_copies / (ps.dram_gb * GB),
        ("reader", "cpu"): load(sps.r_rd),
        ("reader", "mem_cap"): np.full(r.n, s.reader_mem_cap),
    }
    ps_load = np.maximum(util[("sparse_ps", "mem_bw")], util[("sparse_ps", "net_bw")])
    util[("sparse_ps", "cpu")] = s.ps_cpu_base + s.ps_cpu_per_load * ps_load
    util[("dense_ps", "cpu")] = s.dps_cpu_base + s.dps_cpu_per_net * util[("dense_ps", "net_bw")]
    util[("dense_ps", "mem_bw")] = s.dps_mem_bw_base + s.dps_mem_bw_per_net * util[("dense_ps", "net_bw")]
    util[("reader", "mem_bw")] = s.reader_mem_bw_base + s.reader_mem_bw_per_cpu * util[("reader", "cpu")]
    util[("reader", "net_bw")] = s.reader_net_base + s.reader_net_per_cpu * util[("reader", "cpu")]
    return util


def _power(r: Rows, hw: Hw, util: dict, ps: Platform) -> dict[str, np.ndarray]:
    """Drawn power (idle + busy share of the dynamic range, every server) and provisioned power."""
    busy = np.where(
        r.is_gpu,
        np.nan_to_num(util[("trainer", "gpu")]) * SHAPE.gpu_power_share
        + util[("trainer", "cpu")] * (1 - SHAPE.gpu_power_share),
        util[("trainer", "cpu")],
    )
    trainer_w = r.n_srv * (hw.idle_w + busy * (hw.peak_w - hw.idle_w))
    cpu_w = lambda u: ps.idle_w + u * (ps.peak_w - ps.idle_w)  # noqa: E731
    drawn = (
        trainer_w
        + r.n_ps * cpu_w(util[("sparse_ps", "cpu")])
        + r.n_dps * cpu_w(util[("dense_ps", "cpu")])
        + r.n_rd * cpu_w(util[("reader", "cpu")])
    )
    # Provisioned power counts trainers and parameter servers (the paper's power-capacity comparison,
    # Table III); readers are a shared input tier and appear in the drawn power only, so drawn power can
    # exceed provisioned power where many readers serve few trainers.
    provisioned = r.n_srv * hw.peak_w + (r.n_ps + r.n_dps) * ps.peak_w
    return {"power_w": drawn, "provisioned_w": provisioned}
