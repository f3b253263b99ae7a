"""The closed loop from telemetry: the workload model's shared coefficients fitted to the runs a data home
observed (`fleet calibrate --fit`), checked by leave-one-platform-out, stored in the data home and used by
`fleet whatif` and `fleet recommend`, which say which fit they answer with and its held-out error.

A run is usable when it succeeded with a throughput on a modelled platform of the home's catalog and its
workload is known: its own columns, else its model's entry in the home's model catalog (so MLPerf runs
ingested with `fleet ingest --source mlperf` are usable once examples/mlperf/ is copied into the catalog).
The coefficients fitted are the shared ones the runs are sensitive to (at most MAX_FITTED): the
elasticity of the predicted throughput to each coefficient decides, so a CPU-only fleet does not move the
GPU coefficients.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipelines.lib import fileio
from pipelines.lib.paths import DataHome
from workload_model.catalog import HardwareCatalog, ModelSpec
from workload_model.model import DEFAULT, Coefficients, predict_frame

MAX_FITTED = 6  # coefficients one fit moves at most (a handful of shared physics, not one per platform)
MIN_ELASTICITY = 0.05  # median |d log throughput / d log coefficient| a coefficient needs to be fitted
MIN_RUNS = 10  # fewer usable runs than this: no fit
SHARES = ("eta_", "kappa")  # coefficients that are shares of a peak: at most 1
SPAN = 30.0  # other coefficients move at most this factor from where the fit starts
# Weight per coefficient (times the square root of the runs) of a weak pull toward where the fit starts:
# runs that say little about a coefficient leave it near its calibrated value instead of at a bound.
PRIOR = 0.05


def fit_path(home: DataHome) -> Path:
    return home.root / "model" / "fit.json"


def bounds(name: str, start: Coefficients) -> tuple[float, float]:
    """Physical bounds of a coefficient for a fit: shares of a peak in (0, 1], the rest within SPAN of the
    starting value."""
    v = getattr(start, name)
    if name.startswith(SHARES):
        return 0.005, 1.0
    return v / SPAN, v * SPAN


def fit_coefficients(
    rows: pl.DataFrame, observed: np.ndarray, hw: HardwareCatalog, start: Coefficients, names: tuple[str, ...]
) -> Coefficients:
    """Least squares on log(predicted / observed) over the rows, of the shared coefficients ``names``
    (log-parametrised within their bounds; a robust loss so one odd run does not drag the rest; a weak pull
    toward the starting values, PRIOR)."""
    from scipy.optimize import least_squares

    lo, hi = (np.log([bounds(k, start)[i] for k in names]) for i in (0, 1))
    x0 = np.clip(np.log([getattr(start, k) for k in names]), lo, hi)

    def coef_at(x: np.ndarray) -> Coefficients:
        return replace(start, **{k: float(np.exp(v)) for k, v in zip(names, x, strict=True)})

    pull = PRIOR * np.sqrt(rows.height)

    def residuals(x: np.ndarray) -> np.ndarray:
        p = predict_frame(rows, hw, coef_at(x))["throughput_eps"].fill_null(np.nan).to_numpy()
        fit = np.where(np.isfinite(p) & (p > 0), np.log(np.maximum(p, 1.0) / observed), 10.0)
        return np.concatenate([fit, pull * (x - x0)])

    sol = least_squares(
        residuals,
        x0,
        bounds=(lo, hi),
        method="trf",
        loss="soft_l1",
        f_scale=0.3,
        diff_step=1e-3,
        max_nfev=200,
    )
    return coef_at(sol.x)


def sensitive(rows: pl.DataFrame, hw: HardwareCatalog, start: Coefficients) -> tuple[str, ...]:
    """The coefficients the runs' predicted throughput responds to, most first (at most MAX_FITTED)."""
    base = np.log(predict_frame(rows, hw, start)["throughput_eps"].fill_null(np.nan).to_numpy())
    step = np.log(1.1)
    score = {}
    for f in fields(Coefficients):
        v = getattr(start, f.name)
        moved = min(v * 1.1, 1.0) if f.name.startswith(SHARES) else v * 1.1
        if moved == v:
            continue
        p = predict_frame(rows, hw, replace(start, **{f.name: moved}))["throughput_eps"]
        e = np.abs(np.log(p.fill_null(np.nan).to_numpy()) - base) / (np.log(moved / v) or step)
        score[f.name] = float(np.nanmedian(e)) if np.isfinite(e).any() else 0.0
    ranked = sorted((k for k in score if score[k] >= MIN_ELASTICITY), key=lambda k: -score[k])
    return tuple(ranked[:MAX_FITTED])


def error_factor(ratio: np.ndarray) -> np.ndarray:
    """Symmetric error factor of predicted / observed: 2.0 means off by 2x either way."""
    return np.exp(np.abs(np.log(ratio)))


WORKLOAD_NEEDED = (
    "n_dense_features",
    "n_sparse_features",
    "embedding_gb",
    "bottom_mlp",
    "top_mlp",
    "batch_size",
)


