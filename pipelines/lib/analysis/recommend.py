"""Hardware-fit recommendations: every platform x placement for a workload, with fit, a P10/P50/P90
throughput band, throughput per watt, the bottleneck, a counterfactual, and the choice under an objective.

The analytical model (workload_model.model) predicts. A scikit-learn model fitted on the observed fleet's
runs may correct it (log residuals); its error is measured by cross-validation grouped by workload (leave
one model family out), and it is applied only to the options where it beats the analytical model there.
The P10-P90 band is conformal: the 10th and 90th percentiles of held-out log residuals of the prediction
actually used, with its coverage measured on held-out model families and shown with every answer. With
too few runs the answer rests on the analytical model alone (band from sampled coefficients, coverage not
measured) and says so.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from pipelines.lib.analysis.recommend_text import GROUP, explain, too_close
from workload_model import alternatives, fields
from workload_model.bottlenecks import BOTTLENECKS
from workload_model.catalog import HardwareCatalog
from workload_model.model import DEFAULT, Coefficients, predict_frame, throughput_draws
from workload_model.sizing import size_servers, system_row

OBJECTIVES = ("throughput", "perf_per_watt")
MIN_RUNS = 60  # fewer observed runs than this: no correction model
MIN_OPTION_RUNS = 30  # the correction is judged (and may be applied) only on options with this many runs
BAND_SAMPLES = 48  # coefficient draws for the analytical band (no fleet history)
# Lognormal sigma of the efficiency coefficients: the spread of achieved-vs-peak shares that published
# DLRM measurements show (paper §V; TorchRec's planner uses fixed efficiencies of the same order).
COEF_SPREAD = 0.15
BAND = (0.1, 0.9)  # the band's nominal quantiles (an 80 % interval)
SAMPLED = (
    "eta_mlp_cpu",
    "eta_mlp_gpu",
    "eta_hbm",
    "eta_net",
    "eta_ps_dram",
    "eta_dram",
    "dispatch_s",
    "fused_launch_s",
    "graph_launch_s",
    "host_copy_gbps",
    "kappa",
)


# ------------------------------------------------------------------------------------- fleet context


OBSERVED_KEYS = ("model_name", "platform", "placement", "n_trainers", "batch_size")


@dataclass
class Fleet:
    """What the observed fleet tells the recommender: runs to learn from and the counts teams run. What it
    is asked per model family or platform is computed once over all runs (a fleet of 20,000 families is
    asked 20,000 times)."""

    runs: pl.DataFrame  # succeeded runs with throughput and a full workload, on modelled platforms
    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    def _once(self, key: Any, make: Callable[[], Any]) -> Any:
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    @classmethod
    def from_runs(cls, runs: pl.DataFrame, hw: HardwareCatalog) -> Fleet:
        modelled = [p for p, spec in hw.platforms.items() if spec.modelled]
        usable = runs.filter(
            (pl.col("status") == "succeeded")
            & (pl.col("throughput_eps") > 0)
            & pl.col("platform").is_in(modelled)
            & pl.col("placement").is_not_null()
            & pl.all_horizontal(pl.col(list(fields.numeric_features())).is_not_null())
        )
        return cls(usable)

    def count_range(self, platform: str, column: str) -> tuple[int, int] | None:
        ranges = self._once(
            ("range", column),
            lambda: {
                p: (int(lo), int(hi))
                for p, lo, hi in self.runs.group_by("platform")
                .agg(pl.col(column).min().alias("lo"), pl.col(column).max().alias("hi"))
                .iter_rows()
            },
        )
        return ranges.get(platform)

    def modal(self, model_name: str, platform: str, column: str) -> int | None:
        """The most common ``column`` (the smallest of equally common ones) of the family's runs on the
        platform, else of every run on it."""
        by_family = self._once(
            ("modal", column), lambda: _modes(self.runs, ["model_name", "platform"], column)
        )
        by_platform = self._once(("modal_all", column), lambda: _modes(self.runs, ["platform"], column))
        return by_family.get((model_name, platform), by_platform.get((platform,)))

    def family(self, model_name: str) -> pl.DataFrame:
        """The runs of one model family (none: an empty frame): a slice of the runs sorted by family."""
        by_family, where = self._once("families", lambda: _by_family(self.runs))
        offset, length = where.get(model_name, (0, 0))
        return by_family.slice(offset, length)

    def medians(self) -> pl.DataFrame:
        """Median throughput and run count per model, platform, placement, trainer count and batch."""
        return self._once(
            "medians",
            lambda: self.runs.group_by(OBSERVED_KEYS).agg(
                pl.col("throughput_eps").median().alias("observed_median_eps"),
                pl.len().cast(pl.Int64).alias("n_observed_runs"),
            ),
        )


def _by_family(runs: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, tuple[int, int]]]:
    by_family = runs.sort("model_name", maintain_order=True)
    spans = (
        by_family.select("model_name")
        .with_row_index("at")
        .group_by("model_name")
        .agg(pl.col("at").min(), pl.len())
    )
    return by_family, {name: (int(at), int(n)) for name, at, n in spans.iter_rows()}


def _modes(runs: pl.DataFrame, keys: list[str], column: str) -> dict[tuple, int]:
    counts = runs.group_by([*keys, column]).len()
    first = (
        counts.sort([*keys, "len", column], descending=[*[False] * len(keys), True, False])
        .group_by(keys, maintain_order=True)
        .first()
    )
    return {tuple(r[:-2]): int(r[-2]) for r in first.select(*keys, column, "len").iter_rows()}


# ------------------------------------------------------------------------------------ correction model


@dataclass
class Correction:
    """What the fleet adds to the analytical model: a residual model on log(observed / analytical), the
    options it is applied to (where it wins in grouped cross-validation), and the conformal band."""

    models: dict[float, Any] | None  # the fitted residual model (P50), None with too little fleet
    options: list[str]  # option order of the one-hot features the model was fitted on
    n_runs: int
    n_groups: int
    cv_mdape_corrected: float | None  # median absolute % error, corrected, on held-out model families
    cv_mdape_analytical: float | None  # the same for the analytical model alone
    cv_band_coverage: float | None  # share of held-out runs inside the band (measured, nested)
    note: str
    applied_options: tuple[str, ...] = ()  # options where the correction beats the analytical model
    band_log: tuple[float, float] | None = None  # conformal log-residual quantiles (P10, P90)
    cv_mdape_used: float | None = None  # held-out error of the prediction actually used

    @property
    def active(self) -> bool:
        """A residual model was fitted (it may still lose to the analytical model everywhere)."""
        return self.models is not None

    @property
    def applied(self) -> bool:
        return bool(self.applied_options)


def _feature_frame(frame: pl.DataFrame, p50: np.ndarray, options: list[str]) -> np.ndarray:
    """Numeric workload/system features, log of the analytical P50, and one indicator per known option
    (platform/placement, in the fixed order ``options``; an option not among them gets all zeros)."""
    num = frame.select([pl.col(c).cast(pl.Float64) for c in fields.numeric_features()]).to_numpy()
    cat = _option(frame)
    onehot = (
        np.stack([(cat == o) for o in options], axis=1).astype(float) if options else np.empty((len(cat), 0))
    )
    return np.hstack([num, np.log(np.maximum(p50, 1e-9))[:, None], onehot])


def _option(frame: pl.DataFrame) -> np.ndarray:
    return frame.select(pl.col("platform") + "/" + pl.col("placement")).to_series().to_numpy().astype(str)


def _residual_model():
    from sklearn.ensemble import HistGradientBoostingRegressor

    # 100 rounds of 15-leaf trees: on a 3,500-run fleet the same leave-one-family-out error (5.6 % vs
    # 5.3 % analytical) and band coverage (79 %) as 150 rounds of 31 leaves, in a third of the time (the
    # median loss refits every leaf each round)
    return HistGradientBoostingRegressor(
        loss="quantile",
        quantile=0.5,
        max_iter=100,
        learning_rate=0.12,
        max_leaf_nodes=15,
        min_samples_leaf=10,
        random_state=0,
    )


def _conformal(resid: np.ndarray, fold: np.ndarray) -> tuple[tuple[float, float], float]:
    """Band quantiles of held-out log residuals, and their coverage measured on held-out folds: each
    fold's runs against the quantiles of the other folds' residuals."""
    inside = np.zeros(resid.size, dtype=bool)
    for k in np.unique(fold):
        lo, hi = np.quantile(resid[fold != k], BAND)
        inside[fold == k] = (resid[fold == k] >= lo) & (resid[fold == k] <= hi)
    lo, hi = np.quantile(resid, BAND)
    return (float(lo), float(hi)), float(inside.mean())


def fit_correction(fleet: Fleet, hw: HardwareCatalog, coef: Coefficients = DEFAULT) -> Correction:
    """Fit the residual model on the fleet's runs, cross-validate it by model family, keep it only for
    the options where it wins, and calibrate the band on the held-out residuals of what is used."""
    runs = fleet.runs
    p50 = predict_frame(runs, hw, coef)["throughput_eps"].fill_null(np.nan).to_numpy() if runs.height else []
    p50 = np.asarray(p50, dtype=float)
    ok = np.isfinite(p50) & (p50 > 0)
    runs, p50 = (runs.filter(pl.Series(ok)), p50[ok]) if runs.height else (runs, p50)
    groups = runs["model_name"].to_numpy() if runs.height else np.array([])
    n_groups = len(set(groups))
    if runs.height < MIN_RUNS or n_groups < 2:
        note = (
            f"analytical model only: {runs.height} usable fleet runs in {n_groups} model families "
            f"(a correction needs {MIN_RUNS} runs in 2+ families); band from sampled coefficients, "
            "coverage not measured"
        )
        return Correction(None, [], runs.height, n_groups, None, None, None, note)
    from sklearn.model_selection import GroupKFold  # 1.7 s to import: only where there is a fit

    y = np.log(runs["throughput_eps"].to_numpy() / p50)
    options = sorted(set(_option(runs)))
    X = _feature_frame(runs, p50, options)
    oof, fold = np.zeros(y.size), np.zeros(y.size, dtype=int)
    for k, (train, test) in enumerate(GroupKFold(n_splits=min(n_groups, 5)).split(X, y, groups)):
        oof[test], fold[test] = _residual_model().fit(X[train], y[train]).predict(X[test]), k
    err_c, err_a = np.abs(np.expm1(oof - y)), np.abs(np.expm1(-y))
    opt = _option(runs)
    applied = tuple(
        o
        for o in options
        if (opt == o).sum() >= MIN_OPTION_RUNS and np.median(err_c[opt == o]) < np.median(err_a[opt == o])
    )
    used = np.isin(opt, applied)
    resid = y - np.where(used, oof, 0.0)
    band, coverage = _conformal(resid, fold)
    c, a = float(np.median(err_c)), float(np.median(err_a))
    u = float(np.median(np.where(used, err_c, err_a)))
    where = f"applied to {', '.join(applied)}" if applied else "not applied: it loses to the analytical model"
    note = (
        f"{runs.height} fleet runs; leave-one-model-family-out error: analytical {a:.1%}, corrected {c:.1%} "
        f"(correction {where}); P10-P90 band covers {coverage:.0%} of held-out runs"
    )
    return Correction(
        {0.5: _residual_model().fit(X, y)},
        options,
        runs.height,
        n_groups,
        c,
        a,
        coverage,
        note,
        applied,
        band,
        u,
    )


# -------------------------------------------------------------------------------------- candidates


def candidates(
    workload: dict[str, Any],
    hw: HardwareCatalog,
    fleet: Fleet,
    platforms: Iterable[str] | None = None,
    coef: Coefficients = DEFAULT,
) -> pl.DataFrame:
    """One system per modelled platform x placement, built and sized as `fleet whatif` builds them
    (workload_model.sizing): the server counts the workload's settings give (``system``) are kept; CPU
    trainers are otherwise as the fleet runs this model (else its production CPU setup, else the CPU default
    of workload_model.defaults); every other tier is sized by its binding constraint."""
    return _sized(_candidate_rows(workload, hw, fleet, platforms), hw, coef)


def _candidate_rows(
    workload: dict[str, Any], hw: HardwareCatalog, fleet: Fleet, platforms: Iterable[str] | None
) -> list[dict[str, Any]]:
    name = workload.get("model_name") or "(custom)"
    asked = dict(workload.get("system") or {})
    rows = []
    for platform, spec in sorted(hw.platforms.items()):
        if not spec.modelled or (platforms and platform not in platforms):
            continue
        if "gpus" in asked and spec.gpus == 0:
            continue  # a GPU count asks about GPU servers
        counts = dict(asked)
        if spec.gpus == 0 and "n_trainers" not in counts:
            modal = fleet.modal(name, platform, "n_trainers")
            if modal:
                counts["n_trainers"] = modal
        rows += [system_row(workload, platform, placement, hw, counts) for placement in spec.placements]
    return rows


def _sized(rows: list[dict[str, Any]], hw: HardwareCatalog, coef: Coefficients) -> pl.DataFrame:
    frame = pl.DataFrame(rows, infer_schema_length=None)
    return size_servers(frame, hw, coef) if frame.height else frame


# ------------------------------------------------------------------------------------ predictions


def analytic_band(
    frame: pl.DataFrame, hw: HardwareCatalog, coef: Coefficients = DEFAULT, seed: int = 0
) -> np.ndarray:
    """(rows, 3) P10/P50/P90 throughput from coefficient draws (one model evaluation per draw)."""
    rng = np.random.default_rng(seed)
    coefs = [
        replace(
            coef,
            **{k: getattr(coef, k) * float(rng.lognormal(0, COEF_SPREAD)) for k in SAMPLED if k != "kappa"},
            kappa=float(rng.uniform(0.1, 0.6)),
        )
        for _ in range(BAND_SAMPLES)
    ]
    draws = throughput_draws(frame, hw, coefs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows that do not fit are all-NaN
        return np.nanpercentile(draws, [10, 50, 90], axis=0).T


def _counterfactual_kind(frame: pl.DataFrame, bottleneck: np.ndarray, hw: HardwareCatalog) -> np.ndarray:
    on_cpu = np.array([hw.platforms[p].gpus == 0 for p in frame["platform"].to_list()], dtype=bool)
    return np.where(on_cpu & (bottleneck == "mlp_compute"), "mlp_compute_cpu", bottleneck)


def _counterfactual_throughput(
    frame: pl.DataFrame, kind: np.ndarray, hw: HardwareCatalog, coef: Coefficients
) -> np.ndarray:
    """Throughput with the bottleneck relieved as its Bottleneck definition says (one model evaluation per
    kind)."""
    out = np.full(frame.height, np.nan)
    for key, b in BOTTLENECKS.items():
        mask = kind == key
        if mask.any():
            f, h, c = b.relief(frame.filter(pl.Series(mask)), hw, coef)
            out[mask] = predict_frame(f, h, c)["throughput_eps"].fill_null(np.nan).to_numpy()
    return out


def _band(
    cand: pl.DataFrame, p50: np.ndarray, correction: Correction, hw: HardwareCatalog, coef
) -> np.ndarray:
    """(rows, 3) P10/P50/P90: the analytical P50, corrected on the options where the correction wins, with
    the conformal band; without fleet history, the analytical model's coefficient-draw band."""
    if correction.band_log is None:
        band = analytic_band(cand, hw, coef)
        band[:, 1] = p50  # the P50 of the default coefficients
        return band
    mid = p50.copy()
    if correction.applied and correction.models is not None:
        X = _feature_frame(cand, np.where(np.isfinite(p50), p50, 1.0), correction.options)
        used = np.isin(_option(cand), correction.applied_options)
        mid = np.where(used, p50 * np.exp(correction.models[0.5].predict(X)), p50)
    lo, hi = correction.band_log
    return np.column_stack([mid * np.exp(lo), mid, mid * np.exp(hi)])


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
    return ranked(options(workload, hw, fleet, correction, platforms, coef), objective, workload)


