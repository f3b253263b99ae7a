"""Defaults that fit the question (issue 42 items 1-2): a workload that states no software runs its platform's
stack, the paper's fleet its 2019 one, anything else today's; every answer names what it assumed and shows
the range over the alternatives."""

import numpy as np
import polars as pl
import pytest

from pipelines.lib.analysis import benchmarks
from workload_model import alternatives, defaults, stack
from workload_model.catalog import load_hardware, load_models
from workload_model.sizing import workload_of_model
from workload_model.whatif import ask

DGX = "mlperf_nvidia_dgxa100_ngc21_05_merlin_hugectr"
CPX = "mlperf_intel_1_node_8s_cpx_2_pytorch"


@pytest.fixture(scope="module")
def catalogs():
    return benchmarks.example_catalogs()


def unstated(model):
    """A catalog model described by a planner who says nothing of its software."""
    return workload_of_model(model) | dict.fromkeys(defaults.STACK_FIELDS) | {"kernels_on": {}}


def test_the_paper_platforms_run_the_2019_stack_and_others_todays_by_class(catalogs):
    hw, _ = catalogs
    assert all(
        stack.platform_stack(hw.platforms[p]) == defaults.PAPER_STACK for p in ("cpu", "big_basin", "zion")
    )
    assert stack.platform_stack(hw.platforms[DGX]) == {
        "precision": "fp16",
        "optimizer": "sgd",
        "kernels": "compiled",
    }
    assert stack.platform_stack(hw.platforms[CPX])["precision"] == "bf16"  # AVX-512 BF16 units
    assert stack.precisions(hw.platforms[DGX]) == ("fp32", "tf32", "fp16")
    assert stack.precisions(hw.platforms["big_basin"]) == ("fp32", "fp16")  # V100: no tf32


def test_a_stated_stack_is_kept_and_only_what_is_missing_is_named(catalogs):
    hw, _ = catalogs
    rows = pl.DataFrame(
        {
            "platform": [DGX, DGX, "big_basin"],
            "precision": [None, "fp32", None],
            "kernels": ["graph", None, None],
        }
    )
    got = stack.resolve(rows, hw)
    assert got["precision"].to_list() == ["fp16", "fp32", "fp32"]
    assert got["kernels"].to_list() == ["graph", "compiled", "per_table"]
    assert got["defaulted_inputs"].to_list() == [
        "precision,optimizer",
        "optimizer,kernels",
        "precision,optimizer,kernels",
    ]
    assert stack.resolve(got, hw)["defaulted_inputs"].equals(got["defaulted_inputs"])  # resolving twice


def test_the_paper_fleet_keeps_its_answers(catalogs):
    """M1-M3prod on the paper's platforms state no stack and get exactly the 2019 one."""
    hw = load_hardware()
    for name, m in load_models().items():
        assert (m.precision, m.optimizer, m.kernels) == (None, None, None), name
    rows = pl.DataFrame({"platform": ["cpu", "big_basin", "zion"]})
    got = stack.resolve(rows, hw)
    assert got.select(defaults.STACK_FIELDS).unique().to_dicts() == [defaults.PAPER_STACK]


def test_b6_without_software_every_mlperf_system_is_within_2x_and_with_it_as_before():
    report = benchmarks.evaluate(loso=False)
    unstated_err = np.exp(np.abs(np.log(report.table["unstated_ratio"].to_numpy())))
    assert unstated_err.max() <= benchmarks.UNSTATED_WITHIN, report.table.select("platform", "unstated_ratio")
    b6 = next(c for c in report.checks if c.id == "b6")
    assert b6.passed and "no software stated" in b6.description


