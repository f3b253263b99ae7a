"""Physics of the workload model beyond its 28 targets (issue 12, items 1-9): each test is a trend or an
invariant the model must respect on inputs it was not fitted to."""

from dataclasses import replace

import numpy as np
import pytest

from pipelines.cli import main
from workload_model.calibration import predict, system
from workload_model.model import DEFAULT
from workload_model.model_inputs import required_gb
from workload_model.whatif import apply_settings, ask


def _with(hw, **platforms):
    return replace(hw, platforms={**hw.platforms, **platforms})


def _one(hw, row):
    return predict([row], hw, DEFAULT).row(0, named=True)


def test_1_traffic_between_gpu_servers_goes_through_the_nic(hw, models):
    """A multi-server GPU run exchanges embeddings and gradients over the NICs, not at NVLink speed."""
    m2 = models["M2prod"]
    thr = {}
    for nic in (6.25, 100.0):
        h = _with(hw, big_basin=replace(hw.platforms["big_basin"], nic_gb_per_s=nic))
        # Fused kernels and data local to the servers: on the paper's eager per-table stack M2prod's 96
        # per-table all-to-alls are bound by their issue latency, not by the NIC's bytes, and a reader tier's
        # examples also cross the NIC (issue 20's per-collective costs and intake).
        thr[nic] = [
            _one(h, system(m2, "big_basin", "gpu_hbm", n_trainers=n, n_readers=0, kernels="fused"))[
                "throughput_eps"
            ]
            for n in (1, 2, 4)
        ]
    assert thr[6.25][0] == pytest.approx(thr[100.0][0])  # one server: the NIC plays no part
    assert thr[6.25][1] < 0.85 * thr[100.0][1] and thr[6.25][2] < 0.85 * thr[100.0][2]
    # Scale-out saturates on the NIC: four servers give far less than four times one server.
    assert thr[6.25][2] < 1.5 * thr[6.25][0]
    one, two = (
        _one(hw, system(m2, "big_basin", "gpu_hbm", n_trainers=n, n_readers=0, kernels="fused"))
        for n in (1, 2)
    )
    assert two["trainer_net_bw_util"] > 4 * one["trainer_net_bw_util"]  # the NIC carries the exchange


@pytest.mark.parametrize("platform, placement", [("cpu", "remote_ps"), ("big_basin", "gpu_hbm")])
def test_2_throughput_rises_then_levels_off_with_batch(hw, models, platform, placement):
    """Per-example cost is bounded as the batch outgrows caches (paper Fig. 11): no collapse."""
    kw = {"n_trainers": 1, "n_sparse_ps": 8, "n_dense_ps": 1} if platform == "cpu" else {}
    batches = (64, 256, 1024, 4096, 16384, 65536, 262144)
    thr = np.array(
        [
            _one(hw, system(models["M1prod"], platform, placement, batch_size=b, **kw))["throughput_eps"]
            for b in batches
        ]
    )
    assert thr[1] > thr[0]  # small batches amortise per-iteration overhead
    assert thr[-1] >= 0.5 * thr.max() and thr[-1] / thr[-2] > 0.75  # levels off, never collapses


def test_3_fit_check_and_ps_memory_count_the_same_bytes(hw, models):
    """Tables plus optimizer state must fit; PS memory utilisation uses the same bytes (<= 1 when it fits)."""
    m3 = models["M3prod"]
    three = _one(hw, system(m3, "cpu", "remote_ps", n_trainers=8, n_sparse_ps=3, n_dense_ps=1))
    assert three["required_gb"] == pytest.approx(required_gb(600.0)) and not three["fits"]
    for n in (6, 8, 16):
        r = _one(hw, system(m3, "cpu", "remote_ps", n_trainers=8, n_sparse_ps=n, n_dense_ps=1))
        assert r["fits"] and r["sparse_ps_mem_cap_util"] <= 1.0
        assert r["sparse_ps_mem_cap_util"] == pytest.approx(
            DEFAULT.ps_mem_base + r["required_gb"] / (n * hw.platforms["cpu"].dram_gb)
        )


def test_4_embedding_dim_sets_table_bytes(hw, models):
    answer = ask(models["M1prod"], ["cpu"], None, hw, {}, ("embedding_dim", [32, 64, 512])).rows
    gb = answer["embedding_gb"].to_list()
    assert gb == pytest.approx([20.0, 40.0, 320.0])  # rows x dim x 4 bytes: 40 GB at dim 64
    both = apply_settings(models["M1prod"].workload("cpu"), {"embedding_dim": 128, "embedding_gb": 10.0})
    assert both["embedding_gb"] == 10.0  # an explicit size wins


def test_5_host_pooling_is_a_declared_property_not_a_bandwidth_threshold(hw, models):
    m2 = models["M2prod"]
    thr = {}
    for bw in (511, 512):
        h = _with(hw, zion=replace(hw.platforms["zion"], dram_bw_gb_per_s=bw))
        thr[bw] = _one(h, system(m2, "zion", "system_memory"))["throughput_eps"]
    assert thr[511] == pytest.approx(thr[512], rel=0.01)
    assert hw.platforms["zion"].host_pooling and not hw.platforms["big_basin"].host_pooling
    uvm = _with(hw, zion=replace(hw.platforms["zion"], host_pooling=False))
    assert _one(uvm, system(m2, "zion", "system_memory"))["throughput_eps"] < 0.5 * thr[512]


