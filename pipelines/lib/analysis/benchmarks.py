"""Public benchmarks: the MLPerf Training DLRM v0.7 and v1.0 closed-division results as a calibration set for
the workload model, so its hardware-fit answers are checked against real machines, not only against the
paper's ratios.

Observed throughput of a system = the median over its distinct successful runs (re-posts removed) of
(final_epoch_num - 1) x 4,195,197,692 / time_to_train_s (epoch_num is 1-based; HugeCTR's logged
train_samples agree within 0.1 %). Every GPU and CPU system of the two rounds is in the set; TPU systems are
not (the model has no TPU). The systems are described in examples/mlperf/hardware.yaml from spec sheets
and the MLPerf system descriptions, the benchmark in examples/mlperf/models.yaml. Later rounds are never
calibration data.

The targets (b1-b6, printed by `fleet calibrate` beside the paper's): every system within 1.5x of observed
and the median within 1.2x; the systems' order (Spearman >= 0.9); multi-node scaling within 1.3x; the
leave-one-system-out error (shared coefficients re-fitted without the system, then it is predicted) within
1.5x; and, described without its software (each platform's default stack), every system within 2x.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import polars as pl

from pipelines.lib.analysis.fit import fit_coefficients
from workload_model import defaults
from workload_model.catalog import HardwareCatalog, ModelSpec, load_hardware, load_models
from workload_model.model import DEFAULT, Coefficients, predict_frame

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "mlperf_training_dlrm" / "mlperf_dlrm_runs.csv"
EXAMPLES = ROOT / "examples" / "mlperf"
ROUNDS = ("v0.7", "v1.0")
TRAIN_SAMPLES = 4_195_197_692  # Criteo Terabyte training examples per epoch
MODEL = "dlrm"
# Shared coefficients the public benchmarks inform (hardware and software physics common to every platform,
# never one per system); leave-one-system-out re-fits them all without the system it then predicts.
FITTED = (
    "eta_mlp_gpu",
    "eta_mlp_cpu",
    "ridge_rows_gpu",
    "core_rows_cpu",
    "fused_launch_s",
    "compiled_launch_s",
    "graph_launch_s",
    "host_stage_gbps",
    "kappa_cpu_sync",
)
WITHIN, MEDIAN_WITHIN, SPEARMAN_MIN, SCALING_WITHIN = 1.5, 1.2, 0.9, 1.3
# A planner who describes the hardware and the model but not the software: each system then runs its
# platform's current default stack (workload_model/stack.py), and must still be within this factor.
UNSTATED_WITHIN = 2.0
# Multi-node scaling pairs (many nodes, one node of the same kind).
SCALING = (
    ("nvidia_dgxa100_n8_ngc21_05_merlin_hugectr", "nvidia_dgxa100_ngc21_05_merlin_hugectr"),
    ("nvidia_dgxa100_n14_ngc21_05_merlin_hugectr", "nvidia_dgxa100_ngc21_05_merlin_hugectr"),
    ("intel_2_nodes_8s_cpx_pytorch", "intel_1_node_4s_cpx_pytorch"),
    ("intel_4_nodes_16s_cpx_pytorch", "intel_1_node_4s_cpx_pytorch"),
    ("intel_4_nodes_32s_8376h_pytorch", "intel_1_node_8s_cpx_2_pytorch"),
    ("intel_8_nodes_64s_8376h_pytorch", "intel_1_node_8s_cpx_2_pytorch"),
)


def mlperf_platform(system_json_path: pl.Expr) -> pl.Expr:
    """The platform name of an MLPerf system, as `fleet ingest --source mlperf` gives it."""
    slug = (
        system_json_path.str.replace(r"\.json$", "")
        .str.replace("/systems/", "_")
        .str.to_lowercase()
        .str.replace_all(r"[^a-z0-9]+", "_")
        .str.strip_chars("_")
    )
    return pl.lit("mlperf_") + slug


def observed(path: Path = FIXTURE) -> pl.DataFrame:
    """One row per GPU or CPU system of rounds v0.7/v1.0 (closed division): platform, nodes, global batch,
    distinct successful runs and their median throughput (examples/s)."""
    raw = pl.read_csv(path, infer_schema=False)
    num = lambda c: pl.col(c).cast(pl.Float64, strict=False)  # noqa: E731
    runs = raw.filter(
        pl.col("mlperf_version").is_in(ROUNDS)
        & (pl.col("benchmark") == MODEL)
        & (pl.col("submission_division") == "closed")
        & (pl.col("run_status") == "success")
        # re-posts of an earlier run are not new evidence
        & pl.col("duplicate_of").is_null()
        & pl.col("same_run_timestamps_as").is_null()
        & ~pl.col("sys_accelerator_model_name").str.contains("TPU")
    ).with_columns(
        ((num("final_epoch_num") - 1) * TRAIN_SAMPLES / num("time_to_train_s")).alias("eps"),
        mlperf_platform(pl.col("system_json_path")).alias("platform"),
    )
    return (
        runs.group_by("platform")
        .agg(
            pl.col("mlperf_version").first().alias("round"),
            pl.col("sys_system_name").first().alias("system"),
            pl.col("sys_number_of_nodes").first().cast(pl.Int32).alias("nodes"),
            num("global_batch_size").median().cast(pl.Int64).alias("global_batch"),
            pl.col("sys_framework").first().alias("framework"),
            pl.len().alias("n_runs"),
            pl.col("eps").median().alias("observed_eps"),
        )
        .sort("observed_eps", descending=True)
    )


@cache
def example_catalogs() -> tuple[HardwareCatalog, dict[str, ModelSpec]]:
    """The built-in catalogs extended by the example MLPerf hardware and model catalogs."""
    return load_hardware(EXAMPLES / "hardware.yaml"), load_models(EXAMPLES / "models.yaml")


def configurations(
    obs: pl.DataFrame, hw: HardwareCatalog, model: ModelSpec, stack: bool = True
) -> pl.DataFrame:
    """One model row per observed system: the benchmark's workload as it ran on the system's platform (its
    kernel mode there) and nodes, its tables in GPU memory (GPU) or sharded over the nodes' DRAM (CPU), at
    the batch it ran (per node on CPU platforms, whose batch is per trainer). Without ``stack``, the
    workload states no software (precision, optimizer, kernels): each platform's default applies."""
    gpus = obs["platform"].replace_strict({k: v.gpus for k, v in hw.platforms.items()}, default=0)
    dropped = {"batch_size"} | (set() if stack else set(defaults.STACK_FIELDS))
    work = pl.DataFrame(
        [
            {k: v for k, v in model.workload(p, hw.platform(p).gpus).items() if k not in dropped}
            for p in obs["platform"]
        ]
    )
    return pl.concat([obs.select("platform", "nodes", "global_batch"), work], how="horizontal").with_columns(
        pl.when(gpus > 0).then(pl.lit("gpu_hbm")).otherwise(pl.lit("system_memory")).alias("placement"),
        pl.when(gpus > 0)
        .then(pl.col("global_batch"))
        .otherwise(pl.col("global_batch") // pl.col("nodes"))
        .cast(pl.Int64)
        .alias("batch_size"),
        pl.col("nodes").alias("n_trainers"),
        pl.lit(0).alias("n_sparse_ps"),
        pl.lit(0).alias("n_dense_ps"),
        pl.lit(0).alias("n_readers"),
    )


def predicted(rows: pl.DataFrame, hw: HardwareCatalog, coef: Coefficients) -> np.ndarray:
    """The model's throughput (examples/s) for each configuration row."""
    return predict_frame(rows, hw, coef)["throughput_eps"].fill_null(np.nan).to_numpy()


def fit(
    rows: pl.DataFrame,
    observed_eps: np.ndarray,
    hw: HardwareCatalog,
    start: Coefficients = DEFAULT,
    names: tuple[str, ...] = FITTED,
) -> Coefficients:
    """The shared coefficients ``names`` fitted on the rows (pipelines.lib.analysis.fit: least squares on log
    ratios within physical bounds)."""
    return fit_coefficients(rows, observed_eps, hw, start, names)


def leave_one_out(
    rows: pl.DataFrame, observed_eps: np.ndarray, hw: HardwareCatalog, start: Coefficients
) -> np.ndarray:
    """Each system predicted by the shared coefficients fitted on every other system."""
    out = np.empty(rows.height)
    for i in range(rows.height):  # one fit per held-out system (25 small fits), not a loop over data rows
        keep = np.arange(rows.height) != i
        coef = fit(rows.filter(pl.Series(keep)), observed_eps[keep], hw, start)
        out[i] = predicted(rows[i], hw, coef)[0]
    return out


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation (average ranks for ties)."""
    ra = pl.Series(a).rank("average").to_numpy()
    rb = pl.Series(b).rank("average").to_numpy()
    return float(np.corrcoef(ra, rb)[0, 1])


@dataclass(frozen=True)
class Check:
    """One public-benchmark target: id, what it asks, the model's value and whether it holds."""

    id: str
    description: str
    expected: str
    value: str
    passed: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "description": self.description,
            "expected": self.expected,
            "value": self.value,
            "passed": self.passed,
        }


