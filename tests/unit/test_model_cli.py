"""`fleet calibrate` and `fleet whatif`: every target passes; errors name the field and the valid choices."""

import json

import pytest

from pipelines.cli import main

# Issue 20 put the public-benchmark targets b1-b5 into `fleet calibrate`'s verdict; b1 and b5 do not hold
# (tests/unit/test_public_benchmarks.py says why, with the figures), so the command exits 1 and prints FAIL
# for them. The paper's 28 targets are checked on their own below.
PUBLIC_FAILS = "public-benchmark targets b1 (worst system 1.67x) and b5 (leave-one-system-out 1.84x) fail"


def _paper_part(out: str) -> str:
    return out.split("\npublic benchmarks:")[0]


def test_calibrate_passes_every_paper_target_and_exits_1_only_for_the_public_ones(calibrate_answers):
    code, out = calibrate_answers["text"]
    paper = _paper_part(out)
    assert "28/28 targets pass" in paper and "FAIL" not in paper
    public_failed = [ln.split()[1] for ln in out.splitlines() if ln.startswith("FAIL  b")]
    assert code == (1 if public_failed else 0) and public_failed == ["b1", "b5"]
    json_code, json_out = calibrate_answers["json"]
    assert json_code == code
    data = json.loads(json_out)
    assert all(t["passed"] for t in data["targets"])
    assert {t["id"] for t in data["targets"]} == {f"t{i}" for i in range(1, 29)}
    assert set(data["coefficients"]) == set(data["coefficient_targets"])


@pytest.mark.xfail(strict=True, reason=PUBLIC_FAILS)
def test_calibrate_passes_every_target(calibrate_answers):
    code, out = calibrate_answers["text"]
    assert code == 0
    assert "28/28 targets pass" in out and "FAIL" not in out


@pytest.mark.xfail(strict=True, reason=PUBLIC_FAILS)
def test_calibrate_json_lists_targets_values_and_coefficients(calibrate_answers):
    code, out = calibrate_answers["json"]
    assert code == 0
    data = json.loads(out)
    assert data["passed"] and {t["id"] for t in data["targets"]} == {f"t{i}" for i in range(1, 29)}
    assert set(data["coefficients"]) == set(data["coefficient_targets"])


