"""A small Kubernetes cluster's scrapes with every case the Prometheus path must get right, as OpenMetrics
text with timestamps (what promtool backfills), and the values they must give.

The day 2026-11-20, namespace ml, exporters scraped as a real Prometheus would (kube-state-metrics every
30 s, node_exporter every 15 s at +5 s, dcgm-exporter every 30 s at +11 s, pcm-sensor-server every 15 s
at +7 s); the mapping (MAPPING) reads 60-s intervals. The exporters' label sets follow node_exporter's
e2e fixture and dcgm-exporter's scrape in tests/fixtures (DataDog's): UUID, device, modelName, Hostname.

- ml/ctr-a 01:00-02:00, CPU nodes (instance type m5.24xlarge -> cpu): master-0 on cpu-1 (CPU 0.8; the only
  node with pcm-sensor-server: memory bandwidth 0.4), worker-0 on cpu-2 (CPU 0.6; node_exporter misses
  01:20-01:30: a gap; NIC speed unknown, -125000), worker-1 on cpu-3 (CPU 0.7; node_exporter restarts at
  01:30: a counter reset) restarted at 01:40 onto cpu-4 (CPU 0.5; seen on both nodes in one interval),
  ps-0 on cpu-2's neighbour cpu-5 (CPU 0.3, network 0.25 of a known 10 GbE NIC), an evaluator (ignored
  role) and a sidecar (an unmapped replica type); a non-training pod (coredns) shares cpu-1. Succeeded.
- ml/gpu-b 03:00-03:30 on p3dn.24xlarge nodes (-> big_basin): master-0 on gpu-1, whose dcgm-exporter runs
  in Kubernetes mode (exported_pod; Hostname is the exporter's pod) with two GPUs, one labelled UUID and
  one uuid (an older exporter): engine 0.9 / 0.7, tensor 0.5 / 0.3, framebuffer a quarter used, PCIe 6 / 3
  GB/s of 12; worker-0 on gpu-2, whose exporter labels GPUs by instance only and exposes GPU_UTIL (60 %)
  but no profiling metrics. The master ends Failed.
- ml/late-c started the day before (23:50) and ends 00:20: derived on its own day, not this one.
- ml/run-d starts 23:30 and is still running when the data ends (23:59:30): no end, status running.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

DAY = "2026-11-20"
NS = "ml"
T = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
CPUS = 4
NIC_10G = 1.25e9
DRAM_BW = 256e9
MAPPING = {
    "interval_s": 60,
    "max_gap_s": 45,
    "roles": {"master": "trainer", "worker": "trainer", "ps": "sparse_ps"},
    "platforms": {"m5.24xlarge": "cpu", "p3dn.24xlarge": "big_basin"},
}
FILES = ("kube-state-metrics.om", "node-exporter.om", "dcgm-exporter.om", "pcm.om")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _s(t: dt.datetime) -> str:
    return f"{t.timestamp():.3f}".rstrip("0").rstrip(".")


def _at(h: int, m: int = 0, s: int = 0, day: int = 0) -> dt.datetime:
    return T + dt.timedelta(days=day, hours=h, minutes=m, seconds=s)


def _every(start: dt.datetime, end: dt.datetime, step: int, offset: int = 0):
    t = start + dt.timedelta(seconds=offset)
    while t <= end:
        yield t
        t += dt.timedelta(seconds=step)


def _labels(**kv) -> str:
    return ",".join(f'{k}="{v}"' for k, v in kv.items())


# pod -> (job, replica, node, start, end, final phase); a restarted pod has two lives
PODS = [
    ("ctr-a-master-0", "ctr-a", "master", "cpu-1", _at(1), _at(2), "Succeeded"),
    ("ctr-a-worker-0", "ctr-a", "worker", "cpu-2", _at(1), _at(2), "Succeeded"),
    ("ctr-a-worker-1", "ctr-a", "worker", "cpu-3", _at(1), _at(1, 40, 30), None),
    ("ctr-a-worker-1", "ctr-a", "worker", "cpu-4", _at(1, 41), _at(2), "Succeeded"),
    ("ctr-a-ps-0", "ctr-a", "ps", "cpu-5", _at(1), _at(2), "Succeeded"),
    ("ctr-a-evaluator-0", "ctr-a", "evaluator", "cpu-6", _at(1), _at(2), "Succeeded"),
    ("ctr-a-sidecar-0", "ctr-a", "sidecar", "cpu-7", _at(1), _at(2), "Succeeded"),
    ("gpu-b-master-0", "gpu-b", "master", "gpu-1", _at(3), _at(3, 30), "Failed"),
    ("gpu-b-worker-0", "gpu-b", "worker", "gpu-2", _at(3), _at(3, 30), "Succeeded"),
    ("late-c-worker-0", "late-c", "worker", "cpu-8", _at(23, 50, day=-1), _at(0, 20), "Succeeded"),
    ("run-d-worker-0", "run-d", "worker", "cpu-8", _at(23, 30), None, None),
]
CPU_UTIL = {
    "cpu-1": 0.8,
    "cpu-2": 0.6,
    "cpu-3": 0.7,
    "cpu-4": 0.5,
    "cpu-5": 0.3,
    "cpu-6": 0.1,
    "cpu-7": 0.1,
    "cpu-8": 0.2,
    "gpu-1": 0.4,
    "gpu-2": 0.4,
}
PLATFORM = {
    **{f"cpu-{i}": "m5.24xlarge" for i in range(1, 9)},
    "gpu-1": "p3dn.24xlarge",
    "gpu-2": "p3dn.24xlarge",
}
IP = {node: f"10.0.{i // 10}.{i % 10 + 1}" for i, node in enumerate(sorted(PLATFORM))}
DATA_END = _at(23, 59, 30)
GAP = (_at(1, 20), _at(1, 30))  # node_exporter of cpu-2 not scraped
RESET = _at(1, 30, 5)  # node_exporter of cpu-3 restarts right after this scrape's predecessor
NET_UTIL = {"cpu-5": 0.25}


def _pod_lives(t: dt.datetime):
    for pod, job, replica, node, start, end, _ in PODS:
        if start <= t <= (end or DATA_END):
            yield pod, job, replica, node


def kube_state_metrics() -> str:
    lines = ["# TYPE kube_pod_labels gauge"]
    info, phase, nodes = ["# TYPE kube_pod_info gauge"], ["# TYPE kube_pod_status_phase gauge"], []
    uid = {}
    for t in _every(_at(23, 0, day=-1), DATA_END, 30):
        for pod, job, replica, node in _pod_lives(t):
            u = uid.setdefault((pod, node), f"uid-{len(uid)}")
            labels = _labels(namespace=NS, pod=pod, uid=u)
            lines.append(
                f'kube_pod_labels{{{labels},label_training_kubeflow_org_job_name="{job}",'
                f'label_training_kubeflow_org_replica_type="{replica}"}} 1 {_s(t)}'
            )
            info.append(f'kube_pod_info{{{labels},node="{node}",host_ip="{IP[node]}"}} 1 {_s(t)}')
            phase.append(f'kube_pod_status_phase{{{labels},phase="Running"}} 1 {_s(t)}')
        if _at(0, 55) <= t <= _at(2, 5):  # a pod that trains nothing, beside ctr-a's master
            labels = _labels(namespace="kube-system", pod="coredns-5d78c9869d-x2x9q", uid="uid-dns")
            lines.append(f"kube_pod_labels{{{labels}}} 1 {_s(t)}")
            info.append(f'kube_pod_info{{{labels},node="cpu-1",host_ip="{IP["cpu-1"]}"}} 1 {_s(t)}')
        for node in PLATFORM:
            kind = f'label_node_kubernetes_io_instance_type="{PLATFORM[node]}"'
            nodes.append(f'kube_node_labels{{node="{node}",{kind}}} 1 {_s(t)}')
    for pod, _job, _r, node, _s0, end, final in PODS:  # the phase a finished pod ends in, one scrape later
        if final:
            u = uid[(pod, node)]
            phase.append(
                f'kube_pod_status_phase{{{_labels(namespace=NS, pod=pod, uid=u)},phase="{final}"}} 1 '
                f"{_s(end + dt.timedelta(seconds=30))}"
            )
    return (
        "\n".join(
            [
                *_grouped(lines),
                *_grouped(info),
                *_grouped(phase),
                "# TYPE kube_node_labels gauge",
                *_grouped(nodes),
            ]
        )
        + "\n"
    )


def _grouped(lines: list[str]) -> list[str]:
    """Samples of one family ordered series by series, each series in time order (OpenMetrics)."""
    head = [x for x in lines if x.startswith("#")]
    body = [x for x in lines if not x.startswith("#")]
    body.sort(key=lambda x: (x.rsplit(" ", 2)[0], float(x.rsplit(" ", 1)[1])))
    return head + body


def _node_busy(node: str, t: dt.datetime) -> bool:
    """node_exporter is scraped around the pods a node runs (a test keeps its files small)."""
    margin = dt.timedelta(minutes=5)
    return any(
        n == node and start - margin <= t <= (end or DATA_END) + margin for *_, n, start, end, _ in PODS
    )


def node_exporter() -> str:
    idle, user, avail, total, rx, tx, speed = ([] for _ in range(7))
    for node in sorted(PLATFORM):
        inst = f'instance="{IP[node]}:9100"'
        u = CPU_UTIL[node]
        boot = _at(0, day=-2)
        for t in _every(_at(23, 0, day=-1), DATA_END, 15, 5):
            if not _node_busy(node, t) or (node == "cpu-2" and GAP[0] <= t < GAP[1]):
                continue
            since = boot if not (node == "cpu-3" and t >= RESET) else RESET - dt.timedelta(seconds=15)
            secs = (t - since).total_seconds()
            for cpu in range(CPUS):
                idle.append(
                    f'node_cpu_seconds_total{{cpu="{cpu}",mode="idle",{inst}}} {(1 - u) * secs!r} {_s(t)}'
                )
                user.append(f'node_cpu_seconds_total{{cpu="{cpu}",mode="user",{inst}}} {u * secs!r} {_s(t)}')
            total.append(f"node_memory_MemTotal_bytes{{{inst}}} 256000000000 {_s(t)}")
            avail.append(f"node_memory_MemAvailable_bytes{{{inst}}} 128000000000 {_s(t)}")
            rate = NET_UTIL.get(node, 0.1) * NIC_10G
            rx.append(f'node_network_receive_bytes_total{{device="eth0",{inst}}} {rate * secs!r} {_s(t)}')
            tx.append(
                f'node_network_transmit_bytes_total{{device="eth0",{inst}}} {rate / 2 * secs!r} {_s(t)}'
            )
            rx.append(f'node_network_receive_bytes_total{{device="lo",{inst}}} {9e9 * secs!r} {_s(t)}')
            tx.append(f'node_network_transmit_bytes_total{{device="veth1a2b",{inst}}} {9e9 * secs!r} {_s(t)}')
            known = -125000 if node == "cpu-2" else NIC_10G
            speed.append(f'node_network_speed_bytes{{device="eth0",{inst}}} {known} {_s(t)}')
    return (
        "\n".join(
            [
                "# TYPE node_cpu_seconds counter",
                *_grouped(idle + user),
                "# TYPE node_memory_MemTotal_bytes gauge",
                *_grouped(total),
                "# TYPE node_memory_MemAvailable_bytes gauge",
                *_grouped(avail),
                "# TYPE node_network_receive_bytes counter",
                *_grouped(rx),
                "# TYPE node_network_transmit_bytes counter",
                *_grouped(tx),
                "# TYPE node_network_speed_bytes gauge",
                *_grouped(speed),
            ]
        )
        + "\n"
    )


def dcgm_labels() -> dict[str, str]:
    """The label set of the vendored dcgm-exporter scrape's first series (its GPU template)."""
    text = (FIXTURES / "dcgm_exporter_datadog" / "metrics.txt").read_text()
    first = next(x for x in text.splitlines() if x.startswith("DCGM_FI_DEV_SM_CLOCK{"))
    inner = first[first.index("{") + 1 : first.rindex("}")]
    return dict(pair.split("=", 1) for pair in inner.split(","))