def test_without_software_a_dgx_a100_ranks_first_and_cpus_below_every_nvlink_server(catalogs):
    from pipelines.lib.analysis.recommend import Fleet, fit_correction, recommend
    from pipelines.lib.contracts import contract

    hw, models = catalogs
    fleet = Fleet(contract("runs").empty_frame())
    mlperf = [p for p in hw.platforms if p.startswith("mlperf_")]
    res = recommend(unstated(models["dlrm"]), hw, fleet, fit_correction(fleet, hw), "throughput", mlperf)
    fits = res.filter("fits")
    assert fits["platform"][0].startswith("mlperf_nvidia_dgxa100")
    linked = fits.filter(
        pl.col("platform").map_elements(lambda p: hw.platforms[p].gpu_peers == "links", pl.Boolean)
    )
    cpus = fits.filter(pl.col("platform").str.contains("intel"))
    assert cpus["rank"].min() > linked["rank"].max()
    assert fits["defaulted_inputs"][0] == "precision,optimizer,kernels"


def test_an_answer_shows_its_range_over_every_kernel_mode_and_precision_the_hardware_runs(catalogs):
    hw, models = catalogs
    rows = ask(unstated(models["dlrm"]), [DGX, CPX], None, hw, {}).rows.filter("default_placement")
    dgx, cpx = (rows.filter(pl.col("platform") == p).row(0, named=True) for p in (DGX, CPX))
    assert dgx["defaulted_inputs"] == "precision,optimizer,kernels"
    labels = [part.split(" ")[0] for part in dgx["stack_alternatives"].split("; ")]
    assert labels == [
        "kernels=per_table",
        "kernels=fused",
        "kernels=graph",
        "precision=fp32",
        "precision=tf32",
    ]
    values = [float(part.split(" ")[1].replace(",", "")) for part in dgx["stack_alternatives"].split("; ")]
    assert dgx["throughput_low_eps"] == pytest.approx(min(values + [dgx["throughput_eps"]]), rel=1e-6)
    assert dgx["throughput_high_eps"] == pytest.approx(max(values + [dgx["throughput_eps"]]), rel=1e-6)
    assert (
        cpx["stack_alternatives"].startswith("precision=fp32 ") and "kernels" not in cpx["stack_alternatives"]
    )
    stated = ask(workload_of_model(models["dlrm"]), [DGX], "gpu_hbm", hw, {}).rows.row(0, named=True)
    assert stated["defaulted_inputs"] == "" and stated["stack_alternatives"] is None


def test_a_flip_is_flagged_where_the_kernel_mode_changes_the_recommended_option(catalogs):
    """MLPerf's DLRM on a DGX A100 or an 8-socket Cooper Lake cluster, software unstated: the GPU server wins
    under today's compiled kernels, but under the 2019 eager per-table stack its 26 tables' dispatches and
    collectives put the CPUs ahead. The answer says so, and stating that stack confirms it."""
    from pipelines.lib.analysis.recommend import Fleet, fit_correction, recommend
    from pipelines.lib.contracts import contract

    hw, models = catalogs
    fleet = Fleet(contract("runs").empty_frame())
    correction = fit_correction(fleet, hw)
    best = recommend(unstated(models["dlrm"]), hw, fleet, correction, "throughput", [DGX, CPX]).filter(
        "recommended"
    )
    assert best["platform"][0] == DGX
    flips = dict(part.split(": ") for part in best["stack_flips"][0].split("; "))
    assert flips.get("kernels=per_table") == f"{CPX}/system_memory", flips
    eager = unstated(models["dlrm"]) | {"kernels": "per_table"}
    again = recommend(eager, hw, fleet, correction, "throughput", [DGX, CPX]).filter("recommended")
    assert again["platform"][0] == CPX
    assert "kernels=" not in (again["stack_flips"][0] or "")  # stated: no longer an assumption


def test_flips_are_per_group_and_ignore_ties():
    alt = alternatives.Alternatives(
        [("kernels", "graph")], np.array([[5.0, 5.0, 3.0, 9.0]]), np.array([[True, True, True, True]])
    )
    got = alternatives.flips(
        alt,
        np.array([0, 0, 1, 1]),
        np.array([True, False, True, False]),
        np.array([True, True, True, True]),
        np.ones(4),
        np.array(["a", "b", "c", "d"]),
    )
    assert got.to_list() == [None, None, "kernels=graph: d", None]