def options(
    workload: dict[str, Any],
    hw: HardwareCatalog,
    fleet: Fleet,
    correction: Correction,
    platforms: Iterable[str] | None = None,
    coef: Coefficients = DEFAULT,
) -> pl.DataFrame:
    """Every option for the workload with its predictions, bands and counterfactuals, not yet ranked: what
    no objective changes, computed once for all of them."""
    return options_of([workload], hw, fleet, correction, platforms, coef).drop(GROUP)


def options_of(
    workloads: list[dict[str, Any]],
    hw: HardwareCatalog,
    fleet: Fleet,
    correction: Correction,
    platforms: Iterable[str] | None = None,
    coef: Coefficients = DEFAULT,
) -> pl.DataFrame:
    """``options`` of several workloads in one evaluation of the model (every step is per row), their rows
    told apart by ``GROUP`` (the workload's index)."""
    rows = [
        {**r, GROUP: i} for i, w in enumerate(workloads) for r in _candidate_rows(w, hw, fleet, platforms)
    ]
    cand = _sized(rows, hw, coef)
    if cand.is_empty():
        raise ValueError(
            "no modelled platform to compare" + (f" among {', '.join(platforms)}" if platforms else "")
        )
    pred = predict_frame(cand, hw, coef)
    p50 = pred["throughput_eps"].fill_null(np.nan).to_numpy()
    fits = pred["fits"].fill_null(False).to_numpy()
    band = np.where(fits[:, None], _band(cand, p50, correction, hw, coef), np.nan)
    kind = _counterfactual_kind(cand, pred["bottleneck"].fill_null("").to_numpy().astype(str), hw)
    cf = _counterfactual_throughput(cand, kind, hw, coef) / p50
    used = np.isin(_option(cand), correction.applied_options)
    basis = np.where(
        used,
        "analytical model + fleet correction",
        "analytical model (the fleet correction loses here in grouped CV)"
        if correction.active
        else "analytical model only",
    )
    names = {i: w.get("model_name") or "(custom)" for i, w in enumerate(workloads)}
    assumed = _assumed(cand, p50, band[:, 1], hw, coef)
    res = pred.select(
        GROUP,
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
        "precision",
        "optimizer",
        "kernels",
        "defaulted_inputs",
    ).with_columns(
        pl.Series("p10_throughput_eps", band[:, 0]).fill_nan(None),
        pl.Series("p50_throughput_eps", band[:, 1]).fill_nan(None),
        pl.Series("p90_throughput_eps", band[:, 2]).fill_nan(None),
        pl.Series("eps_per_w", band[:, 1] / pred["provisioned_w"].to_numpy()).fill_nan(None),
        pl.Series("counterfactual_gain", cf).fill_nan(None),
        pl.Series("_cf_kind", kind),
        pl.col(GROUP).replace_strict(names, return_dtype=pl.String).alias("model_name"),
        pl.Series("basis", basis),
        pl.lit(correction.cv_mdape_used, pl.Float64).alias("cv_mdape"),
        pl.lit(correction.cv_band_coverage, pl.Float64).alias("band_coverage"),
    )
    res = pl.concat([res, assumed], how="horizontal")
    return _as_gpu_hbm_twin(res.with_columns(_count_flags(res, fleet, hw)))


