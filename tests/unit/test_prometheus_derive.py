"""Runs and utilisation samples derived from a cluster's scrapes (tests/support/prom_fixtures.py): counters
across a reset, gaps kept as gaps, a pod restarted on another node, DCGM series by pod and by node (never by
the exporter's Hostname), UUID and uuid, an unknown NIC speed, roles, statuses, windows; and the ledger,
quarantine and idempotence guarantees for scrape files; and the mapping file's validation."""

from __future__ import annotations

import datetime as dt
import json
import shutil

import polars as pl
import pytest

from pipelines.lib.ingest import ingest_partition, reconciliation
from pipelines.lib.ingest.prometheus.mapping import MappingError, build, ksm_label
from pipelines.lib.paths import DataHome
from pipelines.lib.storage import lake
from tests.support import prom_fixtures as pf

UTC = dt.UTC


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, hw):
    home = DataHome.resolve(tmp_path_factory.mktemp("cluster"))
    pf.write(home.landing / "k8s" / pf.DAY)
    home.user_catalog_dir.mkdir(parents=True)
    (home.user_catalog_dir / "prometheus.yaml").write_text(pf.mapping_yaml())
    outcome = ingest_partition(home, pf.DAY, hw.platforms.keys())
    return home, outcome


@pytest.fixture(scope="module")
def samples(cluster) -> pl.DataFrame:
    """The day's utilisation samples as promoted to the lake."""
    home, _ = cluster
    return lake.read_partition(home, "utilisation_samples", pf.DAY)


def _at(h, m=0):
    return dt.datetime(2026, 11, 20, h, m, tzinfo=UTC)


def _pod(samples: pl.DataFrame, pod: str) -> pl.DataFrame:
    return samples.filter(pl.col("server_id") == pod).sort("ts")


def test_every_scrape_is_accounted_for_and_the_day_promoted(cluster):
    _, outcome = cluster
    r = outcome.result
    assert outcome.promoted and all(c.passed for c in outcome.checks)
    ledger = r.ingest_ledger
    assert set(ledger["format"]) == {"openmetrics"} and set(ledger["table_name"]) == {"metric_samples"}
    assert reconciliation(ledger).height == 0
    assert int(ledger["rows_accepted"].sum()) == r.metric_samples_rows > 60_000
    assert r.quarantine.height == 0


def test_runs_have_their_jobs_windows_roles_statuses_and_platforms(cluster):
    _, outcome = cluster
    runs = {r["run_id"]: r for r in outcome.result.runs.iter_rows(named=True)}
    assert set(runs) == {"ml/ctr-a", "ml/gpu-b", "ml/run-d"}  # late-c started the day before
    a, b, d = runs["ml/ctr-a"], runs["ml/gpu-b"], runs["ml/run-d"]
    assert (a["start_ts"], a["end_ts"], a["status"], a["platform"]) == (_at(1), _at(2), "succeeded", "cpu")
    # master + 2 workers; the evaluator (ignored) and the sidecar (unmapped) are in no role
    assert (a["n_trainers"], a["n_sparse_ps"], a["n_dense_ps"], a["n_readers"]) == (3, 1, 0, 0)
    assert (b["status"], b["platform"], b["n_trainers"]) == ("failed", "big_basin", 2)
    assert (d["status"], d["end_ts"], d["start_ts"]) == ("running", None, _at(23, 30))
    # what telemetry cannot know stays null
    assert all(
        a[f] is None for f in ("model_name", "placement", "embedding_gb", "batch_size", "throughput_eps")
    )
    notes = " | ".join(outcome.result.notes)
    assert "1 job(s) in these samples started on another day" in notes
    assert "['sidecar']" in notes and "on two nodes" in notes and "unknown NIC speed" in notes


def test_samples_follow_the_grid_of_their_job(samples):
    s = samples
    master = _pod(s, "ctr-a-master-0")
    assert master["ts"].to_list() == [_at(1) + dt.timedelta(minutes=k) for k in range(60)]
    assert master["cpu_util"].to_list() == pytest.approx([0.8] * 60, abs=1e-9)
    assert master["mem_cap_util"].to_list() == pytest.approx([0.5] * 60)
    assert master["mem_bw_util"].to_list() == pytest.approx([0.4] * 60)  # pcm-sensor-server's system total
    # no memory-bandwidth exporter on the other nodes: null, not 0
    assert s.filter(pl.col("server_id") != "ctr-a-master-0")["mem_bw_util"].null_count() == s.height - 60


def test_a_counter_reset_gives_no_negative_or_halved_rate(samples):
    w1 = _pod(samples, "ctr-a-worker-1")
    before_move = w1.filter(pl.col("ts") < _at(1, 40))
    assert before_move.height == 40  # across the reset at 01:30, every interval
    assert before_move["cpu_util"].to_list() == pytest.approx([0.7] * 40, abs=1e-9)


def test_a_gap_stays_a_gap(samples):
    w0 = _pod(samples, "ctr-a-worker-0")
    minutes = {t.minute for t in w0.filter(pl.col("ts").dt.hour() == 1)["ts"]}
    assert minutes == set(range(60)) - set(range(20, 30))  # node_exporter missed 01:20-01:30
    assert w0["cpu_util"].to_list() == pytest.approx([0.6] * 50, abs=1e-9)  # no flat line, no dip