def dcgm_exporter() -> str:
    template = dcgm_labels()
    families: dict[str, list[str]] = {}
    fb_total = 32768.0
    for t in _every(_at(2, 50), _at(3, 40), 30, 11):
        for gpu, ident, active, tensor in ((0, "UUID", 0.9, 0.5), (1, "uuid", 0.7, 0.3)):
            labels = _labels(
                gpu=gpu,
                **{ident: f"GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586{gpu}"},
                device=f"nvidia{gpu}",
                modelName="Tesla V100-SXM2-32GB",
                Hostname="dcgm-exporter-x7k2p",
                DCGM_FI_DRIVER_VERSION=template["DCGM_FI_DRIVER_VERSION"].strip('"'),
                exported_namespace=NS,
                exported_pod="gpu-b-master-0",
                namespace="gpu-operator",
                pod="dcgm-exporter-x7k2p",
            )
            for name, v in (
                ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", active),
                ("DCGM_FI_DEV_GPU_UTIL", round(active * 100)),
                ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", tensor),
                ("DCGM_FI_DEV_FB_USED", fb_total / 4),
                ("DCGM_FI_DEV_FB_FREE", fb_total * 3 / 4 - 300),
                ("DCGM_FI_DEV_FB_RESERVED", 300.0),
                ("DCGM_FI_PROF_PCIE_TX_BYTES", 6e9),
                ("DCGM_FI_PROF_PCIE_RX_BYTES", 3e9),
            ):
                families.setdefault(name, []).append(f"{name}{{{labels}}} {v!r} {_s(t)}")
        labels = _labels(
            gpu=0,
            UUID="GPU-9ef1b6d0-3643-5dd7-b823-c0ec20dcf2d5",
            device="nvidia0",
            modelName="Tesla V100-SXM2-32GB",
            Hostname="dcgm-exporter-abcde",
            instance=f"{IP['gpu-2']}:9400",
        )
        families.setdefault("DCGM_FI_DEV_GPU_UTIL", []).append(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} 60 {_s(t)}")
    out = []
    for name, lines in families.items():
        out += [f"# TYPE {name} gauge", *_grouped(lines)]
    return "\n".join(out) + "\n"