ALT = ("_alt_eps", "_alt_on", "_alt_labels")  # each option under each alternative stack, for its flips


def _assumed(
    cand: pl.DataFrame, p50: np.ndarray, used: np.ndarray, hw: HardwareCatalog, coef: Coefficients
) -> pl.DataFrame:
    """Each option under the alternatives to its defaulted software (workload_model.alternatives), scaled
    as its own answer is (the fleet correction's factor where it is applied): the range and its text, and
    the scenarios for ranked_of's flips."""
    alt = alternatives.evaluate(cand, p50, hw, coef)
    scale = np.where(np.isfinite(p50) & (p50 > 0), used / p50, 1.0)
    alt = replace(alt, throughput=alt.throughput * scale[None, :])
    k = len(alt.scenarios)
    return alternatives.summary(alt, used).with_columns(
        pl.Series("_alt_eps", alt.throughput.T, dtype=pl.Array(pl.Float64, k)),
        pl.Series("_alt_on", alt.applies.T, dtype=pl.Array(pl.Boolean, k)),
        pl.lit(alt.labels(), dtype=pl.List(pl.String)).alias("_alt_labels"),
    )


def _flips(res: pl.DataFrame, objective: str) -> pl.Series:
    """Per recommended option, the alternative stacks under which another option of its workload wins."""
    labels = res["_alt_labels"][0].to_list() if res.height else []
    k = len(labels)
    alt = alternatives.Alternatives(
        [tuple(label.split("=", 1)) for label in labels],
        res["_alt_eps"].to_numpy().reshape(res.height, k).T,
        res["_alt_on"].to_numpy().reshape(res.height, k).T,
    )
    per = res["provisioned_w"].to_numpy() if objective == "perf_per_watt" else np.ones(res.height)
    return alternatives.flips(
        alt,
        res[GROUP].to_numpy(),
        res["recommended"].to_numpy(),
        (res["fits"] & ~res["same_as_gpu_hbm"]).to_numpy(),
        per,
        res.select(pl.format("{}/{}", "platform", "placement")).to_series().to_numpy(),
    )