def test_6_precision_selects_the_platforms_peak(hw, models, tmp_path):
    """A box with tensor-core peaks beats an older one on tf32/fp16 workloads, ties it on fp32."""
    import yaml

    from workload_model.catalog import load_hardware, needed_fields

    bb = hw.platforms["big_basin"]
    # Big Basin with faster tensor-core peaks: the same server, running the same default software.
    spec = {k: getattr(bb, k) for k in needed_fields()} | {"placements": ["gpu_hbm"], "stack": bb.stack}
    user = tmp_path / "hardware.yaml"
    user.write_text(
        yaml.safe_dump({"platforms": {"box": spec | {"gpu_tf32_tflops": 125, "gpu_fp16_tflops": 250}}})
    )
    h = load_hardware(user)
    m1 = models["M1prod"]
    # Graph-launched kernels and data local to the server: on the paper's eager per-table stack M1prod is
    # bound by per-table dispatch and collectives, and a reader tier's examples cross the NIC; the MLPs'
    # precision changes neither (issue 20's per-operator costs and intake).
    thr = {
        (p, prec): _one(h, system(m1, p, "gpu_hbm", gpus=8, precision=prec, kernels="graph", n_readers=0))[
            "throughput_eps"
        ]
        for p in ("box", "big_basin")
        for prec in ("fp32", "tf32", "fp16")
    }
    assert thr[("box", "fp32")] == pytest.approx(thr[("big_basin", "fp32")])
    assert thr[("box", "tf32")] > 1.5 * thr[("big_basin", "tf32")]  # V100: no tf32, runs at its fp32 peak
    assert thr[("box", "fp16")] > thr[("big_basin", "fp16")] > thr[("big_basin", "fp32")]
    assert h.platforms["big_basin"].gpu_tf32_tflops == h.platforms["big_basin"].gpu_fp32_tflops  # default


def test_7_cpu_system_memory_pays_the_dram_gather_not_the_nic(hw, models):
    base = replace(hw.platforms["cpu"], name="cpu_sm", placements=("remote_ps", "system_memory"))
    row = system(  # data local to the trainer (no reader tier, whose examples would cross the NIC)
        models["M2prod"],
        "cpu_sm",
        "system_memory",
        gpus=0,
        n_trainers=1,
        n_sparse_ps=0,
        n_dense_ps=0,
        n_readers=0,
    )
    r = {}
    for nic, bw in ((3.125, 256.0), (100.0, 256.0), (3.125, 64.0)):
        r[(nic, bw)] = _one(_with(hw, cpu_sm=replace(base, nic_gb_per_s=nic, dram_bw_gb_per_s=bw)), row)
    assert r[(3.125, 256.0)]["fits"] and r[(3.125, 256.0)]["t_embedding_s"] > 0
    # One trainer holds every shard: no lookup crosses the network.
    assert r[(3.125, 256.0)]["throughput_eps"] == pytest.approx(r[(100.0, 256.0)]["throughput_eps"], rel=0.01)
    assert r[(3.125, 64.0)]["t_embedding_s"] == pytest.approx(4 * r[(3.125, 256.0)]["t_embedding_s"])
    assert r[(3.125, 64.0)]["throughput_eps"] < r[(3.125, 256.0)]["throughput_eps"]


def test_8_tables_hold_the_bytes_features_make_the_lookups(hw, models):
    m1 = models["M1prod"]
    shared = _one(hw, system(m1, "big_basin", "gpu_hbm", n_sparse_features=64, n_tables=32))
    own = _one(hw, system(m1, "big_basin", "gpu_hbm"))
    assert shared["required_gb"] == own["required_gb"]
    assert shared["gather_bytes_per_example"] == 2 * own["gather_bytes_per_example"]
    assert shared["throughput_eps"] < own["throughput_eps"]
    w = apply_settings(m1.workload("cpu"), {"n_sparse_features": 64, "n_tables": 32})
    assert w["embedding_gb"] == m1.embedding_gb  # shared tables: same bytes
    w = apply_settings(m1.workload("cpu"), {"n_sparse_features": 64})
    assert w["n_tables"] == 64 and w["embedding_gb"] == 2 * m1.embedding_gb  # one table per feature


@pytest.mark.parametrize(
    "setting, bound",
    [
        ("n_trainers=0", "n_trainers='0': must be a whole number >= 1"),
        ("batch_size=0", "batch_size='0': must be a whole number >= 1"),
        ("embedding_dim=0", "embedding_dim='0': must be a whole number >= 1"),
        ("n_tables=0", "n_tables='0': must be a whole number >= 1"),
        ("lookup_power_law_alpha=7", "lookup_power_law_alpha='7': must be a number >= 0 and <= 5"),
        ("precision=fp8", "precision='fp8': valid values are fp32, tf32, fp16, bf16"),
    ],
)
def test_9_whatif_and_recommend_enforce_the_bounds(capsys, home, setting, bound):
    for cmd in (["whatif", "--platform", "cpu"], ["recommend"]):
        assert main([*cmd, "--model", "M1prod", "--set", setting, "--home", str(home.root)]) == 2
        err = capsys.readouterr().err
        assert bound in err and len(err.strip().splitlines()) == 1