def test_whatif_one_configuration(capsys, home):
    assert (
        main(
            [
                "whatif",
                "--model",
                "M1prod",
                "--platform",
                "big_basin",
                "--placement",
                "gpu_hbm",
                "--set",
                "n_dense_features=1024",
                "--set",
                "batch_size=3200",
                "--home",
                str(home.root),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert (
        "M1prod on big_basin with gpu_hbm (batch 3200" in out
        and "bottleneck" in out
        and "mean utilisation" in out
    )


def test_whatif_reports_does_not_fit_with_the_shortfall(capsys, home):
    assert (
        main(
            [
                "whatif",
                "--model",
                "M3prod",
                "--platform",
                "big_basin",
                "--placement",
                "gpu_hbm",
                "--home",
                str(home.root),
            ]
        )
        == 0
    )
    assert "DOES NOT FIT: short by 982.4 GB" in capsys.readouterr().out  # 600 GB + optimizer state


def test_whatif_sweep_json_is_complete(capsys, home):
    assert (
        main(
            [
                "whatif",
                "--model",
                "M1prod",
                "--platform",
                "cpu,big_basin,zion",
                "--sweep",
                "n_sparse_features=4,8,16,32,64,128",
                "--json",
                "--home",
                str(home.root),
            ]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 6 * (1 + 4 + 4)
    assert {
        "throughput_eps",
        "bottleneck",
        "fits",
        "headroom",
        "eps_per_w",
        "trainer_cpu_util",
        "default_placement",
    } <= set(rows[0])


DLRM_UNSTATED = """model_name: dlrm_planner
n_dense_features: 13
n_sparse_features: 26
embedding_dim: 128
embedding_gb: 96.14
mean_lookups_per_table: 1
bottom_mlp: 13-512-256-128
top_mlp: 1024-1024-512-256-1
interaction: dot
batch_size: 55296
"""
DGX = "mlperf_nvidia_dgxa100_ngc21_05_merlin_hugectr"
CPX = "mlperf_intel_1_node_8s_cpx_2_pytorch"


def test_answers_say_what_software_they_assumed_with_the_range_and_the_flip(capsys, tmp_path):
    """A planner's DLRM with no software stated, on the MLPerf catalog: whatif and recommend name the
    defaulted inputs, the range over the alternatives and, in recommend, the stack that would flip the
    answer; --json carries the same fields."""
    import shutil

    from pipelines.lib.analysis import benchmarks

    (tmp_path / "catalog").mkdir()
    shutil.copy(benchmarks.EXAMPLES / "hardware.yaml", tmp_path / "catalog" / "hardware.yaml")
    cfg = tmp_path / "dlrm.yaml"
    cfg.write_text(DLRM_UNSTATED)
    ask = ["--config", str(cfg), "--home", str(tmp_path)]
    assert main(["whatif", *ask, "--platform", DGX, "--placement", "gpu_hbm"]) == 0
    out = capsys.readouterr().out
    assert f"assumed on {DGX} (not stated: its default stack" in out
    assert "precision=fp16, optimizer=sgd, kernels=compiled" in out and "kernels=graph " in out
    assert main(["recommend", *ask, "--platforms", f"{DGX},{CPX}"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # read as one text: long lines are wrapped
    assert f"-> Recommended. {DGX}/gpu_hbm: " in out
    assert f"WARNING: the recommendation would change under kernels=per_table: {CPX}/system_memory" in out
    assert main(["recommend", *ask, "--platforms", f"{DGX},{CPX}", "--json"]) == 0
    best = next(o for o in json.loads(capsys.readouterr().out)["options"] if o["recommended"])
    assert best["defaulted_inputs"] == "precision,optimizer,kernels" and best["kernels"] == "compiled"
    assert best["throughput_low_eps"] < best["p50_throughput_eps"] <= best["throughput_high_eps"]
    assert "kernels=per_table" in best["stack_flips"] and "precision=fp32" in best["stack_alternatives"]


def test_whatif_errors_name_the_field_and_list_valid_ones(capsys, home):
    assert main(["whatif", "--model", "M9prod", "--platform", "cpu", "--home", str(home.root)]) == 2
    assert "unknown model 'M9prod'; valid models: M1prod, M2prod, M3prod" in capsys.readouterr().err
    assert (
        main(
            [
                "whatif",
                "--model",
                "M1prod",
                "--platform",
                "cpu",
                "--set",
                "colour=blue",
                "--home",
                str(home.root),
            ]
        )
        == 2
    )
    assert "unknown field 'colour'; valid fields: n_dense_features" in capsys.readouterr().err
    assert (
        main(
            [
                "whatif",
                "--model",
                "M1prod",
                "--platform",
                "cpu",
                "--set",
                "interaction=sum",
                "--home",
                str(home.root),
            ]
        )
        == 2
    )
    assert "valid values are dot, cat" in capsys.readouterr().err
    assert main(["whatif", "--model", "M1prod", "--platform", "tpu", "--home", str(home.root)]) == 2
    assert "valid platforms: big_basin, cpu, zion" in capsys.readouterr().err
    assert (
        main(
            [
                "whatif",
                "--model",
                "M1prod",
                "--platform",
                "cpu",
                "--placement",
                "gpu_hbm",
                "--home",
                str(home.root),
            ]
        )
        == 2
    )
    assert "cpu does not offer placement 'gpu_hbm'" in capsys.readouterr().err


def test_the_accuracy_pages_record_is_what_calibrate_answers_now(calibrate_answers):
    """docs/measurements/calibrate.json feeds the accuracy page's tables: it must be today's answer, to the
    figures the page shows (regenerate: fleet calibrate --json > docs/measurements/calibrate.json)."""
    from pipelines.lib.analysis import accuracy_tables

    now = json.loads(calibrate_answers["json"][1])
    kept = accuracy_tables.recorded()
    assert accuracy_tables.markdown(kept) == accuracy_tables.markdown(now)
    page = accuracy_tables.markdown(kept)
    assert page.count("\n| dgx") + page.count("\n| 1-node") > 2 and "28 of 28 pass" in page