def pcm() -> str:
    lines = []
    inst = f'instance="{IP["cpu-1"]}:9738"'
    for t in _every(_at(0, 30), _at(2, 30), 15, 7):
        secs = (t - _at(0)).total_seconds()
        for name, share in (("DRAM_Reads", 0.7), ("DRAM_Writes", 0.3)):
            lines.append(f'{name}{{aggregate="system",{inst}}} {0.4 * DRAM_BW * share * secs!r} {_s(t)}')
            lines.append(
                f'{name}{{socket="0",aggregate="socket",{inst}}} {0.2 * DRAM_BW * share * secs!r} {_s(t)}'
            )
    reads = [x for x in lines if x.startswith("DRAM_Reads")]
    writes = [x for x in lines if x.startswith("DRAM_Writes")]
    return (
        "\n".join(
            ["# TYPE DRAM_Reads unknown", *_grouped(reads), "# TYPE DRAM_Writes unknown", *_grouped(writes)]
        )
        + "\n"
    )


def write(folder: Path) -> list[Path]:
    """The four exporters' files (OpenMetrics, # EOF) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, text in zip(
        FILES, (kube_state_metrics(), node_exporter(), dcgm_exporter(), pcm()), strict=True
    ):
        path = folder / name
        path.write_text(text + "# EOF\n")
        out.append(path)
    return out


def mapping_yaml() -> str:
    return json.dumps(MAPPING)  # JSON is YAML
