"""Hardware-fit recommendations on the default synthetic fleet, against the paper's conclusions."""

import json

import numpy as np
import polars as pl
import pytest

from pipelines.cli import main
from pipelines.lib.analysis.recommend import OBJECTIVES, Fleet, fit_correction, recommend
from pipelines.lib.analysis.recommend_fleet import fleet_recommendations, fleet_workloads, observed
from synthetic_fleet.sampler import default_fleet
from workload_model.sizing import workload_of_model


@pytest.fixture(scope="module")
def fleet(hw):
    runs, _ = default_fleet()
    return Fleet.from_runs(runs, hw)


@pytest.fixture(scope="module")
def correction(fleet, hw):
    return fit_correction(fleet, hw)


def _best(models, hw, fleet, correction, model, objective, platforms=None):
    res = observed(
        recommend(workload_of_model(models[model]), hw, fleet, correction, objective, platforms), fleet
    )
    return res, res.filter(pl.col("recommended")).row(0, named=True)


@pytest.mark.parametrize(
    "model, objective, platforms, want",
    [
        ("M1prod", "throughput", ["cpu", "big_basin"], ("big_basin", "gpu_hbm")),
        ("M1prod", "perf_per_watt", ["cpu", "big_basin"], ("big_basin", "gpu_hbm")),
        ("M2prod", "throughput", ["cpu", "big_basin"], ("cpu", "remote_ps")),
        ("M2prod", "perf_per_watt", ["cpu", "big_basin"], ("big_basin", "gpu_hbm")),
        ("M3prod", "throughput", None, ("zion", "system_memory")),
    ],
)
def test_recommendations_follow_the_paper(models, hw, fleet, correction, model, objective, platforms, want):
    res, best = _best(models, hw, fleet, correction, model, objective, platforms)
    assert (best["platform"], best["placement"]) == want
    assert best["bottleneck"] and "limited by" in best["explanation"] and "would give" in best["explanation"]
    assert set(res["platform"]) == set(platforms or ["cpu", "big_basin", "zion"])
    # The band contains what the fleet observed for this configuration.
    assert best["n_observed_runs"] > 5
    assert best["p10_throughput_eps"] <= best["observed_median_eps"] <= best["p90_throughput_eps"]


def test_cross_validated_error_is_reported(fleet, hw, correction, models):
    assert correction.active and correction.n_groups == 3
    assert 0 < correction.cv_mdape_corrected < 0.5 and correction.cv_mdape_analytical is not None
    res, best = _best(models, hw, fleet, correction, "M1prod", "throughput")
    # The correction is applied only to the options where it wins in grouped CV (item 11 of issue 12).
    option = f"{best['platform']}/{best['placement']}"
    applied = option in correction.applied_options
    assert best["basis"] == (
        "analytical model + fleet correction"
        if applied
        else "analytical model (the fleet correction loses here in grouped CV)"
    )
    assert best["cv_mdape"] == correction.cv_mdape_used


def test_with_too_few_runs_the_analytical_model_answers_alone_and_says_so(fleet, hw, models):
    small = Fleet(fleet.runs.head(20))
    c = fit_correction(small, hw)
    assert not c.active and "analytical model only" in c.note
    res = recommend(workload_of_model(models["M1prod"]), hw, small, c)
    assert set(res["basis"]) == {"analytical model only"} and res["cv_mdape"].null_count() == res.height


def test_options_that_do_not_fit_say_by_how_much(models, hw, fleet, correction):
    res, _ = _best(models, hw, fleet, correction, "M3prod", "throughput")
    bb = res.filter((pl.col("platform") == "big_basin") & (pl.col("placement") == "gpu_hbm")).row(
        0, named=True
    )
    assert not bb["fits"] and bb["p50_throughput_eps"] is None and "982.4 GB short" in bb["explanation"]


def test_cpu_counts_outside_the_fleet_are_flagged(models, hw, fleet, correction):
    few_ps = Fleet(fleet.runs.filter((pl.col("platform") != "cpu") | (pl.col("n_sparse_ps") <= 5)))
    res = recommend(workload_of_model(models["M2prod"]), hw, few_ps, correction, "throughput", ["cpu"])
    assert (
        "sparse PS" in res.row(0, named=True)["count_flags"]
        and "outside the fleet's" in res.row(0, named=True)["count_flags"]
    )


