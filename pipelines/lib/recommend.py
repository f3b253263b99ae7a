"""Hardware-fit recommendations: every platform x placement for a workload, with fit, a P10/P50/P90
throughput band, throughput per watt, the bottleneck, a counterfactual, and the choice under an objective.

The analytical model (synthetic_fleet.model) predicts; a scikit-learn model fitted on the observed fleet's
runs corrects it (log residuals, quantile models for the band), with its error measured by cross-validation
grouped by workload (leave one model family out). With too few runs the answer rests on the analytical
model alone and says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import polars as pl

from synthetic_fleet.catalog import HardwareCatalog, ModelSpec
from synthetic_fleet.model import DEFAULT, Coefficients, predict_frame

OBJECTIVES = ("throughput", "perf_per_watt")
MIN_RUNS = 60  # fewer observed runs than this: no correction model
BAND_SAMPLES = 48  # coefficient draws for the analytical band
COEF_SPREAD = 0.15  # lognormal sigma of the efficiency coefficients (anchors note §5C ranges)
SAMPLED = (
    "eta_c_cpu",
    "eta_c_gpu",
    "eta_hbm",
    "eta_net",
    "eta_ps_dram",
    "eta_dram",
    "gpu_table_overhead_s",
    "host_copy_gbps",
    "kappa",
)
FEATURES = (
    "n_dense_features",
    "n_sparse_features",
    "n_tables",
    "embedding_dim",
    "embedding_gb",
    "mean_lookups_per_table",
    "batch_size",
    "n_trainers",
    "n_sparse_ps",
    "n_dense_ps",
    "n_readers",
)
WORKLOAD_FIELDS = (
    "model_name",
    "n_dense_features",
    "n_sparse_features",
    "n_tables",
    "embedding_dim",
    "embedding_gb",
    "mean_lookups_per_table",
    "lookup_power_law_alpha",
    "bottom_mlp",
    "top_mlp",
    "interaction",
)


# ------------------------------------------------------------------------------------- fleet context


@dataclass
class Fleet:
    """What the observed fleet tells the recommender: runs to learn from and the counts teams run."""

    runs: pl.DataFrame  # succeeded runs with throughput and a full workload, on modelled platforms

    @classmethod
    def from_runs(cls, runs: pl.DataFrame, hw: HardwareCatalog) -> Fleet:
        modelled = [p for p, spec in hw.platforms.items() if spec.modelled]
        usable = runs.filter(
            (pl.col("status") == "succeeded")
            & (pl.col("throughput_eps") > 0)
            & pl.col("platform").is_in(modelled)
            & pl.col("placement").is_not_null()
            & pl.all_horizontal(pl.col(list(FEATURES)).is_not_null())
        )
        return cls(usable)

    def count_range(self, platform: str, column: str) -> tuple[int, int] | None:
        r = self.runs.filter(pl.col("platform") == platform)
        return (int(r[column].min()), int(r[column].max())) if r.height else None

    def modal(self, model_name: str, platform: str, column: str) -> int | None:
        r = self.runs.filter((pl.col("platform") == platform) & (pl.col("model_name") == model_name))
        if not r.height:
            r = self.runs.filter(pl.col("platform") == platform)
        if not r.height:
            return None
        return int(r[column].mode().sort()[0])


# ------------------------------------------------------------------------------------ correction model


@dataclass
class Correction:
    """A residual model on log(observed / analytical P50), with its grouped cross-validated error."""

    models: dict[float, Any] | None
    options: list[str]  # option order of the one-hot features the models were fitted on
    n_runs: int
    n_groups: int
    cv_mdape_corrected: float | None  # median absolute % error, corrected, on held-out model families
    cv_mdape_analytical: float | None  # the same for the analytical model alone
    cv_band_coverage: float | None  # share of held-out runs inside the corrected P10-P90
    note: str

    @property
    def active(self) -> bool:
        return self.models is not None


def _feature_frame(frame: pl.DataFrame, p50: np.ndarray, options: list[str]) -> np.ndarray:
    """Numeric workload/system features, log of the analytical P50, and one indicator per known option
    (platform/placement, in the fixed order ``options``; an option not among them gets all zeros)."""
    num = frame.select([pl.col(c).cast(pl.Float64) for c in FEATURES]).to_numpy()
    cat = frame.select((pl.col("platform") + "/" + pl.col("placement")).alias("option")).to_series()
    onehot = (
        np.stack([(cat == o).to_numpy() for o in options], axis=1).astype(float)
        if options
        else np.empty((len(cat), 0))
    )
    return np.hstack([num, np.log(np.maximum(p50, 1e-9))[:, None], onehot])


def fit_correction(fleet: Fleet, hw: HardwareCatalog, coef: Coefficients = DEFAULT) -> Correction:
    """Fit quantile residual models (P10, P50, P90) on the fleet's runs; cross-validate by model family."""
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.model_selection import GroupKFold

    runs = fleet.runs
    p50 = (
        predict_frame(runs, hw, coef)["throughput_eps"].fill_null(np.nan).to_numpy()
        if runs.height
        else np.array([])
    )
    runs = runs.filter(pl.Series(np.isfinite(p50) & (p50 > 0))) if runs.height else runs
    p50 = p50[np.isfinite(p50) & (p50 > 0)]
    groups = runs["model_name"].to_numpy() if runs.height else np.array([])
    n_groups = len(set(groups))
    if runs.height < MIN_RUNS or n_groups < 2:
        return Correction(
            None,
            [],
            runs.height,
            n_groups,
            None,
            None,
            None,
            f"analytical model only: {runs.height} usable fleet runs in {n_groups} model families "
            f"(a correction needs {MIN_RUNS} runs in 2+ families)",
        )
    y = np.log(runs["throughput_eps"].to_numpy() / p50)
    options = sorted((runs["platform"] + "/" + runs["placement"]).unique().to_list())
    X = _feature_frame(runs, p50, options)

    def model(q: float):
        return HistGradientBoostingRegressor(
            loss="quantile", quantile=q, max_iter=150, learning_rate=0.08, min_samples_leaf=10, random_state=0
        )

    errors_c, errors_a, inside = [], [], []
    for train, test in GroupKFold(n_splits=min(n_groups, 5)).split(X, y, groups):
        fitted = {q: model(q).fit(X[train], y[train]) for q in (0.1, 0.5, 0.9)}
        lo, mid, hi = (fitted[q].predict(X[test]) for q in (0.1, 0.5, 0.9))
        errors_c.append(np.abs(np.expm1(mid - y[test])))
        errors_a.append(np.abs(np.expm1(-y[test])))
        inside.append((y[test] >= np.minimum(lo, mid)) & (y[test] <= np.maximum(hi, mid)))
    models = {q: model(q).fit(X, y) for q in (0.1, 0.5, 0.9)}
    c, a, cov = (
        float(np.median(np.concatenate(errors_c))),
        float(np.median(np.concatenate(errors_a))),
        float(np.mean(np.concatenate(inside))),
    )
    return Correction(
        models,
        options,
        runs.height,
        n_groups,
        c,
        a,
        cov,
        f"analytical model corrected on {runs.height} fleet runs; leave-one-model-family-out error "
        f"{c:.1%} (analytical alone {a:.1%})",
    )


