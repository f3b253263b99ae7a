"""The synthetic fleet as a Kubernetes cluster's exporters would expose it: OpenMetrics text with timestamps
(the format `promtool tsdb create-blocks-from openmetrics` backfills), one file per exporter and day.

Every server of a run is a pod of a Kubeflow job on a node of its own (trainers on the run's platform, the
other roles on the CPU servers parameter servers run on), scraped every SAMPLE_INTERVAL_S from the run's
start to its end: a scrape at t_(k+1) closes sample k, so each counter grows by what sample k's
utilisation implies over the interval and each gauge reads sample k's value. What the exporters show:

- kube-state-metrics: kube_pod_labels (job name and replica type as Kubeflow labels them), kube_pod_info
  (node and host IP), kube_pod_status_phase (Running, then Succeeded or Failed one scrape after the end),
  kube_node_labels (the node's instance type = the platform), and a system pod that is no training pod;
- node_exporter (instance = the node's IP): node_cpu_seconds_total per CPU (idle and user), MemTotal and
  MemAvailable, network bytes of eth0 and lo (lo is not counted), node_network_speed_bytes of eth0, which
  reads -125000 (unknown) on every third node as it does on many VMs;
- dcgm-exporter (GPU servers): the graphics-engine active ratio, GPU_UTIL, framebuffer used / free /
  reserved, per GPU; half the nodes' exporters run in Kubernetes mode (the pod named in exported_pod, the
  Hostname label naming the exporter's own pod), the others label GPUs by node only with an older
  exporter's lower-case uuid label;
- pcm-sensor-server: DRAM_Reads and DRAM_Writes (bytes), per socket and for the system.

The roles map to replica types worker (trainers), ps (sparse PS), densePS and reader: ``MAPPING`` is the
mapping file that reads them back (interval_s = SAMPLE_INTERVAL_S, the replica types, platform labels).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl

from pipelines.lib import fileio
from synthetic_fleet.sampler import DayFleet
from synthetic_fleet.servers import SAMPLE_INTERVAL_S
from workload_model.catalog import HardwareCatalog

NAMESPACE = "dlrm"
REPLICA = {"trainer": "worker", "sparse_ps": "ps", "dense_ps": "densePS", "reader": "reader"}
GB = 1e9
MIB = 1 << 20
BASE_CPU_S = 86_400.0  # counters start where a day-old node would have them
CHUNK_SERVERS = 2_000  # servers formatted at once (memory is bounded by a chunk, not by the day)
MAPPING = {
    "interval_s": SAMPLE_INTERVAL_S,
    "max_gap_s": 1.5 * SAMPLE_INTERVAL_S,
    "roles": {"worker": "trainer", "ps": "sparse_ps", "denseps": "dense_ps", "reader": "reader"},
}
FILES = ("kube_state_metrics.om", "node_exporter.om", "dcgm_exporter.om", "pcm_sensor_server.om")


def mapping_yaml() -> str:
    """The mapping file that reads this exporters' view back (for <data home>/catalog/prometheus.yaml)."""
    roles = ", ".join(f"{k}: {v}" for k, v in MAPPING["roles"].items())
    return (
        "# Written for the synthetic fleet's exporters (synthetic_fleet/exporters.py): they scrape every\n"
        f"# {SAMPLE_INTERVAL_S} s and name roles with these replica types.\n"
        f"interval_s: {MAPPING['interval_s']}\n"
        f"max_gap_s: {MAPPING['max_gap_s']:g}\n"
        f"roles: {{{roles}}}\n"
    )