def test_recommend_cli_with_a_workload_file(tmp_path, capsys, home):
    cfg = tmp_path / "ranker.yaml"
    cfg.write_text(
        "n_dense_features: 2048\nn_sparse_features: 8\nembedding_dim: 64\nembedding_gb: 12\n"
        "mean_lookups_per_table: 10\nbottom_mlp: 2048-1024-64\ntop_mlp: 512-256-1\ninteraction: dot\n"
    )
    assert (
        main(
            [
                "recommend",
                "--config",
                str(cfg),
                "--objective",
                "perf_per_watt",
                "--json",
                "--home",
                str(home.root),
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["workload"]["model_name"] == "ranker" and data["objective"] == "perf_per_watt"
    assert sum(o["recommended"] for o in data["options"]) == 1
    assert "analytical model only" in data["correction"]  # an empty data home has no fleet to learn from
    cfg.write_text("n_dense_features: 2048\ncolour: blue\n")
    assert main(["recommend", "--config", str(cfg), "--home", str(home.root)]) == 2
    assert "unknown field(s) ['colour']" in capsys.readouterr().err
    assert main(["recommend", "--model", "M1prod", "--config", str(cfg), "--home", str(home.root)]) == 2
    assert "exactly one of --model" in capsys.readouterr().err


def test_recommend_cli_text_fits_one_screen(capsys, home):
    assert main(["recommend", "--model", "M3prod", "--home", str(home.root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("M3prod: best throughput across the catalog") and len(out.splitlines()) <= 24


def test_recommend_for_an_observed_run_and_with_overrides(capsys, home, hw, models):
    import datetime as dt

    from pipelines.lib.storage import lake
    from synthetic_fleet.sampler import sample_day

    day = sample_day("2026-11-20", 12, 5, hw, models)
    runs = day.runs.with_columns(
        pl.lit(dt.date(2026, 11, 20)).alias("day"), pl.lit("synthetic").alias("source")
    )
    lake.write_partition(home, "runs", "2026-11-20", runs)
    run_id = runs.filter(pl.col("model_name") == "M3prod")["run_id"][0]
    assert main(["recommend", "--run", run_id, "--json", "--home", str(home.root)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["workload"]["model_name"] == "M3prod" and len(data["options"]) >= 8
    assert (
        main(
            [
                "recommend",
                "--model",
                "M1prod",
                "--set",
                "embedding_gb=500",
                "--set",
                "n_dense_features=64",
                "--json",
                "--home",
                str(home.root),
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["workload"]["bottom_mlp"].startswith("64-") and data["workload"]["embedding_gb"] == 500
    assert not next(
        o for o in data["options"] if o["platform"] == "big_basin" and o["placement"] == "gpu_hbm"
    )["fits"]
    assert main(["recommend", "--run", "nope", "--home", str(home.root)]) == 2
    assert "no run 'nope' in the lake" in capsys.readouterr().err


def test_correction_features_keep_the_option_order_they_were_fitted_with(fleet, hw, correction, models):
    from pipelines.lib.analysis.recommend import _feature_frame, candidates

    cand = candidates(workload_of_model(models["M1prod"]), hw, fleet, ["zion"])  # a subset, in another order
    X = _feature_frame(cand, np.ones(cand.height), correction.options)
    onehot = X[:, -len(correction.options) :]
    for i, row in enumerate(cand.iter_rows(named=True)):
        option = f"{row['platform']}/{row['placement']}"
        assert onehot[i].sum() == (1 if option in correction.options else 0)
        if option in correction.options:
            assert onehot[i, correction.options.index(option)] == 1
    assert X.shape[1] == correction.models[0.5].n_features_in_


def test_families_answered_in_batches_equal_each_answered_alone(fleet, hw, models, correction, monkeypatch):
    """The night answers every model family in batches of one model evaluation each (20,000 families
    in a day: time linear in the families, memory bounded by the batch); a batch never mixes one family's
    options, ranks, bands, explanations or observed medians into another's."""
    import pipelines.lib.analysis.recommend_fleet as rec

    # the fleet's three catalog models and eleven families named as a producer might, with their own shapes
    renamed = fleet.runs.head(400).with_columns(
        pl.when(pl.int_range(pl.len()) % 5 == 0)
        .then(pl.format("team-ctr-{}", pl.int_range(pl.len()) % 11))
        .otherwise(pl.col("model_name"))
        .alias("model_name")
    )
    mixed = Fleet(renamed)
    workloads = list(fleet_workloads(mixed, models).values())
    assert len(workloads) == 14
    monkeypatch.setattr(rec, "FAMILIES_PER_BATCH", 4)  # 4 batches, the last one short
    batched = fleet_recommendations(mixed, hw, models, correction)
    alone = pl.concat(
        [
            observed(recommend(w, hw, mixed, correction, objective), mixed, w)
            for w in workloads
            for objective in OBJECTIVES
        ],
        how="diagonal_relaxed",
    )
    assert batched.equals(alone)
    assert batched.filter(pl.col("recommended")).height == 2 * 14


def test_the_fleet_answers_per_family_questions_from_one_pass_over_its_runs(fleet):
    runs = fleet.runs
    some = runs.row(0, named=True)
    name, platform = some["model_name"], some["platform"]
    on = runs.filter((pl.col("model_name") == name) & (pl.col("platform") == platform))
    counts = on.group_by("n_trainers").len()
    top = counts.filter(pl.col("len") == counts["len"].max())["n_trainers"].min()
    assert fleet.modal(name, platform, "n_trainers") == top
    assert fleet.modal("never-ran", platform, "n_trainers") is not None  # the platform's own mode
    assert fleet.modal(name, "no-such-platform", "n_trainers") is None
    plat = runs.filter(pl.col("platform") == platform)["n_trainers"]
    assert fleet.count_range(platform, "n_trainers") == (plat.min(), plat.max())
    assert fleet.family(name).equals(runs.filter(pl.col("model_name") == name))
    assert fleet.family("never-ran").is_empty()
