"""Planning on the user's own hardware without friction, one answer to one question, and the closed loop
from telemetry (issue 20, items 5-7 and the reader sizing of item 3)."""

import datetime as dt
import json

import numpy as np
import polars as pl
import pytest
import yaml

from pipelines.cli import main
from pipelines.lib.analysis.recommend import Fleet, fit_correction, recommend
from pipelines.lib.analysis.recommend_fleet import never_ran, observed
from pipelines.lib.storage import lake
from synthetic_fleet.sampler import default_fleet
from workload_model.sizing import workload_of_model
from workload_model.whatif import ask


def _json(capsys, argv):
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def no_fleet(hw):
    empty = Fleet(default_fleet()[0].head(0))
    return empty, fit_correction(empty, hw)


# ----------------------------------------------------------------------------------- item 6


def test_whatif_takes_a_workload_file_like_recommend(tmp_path, capsys, home):
    cfg = tmp_path / "ranker.yaml"
    cfg.write_text(
        "n_dense_features: 256\nn_sparse_features: 16\nembedding_dim: 64\nembedding_gb: 8\n"
        "mean_lookups_per_table: 10\nbottom_mlp: 256-128-64\ntop_mlp: 256-1\ninteraction: dot\n"
        "optimizer: sgd\nkernels: graph\n"
    )
    rows = _json(
        capsys, ["whatif", "--config", str(cfg), "--platform", "big_basin", "--home", str(home.root)]
    )
    assert {r["model_name"] for r in rows} == {"ranker"} and {r["kernels"] for r in rows} == {"graph"}
    assert (
        main(
            [
                "whatif",
                "--model",
                "M1prod",
                "--config",
                str(cfg),
                "--platform",
                "cpu",
                "--home",
                str(home.root),
            ]
        )
        == 2
    )
    assert "exactly one of --model" in capsys.readouterr().err


def test_servers_is_a_node_count_in_whatif_recommend_and_sweeps(capsys, home):
    base = ["--model", "M1prod", "--home", str(home.root)]
    two = _json(
        capsys, ["whatif", *base, "--platform", "big_basin", "--placement", "gpu_hbm", "--servers", "2"]
    )
    assert two[0]["n_trainers"] == 2 and two[0]["capacity_gb"] == pytest.approx(2 * 8 * 32 * 0.85)
    sweep = _json(capsys, ["whatif", *base, "--platform", "cpu", "--sweep", "n_trainers=4,8,16"])
    assert [r["n_trainers"] for r in sweep] == [4, 8, 16]
    # recommend keeps the count asked for, with --servers or --set, on every option
    for flag in (["--servers", "3"], ["--set", "n_trainers=3"]):
        opts = _json(capsys, ["recommend", *base, *flag])["options"]
        assert {o["n_trainers"] for o in opts} == {3}


def test_gpus_per_server_is_sweepable(capsys, home):
    rows = _json(
        capsys,
        [
            "whatif", "--model", "M2prod", "--platform", "big_basin", "--placement", "gpu_hbm",
            "--sweep", "gpus=2,4,8,16", "--home", str(home.root),
        ],
    )  # fmt: skip
    cap = [r["capacity_gb"] for r in rows]
    assert cap == pytest.approx([g * 32 * 0.85 for g in (2, 4, 8, 16)])
    assert [r["fits"] for r in rows] == [False, False, True, True]  # 160 GB of tables and Adagrad state
    assert (
        main(
            ["whatif", "--model", "M1prod", "--platform", "cpu", "--set", "gpus=8", "--home", str(home.root)]
        )
        == 2
    )
    assert "cpu is a CPU platform" in capsys.readouterr().err


