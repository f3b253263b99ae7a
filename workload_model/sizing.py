"""The systems `fleet whatif` and `fleet recommend` answer for, built and sized the same way.

A workload (a catalog model, a workload file or an observed run) becomes one configuration row per platform
and placement: the workload's batch on that platform, the server counts the user gave, and for the rest the
defaults of workload_model.defaults (trainers: the workload's production CPU setup on a CPU platform, one
server on a GPU platform). Every other tier left at 0 is sized by its binding constraint: sparse PS
(remote_ps) at the smallest count that holds the tables with their optimizer state and reaches the
throughput, dense PS on asynchronous CPU clusters the same way, and readers for what the trainers then
consume.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from workload_model import defaults, fields
from workload_model.catalog import HardwareCatalog, ModelSpec
from workload_model.model import DEFAULT, Coefficients, predict_frame

SATURATION = 0.99  # a tier is sized at the smallest count that reaches this share of its ample throughput
SEARCH_MAX = 256  # largest sparse-PS or dense-PS count the sizing search tries
AMPLE_READERS = 1_000_000  # a reader tier that never binds (its examples still cross the trainers' NICs)
COUNTS = ("n_trainers", "n_sparse_ps", "n_dense_ps", "n_readers")


def workload_of_model(spec: ModelSpec) -> dict[str, Any]:
    """A catalog model as a workload: its shape, its batch per platform, its production CPU setup and the
    platforms where it ran with other kernels."""
    return {k: spec.name if k == "model_name" else getattr(spec, k) for k in fields.workload_keys()} | {
        "batch_map": dict(spec.batch_size),
        "cpu_baseline": dict(spec.cpu_baseline) if spec.cpu_baseline else None,
        "kernels_on": dict(spec.kernels_on or {}),
    }


def batch_on(workload: dict[str, Any], platform: str, gpus: int) -> int:
    """The workload's batch on a platform: its batch map's entry; else ``batch_cpu`` / ``batch_gpu``;
    else the default of the platform kind (workload_model.defaults: 512 per CPU trainer, 512 per GPU)."""
    batch_map = workload.get("batch_map") or {}
    if platform in batch_map:
        return int(batch_map[platform])
    given = workload.get("batch_cpu" if gpus == 0 else "batch_gpu")
    return int(given) if given else defaults.batch_for(batch_map, platform, gpus)


def system_row(
    workload: dict[str, Any],
    platform: str,
    placement: str,
    hw: HardwareCatalog,
    counts: dict[str, int] | None = None,
) -> dict[str, Any]:
    """One configuration row: the workload on ``platform`` with ``placement``, the given server counts
    (``gpus`` overrides the GPUs per server), default trainers and every other tier at 0 (to be sized)."""
    counts = dict(counts or {})
    gpus = int(counts.get("gpus") or hw.platform(platform).gpus)
    row = {k: workload[k] for k in fields.workload_keys() if workload.get(k) is not None}
    kernels = (workload.get("kernels_on") or {}).get(platform, row.get("kernels"))
    if kernels is not None:
        row["kernels"] = kernels
    trainers = defaults.system_for(workload.get("cpu_baseline"), gpus)["n_trainers"]
    row.update(
        platform=platform,
        placement=placement,
        batch_size=batch_on(workload, platform, gpus),
        n_trainers=trainers,
        n_sparse_ps=0,
        n_dense_ps=0,
        n_readers=0,
    )
    row.update({k: int(v) for k, v in counts.items() if k in COUNTS})
    if "gpus" in counts:
        row["gpus"] = gpus
    return row


def _smallest(
    frame: pl.DataFrame, rows: np.ndarray, column: str, hw: HardwareCatalog, coef: Coefficients
) -> np.ndarray:
    """Per row in ``rows``: the smallest count of ``column`` (1..SEARCH_MAX) whose throughput reaches
    SATURATION of the best any count gives, with the tables fitting; one model evaluation for all."""
    out = frame[column].to_numpy().copy()
    idx = np.flatnonzero(rows)
    if not idx.size:
        return out
    counts = np.arange(1, SEARCH_MAX + 1)
    trial = (
        frame[idx]
        .select(pl.all().repeat_by(SEARCH_MAX).explode())
        .with_columns(pl.Series(column, np.tile(counts, idx.size), pl.Int32))
    )
    p = predict_frame(trial, hw, coef)
    thr = p["throughput_eps"].fill_null(0.0).to_numpy().reshape(idx.size, SEARCH_MAX)
    good = thr >= SATURATION * thr.max(axis=1, keepdims=True)
    good &= thr > 0
    out[idx] = np.where(good.any(axis=1), counts[good.argmax(axis=1)], out[idx])
    return out


def size_servers(frame: pl.DataFrame, hw: HardwareCatalog, coef: Coefficients = DEFAULT) -> pl.DataFrame:
    """Every tier left at 0 sized by its binding constraint: sparse PS (remote_ps) at the smallest count
    that holds the tables with their optimizer state and reaches the throughput (PS memory bandwidth,
    network); then CPU dense PS the same way (asynchronous trainers: a synchronous system_memory job
    all-reduces its dense weights); then readers for the throughput reached (examples/s x bytes
    per example over one reader's rate). Counts already given are kept."""
    if frame.is_empty():
        return frame
    # Servers that read their examples from local drives have no reader tier to size.
    local = frame["platform"].replace_strict(
        {k: v.input_from == "local_storage" for k, v in hw.platforms.items()}, default=False
    )
    size_readers = (frame["n_readers"].to_numpy() == 0) & ~local.to_numpy()
    # While the other tiers are sized, the readers are ample: their examples still reach the trainers.
    work = frame.with_columns(
        pl.when(pl.Series(size_readers)).then(AMPLE_READERS).otherwise(pl.col("n_readers")).alias("n_readers")
    )
    on_cpu = work["platform"].replace_strict({k: v.gpus == 0 for k, v in hw.platforms.items()}).to_numpy()
    ps_rows = (work["placement"].to_numpy() == "remote_ps") & (work["n_sparse_ps"].to_numpy() == 0)
    work = work.with_columns(
        pl.Series("n_sparse_ps", _smallest(work, ps_rows, "n_sparse_ps", hw, coef).astype(np.int32))
    )
    # Dense PS serve asynchronous CPU trainers; a synchronous system_memory job all-reduces its dense weights.
    synchronous = work["placement"].to_numpy() == "system_memory"
    dps_rows = on_cpu & ~synchronous & (work["n_dense_ps"].to_numpy() == 0)
    work = work.with_columns(
        pl.Series("n_dense_ps", _smallest(work, dps_rows, "n_dense_ps", hw, coef).astype(np.int32))
    )
    p = predict_frame(work, hw, coef)
    thr = p["throughput_eps"].fill_null(0).to_numpy()
    need = np.ceil(thr * p["input_bytes_per_example"].to_numpy() / (coef.reader_gbps * 1e9)).clip(1, None)
    readers = np.where(size_readers, need, frame["n_readers"].to_numpy())
    return work.with_columns(pl.Series("n_readers", readers.astype(np.int32)))