def test_a_pod_restarted_on_another_node_is_followed_there(samples):
    w1 = _pod(samples, "ctr-a-worker-1")
    assert w1.height == 59  # the interval in which it was seen on both nodes has no sample
    assert _at(1, 40) not in w1["ts"].to_list()
    after = w1.filter(pl.col("ts") > _at(1, 40))
    assert after["cpu_util"].to_list() == pytest.approx([0.5] * 19, abs=1e-9)  # cpu-4's load


def test_network_counts_real_nics_against_their_speed_or_the_platforms(samples):
    s = samples
    ps = _pod(s, "ctr-a-ps-0")
    assert ps["net_bw_util"].to_list() == pytest.approx([0.25] * 60)  # lo and veth not counted
    # cpu-2's NIC reads -125000: the catalog's cpu NIC (3.125 GB/s) is the capacity
    w0 = _pod(s, "ctr-a-worker-0")
    assert w0["net_bw_util"].to_list() == pytest.approx([0.1 * pf.NIC_10G / 3.125e9] * 50)


def test_gpus_by_pod_or_by_node_never_by_the_exporters_hostname(samples, hw):
    s = samples
    master = _pod(s, "gpu-b-master-0")
    assert master.height == 30
    # two GPUs, one labelled UUID and one uuid: both counted
    assert master["gpu_util"].to_list() == pytest.approx([0.8] * 30)
    assert master["gpu_tensor_util"].to_list() == pytest.approx([0.4] * 30)
    assert master["gpu_mem_util"].to_list() == pytest.approx([0.25] * 30)
    pcie = 6e9 / (hw.platforms["big_basin"].pcie_gb_per_s * 1e9)
    assert master["gpu_pcie_util"].to_list() == pytest.approx([pcie] * 30)
    assert master["gpu_nvlink_util"].null_count() == 30  # not exported
    worker = _pod(s, "gpu-b-worker-0")  # by instance (the node's IP); GPU_UTIL only
    assert worker["gpu_util"].to_list() == pytest.approx([0.6] * 30)
    assert worker["gpu_tensor_util"].null_count() == 30
    ctr_a = s.filter(pl.col("run_id") == "ml/ctr-a")
    assert ctr_a.height == 60 + 50 + 59 + 60 and ctr_a["gpu_util"].null_count() == ctr_a.height  # CPU nodes


def test_ingesting_the_day_again_gives_the_same_lake(cluster, hw):
    home, first = cluster
    again = ingest_partition(home, pf.DAY, hw.platforms.keys())
    assert again.result.runs.drop("day").equals(first.result.runs.drop("day"))
    assert again.result.samples_rows == first.result.samples_rows
    assert again.result.metric_samples_rows == first.result.metric_samples_rows


def test_a_scrape_delivered_twice_and_a_repeated_sample_are_duplicates(tmp_path, hw):
    home = DataHome.resolve(tmp_path)
    folder = home.landing / "k8s" / pf.DAY
    paths = pf.write(folder)
    shutil.copy(paths[3], folder / "pcm-again.om")  # the same bytes: file_duplicate
    text = paths[3].read_text().splitlines()
    sample = next(x for x in text if x.startswith("DRAM_Reads"))
    (folder / "pcm-overlap.om").write_text(f"# TYPE DRAM_Reads unknown\n{sample}\n# EOF\n")
    out = ingest_partition(home, pf.DAY, hw.platforms.keys()).result
    q = out.quarantine
    assert q.filter(pl.col("source_file").str.ends_with("pcm-again.om"))["reason_code"].to_list() == [
        "file_duplicate"
    ]
    dup = q.filter(pl.col("source_file").str.ends_with("pcm-overlap.om")).row(0, named=True)
    assert (dup["reason_code"], dup["row_number"], dup["table_name"]) == (
        "duplicate_key",
        2,
        "metric_samples",
    )
    assert "pcm.om" in dup["message"] and reconciliation(out.ingest_ledger).height == 0


def test_a_derived_row_the_contract_rejects_is_quarantined_where_its_evidence_is(tmp_path, hw):
    home = DataHome.resolve(tmp_path)
    pf.write(home.landing / "k8s" / pf.DAY)
    home.user_catalog_dir.mkdir(parents=True)
    # a NIC capacity set far too low: network above 1, beyond the clip tolerance
    (home.user_catalog_dir / "prometheus.yaml").write_text(
        json.dumps({**pf.MAPPING, "nic_bytes_per_s": 1.0e6})
    )
    out = ingest_partition(home, pf.DAY, hw.platforms.keys()).result
    bad = out.quarantine.filter(pl.col("table_name") == "utilisation_samples")
    assert bad.height > 0 and set(bad["reason_code"]) == {"out_of_bounds"}
    row = bad.row(0, named=True)
    assert row["source_file"].endswith("kube-state-metrics.om") and row["row_number"] > 0
    assert row["message"].startswith("derived from Prometheus samples: 'net_bw_util'")
    assert json.loads(row["raw_record"])["server_id"] == "ctr-a-worker-0"
    # the ledger counts the scrapes' samples, all accepted; the derived reject is not one of them
    assert reconciliation(out.ingest_ledger).height == 0
    assert int(out.ingest_ledger["rows_quarantined"].sum()) == 0