def usable_runs(
    runs: pl.DataFrame, hw: HardwareCatalog, models: dict[str, ModelSpec]
) -> tuple[pl.DataFrame, np.ndarray]:
    """The runs a fit can learn from, as model rows (what a run does not record filled in from its model's
    catalog entry), and their observed throughput."""
    modelled = {p: spec for p, spec in hw.platforms.items() if spec.modelled}
    ok = runs.filter(
        (pl.col("status") == "succeeded")
        & (pl.col("throughput_eps") > 0)
        & pl.col("platform").is_in(list(modelled))
    )
    rows = []
    for r in ok.iter_rows(named=True):  # one dict per run: the model catalog fills what a run lacks
        spec = models.get(r["model_name"])
        gpus = modelled[r["platform"]].gpus
        row = {
            **(spec.workload(r["platform"], gpus) if spec else {}),
            **{k: v for k, v in r.items() if v is not None},
        }
        row.setdefault("placement", "gpu_hbm" if gpus else "system_memory")
        row.setdefault("n_tables", row.get("n_sparse_features"))
        if gpus == 0 and row["placement"] == "system_memory" and row.get("n_trainers"):
            # A synchronous CPU job records its global batch; the model's CPU batch is per trainer.
            row["batch_size"] = max(1, int(row["batch_size"]) // int(row["n_trainers"]))
        if all(row.get(k) is not None for k in WORKLOAD_NEEDED):
            rows.append({**dict.fromkeys(("n_sparse_ps", "n_dense_ps", "n_readers"), 0), **row})
    if not rows:
        return pl.DataFrame(), np.empty(0)
    frame = pl.DataFrame(rows, infer_schema_length=None)
    return frame, frame["throughput_eps"].to_numpy().astype(float)


@dataclass(frozen=True)
class ModelFit:
    """The coefficients `fleet whatif` and `fleet recommend` answer with, and one line naming them."""

    coef: Coefficients
    note: str


def run_fit(home: DataHome, hw: HardwareCatalog, models: dict[str, ModelSpec]) -> dict[str, Any]:
    """Fit the coefficients the home's runs are sensitive to, measure the leave-one-platform-out error
    (fit without a platform's runs, predict them), store the fit in the data home; returns its record."""
    from pipelines.lib.storage import lake

    rows, y = usable_runs(lake.read_table(home, "runs"), hw, models)
    if rows.height < MIN_RUNS:
        raise ValueError(
            f"{rows.height} usable runs in {home.lake_uri} (a fit needs {MIN_RUNS}): succeeded runs with a "
            "throughput on a modelled platform of the catalog, with a workload from the run or its model"
        )
    names = sensitive(rows, hw, DEFAULT)
    coef = fit_coefficients(rows, y, hw, DEFAULT, names)
    platforms = rows["platform"].to_numpy()
    held = np.full(y.size, np.nan)
    for p in np.unique(platforms):  # one fit per held-out platform (a handful), not a loop over runs
        keep = platforms != p
        if keep.sum() >= MIN_RUNS:
            # only what the other platforms' runs can tell: a coefficient they are blind to keeps its default
            train = rows.filter(pl.Series(keep))
            told = tuple(k for k in sensitive(train, hw, DEFAULT) if k in names)
            c = fit_coefficients(train, y[keep], hw, DEFAULT, told) if told else DEFAULT
            held[~keep] = predict_frame(rows.filter(pl.Series(~keep)), hw, c)["throughput_eps"].to_numpy()
    fitted = predict_frame(rows, hw, coef)["throughput_eps"].to_numpy()
    err, held_err = error_factor(fitted / y), error_factor(held / y)
    by_platform = {
        str(p): round(float(np.nanmedian(held_err[platforms == p])), 3)
        for p in np.unique(platforms)
        if np.isfinite(held_err[platforms == p]).any()
    }
    record = {
        "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "runs": int(rows.height),
        "platforms": sorted(set(platforms.tolist())),
        "fitted": {k: getattr(coef, k) for k in names},
        "defaults": {k: getattr(DEFAULT, k) for k in names},
        "in_sample_median_error": float(np.median(err)),
        "held_out_median_error": float(np.nanmedian(held_err)) if np.isfinite(held_err).any() else None,
        "held_out_worst_error": float(np.nanmax(held_err)) if np.isfinite(held_err).any() else None,
        "held_out_by_platform": by_platform,
    }
    fileio.write_text(fit_path(home), json.dumps(record, indent=2))
    return record


def load_fit(home: DataHome) -> ModelFit:
    """The data home's stored fit, else the default coefficients; with one line saying which."""
    path = fit_path(home)
    if not path.exists():
        return ModelFit(
            DEFAULT, "default coefficients (no fit in this data home; `fleet calibrate --fit` makes one)"
        )
    record = json.loads(path.read_text(encoding="utf-8"))
    known = {f.name for f in fields(Coefficients)}
    coef = replace(DEFAULT, **{k: float(v) for k, v in record["fitted"].items() if k in known})
    held = record.get("held_out_median_error")
    error = (
        f"leave-one-platform-out error median {held:.2f}x, worst {record['held_out_worst_error']:.2f}x"
        if held is not None
        else "no held-out error (a single platform)"
    )
    return ModelFit(
        coef,
        f"fit of {record['created_utc']} to {record['runs']} observed runs on {len(record['platforms'])} "
        f"platforms ({', '.join(record['fitted']) or 'nothing sensitive'}); {error} [{path}]",
    )
