"""The workload model: fit, bounds, bottlenecks and the paper's trends, straight from the model."""

import re

import numpy as np
import polars as pl
import pytest

from workload_model import components
from workload_model.calibration import POWER_RATIO, predict, suite_row, system
from workload_model.coefficients import DEFAULT, Coefficients, coefficient_docs


def _one(hw, row):
    return predict([row], hw, DEFAULT).row(0, named=True)


def test_a_table_set_that_does_not_fit_gets_no_throughput(hw, models):
    r = _one(hw, system(models["M3prod"], "big_basin", "gpu_hbm"))
    assert r["fits"] is False and r["throughput_eps"] is None and r["bottleneck"] is None
    assert r["tier"] == "gpu_hbm" and r["capacity_gb"] == pytest.approx(8 * 32 * 0.85)
    # Tables and their optimizer state (Adagrad: one more byte per byte) must fit.
    assert r["required_gb"] == pytest.approx(1200) and r["shortfall_gb"] == pytest.approx(1200 - 217.6)
    z = _one(hw, system(models["M3prod"], "zion", "system_memory"))
    assert z["fits"] and z["headroom"] == pytest.approx(1 - 1200 / (2048 * 0.85))


def test_bottleneck_moves_from_mlp_to_network(hw, models):
    base = {"n_trainers": 16, "n_sparse_ps": 64, "n_dense_ps": 2, "n_readers": 32}
    narrow = _one(hw, system(models["M1prod"], "cpu", "remote_ps", **base))
    wide = _one(hw, system(models["M1prod"], "cpu", "remote_ps", embedding_dim=1024, **base))
    assert narrow["bottleneck"] == "mlp_compute"
    assert wide["bottleneck"] == "trainer_network" and wide["throughput_eps"] < narrow["throughput_eps"]


def test_throughput_lies_between_the_overlap_and_serial_bounds(hw, models):
    rows = [
        system(models[m], p, pl_)
        for m in models
        for p in ("big_basin", "zion")
        for pl_ in ("gpu_hbm", "system_memory")
    ]
    p = predict(rows, hw, DEFAULT).filter(pl.col("fits"))
    b = p["batch_size"].cast(pl.Float64)
    assert (
        (p["throughput_eps"] <= b / p["t_lower_bound_s"] + 1e-6)
        & (p["throughput_eps"] >= b / p["t_upper_bound_s"] - 1e-6)
    ).all()


def test_power_is_provisioned_per_server_as_the_paper_counts_it(hw, models):
    bb = _one(hw, system(models["M1prod"], "big_basin", "gpu_hbm", n_readers=0))
    cpu = _one(
        hw,
        system(models["M1prod"], "cpu", "remote_ps", n_trainers=1, n_sparse_ps=0, n_dense_ps=0, n_readers=0),
    )
    assert bb["provisioned_w"] / cpu["provisioned_w"] == pytest.approx(POWER_RATIO)
    assert 0 < bb["power_w"] <= bb["provisioned_w"]


def _suite(hw, **kw):
    return predict([suite_row(p, **kw) for p in ("cpu", "big_basin")], hw, DEFAULT)[
        "throughput_eps"
    ].to_list()


def test_t20_t21_throughput_falls_with_features_and_big_basin_is_faster(hw):
    for platform in ("cpu", "big_basin"):
        dense = [
            predict([suite_row(platform, d, 16)], hw, DEFAULT)["throughput_eps"][0] for d in (64, 512, 4096)
        ]
        sparse = [
            predict([suite_row(platform, 512, s)], hw, DEFAULT)["throughput_eps"][0] for s in (4, 32, 128)
        ]
        assert dense == sorted(dense, reverse=True) and sparse == sorted(sparse, reverse=True)
    for d, s in ((64, 4), (4096, 4), (64, 128), (4096, 128)):
        cpu, bb = _suite(hw, dense=d, sparse=s)
        assert bb > cpu


def test_t22_perf_per_watt_favours_dense_heavy_models(hw):
    dense_corner = np.divide(*_suite(hw, dense=4096, sparse=4)[::-1]) / POWER_RATIO
    sparse_corner = np.divide(*_suite(hw, dense=64, sparse=128)[::-1]) / POWER_RATIO
    assert dense_corner > 1 > sparse_corner


def test_t23_gpu_throughput_grows_then_saturates_with_batch(hw):
    thr = [
        predict([suite_row("big_basin", 4096, 4, batch=b)], hw, DEFAULT)["throughput_eps"][0]
        for b in (50, 100, 12800, 25600)
    ]
    assert thr[1] / thr[0] > 1.8 and thr[3] / thr[2] < 1.2


def test_t24_bigger_tables_hurt_big_basin_more_than_a_cpu_ps(hw):
    small = _suite(hw, dense=512, sparse=32, hash_size=100_000)
    large = _suite(hw, dense=512, sparse=32, hash_size=12_500_000)  # 205 GB with optimizer state
    assert large[1] / small[1] < 0.6 and large[0] / small[0] > large[1] / small[1]


def test_t25_wider_mlps_hurt_the_cpu_more(hw):
    narrow, wide = _suite(hw, dense=256, sparse=32, width=16), _suite(hw, dense=256, sparse=32, width=2048)
    assert wide[0] / narrow[0] < wide[1] / narrow[1] < 1


