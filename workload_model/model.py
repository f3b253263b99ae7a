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
path the server is built with inside it (GPU links, PCIe peer-to-peer, or staged through host memory) and
over the NICs between servers (GPUDirect RDMA or not), plus a latency per message to each peer (one message
per peer for fused kernels, as collective libraries aggregate them; one per table and peer for a per-table
stack). Examples from a reader tier cross the trainers' NICs, overlapping the iterations; a server reading
local drives needs no reader tier. Throughput therefore rises with the batch and saturates; nothing caps it
independently of the hardware.

Evaluation runs in stages (sparse PS, CPU trainers, GPU iteration: workload_model/stages.py; then throughput,
utilisation, power here), each a function of frozen dataclasses of arrays (``Hw``, ``Rows`` in,
workload_model/model_inputs.py; ``SparsePS``, ``CpuTrainers``, ``GpuIteration`` out). The fitted coefficients
live in ``Coefficients`` with the calibration targets each one serves (``t*``: the paper's,
workload_model/calibration.py; ``b*``: the public benchmarks, pipelines/lib/analysis/benchmarks.py); the fixed
shape constants of the utilisation and power estimates live in ``UtilisationShape``; both in
workload_model/coefficients.py.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from workload_model.catalog import HardwareCatalog, PsServer
from workload_model.coefficients import DEFAULT, SHAPE, Coefficients
from workload_model.model_inputs import (
    GB,
    HW_KEYS,
    TINY,
    Hw,
    Rows,
    fit_frame,
    per_example,
    rows_of,
    with_defaults,
    with_hardware,
)
from workload_model.stages import (
    CpuTrainers,
    GpuIteration,
    SparsePS,
    cpu_trainer_stage,
    gpu_iteration_stage,
    sparse_ps_stage,
)

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


# The coefficients the per-workload stage reads: coefficient sets equal in these share one preparation.
WORKLOAD_COEFFICIENTS = ("gemm_half_cpu", "gemm_half_gpu")


def _prepared(frame: pl.DataFrame, hw: HardwareCatalog, coef: Coefficients) -> tuple[pl.DataFrame, Hw]:
    """The rows with their fit, hardware and per-example quantities, and the hardware as arrays."""
    base = with_hardware(fit_frame(frame, hw), hw)
    x = per_example(with_defaults(base), coef)
    figures = x.select(pl.col(f"hw_{k}").fill_null(np.nan) for k in HW_KEYS)  # one select, not one per column
    return x, Hw(**{k: figures.get_column(f"hw_{k}").to_numpy() for k in HW_KEYS})


def _evaluated(
    x: pl.DataFrame, arrays: Hw, hw: HardwareCatalog, coef: Coefficients
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every stage's outputs for prepared rows, and which rows have a prediction (they fit and run)."""
    fits = x.get_column("fits").fill_null(False).to_numpy()
    ps = hw.ps_server()
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # masked branches of np.where
        out = _evaluate(rows_of(x, arrays, coef), arrays, ps, coef, hw.hbm_reserve)
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
    ``kernels``, ``dcn_layers``, ``dcn_rank``) are optional (defaults in workload_model.defaults).
    """
    x, arrays = _prepared(frame, hw, coef)
    out, keep = _evaluated(x, arrays, hw, coef)
    cols: list[pl.Series | pl.Expr] = [
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


def _evaluate(r: Rows, hw: Hw, ps: PsServer, coef: Coefficients, hbm_reserve: float) -> dict[str, np.ndarray]:
    """Every stage over all rows; throughput is the slowest stage."""
    sps = sparse_ps_stage(r, hw, ps, coef)
    cpu = cpu_trainer_stage(r, hw, ps, coef)
    gpu = gpu_iteration_stage(r, hw, coef, hbm_reserve)
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
    ps: PsServer,
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
    r: Rows, sps: SparsePS, cpu: CpuTrainers, thr: np.ndarray, ps: PsServer, coef: Coefficients
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


def _power(r: Rows, hw: Hw, util: dict, ps: PsServer) -> dict[str, np.ndarray]:
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