# -------------------------------------------------------------------------------------- candidates


def workload_of_model(spec: ModelSpec) -> dict[str, Any]:
    w = spec.workload("cpu")
    return {k: w[k] for k in WORKLOAD_FIELDS} | {
        "batch_cpu": spec.batch_size.get("cpu"),
        "batch_gpu": max(spec.batch_size.values()),
    }


def candidates(
    workload: dict[str, Any], hw: HardwareCatalog, fleet: Fleet, platforms: Iterable[str] | None = None
) -> pl.DataFrame:
    """One system per modelled platform x placement, sized as a planner would (counts the fleet runs)."""
    name = workload.get("model_name") or "(custom)"
    rows = []
    for platform, spec in sorted(hw.platforms.items()):
        if not spec.modelled or (platforms and platform not in platforms):
            continue
        on_cpu = spec.gpus == 0
        hbm_usable = spec.gpus * (spec.hbm_gb_per_gpu or 0) * (1 - hw.hbm_reserve)
        for placement in spec.placements:
            if placement == "hybrid" and workload["embedding_gb"] <= hbm_usable:
                continue  # the tables fit HBM: hybrid would be gpu_hbm under another name
            row = {k: workload[k] for k in WORKLOAD_FIELDS if k in workload}
            row.update(
                platform=platform,
                placement=placement,
                batch_size=int(
                    workload.get("batch_cpu" if on_cpu else "batch_gpu") or workload.get("batch_size") or 512
                ),
            )
            if on_cpu:
                row.update(
                    n_trainers=fleet.modal(name, platform, "n_trainers") or 16,
                    n_dense_ps=fleet.modal(name, platform, "n_dense_ps") or 2,
                )
            else:
                row.update(n_trainers=1, n_dense_ps=0)
            row.update(n_readers=0, n_sparse_ps=0)
            rows.append(row)
    frame = pl.DataFrame(rows, infer_schema_length=None)
    return _size_servers(frame, hw)