def ranked(opts: pl.DataFrame, objective: str, workload: dict[str, Any]) -> pl.DataFrame:
    """``options`` ranked under the objective; the first fitting one is recommended."""
    return ranked_of(opts.with_columns(pl.lit(0).alias(GROUP)), objective, [workload]).drop(GROUP)


def ranked_of(opts: pl.DataFrame, objective: str, workloads: list[dict[str, Any]]) -> pl.DataFrame:
    """``options_of`` ranked under the objective, each workload's options apart."""
    res = opts.with_columns(pl.lit(objective).alias("objective"))
    score = "p50_throughput_eps" if objective == "throughput" else "eps_per_w"
    # Ties (hybrid equals gpu_hbm when the tables fit HBM) go to the simpler placement; options still
    # equal keep the catalog's order.
    simpler = pl.col("placement").replace_strict(
        {"gpu_hbm": 0, "system_memory": 1, "remote_ps": 2, "hybrid": 3}, default=4
    )
    res = (
        res.with_columns(pl.col(score).round(6).alias("_score"), simpler.alias("_simpler"))
        .sort(
            [GROUP, "fits", "_score", "_simpler"],
            descending=[False, True, True, False],
            nulls_last=True,
            maintain_order=True,
        )
        .drop("_score", "_simpler")
    )
    res = res.select((pl.int_range(1, pl.len() + 1, dtype=pl.UInt32).over(GROUP)).alias("rank"), pl.all())
    res = res.with_columns(((pl.col("rank") == 1) & pl.col("fits")).alias("recommended"))
    res = res.with_columns(too_close(objective), _flips(res, objective))
    return res.with_columns(explain(score, workloads)).drop("_cf_kind", *ALT)


