"""Server design in the catalog (issue 42 item 3): GPU peers over PCIe, NICs with GPUDirect RDMA, local
dataset drives and CPU matrix engines follow the path a spec sheet describes, each at a rate a public
component measurement checks (workload_model/components.py)."""

import re
from pathlib import Path

import polars as pl
import pytest
import yaml

from workload_model import components
from workload_model.catalog import CatalogError, load_hardware
from workload_model.coefficients import DEFAULT
from workload_model.model import predict_frame
from workload_model.whatif import ask

ROOT = Path(__file__).resolve().parents[2]

# An 8-GPU PCIe server from its spec sheet: A100-PCIe-class GPUs in Gen4 x16 slots behind two PCIe switches
# (four GPUs each, one Gen4 x16 uplink per switch), peer-to-peer enabled, no NVLink.
PCIE_SERVER = {
    "description": "8x A100-PCIe 40GB behind two PCIe Gen4 switches, peer-to-peer",
    "gpus": 8,
    "sockets": 2,
    "cpu_fp32_tflops": 5.3,
    "dram_gb": 1024,
    "dram_bw_gb_per_s": 409.6,
    "hbm_gb_per_gpu": 40,
    "hbm_bw_gb_per_s_per_gpu": 1555,
    "gpu_fp32_tflops": 19.5,
    "gpu_fp16_tflops": 312,
    "gpu_link_gb_per_s": 0,
    "gpu_peers": "pcie_p2p",
    "pcie_gen": 4,
    "pcie_switches": 2,
    "nic_gb_per_s": 12.5,
    "peak_w": 3500,
    "placements": ["gpu_hbm"],
}
WORKLOAD = {
    "model_name": "dlrm_like",
    "n_dense_features": 13,
    "n_sparse_features": 26,
    "n_tables": 26,
    "embedding_dim": 128,
    "embedding_gb": 96.0,
    "mean_lookups_per_table": 1.0,
    "lookup_power_law_alpha": 1.1,
    "bottom_mlp": "13-512-256-128",
    "top_mlp": "1024-1024-512-256-1",
    "interaction": "dot",
    "precision": "fp16",
    "optimizer": "sgd",
    "kernels": "graph",
    "batch_size": 55296,
    "n_trainers": 1,
    "n_sparse_ps": 0,
    "n_dense_ps": 0,
    "n_readers": 0,
}


def _catalog(tmp_path, **platforms):
    path = tmp_path / "hardware.yaml"
    path.write_text(yaml.safe_dump({"platforms": platforms}))
    return load_hardware(path)


def _predict(hw, platform, **over):
    row = {**WORKLOAD, "platform": platform, "placement": "gpu_hbm", **over}
    return predict_frame(pl.DataFrame([row]), hw, DEFAULT).row(0, named=True)


def test_the_pcie_rate_follows_generation_and_lanes_and_the_peer_path_its_description(tmp_path):
    hw = _catalog(tmp_path, p2p=PCIE_SERVER, nvl={**PCIE_SERVER, "gpu_link_gb_per_s": 300, "gpu_peers": None})
    assert hw.platforms["p2p"].pcie_gb_per_s == pytest.approx(16 * 1.969)
    assert hw.platforms["p2p"].pcie_uplink_gb_per_s == hw.platforms["p2p"].pcie_gb_per_s
    assert hw.platforms["nvl"].gpu_peers == "links"  # a server with GPU links uses them
    with pytest.raises(CatalogError, match="gpu_peers must be one of links, pcie_p2p, host"):
        _catalog(tmp_path, bad={**PCIE_SERVER, "gpu_peers": "nvswitch"})
    bare = {k: v for k, v in PCIE_SERVER.items() if k != "pcie_gen"}
    with pytest.raises(CatalogError, match="lacks .*pcie_gb_per_s"):
        _catalog(tmp_path, bare=bare)


