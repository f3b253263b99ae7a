"""What can limit a configuration's throughput: one definition per bottleneck, with the label the model
writes, the sentence the recommender explains it with, and the counterfactual (what relieving it would
take, and how the model evaluates that)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import polars as pl

from workload_model.catalog import HardwareCatalog
from workload_model.model import Coefficients

Relief = Callable[
    [pl.DataFrame, HardwareCatalog, Coefficients], tuple[pl.DataFrame, HardwareCatalog, Coefficients]
]


@dataclass(frozen=True)
class Bottleneck:
    """One thing that can bind: ``key`` is the model's label, ``explanation`` names it for a reader,
    ``counterfactual`` says what would relieve it (``{n_tables}`` is filled in) and ``relief`` evaluates
    that on the same rows."""

    key: str
    explanation: str
    counterfactual: str
    relief: Relief


def _platforms(hw: HardwareCatalog, **floors: float) -> HardwareCatalog:
    """Every platform with each named figure raised to at least its floor."""
    return replace(
        hw,
        platforms={
            k: replace(v, **{f: max(getattr(v, f) or 0, x) for f, x in floors.items()})
            for k, v in hw.platforms.items()
        },
    )


def _faster_links(hw: HardwareCatalog) -> HardwareCatalog:
    return replace(
        hw,
        platforms={
            k: replace(v, gpu_link_gb_per_s=max(2 * (v.gpu_link_gb_per_s or 0), 150.0), gpu_peers="links")
            for k, v in hw.platforms.items()
        },
    )


def _scaled(column: str, factor: float) -> Relief:
    return lambda f, h, c: (f.with_columns((pl.col(column) * factor).cast(f.schema[column])), h, c)


_TIERS = pl.col("n_trainers", "n_sparse_ps", "n_dense_ps", "n_readers") * 2
_ALL = (
    Bottleneck(
        "mlp_compute",
        "MLP compute",
        "fp16 tensor-core MLPs",
        lambda f, h, c: (f.with_columns(pl.lit("fp16").alias("precision")), h, c),
    ),
    # The CPU cluster's variant of mlp_compute: CPUs have no tensor cores, more servers help.
    Bottleneck(
        "mlp_compute_cpu",
        "MLP compute",
        "twice the servers in every tier",
        lambda f, h, c: (f.with_columns(_TIERS), h, c),
    ),
    Bottleneck(
        "kernel_overhead",
        "per-iteration kernel launches",
        "one batched kernel for all {n_tables} tables, launched from a captured graph",
        lambda f, h, c: (f.with_columns(pl.lit("graph").alias("kernels")), h, c),
    ),
    Bottleneck(
        "gpu_communication",
        "GPU-GPU communication",
        "GPU links twice as fast (at least NVLink-class, 150 GB/s)",
        lambda f, h, c: (f, _faster_links(h), c),
    ),
    Bottleneck(
        "exchange_latency",
        "the latency of the all-to-all's messages to every peer GPU",
        "half the peer latency (a faster interconnect or fewer, larger messages)",
        lambda f, h, c: (
            f,
            h,
            replace(c, peer_latency_s=c.peer_latency_s / 2, nic_peer_latency_s=c.nic_peer_latency_s / 2),
        ),
    ),
    Bottleneck(
        "embedding_lookup",
        "embedding lookups",
        "fp16 embedding rows (half the bytes moved)",
        lambda f, h, c: (f.with_columns((pl.col("embedding_dim") // 2).alias("embedding_dim")), h, c),
    ),
    Bottleneck(
        "host_copy",
        "the GPU host's copies between NIC and GPUs (remote PS)",
        "GPUDirect RDMA (host copies twice as fast)",
        lambda f, h, c: (f, h, replace(c, host_copy_gbps=c.host_copy_gbps * 2)),
    ),
    Bottleneck(
        "trainer_network",
        "the trainers' network",
        "a 100 GbE NIC on every server",
        lambda f, h, c: (f, _platforms(h, nic_gb_per_s=12.5), c),
    ),
    Bottleneck(
        "ps_network",
        "the parameter servers' network",
        "a 100 GbE NIC on every server",
        lambda f, h, c: (f, _platforms(h, nic_gb_per_s=12.5), c),
    ),
    Bottleneck(
        "ps_memory_bandwidth",
        "parameter-server memory bandwidth",
        "twice the sparse parameter servers",
        _scaled("n_sparse_ps", 2),
    ),
    Bottleneck(
        "dense_ps_network",
        "dense-PS synchronisation",
        "twice the dense parameter servers",
        _scaled("n_dense_ps", 2),
    ),
    Bottleneck("readers", "the readers", "twice the readers", _scaled("n_readers", 2)),
)
BOTTLENECKS: dict[str, Bottleneck] = {b.key: b for b in _ALL}
