"""The night's hardware-fit answers: one workload per model family of the fleet, every family x objective x
option ranked (pipelines.lib.analysis.recommend), with the fleet's observed medians where the fleet ran that
workload. Families are answered in batches, one model evaluation per batch, so a day of 20,000 model
names costs time linear in them and memory bounded by the batch."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import polars as pl

from pipelines.lib.analysis.recommend import (
    GROUP,
    OBJECTIVES,
    OBSERVED_KEYS,
    Correction,
    Fleet,
    fit_correction,
    options_of,
    ranked_of,
)
from workload_model import fields
from workload_model.catalog import HardwareCatalog, ModelSpec
from workload_model.model import DEFAULT, Coefficients
from workload_model.scalars import as_float
from workload_model.sizing import workload_of_model


def fleet_workloads(fleet: Fleet, models: dict[str, ModelSpec]) -> dict[str, dict[str, Any]]:
    """One workload per model family in the fleet: its catalog shape, or the family's most common one (the
    first of equally common ones in the shape's order) with its median batch per platform it ran on."""
    runs = fleet.runs
    shape = [k for k in fields.workload_keys()[1:] if k in runs.columns]
    common = (
        runs.group_by(["model_name", *shape])
        .len()
        .sort(["model_name", "len", *shape], descending=[False, True, *[False] * len(shape)], nulls_last=True)
        .group_by("model_name", maintain_order=True)
        .first()
    )
    batches = (
        runs.group_by("model_name", "platform")
        .agg(pl.col("batch_size").median())
        .group_by("model_name")
        .agg(pl.struct("platform", "batch_size").alias("batches"))
    )
    out = {}
    for row in common.join(batches, on="model_name").sort("model_name").iter_rows(named=True):
        name = row["model_name"]
        if name in models:
            out[name] = workload_of_model(models[name])
            continue
        out[name] = {
            "model_name": name,
            **{k: row[k] for k in shape},
            "batch_map": {b["platform"]: int(b["batch_size"]) for b in sorted(row["batches"], key=str)},
        }
    return out


def never_ran(workload: dict[str, Any], fleet: Fleet) -> str | None:
    """Why the fleet's observations do not describe this workload (its model family never ran, or a shape
    field lies outside what the family's runs cover), or None when they do."""
    name = workload.get("model_name")
    family = fleet.family(name) if name else fleet.runs.clear()
    if family.is_empty():
        return f"the fleet never ran {name or 'this workload'}"
    for f in fields.shape_fields():
        v = workload.get(f)
        if v is None or f not in family.columns or family[f].null_count() == family.height:
            continue
        seen = family[f].drop_nulls()
        if family.schema[f] == pl.String:
            if v not in set(seen.to_list()):
                return f"the fleet never ran {name} with {f} {v}"
            continue
        low, high = as_float(seen.min()), as_float(seen.max())
        if not low - 1e-9 <= float(v) <= high + 1e-9:
            return f"the fleet never ran {name} with {f} {v:g} (its runs: {low:g}-{high:g})"
    return None


def observed(res: pl.DataFrame, fleet: Fleet, workload: dict[str, Any] | None = None) -> pl.DataFrame:
    """Attach the fleet's median throughput for each option's model, platform, placement, trainer count and
    batch; with ``workload``, only where the fleet ran that workload (``observed_note`` says why not)."""
    return observed_of(res.with_columns(pl.lit(0).alias(GROUP)), fleet, [workload]).drop(GROUP)


def observed_of(res: pl.DataFrame, fleet: Fleet, workloads: Sequence[dict[str, Any] | None]) -> pl.DataFrame:
    """``observed`` for the rows of several workloads (``GROUP``)."""
    why = {i: never_ran(w, fleet) if w is not None else None for i, w in enumerate(workloads)}
    med = fleet.medians().with_columns(pl.col(k).cast(res.schema[k]) for k in ("n_trainers", "batch_size"))
    note = pl.col(GROUP).replace_strict(why, return_dtype=pl.String)
    return res.join(med, on=list(OBSERVED_KEYS), how="left", maintain_order="left").with_columns(
        pl.when(note.is_null()).then(pl.col("observed_median_eps")).alias("observed_median_eps"),
        pl.when(note.is_null())
        .then(pl.col("n_observed_runs").fill_null(0))
        .otherwise(0)
        .alias("n_observed_runs"),
        note.alias("observed_note"),
    )


FAMILIES_PER_BATCH = 100  # model families evaluated together: the batch bounds the night's memory