def test_a_gpu_reading_no_sample_can_use_is_quarantined_naming_its_value(tmp_path, hw):
    home = DataHome.resolve(tmp_path)
    dcgm = pf.write(home.landing / "k8s" / pf.DAY)[2]
    lines = dcgm.read_text().splitlines()
    gpu0 = [
        i
        for i, x in enumerate(lines)
        if x.startswith("DCGM_FI_PROF_GR_ENGINE_ACTIVE{") and 'UUID="' in x and "exported_pod" in x
    ]

    def at(i: int) -> dt.datetime:
        return dt.datetime.fromtimestamp(float(lines[i].rsplit(" ", 1)[1]), UTC)

    inside = [i for i in gpu0 if _at(3, 5) <= at(i) <= _at(3, 25)]
    before = next(i for i in gpu0 if at(i) < _at(3))  # the pod is not running yet: no sample wants it
    bad = {inside[0]: "NaN", inside[10]: "+Inf", inside[20]: "-0.5", before: "NaN"}
    for i, value in bad.items():
        head, _, ts = lines[i].rsplit(" ", 2)
        lines[i] = f"{head} {value} {ts}"
    dcgm.write_text("\n".join(lines) + "\n")
    home.user_catalog_dir.mkdir(parents=True)
    (home.user_catalog_dir / "prometheus.yaml").write_text(pf.mapping_yaml())
    out = ingest_partition(home, pf.DAY, hw.platforms.keys()).result
    q = out.quarantine.sort("row_number")
    # each reading a sample would have used is named at its own line; the one before the pod ran is not
    assert q["row_number"].to_list() == [i + 1 for i in sorted(bad) if i != before]
    assert set(q["source_file"]) == {f"k8s/{pf.DAY}/dcgm-exporter.om"}
    assert set(q["table_name"]) == {"utilisation_samples"} and set(q["field"]) == {"value"}
    by_value = {json.loads(r["raw_record"])["value"]: r for r in q.iter_rows(named=True)}
    assert {v: r["reason_code"] for v, r in by_value.items()} == {
        "nan": "not_finite",
        "inf": "not_finite",
        "-0.5": "out_of_bounds",
    }
    message = by_value["-0.5"]["message"]
    assert message.startswith(
        "derived from Prometheus samples: DCGM_FI_PROF_GR_ENGINE_ACTIVE reading -0.5 at 2026-11-20T03:"
    )
    assert "GPU GPU-20c56d28-0da5-6d26-a36a-e7af1ce25860" in message and "pod ml/gpu-b-master-0" in message
    assert message.endswith("is outside [0, 1]: left out of gpu_util")
    # left out, not averaged in: each interval's GPU mean is over the readings that are numbers in range
    master = _pod(lake.read_partition(home, "utilisation_samples", pf.DAY), "gpu-b-master-0")
    assert master["gpu_util"].to_list() == pytest.approx([0.8] * 30)
    # the scrapes' samples are all accepted into metric_samples, as delivered
    assert reconciliation(out.ingest_ledger).height == 0
    assert int(out.ingest_ledger["rows_quarantined"].sum()) == 0


def test_kube_state_metrics_label_names():
    assert ksm_label("training.kubeflow.org/job-name") == "label_training_kubeflow_org_job_name"
    assert ksm_label("node.kubernetes.io/instance-type") == "label_node_kubernetes_io_instance_type"
    assert ksm_label("replicaType") == "label_replica_type"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"interval_s": 0}, "interval_s must be a whole number in [1, 86400] s, got 0"),
        ({"roles": {"worker": "trainerz"}}, "roles maps to {'worker': 'trainerz'}"),
        ({"platforms": {"x1": "tpu"}}, "not in the hardware catalog"),
        ({"nic_exclude": "lo|("}, "nic_exclude must be a regular expression"),
        ({"run_id": "{namespace}"}, "run_id must be a template with {job}"),
        ({"metrics": {"gpu_magic": "X"}}, "metrics has unknown keys ['gpu_magic']"),
        ({"interval": 60}, "unknown keys ['interval']"),
        ({"default_platform": "tpu"}, "default_platform must be a hardware catalog platform"),
    ],
)
def test_a_mapping_file_is_validated_key_by_key(change, message, hw):
    with pytest.raises(MappingError) as exc:
        build(change, "m.yaml", frozenset(hw.platforms))
    assert message in str(exc.value) and str(exc.value).startswith("m.yaml: ")


def test_the_default_mapping_is_kubeflows(hw):
    m = build(None, "defaults", frozenset(hw.platforms))
    assert m.roles == {"master": "trainer", "chief": "trainer", "worker": "trainer", "ps": "sparse_ps"}
    assert m.job_labels[0] == "training.kubeflow.org/job-name"
    assert m.metrics["gpu_active"] == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