def _size_servers(frame: pl.DataFrame, hw: HardwareCatalog, coef: Coefficients = DEFAULT) -> pl.DataFrame:
    """Remote PS: capacity at half fill, and enough that PS network load stays under 70% of a trainer's;
    readers: enough for the predicted throughput with 25% headroom."""
    remote = pl.col("placement") == "remote_ps"
    ample = predict_frame(
        frame.with_columns(
            pl.when(remote).then(256).otherwise(0).cast(pl.Int32).alias("n_sparse_ps"),
            pl.lit(4096, pl.Int32).alias("n_readers"),
        ),
        hw,
        coef,
    )
    u_ps = np.maximum(
        ample["sparse_ps_net_bw_util"].fill_null(0).to_numpy(),
        ample["sparse_ps_mem_bw_util"].fill_null(0).to_numpy(),
    )
    u_tr = np.maximum(ample["trainer_net_bw_util"].fill_null(0).to_numpy(), 0.05)
    by_bw = np.ceil(u_ps * 256 / (0.7 * u_tr))
    by_cap = np.ceil(2 * frame["embedding_gb"].to_numpy() / (hw.ps_server_gb * 0.5))
    n_ps = np.where(
        frame["placement"].to_numpy() == "remote_ps",
        np.clip(np.maximum(by_bw, by_cap), 1, 4 * hw.remote_ps_max_servers),
        0,
    )
    thr = ample["throughput_eps"].fill_null(0).to_numpy()
    n_rd = np.ceil(1.25 * thr * ample["input_bytes_per_example"].to_numpy() / (coef.reader_gbps * 1e9)).clip(
        1, None
    )
    return frame.with_columns(
        pl.Series("n_sparse_ps", n_ps.astype(np.int32)), pl.Series("n_readers", n_rd.astype(np.int32))
    )


# ------------------------------------------------------------------------------------ predictions


def analytic_band(
    frame: pl.DataFrame, hw: HardwareCatalog, coef: Coefficients = DEFAULT, seed: int = 0
) -> np.ndarray:
    """(rows, 3) P10/P50/P90 throughput from coefficient draws (one model evaluation per draw)."""
    rng = np.random.default_rng(seed)
    draws = [
        predict_frame(
            frame,
            hw,
            replace(
                coef,
                **{
                    k: getattr(coef, k) * float(rng.lognormal(0, COEF_SPREAD))
                    for k in SAMPLED
                    if k != "kappa"
                },
                kappa=float(rng.uniform(0.1, 0.6)),
            ),
        )["throughput_eps"]
        .fill_null(np.nan)
        .to_numpy()
        for _ in range(BAND_SAMPLES)
    ]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows that do not fit are all-NaN
        return np.nanpercentile(np.vstack(draws), [10, 50, 90], axis=0).T