def fleet_recommendations(
    fleet: Fleet,
    hw: HardwareCatalog,
    models: dict[str, ModelSpec],
    correction: Correction,
    coef: Coefficients = DEFAULT,
) -> pl.DataFrame:
    """Every model family of the fleet x objective x option, ranked; families evaluated in batches."""
    workloads = list(fleet_workloads(fleet, models).values())
    parts = []
    for start in range(0, len(workloads), FAMILIES_PER_BATCH):
        batch = workloads[start : start + FAMILIES_PER_BATCH]
        opts = options_of(batch, hw, fleet, correction, None, coef)
        ranked = [observed_of(ranked_of(opts, objective, batch), fleet, batch) for objective in OBJECTIVES]
        # each family's objectives together, as the families are ordered
        parts.append(pl.concat(ranked).sort(GROUP, maintain_order=True).drop(GROUP))
    return pl.concat(parts, how="diagonal_relaxed", rechunk=False) if parts else pl.DataFrame()


def cached_correction(home, hw: HardwareCatalog) -> tuple[Fleet, Correction, Coefficients, bool]:
    """The data home's fleet, its fleet correction and the model fit it was fitted with: fitted once per
    change of the lake's runs, the hardware catalog, the model fit, the code or the libraries, and read
    back after that by the night and by every `fleet recommend` (fleet, correction, coefficients, reused).
    The fit's threads are capped to the cores this process may use."""
    import numpy
    import sklearn
    from threadpoolctl import threadpool_limits

    from pipelines.lib.analysis.fit import fit_path, load_fit
    from pipelines.lib.storage import cache, lake

    coef = load_fit(home).coef
    fleet = Fleet.from_runs(lake.read_table(home, "runs"), hw)
    version = cache.key(
        cache.lake_version(home, ["runs"]),
        cache.files_version([home.user_catalog_dir / "hardware.yaml", fit_path(home)]),
        cache.code_version("workload_model", "synthetic_fleet", "pipelines/lib", "schemas"),
        f"sklearn {sklearn.__version__} numpy {numpy.__version__}",
    )

    def compute() -> Correction:
        with threadpool_limits(limits=len(os.sched_getaffinity(0))):
            return fit_correction(fleet, hw, coef)

    correction, reused = cache.cached_object(home, "fleet_correction", version, compute)
    return fleet, correction, coef, reused


def fleet_recommendations_cached(home, hw: HardwareCatalog) -> tuple[pl.DataFrame, dict, bool]:
    """``fleet_recommendations`` for the data home's fleet with the data home's model fit (if any),
    recomputed only when what it reads changed (the lake's runs, the user's catalogs, the model fit, the
    code): (recommendations, the correction's figures, reused)."""
    from threadpoolctl import threadpool_limits

    from pipelines.lib.analysis.fit import fit_path
    from pipelines.lib.contracts import contract
    from pipelines.lib.storage import cache
    from workload_model.catalog import load_models

    models_path = home.user_catalog_dir / "models.yaml"
    version = cache.key(
        cache.lake_version(home, ["runs"]),
        cache.files_version([home.user_catalog_dir / "hardware.yaml", models_path, fit_path(home)]),
        cache.code_version("workload_model", "synthetic_fleet", "pipelines/lib", "schemas"),
    )
    computed = []

    def compute() -> dict[str, pl.DataFrame]:
        computed.append(True)
        fleet, correction, coef, _ = cached_correction(home, hw)
        with threadpool_limits(limits=len(os.sched_getaffinity(0))):  # the correction's predictions
            recs = fleet_recommendations(fleet, hw, load_models(models_path, lenient=True), correction, coef)
        c = contract("recommendations")
        figures = {
            "note": correction.note,
            "cv_mdape_corrected": correction.cv_mdape_corrected,
            "cv_mdape_analytical": correction.cv_mdape_analytical,
            "cv_band_coverage": correction.cv_band_coverage,
            "n_runs": correction.n_runs,
        }
        return {
            "recommendations": c.conform(recs if recs.height else c.empty_frame()),
            "correction": pl.DataFrame(
                [figures], schema={k: (pl.String if k == "note" else pl.Float64) for k in figures}
            ),
        }

    frames = cache.cached_frames(home, "recommendations", version, compute)
    figures = frames["correction"].row(0, named=True)
    figures["n_runs"] = int(figures["n_runs"] or 0)
    return frames["recommendations"], figures, not computed