def test_every_coefficient_names_the_target_it_serves():
    # t*: the paper's targets; b*: the public benchmarks; c*: public component measurements.
    docs = coefficient_docs()
    assert set(docs) == set(Coefficients.__dataclass_fields__)
    assert all(re.search(r"\b[tbc]\d+\b", d) for d in docs.values()), {
        k: v for k, v in docs.items() if not re.search(r"\b[tbc]\d+\b", v)
    }
    checked = {c.coefficient: c.id for c in components.evaluate()}
    assert all(re.search(rf"\b{i}\b", docs[k]) for k, i in checked.items()), checked


def test_a_tier_without_servers_is_not_a_constraint_and_no_infinity_leaks(hw, models):
    rows = [
        system(models["M1prod"], "cpu", "remote_ps", n_trainers=16, n_sparse_ps=0, n_dense_ps=0, n_readers=0),
        system(
            models["M1prod"], "cpu", "remote_ps", n_trainers=16, n_sparse_ps=64, n_dense_ps=2, n_readers=32
        ),
    ]
    p = predict(rows, hw, DEFAULT)
    assert (p["throughput_eps"] > 0).all()
    for col in p.columns:
        if p.schema[col] == pl.Float64:
            assert not np.isinf(p[col].drop_nulls().to_numpy()).any(), col


def test_gpu_platforms_without_links_fall_back_to_pcie(hw, models):
    from dataclasses import replace

    from workload_model.catalog import HardwareCatalog

    def with_box(gpus: int) -> HardwareCatalog:
        box = replace(hw.platforms["big_basin"], name="box", gpus=gpus, gpu_link_gb_per_s=0)
        return HardwareCatalog(
            {**hw.platforms, "box": box},
            hw.hbm_reserve,
            hw.dram_reserve,
            hw.remote_ps_platform,
            hw.remote_ps_max_servers,
        )

    for gpus in (1, 8):
        r = predict(
            [system(models["M1prod"], "box", "gpu_hbm", gpus=gpus, embedding_gb=4.0)], with_box(gpus), DEFAULT
        ).row(0, named=True)
        assert r["fits"] and r["throughput_eps"] > 0 and r["bottleneck"]


def test_recommender_ignores_runs_without_throughput(hw):
    from pipelines.lib.analysis.recommend import Fleet, fit_correction
    from synthetic_fleet.sampler import default_fleet

    runs, _ = default_fleet()
    runs = runs.with_columns(
        pl.when(pl.int_range(pl.len()) == 0)
        .then(0.0)
        .otherwise(pl.col("throughput_eps"))
        .alias("throughput_eps")
    )
    c = fit_correction(Fleet.from_runs(runs, hw), hw)
    assert c.active and c.n_runs < runs.height


def test_per_example_quantities_once_per_shape_equal_them_row_by_row(hw, models):
    # Sizing searches evaluate a few workload shapes on many systems: computed once per shape and gathered
    # back, every row's quantities are bit-identical to computing them row by row.
    from workload_model import model_inputs as model

    rows = [
        system(models[m], p, placement, n_trainers=n, batch_size=b)
        for m in models
        for p in ("cpu", "big_basin", "zion")
        for placement in hw.platforms[p].placements
        for n in (1, 3, 8)
        for b in (512, 4096)
    ]
    rows.append(system(models["M1prod"], "cpu", "remote_ps", embedding_dim=1024))  # a shape seen once
    base = model.with_defaults(model.with_hardware(model.fit_frame(pl.DataFrame(rows), hw), hw))
    base = base.sample(fraction=1.0, shuffle=True, seed=7)  # shapes interleaved
    once = model.per_example(base, DEFAULT)
    each = model._per_workload(base, DEFAULT)
    assert base.select(pl.struct(model.WORKLOAD_SHAPE).n_unique()).item() < base.height
    assert once.columns == each.columns and once.equals(each, null_equal=True)


def test_throughput_draws_equal_one_prediction_per_coefficient_set(hw, models):
    # The recommender's band evaluates 48 coefficient draws on rows prepared once: each draw is bit-identical
    # to predict_frame under it, rows that do not fit included (NaN for none).
    from dataclasses import replace

    from workload_model.model import WORKLOAD_COEFFICIENTS, predict_frame, throughput_draws

    rows = [
        system(models[m], p, pl_)
        for m in models
        for p in ("cpu", "big_basin", "zion")
        for pl_ in hw.platforms[p].placements
    ]
    frame = pl.DataFrame(rows)
    rng = np.random.default_rng(3)
    coefs = [
        replace(
            DEFAULT,
            eta_mlp_gpu=DEFAULT.eta_mlp_gpu * rng.lognormal(0, 0.3),
            eta_net=DEFAULT.eta_net * rng.lognormal(0, 0.3),
            kappa=float(rng.uniform(0.1, 0.6)),
            host_copy_gbps=rng.uniform(2, 20),
        )
        for _ in range(6)
    ]
    got = throughput_draws(frame, hw, coefs)
    want = np.vstack(
        [predict_frame(frame, hw, c)["throughput_eps"].fill_null(np.nan).to_numpy() for c in coefs]
    )
    assert got.shape == (6, frame.height) and np.isnan(want).any() and not np.isnan(want).all()
    np.testing.assert_array_equal(got, want)
    assert len({tuple(r) for r in np.nan_to_num(got)}) == 6  # the draws do differ
    with pytest.raises(ValueError, match=WORKLOAD_COEFFICIENTS[0]):
        throughput_draws(frame, hw, [DEFAULT, replace(DEFAULT, gemm_half_cpu=DEFAULT.gemm_half_cpu * 2)])