COUNTERFACTUAL = {
    "mlp_compute": "fp16 tensor-core MLPs (4x the MLP rate)",
    "kernel_overhead": "one batched kernel for all {n_tables} tables",
    "gpu_communication": "NVLink-class GPU links (150 GB/s)",
    "embedding_lookup": "fp16 embedding rows (half the bytes moved)",
    "trainer_network": "a 100 GbE NIC on every server",
    "ps_network": "a 100 GbE NIC on every server",
    "ps_memory_bandwidth": "twice the sparse parameter servers",
    "dense_ps_network": "twice the dense parameter servers",
    "readers": "twice the readers",
}


def _counterfactual_throughput(
    frame: pl.DataFrame, bottleneck: np.ndarray, hw: HardwareCatalog, coef: Coefficients
) -> np.ndarray:
    """Throughput with the bottleneck relieved as COUNTERFACTUAL says (one model evaluation per kind)."""
    out = np.full(frame.height, np.nan)

    def upgraded(**field: float) -> HardwareCatalog:
        ((name, floor),) = field.items()
        return replace(
            hw,
            platforms={
                k: replace(v, **{name: max(getattr(v, name) or 0, floor)}) for k, v in hw.platforms.items()
            },
        )

    fast_nic, nvlink = upgraded(nic_gb_per_s=12.5), upgraded(gpu_link_gb_per_s=150)
    variants = {
        "mlp_compute": (frame, hw, replace(coef, eta_c_gpu=coef.eta_c_gpu * 4, eta_c_cpu=coef.eta_c_cpu * 4)),
        "kernel_overhead": (frame, hw, replace(coef, gpu_table_overhead_s=coef.gpu_table_overhead_s / 8)),
        "gpu_communication": (frame, nvlink, coef),
        "embedding_lookup": (
            frame.with_columns((pl.col("embedding_dim") // 2).alias("embedding_dim")),
            hw,
            coef,
        ),
        "trainer_network": (frame, fast_nic, coef),
        "ps_network": (frame, fast_nic, coef),
        "ps_memory_bandwidth": (frame.with_columns(pl.col("n_sparse_ps") * 2), hw, coef),
        "dense_ps_network": (frame.with_columns(pl.col("n_dense_ps") * 2), hw, coef),
        "readers": (frame.with_columns(pl.col("n_readers") * 2), hw, coef),
    }
    for kind, (f, h, c) in variants.items():
        mask = bottleneck == kind
        if mask.any():
            out[mask] = (
                predict_frame(f.filter(pl.Series(mask)), h, c)["throughput_eps"].fill_null(np.nan).to_numpy()
            )
    return out


def recommend(
    workload: dict[str, Any],
    hw: HardwareCatalog,
    fleet: Fleet,
    correction: Correction,
    objective: str = "throughput",
    platforms: Iterable[str] | None = None,
    coef: Coefficients = DEFAULT,
) -> pl.DataFrame:
    """Every option for the workload, ranked under the objective; the first fitting one is recommended."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; valid: {', '.join(OBJECTIVES)}")
    cand = candidates(workload, hw, fleet, platforms)
    if cand.is_empty():
        raise ValueError(
            "no modelled platform to compare" + (f" among {', '.join(platforms)}" if platforms else "")
        )
    pred = predict_frame(cand, hw, coef)
    band = analytic_band(cand, hw, coef)
    band[:, 1] = (
        pred["throughput_eps"].fill_null(np.nan).to_numpy()
    )  # the P50 the correction was fitted against
    fits = pred["fits"].fill_null(False).to_numpy()
    if correction.active:
        X = _feature_frame(cand, np.where(np.isfinite(band[:, 1]), band[:, 1], 1.0), correction.options)
        lo, mid, hi = (correction.models[q].predict(X) for q in (0.1, 0.5, 0.9))
        band = np.column_stack(
            [
                band[:, 0] * np.exp(np.minimum(lo, mid)),
                band[:, 1] * np.exp(mid),
                band[:, 2] * np.exp(np.maximum(hi, mid)),
            ]
        )
    band = np.where(fits[:, None], band, np.nan)
    bottleneck = pred["bottleneck"].fill_null("").to_numpy().astype(str)
    cf = (
        _counterfactual_throughput(cand, bottleneck, hw, coef)
        / pred["throughput_eps"].fill_null(np.nan).to_numpy()
    )
    provisioned = pred["provisioned_w"].to_numpy()
    res = pred.select(
        "platform",
        "placement",
        "tier",
        "required_gb",
        "capacity_gb",
        "headroom",
        "fits",
        "shortfall_gb",
        "bottleneck",
        "n_trainers",
        "n_sparse_ps",
        "n_dense_ps",
        "n_readers",
        "batch_size",
        "provisioned_w",
        "power_w",
    ).with_columns(
        pl.Series("p10_throughput_eps", band[:, 0]).fill_nan(None),
        pl.Series("p50_throughput_eps", band[:, 1]).fill_nan(None),
        pl.Series("p90_throughput_eps", band[:, 2]).fill_nan(None),
        pl.Series("eps_per_w", band[:, 1] / provisioned).fill_nan(None),
        pl.Series("counterfactual_gain", cf).fill_nan(None),
        pl.lit(objective).alias("objective"),
        pl.lit(workload.get("model_name") or "(custom)").alias("model_name"),
        pl.lit("analytical model + fleet correction" if correction.active else "analytical model only").alias(
            "basis"
        ),
        pl.lit(correction.cv_mdape_corrected, pl.Float64).alias("cv_mdape"),
    )
    res = res.with_columns(_count_flags(res, fleet, hw))
    score = "p50_throughput_eps" if objective == "throughput" else "eps_per_w"
    # Ties (hybrid equals gpu_hbm when the tables fit HBM) go to the simpler placement.
    simpler = pl.col("placement").replace_strict(
        {"gpu_hbm": 0, "system_memory": 1, "remote_ps": 2, "hybrid": 3}, default=4
    )
    res = (
        res.with_columns(pl.col(score).round(6).alias("_score"), simpler.alias("_simpler"))
        .sort(["fits", "_score", "_simpler"], descending=[True, True, False], nulls_last=True)
        .drop("_score", "_simpler")
        .with_row_index("rank", offset=1)
    )
    res = res.with_columns(((pl.col("rank") == 1) & pl.col("fits")).alias("recommended"))
    return res.with_columns(_explain(res, score, workload))


def _count_flags(res: pl.DataFrame, fleet: Fleet, hw: HardwareCatalog) -> pl.Expr:
    """For CPU clusters: which counts fall outside what the fleet has run on that platform."""
    parts = []
    cpu_platforms = [p for p in res["platform"].unique().to_list() if hw.platforms[p].gpus == 0]
    for col, label in (
        ("n_trainers", "trainers"),
        ("n_sparse_ps", "sparse PS"),
        ("n_dense_ps", "dense PS"),
        ("n_readers", "readers"),
    ):
        for platform in cpu_platforms:
            rng = fleet.count_range(platform, col)
            if rng is None:
                continue
            lo, hi = rng
            parts.append(
                pl.when((pl.col("platform") == platform) & ((pl.col(col) < lo) | (pl.col(col) > hi)))
                .then(pl.format(f"{label} {{}} outside the fleet's {lo}-{hi}", pl.col(col)))
                .otherwise(None)
            )
    if not parts:
        return pl.lit(None, pl.String).alias("count_flags")
    return pl.concat_str(parts, separator="; ", ignore_nulls=True).replace("", None).alias("count_flags")


BOTTLENECK_TEXT = {
    "mlp_compute": "MLP compute",
    "kernel_overhead": "per-table GPU kernel overhead",
    "gpu_communication": "GPU-GPU communication",
    "embedding_lookup": "embedding lookups",
    "trainer_network": "the trainers' network",
    "ps_network": "the parameter servers' network",
    "ps_memory_bandwidth": "parameter-server memory bandwidth",
    "dense_ps_network": "dense-PS synchronisation",
    "readers": "the readers",
}


def _explain(res: pl.DataFrame, score: str, workload: dict[str, Any]) -> pl.Expr:
    best = res.filter(pl.col("fits")).row(0, named=True) if res["fits"].any() else None
    cf_text = pl.col("bottleneck").replace_strict(
        {k: v.format(n_tables=workload.get("n_tables", "")) for k, v in COUNTERFACTUAL.items()}, default=""
    )
    fits_text = pl.format(
        "{}/{}: {} ex/s (P10-P90 {}-{}), {} ex/s/W; limited by {}; {} would give {}x",
        "platform",
        "placement",
        pl.col("p50_throughput_eps").round(0).cast(pl.Int64),
        pl.col("p10_throughput_eps").round(0).cast(pl.Int64),
        pl.col("p90_throughput_eps").round(0).cast(pl.Int64),
        pl.col("eps_per_w").round(1),
        pl.col("bottleneck").replace_strict(BOTTLENECK_TEXT, default=pl.col("bottleneck")),
        cf_text,
        pl.col("counterfactual_gain").round(2),
    )
    if best is not None:
        rel = pl.col(score) / best[score]
        fits_text = (
            pl.when(pl.col("recommended"))
            .then(pl.concat_str([pl.lit("Recommended. "), fits_text, pl.lit(".")]))
            .otherwise(
                pl.concat_str(
                    [
                        fits_text,
                        pl.lit("; "),
                        (rel * 100).round(0).cast(pl.Int64).cast(pl.String),
                        pl.lit("% of the best."),
                    ]
                )
            )
        )
    no_fit = pl.format(
        "{}/{}: the tables ({} GB) do not fit {} ({} GB usable); {} GB short.",
        "platform",
        "placement",
        pl.col("required_gb").round(1),
        "tier",
        pl.col("capacity_gb").round(1),
        pl.col("shortfall_gb").round(1),
    )
    return pl.when(pl.col("fits")).then(fits_text).otherwise(no_fit).alias("explanation")


def fleet_workloads(fleet: Fleet, models: dict[str, ModelSpec]) -> dict[str, dict[str, Any]]:
    """One workload per model family in the fleet: its catalog shape, or the family's most common one."""
    out = {}
    for name in sorted(fleet.runs["model_name"].unique().to_list()):
        if name in models:
            out[name] = workload_of_model(models[name])
            continue
        fam = fleet.runs.filter(pl.col("model_name") == name)
        common = fam.group_by(list(WORKLOAD_FIELDS[1:])).len().sort("len", descending=True).row(0, named=True)
        cpu_b = fam.filter(pl.col("platform") == "cpu")["batch_size"].median()
        gpu_b = fam.filter(pl.col("platform") != "cpu")["batch_size"].median()
        out[name] = {
            "model_name": name,
            **{k: common[k] for k in WORKLOAD_FIELDS[1:]},
            "batch_cpu": int(cpu_b or fam["batch_size"].median()),
            "batch_gpu": int(gpu_b or fam["batch_size"].median()),
        }
    return out


def observed(res: pl.DataFrame, fleet: Fleet) -> pl.DataFrame:
    """Attach the fleet's median throughput for each option's model, platform, placement and trainer count."""
    med = fleet.runs.group_by("model_name", "platform", "placement", "n_trainers").agg(
        pl.col("throughput_eps").median().alias("observed_median_eps"),
        pl.len().cast(pl.Int64).alias("n_observed_runs"),
    )
    return res.join(
        med.with_columns(pl.col("n_trainers").cast(res.schema["n_trainers"])),
        on=["model_name", "platform", "placement", "n_trainers"],
        how="left",
    ).with_columns(pl.col("n_observed_runs").fill_null(0))


def fleet_recommendations(
    fleet: Fleet, hw: HardwareCatalog, models: dict[str, ModelSpec], correction: Correction
) -> pl.DataFrame:
    """Every model family of the fleet x objective x option, ranked."""
    parts = [
        observed(recommend(w, hw, fleet, correction, objective), fleet)
        for w in fleet_workloads(fleet, models).values()
        for objective in OBJECTIVES
    ]
    return pl.concat(parts, how="diagonal_relaxed") if parts else pl.DataFrame()