# What a hybrid option whose tables fit in HBM takes from the platform's gpu_hbm option: it is that option.
TWIN_COLUMNS = (
    "p10_throughput_eps",
    "p50_throughput_eps",
    "p90_throughput_eps",
    "eps_per_w",
    "basis",
    "throughput_low_eps",
    "throughput_high_eps",
    "stack_alternatives",
    "_alt_eps",
)


def _as_gpu_hbm_twin(res: pl.DataFrame) -> pl.DataFrame:
    """hybrid on a platform whose HBM holds the tables (its gpu_hbm option fits) keeps them all there: the
    gpu_hbm option under another name. It gets that option's answer (the fleet correction, fitted per
    placement, must not split one configuration in two) and is marked, so the tie goes to gpu_hbm."""
    hbm = res.filter((pl.col("placement") == "gpu_hbm") & pl.col("fits")).select(
        GROUP, "platform", *[pl.col(c).alias(f"_hbm_{c}") for c in TWIN_COLUMNS]
    )
    out = res.join(hbm, on=[GROUP, "platform"], how="left", maintain_order="left")
    twin = (pl.col("placement") == "hybrid") & pl.col("fits") & pl.col("_hbm_basis").is_not_null()
    return out.with_columns(
        *[pl.when(twin).then(pl.col(f"_hbm_{c}")).otherwise(pl.col(c)).alias(c) for c in TWIN_COLUMNS],
        twin.fill_null(False).alias("same_as_gpu_hbm"),
    ).drop([f"_hbm_{c}" for c in TWIN_COLUMNS])


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