@dataclass(frozen=True)
class Report:
    """The calibration set with predictions, the scaling pairs and the targets' verdicts."""

    table: pl.DataFrame  # platform, system, nodes, observed, predicted, ratio, loso predicted, loso ratio
    scaling: pl.DataFrame  # many, one, observed ratio, predicted ratio, error
    checks: tuple[Check, ...]


def _error(ratio: np.ndarray) -> np.ndarray:
    """Symmetric error factor: 2.0 means off by 2x either way."""
    return np.exp(np.abs(np.log(ratio)))


def evaluate(coef: Coefficients = DEFAULT, loso: bool = True) -> Report:
    """Predict every system of the calibration set and check the targets b1-b5 (b5 needs ``loso``)."""
    hw, models = example_catalogs()
    obs = observed()
    rows = configurations(obs, hw, models[MODEL])
    y = obs["observed_eps"].to_numpy()
    p = predicted(rows, hw, coef)
    held = leave_one_out(rows, y, hw, coef) if loso else np.full(y.size, np.nan)
    unstated = predicted(configurations(obs, hw, models[MODEL], stack=False), hw, coef)
    table = obs.select(
        "platform", "system", "round", "nodes", "framework", "n_runs", "observed_eps"
    ).with_columns(
        pl.Series("predicted_eps", p),
        pl.Series("ratio", p / y),
        pl.Series("unstated_ratio", unstated / y),
        pl.Series("loso_predicted_eps", held),
        pl.Series("loso_ratio", held / y),
    )
    by = dict(zip(obs["platform"].to_list(), range(obs.height), strict=True))
    pairs = [(f"mlperf_{m}", f"mlperf_{o}") for m, o in SCALING]
    scaling = pl.DataFrame(
        {
            "many": [m for m, _ in pairs],
            "one": [o for _, o in pairs],
            "observed": [y[by[m]] / y[by[o]] for m, o in pairs],
            "predicted": [p[by[m]] / p[by[o]] for m, o in pairs],
        }
    ).with_columns((pl.col("predicted") / pl.col("observed")).alias("ratio"))
    err = _error(p / y)
    s_err = _error(scaling["ratio"].to_numpy())
    rho = spearman(p, y)
    checks = [
        Check(
            "b1",
            "every system within 1.5x of observed",
            f"<= {WITHIN}x",
            f"worst {err.max():.2f}x",
            bool(err.max() <= WITHIN),
        ),
        Check(
            "b2",
            "median error",
            f"<= {MEDIAN_WITHIN}x",
            f"{np.median(err):.2f}x",
            bool(np.median(err) <= MEDIAN_WITHIN),
        ),
        Check("b3", "systems' order (Spearman)", f">= {SPEARMAN_MIN}", f"{rho:.3f}", rho >= SPEARMAN_MIN),
        Check(
            "b4",
            "multi-node scaling (GPU 8, 14 nodes; CPU 2, 4, 8 nodes over 1)",
            f"<= {SCALING_WITHIN}x",
            f"worst {s_err.max():.2f}x",
            bool(s_err.max() <= SCALING_WITHIN),
        ),
    ]
    if loso:
        h_err = _error(held / y)
        checks.append(
            Check(
                "b5",
                "leave-one-system-out error",
                f"<= {WITHIN}x",
                f"worst {h_err.max():.2f}x, median {np.median(h_err):.2f}x",
                bool(h_err.max() <= WITHIN),
            )
        )
    u_err = _error(unstated / y)
    checks.append(
        Check(
            "b6",
            "no software stated (each platform's default stack): every system within 2x",
            f"<= {UNSTATED_WITHIN:g}x",
            f"worst {u_err.max():.2f}x, median {np.median(u_err):.2f}x",
            bool(u_err.max() <= UNSTATED_WITHIN),
        )
    )
    return Report(table, scaling, tuple(checks))


def fit_all(start: Coefficients = DEFAULT) -> Coefficients:
    """The shared coefficients fitted on every system of the calibration set."""
    hw, models = example_catalogs()
    obs = observed()
    return fit(configurations(obs, hw, models[MODEL]), obs["observed_eps"].to_numpy(), hw, start)
