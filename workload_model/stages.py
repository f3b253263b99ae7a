"""The workload model's stages, each a function of the rows as arrays (workload_model/model_inputs.py):
remote sparse parameter servers and readers, CPU trainers, and the GPU iteration (embeddings, the exchange
between GPUs over the path the server is built with, MLPs, kernel launches)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workload_model.catalog import PsServer
from workload_model.coefficients import Coefficients
from workload_model.model_inputs import (
    BYTES_FP32,
    GB,
    HALF_PRECISIONS,
    TERA,
    TINY,
    Hw,
    Rows,
    harmonic,
)


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


def sparse_ps_stage(r: Rows, hw: Hw, ps: PsServer, coef: Coefficients) -> SparsePS:
    """Remote sparse parameter servers: DRAM and network rates, with the hottest table's imbalance; readers
    and the trainers' intake of examples (over the NICs, or from local drives at their read rate)."""
    n_ps = r.n_ps
    # Hottest table's share under power-law lookups: the busiest PS carries at least its row-wise slice.
    hot_share = 1.0 / harmonic(r.n_tab, r.alpha)
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


def cpu_trainer_stage(r: Rows, hw: Hw, ps: PsServer, coef: Coefficients) -> CpuTrainers:
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


def gpu_iteration_stage(r: Rows, hw: Hw, coef: Coefficients, hbm_reserve: float) -> GpuIteration:
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
