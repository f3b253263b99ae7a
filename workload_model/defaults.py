"""The one home of the workload defaults every layer uses (catalog, model, what-if, recommender, CLI).

A workload or system that leaves a field out gets the value below; docs/how-to/planners.md lists
them. Tests check that no other module defines its own copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Power-law exponent of lookups across tables when a workload does not state it: the catalog's production
# models use 1.1 (a few hot tables, paper §III-A).
LOOKUP_POWER_LAW_ALPHA = 1.1
# The shape a workload file starts from where it leaves a field out: the public MLPerf Training DLRM
# reference (Criteo Terabyte; examples/mlperf/models.yaml). The fields given replace it consistently
# (workload_model.whatif.apply_settings: more sparse features, more tables and table bytes), so a partial
# description gets a first answer, which names every field it took from here.
STARTING_SHAPE = {
    "n_dense_features": 13,
    "n_sparse_features": 26,
    "n_tables": 26,
    "embedding_dim": 128,
    "embedding_gb": 96.14,
    "mean_lookups_per_table": 1.0,
    "bottom_mlp": "13-512-256-128",
    "top_mlp": "1024-1024-512-256-1",
    "interaction": "dot",
}
# A workload's software stack: the arithmetic of its MLPs, the optimizer of its tables (state bytes per table
# byte: TorchRec's multipliers) and how its framework issues GPU kernels (each mode has its own fitted cost
# per operator, workload_model/coefficients.py): "per_table", an eager framework with one operator per
# table and per layer, each dispatched and synchronised by the host, as the paper's production stack did;
# "fused", one batched embedding kernel and the operators dispatched eagerly from Python, one process per
# GPU (NVIDIA's PyTorch DLRM); "compiled", fused kernels launched by a compiled runtime (HugeCTR's C++
# engine, PyTorch 2's torch.compile); "graph", fused kernels launched from a captured graph (HugeCTR 3.x
# with CUDA graphs). A workload that does not state its stack runs its platform's (workload_model/stack.py).
STACK_FIELDS = ("precision", "optimizer", "kernels")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
OPTIMIZER_STATE = {"sgd": 0.0, "adagrad": 1.0, "rowwise_adagrad": "1/dim", "adam": 2.0}
# The paper's 2019 production stack: fp32 MLPs, Adagrad tables and an eager per-table framework. The
# paper's platforms (cpu, big_basin, zion: catalog field `stack: paper_2019`) run it.
PAPER_STACK = {"precision": "fp32", "optimizer": "adagrad", "kernels": "per_table"}
# Today's stack on any other platform, from public framework documentation (docs/model-terms.md):
# TorchRec's FBGEMM table-batched embedding kernels with the dense part under PyTorch 2's torch.compile
# (compiled); the tables' optimizer FBGEMM's table-batched embedding module defaults to (exact SGD); mixed
# precision where the hardware has a faster 16-bit unit (PyTorch AMP: float16 autocast on CUDA GPUs,
# bfloat16 on CPUs), else tf32 on GPUs that have it, else fp32.
CURRENT_KERNELS = "compiled"
CURRENT_OPTIMIZER = "sgd"
CURRENT_HALF = {"gpu": "fp16", "cpu": "bf16"}
KERNEL_MODES = ("per_table", "fused", "compiled", "graph")
# Cores per socket when a platform states its sockets but not its cores (a Skylake-SP-class socket).
CORES_PER_SOCKET = 20
# DCNv2 cross layers (interaction: dcn) when a workload names the interaction but not its shape: the
# MLPerf DLRM-DCNv2 reference (3 low-rank layers of rank 512).
DCN_LAYERS = 3
DCN_RANK = 512
# Watts a server draws idle, as a share of its peak, when the catalog does not state idle_w.
IDLE_SHARE = 0.4
# Batch per platform kind when a model's batch map does not name the platform: the CPU batch of one
# asynchronous trainer, and per GPU for a synchronous GPU server (Big Basin: 8 x 512 = 4096).
BATCH_CPU = 512
BATCH_PER_GPU = 512
# A CPU cluster when neither the model (its `cpu_baseline`) nor the fleet says how teams run it: the
# paper's typical production setup (Table III scale; readers ample).
CPU_SYSTEM: dict[str, int] = {"n_trainers": 8, "n_sparse_ps": 4, "n_dense_ps": 1, "n_readers": 8}
# One GPU server; remote PS and readers are sized by what the trainers consume (0 = sized, see
# workload_model.sizing).
GPU_SYSTEM: dict[str, int] = {"n_trainers": 1, "n_sparse_ps": 0, "n_dense_ps": 0, "n_readers": 0}


def batch_for(batch_map: dict[str, int] | None, platform: str, gpus: int) -> int:
    """The batch of a model on ``platform``: its batch map's entry, else the platform kind's default
    (BATCH_CPU on a CPU platform, BATCH_PER_GPU per GPU on a GPU platform)."""
    if batch_map and platform in batch_map:
        return int(batch_map[platform])
    if gpus == 0:
        return int((batch_map or {}).get("cpu", BATCH_CPU))
    return BATCH_PER_GPU * int(gpus)


def system_for(cpu_baseline: Mapping[str, Any] | None, gpus: int) -> dict[str, int]:
    """Default server counts of a run on a platform kind: the model's CPU baseline or CPU_SYSTEM on a CPU
    platform, GPU_SYSTEM on a GPU platform."""
    if gpus == 0:
        return {**CPU_SYSTEM, **{k: int(v) for k, v in (cpu_baseline or {}).items()}}
    return dict(GPU_SYSTEM)
