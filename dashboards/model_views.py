"""The report's views of the workload model itself (no fleet data): what-if sweeps, placements, the
calibration table and the paper's Table III setting."""

from __future__ import annotations

import polars as pl


def model_views() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """What-if sweeps (test suite), placement comparison, calibration table and the paper's Table III
    setting (each production model's CPU baseline against one Big Basin), from the workload model."""
    from workload_model.calibration import predict, production_ratios, system
    from workload_model.catalog import load_hardware, load_models
    from workload_model.model import DEFAULT

    hw, models = load_hardware(), load_models()
    prow = [
        system(
            models[m],
            p_,
            pl_,
            n_sparse_ps=(models[m].cpu_baseline or {}).get("n_sparse_ps", 4) if pl_ == "remote_ps" else 0,
        )
        for m in ("M1prod", "M2prod", "M3prod")
        for p_ in ("big_basin", "zion")
        for pl_ in ("gpu_hbm", "system_memory", "hybrid", "remote_ps")
    ]
    placements = predict(prow, hw, DEFAULT).select(
        "model_name", "platform", "placement", "throughput_eps", "bottleneck", "fits"
    )
    prod = production_ratios(models, hw, DEFAULT)
    table_iii = pl.DataFrame(
        [
            {
                "model_name": m,
                "cpu_setup": f"{v['cpu']['n_trainers']} trainers + {v['cpu']['n_sparse_ps']} sparse PS + "
                f"{v['cpu']['n_dense_ps']} dense PS",
                "big_basin_placement": v["bb"]["placement"],
                "throughput_ratio": v["thr"],
                "perf_per_watt_ratio": v["ppw"],
            }
            for m, v in prod.items()
        ]
    )
    return _sweeps(hw), placements, _calibration_table(hw, models), table_iii


def _sweeps(hw) -> pl.DataFrame:
    """The test suite's what-if sweeps: throughput and bottleneck per swept value and platform."""
    from workload_model.calibration import predict, suite_row
    from workload_model.model import DEFAULT

    grid = {
        "dense features": ("dense", (64, 128, 256, 512, 1024, 2048, 4096)),
        "sparse features": ("sparse", (4, 8, 16, 32, 64, 128)),
        "batch size": ("batch", (50, 200, 800, 3200, 12800, 51200)),
        "rows per table": ("hash_size", (100_000, 1_000_000, 10_000_000, 25_000_000)),
        "MLP width": ("width", (16, 64, 256, 1024, 2048)),
    }
    rows, meta = [], []
    for label, (key, values) in grid.items():
        for v in values:
            for platform in ("cpu", "big_basin", "zion"):
                kw = {"dense": 512, "sparse": 32}
                kw[key] = v
                rows.append(suite_row(platform, kw.pop("dense"), kw.pop("sparse"), **kw))
                if platform == "zion":
                    rows[-1]["placement"] = "system_memory"
                meta.append((label, float(v)))
    p = predict(rows, hw, DEFAULT).select("platform", "throughput_eps", "bottleneck")
    return p.with_columns(pl.Series("field", [m[0] for m in meta]), pl.Series("value", [m[1] for m in meta]))


def _calibration_table(hw, models) -> pl.DataFrame:
    """Every calibration target with the model's value (the fleet-shape ones on the demo's fleet)."""
    from synthetic_fleet.sampler import default_fleet
    from workload_model.calibration import evaluate, load_targets
    from workload_model.model import DEFAULT

    results = evaluate(DEFAULT, hw, models, fleet=default_fleet())
    targets = load_targets()
    return pl.DataFrame(
        [
            {
                "id": r.id,
                "label": f"{r.id} {r.description[:48]}",
                "status": "PASS" if r.passed else "FAIL",
                "expected": r.expected,
                "value_text": r.value,
                "target": targets[r.id].get("value"),
                "low": targets[r.id]["value"] - targets[r.id]["tol"] if "value" in targets[r.id] else None,
                "high": targets[r.id]["value"] + targets[r.id]["tol"] if "value" in targets[r.id] else None,
                "model": float(r.value) if "value" in targets[r.id] else None,
            }
            for r in results
        ],
        schema_overrides={"target": pl.Float64, "low": pl.Float64, "high": pl.Float64, "model": pl.Float64},
    )
