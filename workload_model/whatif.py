"""What-if questions to the workload model: one configuration, or a sweep of one field over platforms."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from workload_model import alternatives, fields
from workload_model.catalog import PLACEMENTS, HardwareCatalog, ModelSpec
from workload_model.model import DEFAULT, MODELLED, ROLES, Coefficients, predict_frame
from workload_model.sizing import size_servers, system_row, workload_of_model


class WhatIfError(ValueError):
    """A question the model cannot answer as asked; the message names the field and the valid choices."""


def parse_setting(text: str) -> tuple[str, str]:
    """``FIELD=VALUE`` split, the field checked against the settable fields."""
    if "=" not in text:
        raise WhatIfError(
            f"--set {text!r}: expected FIELD=VALUE (fields: {', '.join(fields.settable_fields())})"
        )
    key, value = text.split("=", 1)
    key = key.strip()
    if key not in fields.settable_fields():
        raise WhatIfError(f"unknown field {key!r}; valid fields: {', '.join(fields.settable_fields())}")
    return key, value.strip()


def coerce(key: str, value: Any) -> Any:
    """A value of the field's type within its bounds (schemas/runs.yaml, workload_model/fields.py), or a
    WhatIfError naming the field and the bound."""
    try:
        return fields.check(key, value)
    except fields.FieldError as exc:
        raise WhatIfError(str(exc)) from None


def pick_model(models: dict[str, ModelSpec], name: str) -> ModelSpec:
    invalid = getattr(models, "invalid", {})
    if name in invalid:
        raise WhatIfError(invalid[name])
    if name not in models:
        raise WhatIfError(f"unknown model {name!r}; valid models: {', '.join(sorted(models))}")
    return models[name]


def pick_platforms(hw: HardwareCatalog, text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    modelled = sorted(p for p, spec in hw.platforms.items() if spec.modelled)
    for p in names:
        if p in hw.invalid:
            raise WhatIfError(hw.invalid[p])
        if p not in modelled:
            raise WhatIfError(f"unknown or unmodelled platform {p!r}; valid platforms: {', '.join(modelled)}")
    return names


def apply_settings(workload: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """Apply field overrides, keeping the shape consistent where only one side is given.

    More sparse features mean more tables at the same features per table (one each, unless tables are
    shared); table bytes follow tables and the embedding dim (rows x dim x bytes per element), so
    ``embedding_gb`` scales with ``n_tables`` and ``embedding_dim`` unless it is set too; more dense
    features widen the bottom MLP's input.
    """
    row = dict(workload)
    new = {**row, **settings}
    if "n_sparse_features" in settings and "n_tables" not in settings:
        per_table = (row.get("n_sparse_features") or 1) / max(
            row.get("n_tables") or row.get("n_sparse_features") or 1, 1
        )
        new["n_tables"] = max(1, round(settings["n_sparse_features"] / per_table))
    if "embedding_gb" not in settings and row.get("embedding_gb") is not None:
        scale = 1.0
        for f in ("n_tables", "embedding_dim"):
            if row.get(f) and new.get(f) and new[f] != row[f]:
                scale *= new[f] / row[f]
        new["embedding_gb"] = row["embedding_gb"] * scale
    if "n_dense_features" in settings and "bottom_mlp" not in settings and row.get("bottom_mlp"):
        new["bottom_mlp"] = "-".join([str(settings["n_dense_features"])] + row["bottom_mlp"].split("-")[1:])
    return new


def split_settings(settings: dict[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
    """Settings of the workload, and of the system (server counts, GPUs per server)."""
    system = {k: v for k, v in settings.items() if k in (*fields.SERVER_COUNTS, *fields.SYSTEM_ONLY)}
    return {k: v for k, v in settings.items() if k not in system}, system


def with_workload_settings(workload: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """The workload with field overrides; ``batch_size`` sets the batch on every platform."""
    out = dict(workload)
    settings = dict(settings)
    if "batch_size" in settings:
        batch = settings.pop("batch_size")
        out.update(batch_map={}, batch_cpu=batch, batch_gpu=batch)
    return apply_settings(out, settings)


def as_workload(model: ModelSpec | dict[str, Any]) -> dict[str, Any]:
    """A catalog model or a workload (pipelines.lib.analysis.workload) as a workload."""
    return workload_of_model(model) if isinstance(model, ModelSpec) else model


@dataclass
class Answer:
    """The model's answer for every platform x placement asked about."""

    rows: pl.DataFrame

    def records(self) -> list[dict[str, Any]]:
        return self.rows.to_dicts()


