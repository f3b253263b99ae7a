"""Workload and system fields, their types and bounds, derived from the runs contract (schemas/runs.yaml).

The runs contract lists a run's workload columns (``model_name`` up to the system's ``platform``) and its
system columns (``platform`` to ``n_readers``); this module reads them once, on first use, so that every
layer (what-if, the recommender, workload files) names, types and bounds fields the same way. The model
adds what the contract does not carry: stricter minimums where a workload is not a DLRM otherwise
(MODEL_MINIMUMS), and model-only fields with defaults (MODEL_ONLY: the MLP ``precision``, the tables'
``optimizer``, how the framework issues ``kernels``, and the DCNv2 shape).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from workload_model import defaults

RUNS_CONTRACT = Path(__file__).resolve().parents[1] / "schemas" / "runs.yaml"
SERVER_COUNTS = ("n_trainers", "n_sparse_ps", "n_dense_ps", "n_readers")
# The model needs at least one table and one sparse feature (the contract allows 0 for observed runs).
MODEL_MINIMUMS = {"n_tables": 1, "n_sparse_features": 1}
MODEL_ONLY = {
    "precision": {
        "name": "precision",
        "type": "string",
        "enum": list(defaults.PRECISIONS),
        "description": "Arithmetic of the MLPs (selects the platform's peak for it).",
    },
    "optimizer": {
        "name": "optimizer",
        "type": "string",
        "enum": list(defaults.OPTIMIZER_STATE),
        "description": "Optimizer of the embedding tables (sets the state bytes held beside them).",
    },
    "kernels": {
        "name": "kernels",
        "type": "string",
        "enum": list(defaults.KERNEL_MODES),
        "description": "per_table (eager, an operator per table), fused (one batched embedding kernel, eager "
        "Python launches), compiled (fused, a compiled runtime's launches) or graph (from a captured graph).",
    },
    "dcn_layers": {
        "name": "dcn_layers",
        "type": "int32",
        "min": 1,
        "max": 64,
        "description": "DCNv2 cross layers (interaction: dcn).",
    },
    "dcn_rank": {
        "name": "dcn_rank",
        "type": "int32",
        "min": 1,
        "max": 65536,
        "description": "Rank of each low-rank DCNv2 cross layer (interaction: dcn).",
    },
}
# A system field the runs contract leaves to the platform: GPUs per server, settable to ask about the same
# server with more or fewer GPUs (a GPU platform only).
SYSTEM_ONLY = {
    "gpus": {
        "name": "gpus",
        "type": "int32",
        "min": 1,
        "max": 64,
        "description": "GPUs per server (a GPU platform's count overridden).",
    },
}


class FieldError(ValueError):
    """A field value outside its type or bounds; the message names the field and the bound."""


@cache
def _columns() -> dict[str, dict[str, Any]]:
    cols = yaml.safe_load(RUNS_CONTRACT.read_text(encoding="utf-8"))["columns"]
    return {c["name"]: c for c in cols}


def _span(first: str, stop: str) -> tuple[str, ...]:
    names = list(_columns())
    return tuple(names[names.index(first) : names.index(stop)])


@cache
def workload_fields() -> tuple[str, ...]:
    """The runs contract's workload columns, in contract order (model_name ... batch_size)."""
    return _span("model_name", "platform")


@cache
def shape_fields() -> tuple[str, ...]:
    """Workload columns that describe the model's shape (no name, no batch)."""
    return tuple(f for f in workload_fields() if f not in ("model_name", "batch_size"))


def workload_keys() -> tuple[str, ...]:
    """A workload's fields as the recommender and workload files use them: the contract's workload
    fields but the batch (chosen per platform) plus the model-only fields."""
    return (*workload_fields()[:-1], *MODEL_ONLY)


@cache
def numeric_features() -> tuple[str, ...]:
    """Numeric workload and system columns a fleet correction can learn from (the lookup exponent is
    left out: public traces rarely know it)."""
    shape = [f for f in shape_fields() if spec(f)["type"] != "string" and f != "lookup_power_law_alpha"]
    return (*shape, "batch_size", *SERVER_COUNTS)


def settable_fields() -> tuple[str, ...]:
    """Fields a what-if or recommendation may override: workload, server counts, GPUs per server and the
    model-only fields."""
    return (*workload_fields()[1:], *SERVER_COUNTS, *SYSTEM_ONLY, *MODEL_ONLY)


def spec(field: str) -> dict[str, Any]:
    """The contract entry of a field (MODEL_MINIMUMS applied), or of a model-only or system-only field."""
    if field in MODEL_ONLY:
        return MODEL_ONLY[field]
    if field in SYSTEM_ONLY:
        return SYSTEM_ONLY[field]
    entry = dict(_columns()[field])
    if field in MODEL_MINIMUMS:
        entry["min"] = max(entry.get("min", MODEL_MINIMUMS[field]), MODEL_MINIMUMS[field])
    return entry


def check(field: str, value: Any) -> Any:
    """``value`` (a string from a command line, or a parsed value) as the field's type, within its
    bounds; FieldError otherwise, naming the field and the bound."""
    if field not in settable_fields():
        raise FieldError(f"unknown field {field!r}; valid fields: {', '.join(settable_fields())}")
    s = spec(field)
    if s["type"] == "string":
        text = str(value).strip()
        if s.get("enum") and text not in s["enum"]:
            raise FieldError(f"{field}={text!r}: valid values are {', '.join(s['enum'])}")
        if s.get("pattern") and not all(p.isdigit() and int(p) > 0 for p in text.split("-")):
            raise FieldError(f"{field}={text!r}: expected layer widths like 512-256-64")
        return text
    whole = s["type"].startswith("int")
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    lo, hi = s.get("min"), s.get("max")
    kind = "a whole number" if whole else "a number"
    bound = " and ".join(
        x for x in (f">= {lo}" if lo is not None else "", f"<= {hi}" if hi is not None else "") if x
    )
    if (
        not (v == v)
        or (whole and not v.is_integer())
        or (lo is not None and v < lo)
        or (hi is not None and v > hi)
    ):
        raise FieldError(f"{field}={value!r}: must be {kind}" + (f" {bound}" if bound else ""))
    return int(v) if whole else v
