"""What-if questions to the workload model: one configuration, or a sweep of one field over platforms."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from synthetic_fleet.catalog import PLACEMENTS, HardwareCatalog, ModelSpec
from synthetic_fleet.model import DEFAULT, RESOURCES, ROLES, Coefficients, predict_frame

INT_FIELDS = (
    "n_dense_features",
    "n_sparse_features",
    "n_tables",
    "embedding_dim",
    "batch_size",
    "n_trainers",
    "n_sparse_ps",
    "n_dense_ps",
    "n_readers",
)
FLOAT_FIELDS = ("embedding_gb", "mean_lookups_per_table", "lookup_power_law_alpha")
TEXT_FIELDS = {"bottom_mlp": None, "top_mlp": None, "interaction": ("dot", "cat")}
SETTABLE = INT_FIELDS + FLOAT_FIELDS + tuple(TEXT_FIELDS)


class WhatIfError(ValueError):
    """A question the model cannot answer as asked; the message names the field and the valid choices."""


def parse_setting(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise WhatIfError(f"--set {text!r}: expected FIELD=VALUE (fields: {', '.join(SETTABLE)})")
    key, value = text.split("=", 1)
    key = key.strip()
    if key not in SETTABLE:
        raise WhatIfError(f"unknown field {key!r}; valid fields: {', '.join(SETTABLE)}")
    return key, value.strip()


def coerce(key: str, value: str) -> Any:
    """A value of the field's type, or a WhatIfError saying what is valid."""
    try:
        if key in INT_FIELDS:
            v = float(value)
            if v != int(v) or v < 0:
                raise ValueError
            return int(v)
        if key in FLOAT_FIELDS:
            v = float(value)
            if not v >= 0:
                raise ValueError
            return v
    except ValueError:
        kind = "a whole number >= 0" if key in INT_FIELDS else "a number >= 0"
        raise WhatIfError(f"{key}={value!r}: expected {kind}") from None
    allowed = TEXT_FIELDS[key]
    if allowed and value not in allowed:
        raise WhatIfError(f"{key}={value!r}: valid values are {', '.join(allowed)}")
    if allowed is None and not all(p.isdigit() for p in value.split("-")):
        raise WhatIfError(f"{key}={value!r}: expected layer widths like 512-256-64")
    return value


def pick_model(models: dict[str, ModelSpec], name: str) -> ModelSpec:
    if name not in models:
        raise WhatIfError(f"unknown model {name!r}; valid models: {', '.join(sorted(models))}")
    return models[name]


def pick_platforms(hw: HardwareCatalog, text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    modelled = sorted(p for p, spec in hw.platforms.items() if spec.modelled)
    for p in names:
        if p not in modelled:
            raise WhatIfError(f"unknown or unmodelled platform {p!r}; valid platforms: {', '.join(modelled)}")
    return names


def configuration(
    model: ModelSpec, platform: str, placement: str | None, hw: HardwareCatalog, settings: dict[str, Any]
) -> dict[str, Any]:
    """A row for the model: the model's workload and a default system on the platform, then the settings.

    Setting n_sparse_features alone keeps one table per feature and the per-table size (so n_tables and
    embedding_gb follow); setting them explicitly wins.
    """
    row = model.workload(platform)
    spec = hw.platform(platform)
    on_cpu = spec.gpus == 0
    # Default systems: the model's production CPU setup; one GPU server with the readers GPU runs use (t18).
    base = (
        dict(model.cpu_baseline or {"n_trainers": 8, "n_sparse_ps": 4, "n_dense_ps": 1, "n_readers": 8})
        if on_cpu
        else {"n_trainers": 1, "n_sparse_ps": 0, "n_dense_ps": 0, "n_readers": 24}
    )
    row.update(
        platform=platform,
        placement=placement or ("remote_ps" if on_cpu else None),
        n_trainers=base["n_trainers"],
        n_sparse_ps=base.get("n_sparse_ps", 0),
        n_dense_ps=base.get("n_dense_ps", 0),
        n_readers=base.get("n_readers", 8),
    )
    return apply_settings(row, settings)


def apply_settings(workload: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """Apply field overrides, keeping the shape consistent where only one side is given: more sparse
    features mean as many tables of the same size; more dense features widen the bottom MLP's input."""
    row = dict(workload)
    if "n_sparse_features" in settings:
        scale = settings["n_sparse_features"] / max(row.get("n_sparse_features") or 1, 1)
        row.setdefault("n_tables", row.get("n_sparse_features"))
        if "n_tables" not in settings:
            row["n_tables"] = settings["n_sparse_features"]
        if "embedding_gb" not in settings and row.get("embedding_gb") is not None:
            row["embedding_gb"] = row["embedding_gb"] * scale
    if "n_dense_features" in settings and "bottom_mlp" not in settings and row.get("bottom_mlp"):
        row["bottom_mlp"] = "-".join([str(settings["n_dense_features"])] + row["bottom_mlp"].split("-")[1:])
    row.update(settings)
    return row


def _with_ps(row: dict[str, Any], model: ModelSpec) -> dict[str, Any]:
    """Remote PS on a GPU platform get the model's CPU-baseline PS count unless set."""
    if row["placement"] == "remote_ps" and not row.get("n_sparse_ps"):
        row = {**row, "n_sparse_ps": (model.cpu_baseline or {}).get("n_sparse_ps", 4)}
    return row


@dataclass
class Answer:
    """The model's answer for every platform x placement asked about."""

    rows: pl.DataFrame

    def records(self) -> list[dict[str, Any]]:
        return self.rows.to_dicts()


def ask(
    model: ModelSpec,
    platforms: list[str],
    placement: str | None,
    hw: HardwareCatalog,
    settings: dict[str, Any],
    sweep: tuple[str, list[Any]] | None = None,
    coef: Coefficients = DEFAULT,
) -> Answer:
    """Predict every asked configuration; without a placement, every placement of each platform is evaluated
    and the best-throughput one that fits is marked ``default_placement``."""
    if placement is not None and placement not in PLACEMENTS:
        raise WhatIfError(f"unknown placement {placement!r}; valid placements: {', '.join(PLACEMENTS)}")
    values = sweep[1] if sweep else [None]
    rows = []
    for value in values:
        s = dict(settings)
        if sweep:
            s[sweep[0]] = value
        for platform in platforms:
            options = [placement] if placement else list(hw.platform(platform).placements)
            if placement and placement not in hw.platform(platform).placements:
                raise WhatIfError(
                    f"{platform} does not offer placement {placement!r}; it offers "
                    f"{', '.join(hw.platform(platform).placements)}"
                )
            for opt in options:
                row = _with_ps(configuration(model, platform, opt, hw, s), model)
                row["sweep_value"] = None if value is None else str(value)
                rows.append(row)
    pred = predict_frame(pl.DataFrame(rows, infer_schema_length=None), hw, coef)
    best = (
        pl.col("throughput_eps") == pl.col("throughput_eps").max().over("sweep_value", "platform")
    ) & pl.col("fits")
    return Answer(pred.with_columns(best.fill_null(False).alias("default_placement")))


def utilisation_table(row: dict[str, Any]) -> dict[str, dict[str, float]]:
    """{role: {resource: mean utilisation}} for one predicted row (roles the system has)."""
    counts = {
        "trainer": row["n_trainers"],
        "sparse_ps": row["n_sparse_ps"],
        "dense_ps": row["n_dense_ps"],
        "reader": row["n_readers"],
    }
    return {
        role: {
            res: row[f"{role}_{res}_util"] for res in RESOURCES if row.get(f"{role}_{res}_util") is not None
        }
        for role in ROLES
        if counts[role]
    }