def test_whatif_header_says_every_placement_only_when_true(capsys, home):
    base = ["whatif", "--model", "M1prod", "--platform", "cpu,big_basin", "--home", str(home.root)]
    assert main(base) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("M1prod: every placement on cpu, big_basin")
    assert main([*base[:-2], "--placement", "remote_ps", "--home", str(home.root)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "every placement" not in head and "placement remote_ps on cpu, big_basin" in head


def _box(**over):
    return {
        "gpus": 8,
        "cpu_fp32_tflops": 10,
        "dram_gb": 1024,
        "dram_bw_gb_per_s": 400,
        "hbm_gb_per_gpu": 80,
        "hbm_bw_gb_per_s_per_gpu": 2000,
        "gpu_fp32_tflops": 19.5,
        "gpu_fp16_tflops": 312,
        "gpu_link_gb_per_s": 300,
        "pcie_gb_per_s": 31.5,
        "nic_gb_per_s": 25,
        "peak_w": 6500,
        "placements": ["gpu_hbm", "hybrid"],
    } | over


def test_whatif_columns_stay_aligned_for_long_platform_names(capsys, home):
    home.user_catalog_dir.mkdir()
    long = "a_very_long_platform_name_from_a_vendor_sheet"
    (home.user_catalog_dir / "hardware.yaml").write_text(yaml.safe_dump({"platforms": {long: _box()}}))
    assert main(["whatif", "--model", "M1prod", "--platform", f"cpu,{long}", "--home", str(home.root)]) == 0
    lines = capsys.readouterr().out.splitlines()[1:4]
    starts = {
        line.index(word) for line, word in zip(lines, ("placement", "remote_ps", "gpu_hbm"), strict=True)
    }
    assert len(starts) == 1  # the placement column starts at the same place on every line


def test_a_cpu_platform_needs_no_gpu_fields_and_idle_power_defaults(home, capsys):
    cpu = {
        "gpus": 0,
        "sockets": 2,
        "cores": 64,
        "cpu_fp32_tflops": 8.0,
        "dram_gb": 512,
        "dram_bw_gb_per_s": 400,
        "pcie_gb_per_s": 32,
        "nic_gb_per_s": 25,
        "peak_w": 800,
        "placements": ["remote_ps"],
    }
    home.user_catalog_dir.mkdir()
    (home.user_catalog_dir / "hardware.yaml").write_text(yaml.safe_dump({"platforms": {"lean_cpu": cpu}}))
    rows = _json(capsys, ["whatif", "--model", "M1prod", "--platform", "lean_cpu", "--home", str(home.root)])
    assert rows[0]["fits"] and rows[0]["throughput_eps"] > 0
    # idle power defaults to 40% of peak: a trainer at rest draws it
    assert rows[0]["power_w"] >= rows[0]["n_trainers"] * 0.4 * 800


def test_one_invalid_catalog_entry_is_named_and_the_others_stay_usable(home, capsys):
    home.user_catalog_dir.mkdir()
    platforms = {"good_box": _box(), "bad_box": _box(nic_gb_per_s=-1)}
    (home.user_catalog_dir / "hardware.yaml").write_text(yaml.safe_dump({"platforms": platforms}))
    assert main(["whatif", "--model", "M1prod", "--platform", "good_box", "--home", str(home.root)]) == 0
    captured = capsys.readouterr()
    assert "good_box" in captured.out
    assert "'bad_box' field nic_gb_per_s must be a non-negative number" in captured.err
    assert main(["whatif", "--model", "M1prod", "--platform", "bad_box", "--home", str(home.root)]) == 2
    err = capsys.readouterr().err
    assert "'bad_box' field nic_gb_per_s" in err and len(err.strip().splitlines()) == 1


# ----------------------------------------------------------------------------------- item 7


def test_whatif_and_recommend_size_remote_ps_alike_and_show_the_counts(hw, models, no_fleet, capsys, home):
    fleet, c = no_fleet
    w = workload_of_model(models["M1prod"])
    rec = recommend(w, hw, fleet, c, "throughput", ["big_basin"]).filter(pl.col("placement") == "remote_ps")
    asked = ask(models["M1prod"], ["big_basin"], "remote_ps", hw, {}).rows
    for col in ("n_trainers", "n_sparse_ps", "n_dense_ps", "n_readers", "batch_size"):
        assert rec[col][0] == asked[col][0], col
    assert rec["p50_throughput_eps"][0] == pytest.approx(asked["throughput_eps"][0])
    assert main(["whatif", "--model", "M1prod", "--platform", "big_basin", "--home", str(home.root)]) == 0
    out = capsys.readouterr().out
    r = asked.row(0, named=True)
    assert f"{r['n_trainers']}/{r['n_sparse_ps']}/{r['n_dense_ps']}/{r['n_readers']}" in out
    assert "trainers/sparse PS/dense PS/readers" in out


def test_no_observed_median_for_a_workload_the_fleet_never_ran(hw, models):
    fleet = Fleet.from_runs(default_fleet()[0], hw)
    c = fit_correction(Fleet(fleet.runs.head(0)), hw)
    w = workload_of_model(models["M1prod"])
    assert never_ran(w, fleet) is None
    ran = observed(recommend(w, hw, fleet, c, "throughput", ["big_basin"]), fleet, w)
    assert ran.filter(pl.col("placement") == "gpu_hbm")["n_observed_runs"][0] > 5
    bigger = {**w, "embedding_gb": 160.0}
    why = never_ran(bigger, fleet)
    assert why and "embedding_gb 160" in why
    res = observed(recommend(bigger, hw, fleet, c, "throughput", ["big_basin"]), fleet, bigger)
    assert res["observed_median_eps"].null_count() == res.height and (res["n_observed_runs"] == 0).all()
    assert (res["observed_note"] == why).all()


def test_options_whose_bands_overlap_are_too_close_to_call(hw, models, no_fleet):
    fleet, c = no_fleet
    res = recommend(
        workload_of_model(models["M2prod"]), hw, fleet, c, "throughput", ["cpu", "big_basin", "zion"]
    )
    ok = res.filter(pl.col("fits") & ~pl.col("same_as_gpu_hbm"))
    best = ok.filter(pl.col("recommended")).row(0, named=True)
    for r in ok.filter(~pl.col("recommended")).iter_rows(named=True):
        overlap = (
            r["p10_throughput_eps"] <= best["p90_throughput_eps"]
            and r["p90_throughput_eps"] >= best["p10_throughput_eps"]
        )
        assert r["too_close_to_call"] == overlap
        assert ("too close to call" in r["explanation"]) == overlap
    assert best["too_close_to_call"] == bool(ok.filter(~pl.col("recommended"))["too_close_to_call"].any())


def test_recommend_offers_the_hybrid_placement(hw, models, no_fleet):
    fleet, c = no_fleet
    res = recommend(workload_of_model(models["M1prod"]), hw, fleet, c, "throughput", ["big_basin"])
    hybrid = res.filter(pl.col("placement") == "hybrid").row(0, named=True)
    assert (
        hybrid["fits"] and hybrid["same_as_gpu_hbm"] and "the same as gpu_hbm here" in hybrid["explanation"]
    )
    m3 = recommend(workload_of_model(models["M3prod"]), hw, fleet, c, "throughput", ["zion"])
    assert "hybrid" in m3["placement"].to_list()


def test_report_compares_cpu_and_big_basin_in_the_papers_setting_or_says_what_differs():
    from dashboards.cards import table_iii_cards
    from dashboards.model_views import model_views

    table_iii = model_views()[3]
    m1 = table_iii.filter(pl.col("model_name") == "M1prod").row(0, named=True)
    assert m1["throughput_ratio"] == pytest.approx(2.25, abs=0.1)  # the calibration's t1
    recs = pl.DataFrame(
        [
            {
                "model_name": "M1prod", "objective": "throughput", "platform": p, "placement": pl_,
                "fits": True, "p50_throughput_eps": thr, "p10_throughput_eps": thr * 0.9,
                "p90_throughput_eps": thr * 1.1, "eps_per_w": 10.0, "bottleneck": "mlp_compute",
                "explanation": "x", "basis": "b", "cv_mdape": None, "n_trainers": n, "n_sparse_ps": 3,
                "n_dense_ps": 1,
            }
            for p, pl_, thr, n in (("cpu", "remote_ps", 100.0, 16), ("big_basin", "gpu_hbm", 130.0, 1))
        ]
    )  # fmt: skip
    html = table_iii_cards(recs, table_iii)
    assert "1.30x Big Basin over CPU" in html and "16 trainers" in html
    assert f"{m1['throughput_ratio']:.2f}x the throughput" in html and "the setting differs" in html


# ---------------------------------------------------------------------------------- item 3


def test_readers_are_sized_by_what_the_trainers_consume(hw, models):
    from workload_model.model import DEFAULT

    rows = ask(models["M1prod"], ["big_basin", "zion"], "gpu_hbm", hw, {}).rows
    need = np.ceil(rows["throughput_eps"] * rows["input_bytes_per_example"] / (DEFAULT.reader_gbps * 1e9))
    assert (rows["n_readers"].to_numpy() >= need.to_numpy()).all()
    assert (rows["bottleneck"] != "readers").all()
    given = ask(models["M1prod"], ["big_basin"], "gpu_hbm", hw, {"n_readers": 1}).rows
    assert given["n_readers"][0] == 1 and given["throughput_eps"][0] <= rows["throughput_eps"][0]


def test_a_synchronous_cpu_job_gets_no_dense_ps():
    # Tables sharded over the trainers' DRAM make one synchronous job that all-reduces its dense weights:
    # no dense PS serves it, so none is sized or charged.
    from pipelines.lib.analysis import benchmarks

    hw, models = benchmarks.example_catalogs()
    cpu = "mlperf_intel_1_node_8s_cpx_2_pytorch"
    rows = ask(models["dlrm"], [cpu], "system_memory", hw, {"n_trainers": 2}).rows
    assert rows["n_dense_ps"][0] == 0 and rows["n_trainers"][0] == 2
    with_dps = ask(models["dlrm"], [cpu], "system_memory", hw, {"n_trainers": 2, "n_dense_ps": 1}).rows
    assert with_dps["throughput_eps"][0] == pytest.approx(rows["throughput_eps"][0])


# ---------------------------------------------------------------------------------- item 5


def _lake_with_runs(home, hw, models, days=3, runs=40):
    from synthetic_fleet.sampler import sample_day

    for i in range(days):
        day = f"2026-11-{20 + i}"
        r = sample_day(day, runs, 7, hw, models).runs
        r = r.with_columns(
            pl.lit(dt.date.fromisoformat(day)).alias("day"), pl.lit("synthetic").alias("source")
        )
        lake.write_partition(home, "runs", day, r)


def test_calibrate_fit_learns_from_the_lake_and_whatif_recommend_name_the_fit(home, hw, models, capsys):
    from pipelines.lib.analysis.fit import fit_path

    assert main(["calibrate", "--fit", "--home", str(home.root)]) == 2
    assert "usable runs" in capsys.readouterr().err  # an empty lake has nothing to learn from
    _lake_with_runs(home, hw, models)
    record = _json(capsys, ["calibrate", "--fit", "--home", str(home.root)])
    assert record["runs"] > 50 and set(record["platforms"]) == {"cpu", "big_basin", "zion"}
    assert 1 <= len(record["fitted"]) <= 6 and record["held_out_median_error"] >= 1.0
    assert set(record["held_out_by_platform"]) == {"cpu", "big_basin", "zion"}
    assert fit_path(home).exists()
    assert main(["whatif", "--model", "M1prod", "--platform", "cpu", "--home", str(home.root)]) == 0
    out = capsys.readouterr().out
    assert "observed runs on 3 platforms" in out and "leave-one-platform-out error median" in out
    data = _json(capsys, ["recommend", "--model", "M1prod", "--home", str(home.root)])
    assert "leave-one-platform-out error" in data["model_fit"]


def test_mlperf_runs_without_a_workload_get_it_from_the_model_catalog():
    from pipelines.lib.analysis import benchmarks
    from pipelines.lib.analysis.fit import usable_runs

    hw, models = benchmarks.example_catalogs()
    runs = pl.DataFrame(
        {
            "run_id": ["a", "b"],
            "status": ["succeeded", "succeeded"],
            "model_name": ["dlrm", "dlrm"],
            "platform": [
                "mlperf_nvidia_dgxa100_ngc21_05_merlin_hugectr",
                "mlperf_intel_2_nodes_8s_cpx_pytorch",
            ],
            "batch_size": [55296, 32768],
            "n_trainers": [1, 2],
            "throughput_eps": [32.1e6, 661e3],
        }
    )
    rows, y = usable_runs(runs, hw, models)
    assert rows.height == 2 and y.tolist() == [32.1e6, 661e3]
    assert rows["embedding_gb"].to_list() == [96.14, 96.14] and rows["kernels"].to_list() == [
        "graph",
        "fused",
    ]
    assert rows["placement"].to_list() == ["gpu_hbm", "system_memory"]
    assert rows["batch_size"].to_list() == [55296, 16384]  # a CPU job's global batch, per trainer