def test_a_pcie_peer_to_peer_server_exchanges_at_pcie_rates_by_hand(tmp_path):
    """The all-to-all and all-reduce of one iteration on 8 GPUs behind two Gen4 switches, computed by hand:
    each GPU's exchange crosses its own x16 link, and what goes to the other switch's four GPUs crosses
    that switch's x16 uplink, which four GPUs share."""
    hw = _catalog(tmp_path, p2p=PCIE_SERVER, staged={**PCIE_SERVER, "gpu_peers": "host"})
    got = _predict(hw, "p2p")
    batch, gpus, per_gpu_link = 55296, 8, 16 * 1.969e9 * DEFAULT.eta_pcie
    pooled = 26 * 128 * 2  # one fp16 vector per feature
    a2a = 2 * (batch / gpus) * pooled * (gpus - 1) / gpus  # forward and backward, to 7 peers
    ring = 2 * (gpus - 1) / gpus * got["dense_params"] * 2  # fp16 gradients
    uplink = 4 * a2a * (4 / 7) + ring  # four GPUs' traffic to the other switch, one ring crossing
    links = max((a2a + ring) / per_gpu_link, uplink / per_gpu_link)
    latency = 2 * 7 * DEFAULT.peer_latency_s  # one aggregated message to each peer, each way
    assert uplink > a2a + ring  # the shared uplinks bind, not the GPUs' own links
    assert got["t_network_s"] == pytest.approx(links + latency, rel=1e-9)
    staged = _predict(hw, "staged")["t_network_s"]
    assert staged == pytest.approx((a2a + ring) * gpus / (DEFAULT.host_stage_gbps * 1e9) + latency, rel=1e-9)
    assert staged > 5 * got["t_network_s"]  # host staging is for servers without peer-to-peer
    one_switch = _catalog(tmp_path, one={**PCIE_SERVER, "pcie_switches": 1})
    assert _predict(one_switch, "one")["t_network_s"] == pytest.approx((a2a + ring) / per_gpu_link + latency)


def test_several_nics_with_gpudirect_rdma_reach_the_measured_share_of_line_rate(tmp_path):
    nvl = {**PCIE_SERVER, "gpu_link_gb_per_s": 300, "gpu_peers": "links", "nic_gb_per_s": 200, "nics": 8}
    hw = _catalog(tmp_path, rdma={**nvl, "gpudirect_rdma": True}, tcp=nvl)
    rdma, tcp = (_predict(hw, p, n_trainers=8, batch_size=71680) for p in ("rdma", "tcp"))
    assert rdma["throughput_eps"] > tcp["throughput_eps"]
    assert hw.platforms["rdma"].nics == 8 and hw.platforms["tcp"].gpudirect_rdma is False


def test_a_server_reading_local_nvme_is_not_bound_by_its_1gbe_nic(tmp_path):
    """Input from local drives: no reader tier is sized, and the management NIC carries no examples."""
    one_gbe = {**PCIE_SERVER, "nic_gb_per_s": 0.125}
    hw = _catalog(tmp_path, nvme={**one_gbe, "local_storage_gb_per_s": 13.8}, net=one_gbe)
    workload = {k: v for k, v in WORKLOAD.items() if not k.startswith("n_") or k.startswith("n_dense_f")}
    workload |= {"n_sparse_features": 26, "n_tables": 26, "batch_gpu": 55296}
    rows = ask(workload, ["nvme", "net"], "gpu_hbm", hw, {}).rows
    nvme, net = (rows.filter(pl.col("platform") == p).row(0, named=True) for p in ("nvme", "net"))
    assert hw.platforms["nvme"].input_from == "local_storage"
    assert nvme["n_readers"] == 0 and nvme["bottleneck"] not in ("trainer_network", "readers")
    assert net["bottleneck"] == "trainer_network" and nvme["throughput_eps"] > 10 * net["throughput_eps"]


def test_a_cpu_matrix_engine_runs_16_bit_mlps_at_its_measured_share(tmp_path):
    cpu = {
        "gpus": 0,
        "sockets": 2,
        "cores": 112,
        "cpu_fp32_tflops": 17.2,
        "cpu_fp16_tflops": 17.2,
        "dram_gb": 1024,
        "dram_bw_gb_per_s": 614.4,
        "pcie_gb_per_s": 31.5,
        "nic_gb_per_s": 12.5,
        "peak_w": 1400,
        "placements": ["system_memory"],
    }
    # 2 x 56 cores x 2.0 GHz x 1,024 bf16 FLOP/cycle (AMX tiles)
    hw = _catalog(tmp_path, amx={**cpu, "cpu_matrix_tflops": 229.4}, avx=cpu)
    over = {"placement": "system_memory", "batch_size": 32768, "kernels": "fused"}
    amx16, avx16 = (_predict(hw, p, precision="bf16", **over)["t_mlp_s"] for p in ("amx", "avx"))
    amx32 = _predict(hw, "amx", precision="fp32", **over)["t_mlp_s"]
    achieved = {"amx": 229.4 * DEFAULT.eta_matrix_cpu, "avx": 17.2 * DEFAULT.eta_mlp_cpu}
    assert avx16 / amx16 == pytest.approx(achieved["amx"] / achieved["avx"])
    assert amx32 == pytest.approx(avx16)  # fp32 never runs on the tiles


def test_every_component_term_lies_within_its_public_measurements_and_the_docs_show_them():
    checks = components.evaluate()
    assert {c.id for c in checks} == {f"c{i}" for i in range(1, 8)}
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]
    assert all(re.search(r"github\.com|docs\.|/", c.measured) for c in checks)  # each names its source
    docs = (ROOT / "docs" / "model-terms.md").read_text()
    assert components.markdown() in docs, "regenerate: python -m workload_model.components"
