"""A workload's software stack (MLP precision, table optimizer, kernel mode) when the workload does not say.

A workload that states its stack keeps it. Otherwise its platform decides (catalog field ``stack``): the
paper's platforms run the paper's 2019 production stack (defaults.PAPER_STACK), every other platform
today's default of its class (defaults.CURRENT_*: 16-bit where the hardware has a faster 16-bit unit).
Every answer names the inputs taken from here (``defaulted_inputs``) and can show what the same option
does under each alternative the hardware runs (``scenario_throughput``): every kernel mode on a GPU server,
every precision the hardware supports. The optimizer changes only what fits, not the speed, and is named
but not varied.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from workload_model import defaults
from workload_model.catalog import HardwareCatalog, Platform

DEFAULTED = "defaulted_inputs"  # the stack fields of a row that came from its platform, comma-separated
VARIED = ("kernels", "precision")  # the defaulted inputs an answer shows the alternatives of


def platform_stack(p: Platform) -> dict[str, str]:
    """The stack a workload runs on ``p`` when it states none."""
    if p.stack == "paper_2019":
        return dict(defaults.PAPER_STACK)
    faster = [x for x in precisions(p) if x != "fp32"]
    half = defaults.CURRENT_HALF["gpu" if p.gpus else "cpu"]
    precision = half if half in faster else (faster[0] if faster else "fp32")
    return {
        "precision": precision,
        "optimizer": defaults.CURRENT_OPTIMIZER,
        "kernels": defaults.CURRENT_KERNELS,
    }


def precisions(p: Platform) -> tuple[str, ...]:
    """The precisions ``p`` runs at a rate of their own: fp32, and each faster unit it has (tf32 and fp16
    tensor cores on a GPU; bf16 vector or matrix units on a CPU). bf16 on a GPU runs as fp16 does."""
    if p.gpus:
        fp32 = p.gpu_fp32_tflops or 0
        return (
            "fp32",
            *(x for x, r in (("tf32", p.gpu_tf32_tflops), ("fp16", p.gpu_fp16_tflops)) if (r or 0) > fp32),
        )
    half = max(p.cpu_fp16_tflops or 0, p.cpu_matrix_tflops or 0)
    return ("fp32", "bf16") if half > (p.cpu_fp32_tflops or 0) else ("fp32",)


def choices(p: Platform) -> dict[str, tuple[str, ...]]:
    """Per varied field, the values an answer on ``p`` is also shown under (kernel modes only matter on
    GPUs)."""
    return {"kernels": defaults.KERNEL_MODES if p.gpus else (), "precision": precisions(p)}


def resolve(frame: pl.DataFrame, hw: HardwareCatalog) -> pl.DataFrame:
    """Each row's stack: as stated, else its platform's; adds ``defaulted_inputs``. Resolving twice keeps the
    first answer's list (the second sees the filled values)."""
    table = pl.DataFrame(
        [
            {"platform": k, **{f"_stack_{f}": v for f, v in platform_stack(p).items()}}
            for k, p in hw.platforms.items()
        ],
        schema={"platform": pl.String, **{f"_stack_{f}": pl.String for f in defaults.STACK_FIELDS}},
    )
    out = frame.join(table, on="platform", how="left", maintain_order="left")
    stated = {f: pl.col(f) if f in frame.columns else pl.lit(None, pl.String) for f in defaults.STACK_FIELDS}
    named = pl.concat_str(
        [pl.when(stated[f].is_null()).then(pl.lit(f)) for f in defaults.STACK_FIELDS],
        separator=",",
        ignore_nulls=True,
    )
    if DEFAULTED in frame.columns:
        named = pl.col(DEFAULTED)
    return out.with_columns(
        *(
            pl.coalesce(stated[f], pl.col(f"_stack_{f}"), pl.lit(defaults.PAPER_STACK[f])).alias(f)
            for f in defaults.STACK_FIELDS
        ),
        named.alias(DEFAULTED),
    ).drop([f"_stack_{f}" for f in defaults.STACK_FIELDS])


def scenarios(frame: pl.DataFrame, hw: HardwareCatalog) -> list[tuple[str, str]]:
    """Every (field, value) some row's defaulted input could take instead, in a stable order."""
    named = set(",".join(frame.get_column(DEFAULTED).drop_nulls().to_list()).split(","))
    out = set()
    for p in frame.get_column("platform").unique().to_list():
        if p in hw.platforms:
            out |= {(f, v) for f, vs in choices(hw.platforms[p]).items() if f in named for v in vs}
    order = {f: i for i, f in enumerate(VARIED)}
    return sorted(
        out,
        key=lambda fv: (
            order[fv[0]],
            defaults.KERNEL_MODES.index(fv[1]) if fv[0] == "kernels" else defaults.PRECISIONS.index(fv[1]),
        ),
    )


def applies(frame: pl.DataFrame, hw: HardwareCatalog, field: str, value: str) -> np.ndarray:
    """Rows whose ``field`` was defaulted, whose hardware runs ``value`` and that answered with another
    value."""
    runs = {k: value in choices(p)[field] for k, p in hw.platforms.items()}
    return (
        frame.select(
            pl.col(DEFAULTED).fill_null("").str.split(",").list.contains(field)
            & pl.col("platform").replace_strict(runs, default=False, return_dtype=pl.Boolean)
            & (pl.col(field) != value)
        )
        .to_series()
        .fill_null(False)
        .to_numpy()
    )