def ask(
    model: ModelSpec | dict[str, Any],
    platforms: list[str],
    placement: str | None,
    hw: HardwareCatalog,
    settings: dict[str, Any],
    sweep: tuple[str, list[Any]] | None = None,
    coef: Coefficients = DEFAULT,
) -> Answer:
    """Predict every asked configuration; without a placement, every placement of each platform is evaluated
    and the best-throughput one that fits is marked ``default_placement``. The systems are built and sized
    as `fleet recommend` builds them (workload_model.sizing): the counts asked for are kept, every tier
    left unset is sized by what binds it."""
    if placement is not None and placement not in PLACEMENTS:
        raise WhatIfError(f"unknown placement {placement!r}; valid placements: {', '.join(PLACEMENTS)}")
    workload = as_workload(model)
    values = sweep[1] if sweep else [None]
    rows = []
    for value in values:
        s = dict(settings)
        if sweep:
            s[sweep[0]] = value
        asked, system = split_settings(s)
        w = with_workload_settings(workload, asked)
        system = {**(w.get("system") or {}), **system}
        for platform in platforms:
            spec = hw.platform(platform)
            if "gpus" in system and spec.gpus == 0:
                raise WhatIfError(f"gpus={system['gpus']}: {platform} is a CPU platform (no GPUs to count)")
            options = [placement] if placement else list(spec.placements)
            if placement and placement not in spec.placements:
                offers = ", ".join(spec.placements)
                raise WhatIfError(f"{platform} does not offer placement {placement!r}; it offers {offers}")
            for opt in options:
                row = system_row(w, platform, opt, hw, system)
                row["sweep_value"] = None if value is None else str(value)
                rows.append(row)
    frame = size_servers(pl.DataFrame(rows, infer_schema_length=None), hw, coef)
    pred = predict_frame(frame, hw, coef)
    best = (
        pl.col("throughput_eps") == pl.col("throughput_eps").max().over("sweep_value", "platform")
    ) & pl.col("fits")
    pred = pred.with_columns(best.fill_null(False).alias("default_placement"))
    return Answer(_with_alternatives(pred, frame, hw, coef))


def _with_alternatives(
    pred: pl.DataFrame, frame: pl.DataFrame, hw: HardwareCatalog, coef: Coefficients
) -> pl.DataFrame:
    """The answer's range over the alternatives to its defaulted software inputs, and the scenarios under
    which another placement would be the best on its platform (workload_model.alternatives)."""
    base = pred["throughput_eps"].fill_null(np.nan).to_numpy()
    alt = alternatives.evaluate(frame, base, hw, coef)
    group = pred.select(pl.concat_str([pl.col("sweep_value").fill_null(""), "platform"], separator="|"))
    flips = alternatives.flips(
        alt,
        group.to_series().to_numpy(),
        pred["default_placement"].to_numpy(),
        pred["fits"].fill_null(False).to_numpy(),
        np.ones(pred.height),
        pred["placement"].to_numpy(),
    )
    return pl.concat([pred, alternatives.summary(alt, base)], how="horizontal").with_columns(flips)


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
            res: row[f"{role}_{res}_util"] for res in MODELLED if row.get(f"{role}_{res}_util") is not None
        }
        for role in ROLES
        if counts[role]
    }