def _servers(fleet: DayFleet, hw: HardwareCatalog) -> pl.DataFrame:
    """One row per server: its pod, node, IP, platform and hardware figures."""
    runs = fleet.runs.select("run_id", "platform", "status", "end_ts")
    s = (
        fleet.samples.group_by("run_id", "server_id", "role", maintain_order=True)
        .agg(pl.col("ts").min().alias("first_ts"))
        .join(runs, on="run_id")
        .with_row_index("n")
    )
    ps = hw.remote_ps_platform
    s = s.with_columns(
        pl.when(pl.col("role") == "trainer")
        .then(pl.col("platform"))
        .otherwise(pl.lit(ps))
        .alias("node_platform"),
        pl.col("server_id").str.extract(r"-(\d+)$").alias("idx"),
    )
    figures = pl.DataFrame(
        [
            {
                "node_platform": name,
                "cpus": int(p.cores or 1),
                "mem_total": float(p.dram_gb or 0) * GB,
                "nic": float(p.nic_gb_per_s or 0) * GB,
                "dram_bw": float(p.dram_bw_gb_per_s or 0) * GB,
                "gpus": int(p.gpus or 0),
                "fb_mib": float(p.hbm_gb_per_gpu or 0) * GB / MIB,
            }
            for name, p in hw.platforms.items()
        ]
    )
    n = pl.col("n")
    return s.join(figures, on="node_platform").with_columns(
        pl.format(
            "{}-{}-{}", "run_id", pl.col("role").replace_strict(REPLICA).str.to_lowercase(), "idx"
        ).alias("pod"),
        pl.format(
            "{}-{}", pl.col("node_platform").str.replace_all("_", "-"), n.cast(pl.String).str.zfill(6)
        ).alias("node"),
        pl.format("10.{}.{}.{}", (n // 65536) % 256, (n // 256) % 256, n % 256).alias("ip"),
        pl.col("role").replace_strict(REPLICA).alias("replica"),
        (n % 3 == 0).alias("speed_unknown"),
        (n % 2 == 0).alias("dcgm_in_k8s"),
        pl.format("{}-{}", pl.col("run_id").hash(7).cast(pl.String), n.cast(pl.String)).alias("uid"),
    )


def exposition_samples(fleet: DayFleet, hw: HardwareCatalog) -> int:
    """How many samples ``write_exporters`` writes for the day (sizes a benchmark's export)."""
    s = _servers(fleet, hw).join(
        fleet.samples.group_by("run_id", "server_id").len().rename({"len": "n_samples"}),
        on=["run_id", "server_id"],
    )
    scrapes = pl.col("n_samples") + 1
    per_scrape = 2 * pl.col("cpus") + 7 + 4 + 5 * pl.col("gpus")  # node, pcm, dcgm (per GPU)
    kube = 2 * scrapes + 2 + scrapes + 1 + scrapes + 2  # labels, info (one scrape after), phases, node labels
    system = 2 * (86_400 // SAMPLE_INTERVAL_S)
    return int(s.select((scrapes * per_scrape + kube).sum()).item()) + system


def _points(fleet: DayFleet, servers: pl.DataFrame) -> pl.DataFrame:
    """Every scrape of every server: t_0 .. t_n, with sample k's values at t_(k+1) (t_0 repeats sample 0)."""
    samples = fleet.samples.join(servers.select("run_id", "server_id", "n"), on=["run_id", "server_id"])
    closing = samples.with_columns((pl.col("ts") + pl.duration(seconds=SAMPLE_INTERVAL_S)).alias("scrape"))
    opening = (
        samples.sort("ts")
        .group_by("n", maintain_order=True)
        .first()
        .with_columns(pl.col("ts").alias("scrape"))
    )
    return (
        pl.concat(
            [
                opening.with_columns(pl.lit(True).alias("first")),
                closing.with_columns(pl.lit(False).alias("first")),
            ],
            how="diagonal",
        )
        .sort("n", "scrape")
        .with_columns(pl.col("scrape").dt.epoch("s").alias("t"))
        .drop("run_id", "server_id", "role", "ts", "power_w")
    )


def _lines(frame: pl.DataFrame, name: str, labels: pl.Expr, value: pl.Expr) -> pl.Series:
    """Exposition lines ``name{labels} value t`` (t in seconds), in the frame's order."""
    return frame.select(
        pl.concat_str(
            pl.lit(name + "{"),
            labels,
            pl.lit("} "),
            value.cast(pl.Float64).cast(pl.String),  # the shortest text that reads back as the same float
            pl.lit(" "),
            pl.col("t").cast(pl.String),
        )
    ).to_series()


def _label(key: str, expr: pl.Expr) -> pl.Expr:
    return pl.concat_str(pl.lit(f'{key}="'), expr, pl.lit('"'))


def _labels(*pairs: tuple[str, pl.Expr]) -> pl.Expr:
    return pl.concat_str([_label(k, v) for k, v in pairs], separator=",")


# ---------------------------------------------------------------- the four exporters, family by family


def _chunks(servers: pl.DataFrame, points: pl.DataFrame) -> Iterator[tuple[pl.DataFrame, pl.DataFrame]]:
    for lo in range(0, servers.height, CHUNK_SERVERS):
        part = servers.slice(lo, CHUNK_SERVERS)
        yield part, points.filter(pl.col("n").is_in(part["n"].implode())).sort("n", "scrape")


def _counter(frame: pl.DataFrame, increase: pl.Expr, by: list[str], base: float = 0.0) -> pl.Expr:
    """A counter at each scrape: base + the increases of the samples closed so far (0 at the first)."""
    return pl.lit(base) + pl.when(pl.col("first")).then(0.0).otherwise(increase).cum_sum().over(by)


def _kube(servers: pl.DataFrame, points: pl.DataFrame, day: str) -> Iterator[str]:
    """kube-state-metrics: pods' labels, placement and phase; nodes' instance types; one system pod."""
    last = points.group_by("n").agg(pl.col("t").max().alias("t_end"))
    after = servers.join(last, on="n").with_columns((pl.col("t_end") + SAMPLE_INTERVAL_S).alias("t"))
    pod = _labels(("namespace", pl.lit(NAMESPACE)), ("pod", pl.col("pod")), ("uid", pl.col("uid")))
    system = pl.DataFrame({"t": np.arange(0, 86_400, SAMPLE_INTERVAL_S) + _epoch(day)})
    sys_pod = _labels(
        ("namespace", pl.lit("kube-system")),
        ("pod", pl.lit("coredns-5d78c9869d-abcde")),
        ("uid", pl.lit("0b7e")),
    )
    yield "# TYPE kube_pod_labels gauge\n"
    yield _join(_lines(system, "kube_pod_labels", sys_pod, pl.lit(1.0)))
    for part, pts in _chunks(servers, points):
        frame = pl.concat([pts.select("n", "t"), after.join(part.select("n"), on="n").select("n", "t")]).sort(
            "n", "t"
        )
        frame = frame.join(part, on="n")
        labels = pl.concat_str(
            [
                pod,
                _labels(
                    ("label_training_kubeflow_org_job_name", pl.col("run_id")),
                    ("label_training_kubeflow_org_replica_type", pl.col("replica")),
                ),
            ],
            separator=",",
        )
        yield _join(_lines(frame, "kube_pod_labels", labels, pl.lit(1.0)))
    yield "# TYPE kube_pod_info gauge\n"
    yield _join(
        _lines(
            system,
            "kube_pod_info",
            pl.concat_str([sys_pod, pl.lit(',node="cpu-system",host_ip="10.255.0.1"')]),
            pl.lit(1.0),
        )
    )
    for part, pts in _chunks(servers, points):
        frame = pl.concat([pts.select("n", "t"), after.join(part.select("n"), on="n").select("n", "t")])
        frame = frame.sort("n", "t").join(part, on="n")
        labels = pl.concat_str(
            [
                pod,
                _labels(
                    ("node", pl.col("node")),
                    ("host_ip", pl.col("ip")),
                    ("created_by_kind", pl.lit("PyTorchJob")),
                    ("created_by_name", pl.col("run_id")),
                ),
            ],
            separator=",",
        )
        yield _join(_lines(frame, "kube_pod_info", labels, pl.lit(1.0)))
    yield from _kube_phases(servers, points, after, pod)
    yield from _kube_nodes(servers, points)


def _kube_phases(
    servers: pl.DataFrame, points: pl.DataFrame, after: pl.DataFrame, pod: pl.Expr
) -> Iterator[str]:
    """kube_pod_status_phase: Running while a pod reports, then its final phase one interval after."""
    yield "# TYPE kube_pod_status_phase gauge\n"
    for part, pts in _chunks(servers, points):
        end = after.join(part.select("n"), on="n")
        final = pl.when(pl.col("status") == "failed").then(pl.lit("Failed")).otherwise(pl.lit("Succeeded"))
        running = pl.concat(
            [pts.select("n", "t", pl.lit(1.0).alias("v")), end.select("n", "t", pl.lit(0.0).alias("v"))]
        )
        running = running.sort("n", "t").join(part, on="n")
        yield _join(
            _lines(
                running,
                "kube_pod_status_phase",
                pl.concat_str([pod, pl.lit(',phase="Running"')]),
                pl.col("v"),
            )
        )
        done = end.join(part.select("n", "pod", "uid", "status"), on="n")
        yield _join(
            _lines(
                done,
                "kube_pod_status_phase",
                pl.concat_str([pod, pl.lit(',phase="'), final, pl.lit('"')]),
                pl.lit(1.0),
            )
        )


def _kube_nodes(servers: pl.DataFrame, points: pl.DataFrame) -> Iterator[str]:
    """kube_node_labels: each node's instance type."""
    yield "# TYPE kube_node_labels gauge\n"
    for part, pts in _chunks(servers, points):
        frame = pts.select("n", "t").join(part, on="n")
        labels = _labels(
            ("node", pl.col("node")), ("label_node_kubernetes_io_instance_type", pl.col("node_platform"))
        )
        yield _join(_lines(frame, "kube_node_labels", labels, pl.lit(1.0)))


def _node(servers: pl.DataFrame, points: pl.DataFrame) -> Iterator[str]:
    """node_exporter: CPU seconds per CPU and mode, memory, network bytes and speed."""
    inst = _label("instance", pl.concat_str([pl.col("ip"), pl.lit(":9100")]))
    yield "# TYPE node_cpu_seconds counter\n"
    for part, pts in _chunks(servers, points):
        cpus = pts.join(part.select("n", "cpus", "ip"), on="n")
        cpus = (
            cpus.with_columns(pl.int_ranges(0, "cpus").alias("cpu")).explode("cpu").sort("n", "cpu", "scrape")
        )
        for mode, share in (("idle", 1 - pl.col("cpu_util")), ("user", pl.col("cpu_util"))):
            value = _counter(cpus, share * SAMPLE_INTERVAL_S, ["n", "cpu"], BASE_CPU_S)
            labels = pl.concat_str(
                [pl.lit('cpu="'), pl.col("cpu").cast(pl.String), pl.lit(f'",mode="{mode}",'), inst]
            )
            yield _join(_lines(cpus, "node_cpu_seconds_total", labels, value))
    for name, value in (
        ("node_memory_MemTotal_bytes", pl.col("mem_total")),
        ("node_memory_MemAvailable_bytes", (pl.col("mem_total") * (1 - pl.col("mem_cap_util"))).round(0)),
    ):
        yield f"# TYPE {name} gauge\n"
        for part, pts in _chunks(servers, points):
            yield _join(_lines(pts.join(part, on="n"), name, inst, value))
    for family, share in (("node_network_receive_bytes", 1.0), ("node_network_transmit_bytes", 0.6)):
        yield f"# TYPE {family} counter\n"
        for part, pts in _chunks(servers, points):
            frame = pts.join(part, on="n")
            eth = _counter(frame, pl.col("net_bw_util") * pl.col("nic") * share * SAMPLE_INTERVAL_S, ["n"])
            lo = _counter(frame, pl.lit(5e8 * share), ["n"])  # loopback traffic: never counted
            for device, value in (("eth0", eth), ("lo", lo)):
                labels = pl.concat_str([pl.lit(f'device="{device}",'), inst])
                yield _join(_lines(frame, family + "_total", labels, value))
    yield "# TYPE node_network_speed_bytes gauge\n"
    for part, pts in _chunks(servers, points):
        frame = pts.join(part, on="n")
        speed = pl.when(pl.col("speed_unknown")).then(-125_000.0).otherwise(pl.col("nic"))
        yield _join(
            _lines(frame, "node_network_speed_bytes", pl.concat_str([pl.lit('device="eth0",'), inst]), speed)
        )


def _dcgm(servers: pl.DataFrame, points: pl.DataFrame) -> Iterator[str]:
    """dcgm-exporter: per GPU of the GPU servers."""
    gpus = servers.filter(pl.col("gpus") > 0)
    if gpus.is_empty():
        return
    exporter = pl.concat_str([pl.lit("dcgm-exporter-"), pl.col("node").str.slice(-6)])
    ident = (
        pl.when(pl.col("dcgm_in_k8s"))
        .then(
            pl.concat_str(
                [pl.lit('UUID="GPU-'), pl.col("uid"), pl.lit("-"), pl.col("gpu").cast(pl.String), pl.lit('"')]
            )
        )
        .otherwise(
            pl.concat_str(
                [pl.lit('uuid="GPU-'), pl.col("uid"), pl.lit("-"), pl.col("gpu").cast(pl.String), pl.lit('"')]
            )
        )
    )
    where = (
        pl.when(pl.col("dcgm_in_k8s"))
        .then(
            pl.concat_str(
                [
                    pl.lit(f'exported_namespace="{NAMESPACE}",exported_pod="'),
                    pl.col("pod"),
                    pl.lit('",namespace="gpu-operator",pod="'),
                    exporter,
                    pl.lit('"'),
                ]
            )
        )
        .otherwise(pl.concat_str([pl.lit('instance="'), pl.col("ip"), pl.lit(':9400"')]))
    )
    labels = pl.concat_str(
        [
            pl.lit('gpu="'),
            pl.col("gpu").cast(pl.String),
            pl.lit('",'),
            ident,
            pl.lit(',device="nvidia'),
            pl.col("gpu").cast(pl.String),
            pl.lit('",modelName="Tesla V100-SXM2-32GB",'),
            pl.lit('Hostname="'),
            exporter,
            pl.lit('",'),
            where,
        ]
    )
    reserved = pl.lit(300.0)
    used = (pl.col("gpu_mem_util") * pl.col("fb_mib")).round(0)
    for name, value in (
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", pl.col("gpu_util")),
        ("DCGM_FI_DEV_GPU_UTIL", (pl.col("gpu_util") * 100).round(0)),
        ("DCGM_FI_DEV_FB_USED", used),
        ("DCGM_FI_DEV_FB_FREE", pl.col("fb_mib") - used - reserved),
        ("DCGM_FI_DEV_FB_RESERVED", reserved),
    ):
        yield f"# TYPE {name} gauge\n"
        for part, pts in _chunks(gpus, points):
            frame = pts.join(part, on="n").with_columns(pl.int_ranges(0, "gpus").alias("gpu")).explode("gpu")
            yield _join(_lines(frame.sort("n", "gpu", "scrape"), name, labels, value))


def _pcm(servers: pl.DataFrame, points: pl.DataFrame) -> Iterator[str]:
    """pcm-sensor-server: bytes read from and written to DRAM, per socket and for the system."""
    inst = _label("instance", pl.concat_str([pl.col("ip"), pl.lit(":9738")]))
    for name, share in (("DRAM_Reads", 0.7), ("DRAM_Writes", 0.3)):
        yield f"# TYPE {name} unknown\n"
        for part, pts in _chunks(servers, points):
            frame = pts.join(part, on="n")
            total = _counter(
                frame, pl.col("mem_bw_util") * pl.col("dram_bw") * share * SAMPLE_INTERVAL_S, ["n"]
            )
            for labels, value in (
                (pl.concat_str([pl.lit('aggregate="system",'), inst]), total),
                (pl.concat_str([pl.lit('socket="0",aggregate="socket",'), inst]), total / 2),
            ):
                yield _join(_lines(frame, name, labels, value))


def _join(lines: pl.Series) -> str:
    return "\n".join(lines.to_list()) + "\n" if lines.len() else ""


def _epoch(day: str) -> int:
    return int(pl.Series([day]).str.to_date().dt.epoch("s")[0])


def write_exporters(
    fleet: DayFleet, landing: Path, hw: HardwareCatalog, source: str = "synthetic"
) -> list[Path]:
    """One day of the fleet as the four exporters' OpenMetrics files in landing/<source>/<day>/."""
    servers = _servers(fleet, hw)
    points = _points(fleet, servers)
    folder = landing / source / fleet.day
    parts = {
        FILES[0]: _kube(servers, points, fleet.day),
        FILES[1]: _node(servers, points),
        FILES[2]: _dcgm(servers, points),
        FILES[3]: _pcm(servers, points),
    }
    written = []
    for name, chunks in parts.items():
        path = folder / name
        with fileio.atomic_target(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
            for chunk in chunks:
                out.write(chunk)
            out.write("# EOF\n")
        written.append(path)
    return written
