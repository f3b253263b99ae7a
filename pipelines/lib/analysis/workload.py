"""Workloads for `fleet whatif` and `fleet recommend`: a catalog model, a workload file (YAML or JSON) or
an observed run, then ``FIELD=VALUE`` overrides. Every value is checked against its type and bounds (the
runs contract, see workload_model/fields.py); an error names the field and the bound, and the CLI prints
it (exit 2).

A workload is a dict of the runs contract's workload fields plus the model-only fields, how to pick its
batch on a platform (workload_model.sizing.batch_on): ``batch_map`` (platform -> batch), else
``batch_cpu`` (per CPU trainer) or ``batch_gpu`` (global batch of one GPU server), else the platform kind's
default; and ``system``: the server counts (and GPUs per server) asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import yaml

from pipelines.lib import safe_yaml
from workload_model import defaults, fields
from workload_model.catalog import CatalogError, load_models
from workload_model.sizing import workload_of_model
from workload_model.whatif import (
    WhatIfError,
    apply_settings,
    coerce,
    parse_setting,
    pick_model,
    split_settings,
    with_workload_settings,
)

BATCH_KEYS = ("batch_cpu", "batch_gpu", "batch_size")
# The defaults of the model-only fields a workload file or an observed run may leave out (its software
# stack is left unset: the platform it runs on decides it, and every answer names it).
MODEL_DEFAULTS = {
    "dcn_layers": defaults.DCN_LAYERS,
    "dcn_rank": defaults.DCN_RANK,
}
# What a user can get wrong in a workload or a catalog: the CLI prints these and exits 2.
INPUT_ERRORS = (WhatIfError, CatalogError, fields.FieldError)


def from_config(path: Path) -> dict[str, Any]:
    """A workload from a YAML or JSON file of workload fields (+ batch_cpu / batch_gpu / batch_size)."""
    if not path.exists():
        raise WhatIfError(f"{path} does not exist")
    try:
        data = safe_yaml.load_file(path) or {}  # size, alias and depth limits, plain data, finite numbers
    except (yaml.YAMLError, safe_yaml.YamlLimitError) as exc:
        raise WhatIfError(f"{path}: not valid YAML or JSON: {exc}") from None
    if not isinstance(data, dict):
        raise WhatIfError(f"{path}: expected a mapping of workload fields")
    allowed = set(fields.workload_keys()) | set(BATCH_KEYS)
    unknown = sorted((k for k in data if k not in allowed), key=str)
    if unknown:
        shown = ", ".join("~ (nothing)" if k is None else repr(k) for k in unknown)
        raise WhatIfError(f"{path}: unknown field(s) [{shown}]; valid: {', '.join(sorted(allowed))}")
    try:
        given = {
            k: str(v) if k == "model_name" else coerce("batch_size" if k in BATCH_KEYS else k, v)
            for k, v in data.items()
        }
    except WhatIfError as exc:
        raise WhatIfError(f"{path}: {exc}") from None
    out = _with_starting_shape(given)
    out.setdefault("n_tables", out["n_sparse_features"])
    out.setdefault("lookup_power_law_alpha", defaults.LOOKUP_POWER_LAW_ALPHA)
    for k, v in MODEL_DEFAULTS.items():
        out.setdefault(k, v)
    out.setdefault("model_name", path.stem)
    batch = out.pop("batch_size", None)
    if batch:
        out.setdefault("batch_cpu", batch)
        out.setdefault("batch_gpu", batch)
    out["assumed"] = assumed(given, out)
    return out


def _with_starting_shape(given: dict[str, Any]) -> dict[str, Any]:
    """``given`` with the shape fields it leaves out from defaults.STARTING_SHAPE, the given ones applied
    to it as a what-if applies them (table count and bytes follow the sparse features)."""
    shape = {k: v for k, v in given.items() if k in defaults.STARTING_SHAPE}
    if len(shape) == len(defaults.STARTING_SHAPE):
        return dict(given)
    return {**apply_settings(dict(defaults.STARTING_SHAPE), shape), **given}


def assumed(given: dict[str, Any], workload: dict[str, Any]) -> dict[str, str]:
    """Each workload field the file did not give, and what it became (the stack: by platform, later)."""
    out = {
        k: str(workload[k]) for k in (*defaults.STARTING_SHAPE, "lookup_power_law_alpha") if k not in given
    }
    if not given.keys() & {"batch_size", "batch_cpu"}:
        out["batch_cpu"] = f"{defaults.BATCH_CPU} per CPU trainer"
    if not given.keys() & {"batch_size", "batch_gpu"}:
        out["batch_gpu"] = f"{defaults.BATCH_PER_GPU} per GPU (a GPU platform's default)"
    return out


def assumed_line(workload: dict[str, Any]) -> str | None:
    """The fields a workload file left out and what they were taken as, in one line (None: none)."""
    taken = workload.get("assumed")
    if not taken:
        return None
    return (
        "not in the workload file, so taken as (shape: the MLPerf DLRM reference with the file's fields "
        "applied, workload_model/defaults.py): " + ", ".join(f"{k}={v}" for k, v in taken.items())
    )


def from_run(runs: pl.DataFrame, run_id: str) -> dict[str, Any]:
    """The workload of an observed run; its batch is kept for its own platform (others: defaults)."""
    hit = runs.filter(pl.col("run_id") == run_id) if "run_id" in runs.columns else runs.clear()
    if hit.is_empty():
        raise WhatIfError(f"no run {run_id!r} in the lake")
    row = hit.row(0, named=True)
    shape = [
        k
        for k in fields.workload_keys()
        if k != "model_name" and k not in MODEL_DEFAULTS and k not in defaults.STACK_FIELDS
    ]
    missing = [k for k in shape if row.get(k) is None]
    if missing:
        raise WhatIfError(
            f"run {run_id!r} does not record its workload ({', '.join(missing)} unknown); "
            "give it with --config or --set"
        )
    return {
        **{k: row[k] for k in ("model_name", *shape)},
        **{k: row.get(k) or v for k, v in MODEL_DEFAULTS.items()},
        **{k: row[k] for k in defaults.STACK_FIELDS if row.get(k)},
        "batch_map": {row["platform"]: int(row["batch_size"])} if row.get("batch_size") else {},
    }


def with_settings(workload: dict[str, Any], settings: list[str]) -> dict[str, Any]:
    """The workload with ``FIELD=VALUE`` overrides (checked; shape kept consistent, see
    workload_model.whatif.apply_settings); ``batch_size`` sets the batch on every platform; server counts
    and GPUs per server go to ``system`` (the counts every option then keeps)."""
    parsed = {k: coerce(k, v) for k, v in (parse_setting(x) for x in settings)}
    asked, system = split_settings(parsed)
    out = with_workload_settings(workload, asked)
    if system:
        out["system"] = {**(out.get("system") or {}), **system}
    return out


def build(
    catalog_dir: Path,
    runs: pl.DataFrame,
    *,
    model: str | None = None,
    config: str | None = None,
    run: str | None = None,
    settings: list[str] | None = None,
) -> dict[str, Any]:
    """The workload asked for by exactly one of ``model`` (catalog name, user models in ``catalog_dir``),
    ``config`` (a workload file) or ``run`` (a run_id of ``runs``), with ``settings`` applied."""
    if sum(bool(x) for x in (model, config, run)) != 1:
        raise WhatIfError("give exactly one of --model NAME, --config workload.yaml or --run RUN_ID")
    if model:
        models = load_models(catalog_dir / "models.yaml", lenient=True)
        workload = workload_of_model(pick_model(models, model))
    elif config:
        workload = from_config(Path(config))
    else:
        workload = from_run(runs, str(run))
    return with_settings(workload, settings or [])
