"""The benchmark suite: the product against a baseline measured in the same run (ratios, medians of
interleaved repeats, peak RSS of each side in a fresh process), printed as one table and written as JSON
under ``<data home>/bench/``.

    .venv/bin/python benchmarks/suite.py [--samples 10000000] [--repeats 3] [--cases ingest,night,...]

Cases (each: product seconds, anchor seconds, ratio = product / anchor, peak RSS of both):
- ``synth``: `fleet synth --format parquet` vs pyarrow writing the same table from memory (target <= 2x).
- ``ingest-parquet|csv|jsonl``: `fleet ingest` of one landing day vs a bare DuckDB
  ``COPY (SELECT * FROM <file>) TO parquet`` (DuckDB's defaults: snappy, like the lake's samples) of the
  same samples file (target <= 2x; peak RSS < 1.5 GB).
- ``ingest-process-jsonl``: `fleet ingest` of a user's ordinary day (1,200 runs, about 2.9M samples in
  JSON Lines, as `fleet synth --days 1 --start 2026-01-01 --runs-per-day 1200 --seed 11 --format jsonl`
  writes it) as a process
  of its own vs a Python process running DuckDB's bare copy of the same files (runs and samples) to Parquet:
  start-up and imports count on both sides (target <= 1.5x; the day's size does not follow ``--samples``).
- ``analytics``: the product's server_windows + run_role_stats + util_distribution over the day's lake
  partition vs one hand-written DuckDB query computing the same statistics; polars and pandas doing the same
  are reported beside it (no target: a comparison).
- ``night``: `fleet run` of one day (ingest, core, out, merged, analyst catalog, report) vs a floor made of
  DuckDB alone running the copy plus the project's own sql/transforms statements (target <= 3x).
- ``waste``: the night of one day (the nightly job's runs as `fleet run` makes them) with every asset vs
  the same night without the waste analyses (run_efficiency, server_outliers, waste_summary) (target
  <= 1.1 at 10M samples). server_windows is on both sides: it is the day's per-server pass, which
  run_role_stats counts its servers from; its cost over the per-server count it replaced shows in
  ``analytics``.
- ``backfill``: 7 days run one after another vs the same days as concurrent Dagster runs on both cores
  (ratio = parallel / serial; target <= 1/1.6).
- ``fixed``: the nightly fixed cost (start-up, merged analyses with recommendations, catalog, report) of a
  `fleet run` whose lake did not change (target < 10 s; anchor: none).
- ``workers``: four days of ``--samples`` / 4 each on Celery workers (`fleet run --executor celery`, Redis
  and PostgreSQL started on 127.0.0.1): two `fleet worker`s vs one (no target: how far two workers keep
  this machine's cores busier; also each side's samples per second per worker and the merge's seconds).
- ``merge-K-days``: the merge run (merged analyses, analyst catalog, report) over K = 1, 2, 4, 8 day
  partitions of ``--samples`` / 4 each (no anchor: its cost against the number of partitions).
- ``split-K``: `fleet ingest` of one day whose source delivered its samples in K files (K = 2, 4, 8),
  read in K slices (one after another from their task files, as the steps of a day's run on the default
  in-process executor read them) and merged vs the same files read in one pass (no target: what splitting
  gains on this machine; also the merge's seconds against K).
- ``partials-K`` (and ``partials-K-by-time``): the day's sample-scanning analyses (server windows, per-run
  statistics, histograms) over the day published in K files (a split day's slices), each file aggregated
  alone and the parts merged, vs the same day published in one file (no target: what the parts cost or
  save, and each side's peak RSS). ``-by-time``: the day delivered in time order, so every run lies in
  every part and its p50 and p95 are taken again over all of its samples.
- ``quantiles-K``: the per-run statistics of one day (run_role_stats) with their exact p50 and p95 taken
  over batches of runs of about 1/K of the day's values (``FLEET_QUANTILE_VALUES``) vs over the whole day
  at once (no target: what bounding the quantiles' memory costs in time, and each side's peak RSS).
- ``memory``: peak RSS of `fleet ingest` for a day of 3x ``--samples`` in every format (target < 1.5 GB).
- ``prometheus``: `fleet ingest` of a Prometheus export of about ``--samples`` exposition samples (the
  synthetic fleet as node_exporter, dcgm-exporter, kube-state-metrics and pcm-sensor-server expose it, in
  OpenMetrics with timestamps: every sample read, validated, stored in metric_samples, runs and utilisation
  samples derived) vs reading the same files with a bare parser (prometheus_client's OpenMetrics sample
  parser, line by line, nothing kept). No ratio target (a comparison); peak RSS < 1.5 GB.
- ``families``: the night's recommendations for a fleet of 4F runs each of its own model name vs F
  (F = ``--samples`` / 2,000): time against the number of model families (linear: 4; target <= 5) and peak
  RSS (< 1.5 GB).

Generated data is cached under ``<data home>/bench/data`` (same seed, same bytes) and reused.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_data import (  # noqa: E402  (this folder is on the path: the suite runs as a script)
    DAY,
    SAMPLES_PER_RUN,
    exposed_samples,
    fresh_home,
    landing_day,
    prometheus_day,
    samples_file,
    synthetic_day,
)

from pipelines.lib.contracts import resources  # noqa: E402  (the repository root is on the path above)
from pipelines.lib.query.sqlfiles import expand_resources  # noqa: E402

TARGETS = {
    "synth": 2.0,
    "ingest-parquet": 2.0,
    "ingest-csv": 2.0,
    "ingest-jsonl": 2.0,
    "ingest-process-jsonl": 1.5,  # #46's acceptance
    "night": 3.0,
    "backfill": 1 / 1.6,
    "waste": 1.1,
    "night-s3": 1.5,
    "families": 5.0,
}
RSS_LIMIT_MB = 1536


# ---------------------------------------------------------------- each case's two sides (child processes)


def side_ingest(args: dict) -> dict:
    from pipelines.lib.ingest import ingest_partition
    from pipelines.lib.paths import DataHome
    from workload_model.catalog import load_hardware

    with tempfile.TemporaryDirectory(dir=args["tmp"]) as tmp:
        home = DataHome.resolve(fresh_home(Path(tmp), [Path(args["tree"])]))
        start = time.perf_counter()
        out = ingest_partition(home, args["day"], load_hardware().platforms)
        seconds = time.perf_counter() - start
    assert out.promoted, out.checks
    return {"seconds": seconds, "rows": out.result.samples_rows}


def side_ingest_prometheus(args: dict) -> dict:
    """`fleet ingest` of a Prometheus export day, with the mapping that reads the synthetic exporters."""
    from pipelines.lib.ingest import ingest_partition
    from pipelines.lib.paths import DataHome
    from synthetic_fleet.exporters import mapping_yaml
    from workload_model.catalog import load_hardware

    with tempfile.TemporaryDirectory(dir=args["tmp"]) as tmp:
        home = DataHome.resolve(fresh_home(Path(tmp), [Path(args["tree"])]))
        home.user_catalog_dir.mkdir(parents=True, exist_ok=True)
        (home.user_catalog_dir / "prometheus.yaml").write_text(mapping_yaml())
        start = time.perf_counter()
        out = ingest_partition(home, args["day"], load_hardware().platforms)
        seconds = time.perf_counter() - start
    assert out.promoted, out.checks
    return {"seconds": seconds, "rows": out.result.metric_samples_rows, "derived": out.result.samples_rows}


def _whole_process(argv: list[str]) -> dict:
    """``argv`` run to its end as a process of its own: its wall seconds (start-up and imports included)
    and its peak RSS (the largest of this process's children: it is the only one)."""
    start = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if p.returncode:
        raise RuntimeError(f"{argv[:2]} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return {"seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def side_ingest_process(args: dict) -> dict:
    """`fleet ingest` of the landing day, as a user runs it: a process of its own."""
    with tempfile.TemporaryDirectory(dir=args["tmp"]) as tmp:
        home = fresh_home(Path(tmp), [Path(args["tree"])])
        return _whole_process([str(Path(sys.executable).parent / "fleet"), "ingest", "--home", str(home)])


BARE_COPY = """import sys, duckdb
reader = {"parquet": "read_parquet", "csv": "read_csv", "jsonl": "read_json"}[sys.argv[1]]
for i, src in enumerate(sys.argv[3:]):
    target = f"{sys.argv[2]}/{i}.parquet"
    duckdb.execute(f"COPY (SELECT * FROM {reader}($src)) TO '{target}' (FORMAT parquet)", {"src": src})
"""


def side_copy_process(args: dict) -> dict:
    """DuckDB's bare copy of the same landing files to Parquet, in a Python process of its own."""
    files = sorted(str(p) for p in Path(args["tree"]).rglob(f"*.{args['fmt']}"))
    with tempfile.TemporaryDirectory(dir=args["tmp"]) as tmp:
        return _whole_process([sys.executable, "-c", BARE_COPY, args["fmt"], tmp, *files])


def side_parse_bare(args: dict) -> dict:
    """The same export read by prometheus_client's OpenMetrics sample parser, line by line: every sample
    parsed (name, labels, value, timestamp), nothing kept. Its family-level parser would hold a whole family
    in memory (a day of node_cpu_seconds_total is most of the export), so the line-level one is the bare
    parser here."""
    from prometheus_client.openmetrics.parser import _parse_sample

    start = time.perf_counter()
    n = 0
    for path in sorted(Path(args["tree"]).rglob("*.om")):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if not line.startswith("#"):
                    _parse_sample(line.rstrip("\n"))
                    n += 1
    return {"seconds": time.perf_counter() - start, "rows": n}


def side_copy(args: dict) -> dict:
    import duckdb

    with tempfile.TemporaryDirectory(dir=args["tmp"]) as tmp:
        target = Path(tmp) / "copy.parquet"
        start = time.perf_counter()
        con = duckdb.connect()
        reader = {"parquet": "read_parquet", "csv": "read_csv", "jsonl": "read_json"}[args["fmt"]]
        con.execute(
            f"COPY (SELECT * FROM {reader}($src)) TO '{target}' (FORMAT parquet)",
            {"src": args["src"]},
        )
        con.close()
        return {"seconds": time.perf_counter() - start}


def _ingested(args: dict, tmp: Path):
    from pipelines.lib.ingest import ingest_partition
    from pipelines.lib.paths import DataHome
    from workload_model.catalog import load_hardware

    home = DataHome.resolve(fresh_home(tmp, [Path(args["tree"])]))
    ingest_partition(home, args["day"], load_hardware().platforms)
    return home


def side_analytics(args: dict) -> dict:
    """The product's core + histogram statistics over one day's lake partition."""
    from pipelines.lib.analysis import analytics
    from pipelines.lib.storage import lake

    with tempfile.TemporaryDirectory(dir=args["tmp"]) as tmp:
        home = _ingested(args, Path(tmp))
        runs = lake.read_partition(home, "runs", args["day"])
        path = analytics.partition_relation(home, "utilisation_samples", args["day"])
        start = time.perf_counter()
        windows = analytics.server_windows(path, args["day"])
        stats = analytics.run_role_stats(runs, path, args["day"], windows)
        analytics.util_distribution(runs, path, stats, args["day"])
        return {"seconds": time.perf_counter() - start}


HAND_SQL = """
WITH long AS (
    UNPIVOT (SELECT run_id, server_id, role, <<resources: {col}>> FROM read_parquet($f))
    ON <<resources: {col}>> INTO NAME resource VALUE util
),
stats AS (
    SELECT run_id, role, resource, count(DISTINCT server_id) n_servers, count(*) n, avg(util) mean_util,
           quantile_cont(util, 0.5) p50, quantile_cont(util, 0.95) p95, max(util) max_util
    FROM long GROUP BY ALL
),
hist AS (
    SELECT role, resource, least(floor(util * 1000), 999)::INTEGER AS bin, count(*) n FROM long GROUP BY ALL
)
SELECT (SELECT count(*) FROM stats), (SELECT count(*) FROM hist)
"""


def side_analytics_duckdb(args: dict) -> dict:
    import duckdb

    with tempfile.TemporaryDirectory(dir=args["tmp"]) as tmp:
        home = _ingested(args, Path(tmp))
        from pipelines.lib.storage import lake

        (path,) = lake.table_files(home, "utilisation_samples", args["day"])
        start = time.perf_counter()
        con = duckdb.connect()
        con.execute(expand_resources(HAND_SQL), {"f": str(path)}).fetchall()
        con.close()
        return {"seconds": time.perf_counter() - start}


UTIL = [f"{r}_util" for r in resources()]  # the contract's resources, as the product's SQL has them


def side_analytics_polars(args: dict) -> dict:
    import polars as pl

    with tempfile.TemporaryDirectory(dir=args["tmp"]) as tmp:
        home = _ingested(args, Path(tmp))
        from pipelines.lib.storage import lake

        (path,) = lake.table_files(home, "utilisation_samples", args["day"])
        start = time.perf_counter()
        long = (
            pl.scan_parquet(path)
            .select("run_id", "server_id", "role", *UTIL)
            .unpivot(UTIL, index=["run_id", "server_id", "role"], variable_name="resource", value_name="util")
            .drop_nulls("util")
        )
        stats = long.group_by("run_id", "role", "resource").agg(
            pl.col("server_id").n_unique(),
            pl.len(),
            pl.col("util").mean().alias("mean"),
            pl.col("util").quantile(0.5).alias("p50"),
            pl.col("util").quantile(0.95).alias("p95"),
            pl.col("util").max().alias("max"),
        )
        hist = long.group_by(
            "role", "resource", (pl.col("util") * 1000).floor().clip(0, 999).cast(pl.Int32).alias("bin")
        ).len()
        pl.collect_all([stats, hist])
        return {"seconds": time.perf_counter() - start}


def side_analytics_pandas(args: dict) -> dict:
    import numpy as np
    import pandas as pd

    with tempfile.TemporaryDirectory(dir=args["tmp"]) as tmp:
        home = _ingested(args, Path(tmp))
        from pipelines.lib.storage import lake

        (path,) = lake.table_files(home, "utilisation_samples", args["day"])
        start = time.perf_counter()
        df = pd.read_parquet(path, columns=["run_id", "server_id", "role", *UTIL])
        long = df.melt(
            id_vars=["run_id", "server_id", "role"], value_vars=UTIL, var_name="resource", value_name="util"
        )
        long = long.dropna(subset=["util"])
        g = long.groupby(["run_id", "role", "resource"])["util"]
        g.agg(["mean", "max", "count"])
        g.quantile([0.5, 0.95])
        long.groupby(["run_id", "role", "resource"])["server_id"].nunique()
        long["bin"] = np.clip(np.floor(long["util"] * 1000), 0, 999).astype("int32")
        long.groupby(["role", "resource", "bin"]).size()
        return {"seconds": time.perf_counter() - start}


def side_night(args: dict) -> dict:
    """`fleet run` of the landing days: real Dagster runs, every asset, in a fresh data home."""
    from pipelines.lib.paths import DataHome
    from pipelines.orchestrate import run_pipeline

    with tempfile.TemporaryDirectory(dir=args["tmp"]) as tmp:
        lake = f"{args['lake']}/{uuid.uuid4().hex[:12]}" if args.get("lake") else None
        home = DataHome.resolve(fresh_home(Path(tmp), [Path(t) for t in args["trees"]]), lake)
        os.environ["DAGSTER_HOME"] = str(home.dagster_home)
        start, cpu = time.perf_counter(), _cpu_seconds()
        kwargs = {"workers": args["workers"]} if "workers" in args else {}
        run_pipeline(home, args["days"], progress=lambda _: None, **kwargs)
        first = time.perf_counter() - start
        out = {"seconds": first, "cores": (_cpu_seconds() - cpu) / first}
        if args.get("again"):  # the lake did not change: what a night costs beyond its new data
            start = time.perf_counter()
            run_pipeline(home, [], progress=lambda _: None)
            out = {"seconds": time.perf_counter() - start}
        return out


WASTE_ASSETS = ("run_efficiency", "server_outliers", "waste_summary")
WASTE_STEPS = ("day_waste", "waste_summary")  # the steps that write them


def side_night_assets(args: dict) -> dict:
    """The nightly job as `fleet run` executes it (each day's partitioned assets as one run, then the merged
    and publish assets) in a fresh data home, leaving out the assets named in ``without``; also how long the
    steps named in ``timed`` took (Dagster's own step events)."""
    import dagster as dg

    from pipelines.definitions import build_defs
    from pipelines.defs.partitions import add_days
    from pipelines.lib.paths import DataHome
    from pipelines.nightly import JOB
    from pipelines.orchestrate import ensure_instance, run_config

    with tempfile.TemporaryDirectory(dir=args["tmp"]) as tmp:
        home = DataHome.resolve(fresh_home(Path(tmp), [Path(t) for t in args["trees"]]))
        os.environ["DAGSTER_HOME"] = str(home.dagster_home)
        start = time.perf_counter()
        instance = ensure_instance(home)
        defs = build_defs()
        add_days(instance, args["days"])
        graph = defs.resolve_asset_graph()
        left_out = {dg.AssetKey(k) for k in args["without"]}
        keys = [k for k in graph.get_all_asset_keys() if graph.get(k).is_materializable and k not in left_out]
        job = defs.resolve_job_def(JOB)
        daily = [k for k in keys if graph.get(k).partitions_def is not None]
        merged = [k for k in keys if graph.get(k).partitions_def is None]
        runs = [(daily, day) for day in args["days"]] + [(merged, args["days"][-1])]
        run_ids = [
            job.execute_in_process(
                asset_selection=selection, partition_key=day, instance=instance, run_config=run_config(home)
            ).run_id
            for selection, day in runs
        ]
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "steps_s": _step_seconds(instance, run_ids, args["timed"])}


def _step_seconds(instance, run_ids: list[str], steps: list[str]) -> float:
    """Seconds the named steps took in these runs, from their start and success events."""
    import dagster as dg

    begin, end = dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS
    total = 0.0
    for run_id in run_ids:
        started = {}
        for e in instance.all_logs(run_id, of_type={begin, end}):
            key = e.dagster_event.step_key
            if key in steps and e.dagster_event.event_type == begin:
                started[key] = e.timestamp
            elif key in steps:
                total += e.timestamp - started.pop(key)
    return total


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (a backfill's worker processes)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def side_night_floor(args: dict) -> dict:
    """DuckDB alone: copy the day's samples to Parquet, then the project's own transforms over them."""
    import duckdb

    from pipelines.lib.contracts import contract, resources
    from pipelines.lib.query.sqlfiles import sql_text

    tree = Path(args["trees"][0])
    src = samples_file(tree, args["fmt"])
    runs = next((tree / "synthetic").glob("*/runs.*"))
    reader = {"parquet": "read_parquet", "csv": "read_csv", "jsonl": "read_json"}[args["fmt"]]
    with tempfile.TemporaryDirectory(dir=args["tmp"]) as tmp:
        copy = Path(tmp) / "samples.parquet"
        start = time.perf_counter()
        con = duckdb.connect()
        con.execute(
            f"COPY (SELECT * FROM {reader}($src)) TO '{copy}' (FORMAT parquet)",
            {"src": str(src)},
        )
        copied = con.read_parquet(str(copy))
        # the nullable resource columns a landing file may leave out, as ingest adds them
        absent = [f"{r}_util" for r in resources() if f"{r}_util" not in copied.columns]
        nulls = [duckdb.ConstantExpression(None).cast("DOUBLE").alias(c) for c in absent]
        copied.select("*", *nulls).create_view("samples")
        con.execute(f"CREATE TABLE runs AS SELECT * FROM {reader}($src)", {"src": str(runs)})
        day = args["days"][0]
        window_s = contract("server_windows").parameters["window_s"]
        n_bins = contract("util_distribution").parameters["n_bins"]

        def step(name: str, out: str, params: dict) -> None:  # each result held, as the product does
            con.register(out, con.sql(sql_text(f"transforms/{name}.sql"), params=params).pl())

        # the day in one file is one part: each analysis's part query, then its merge
        step("server_windows_part", "server_windows_parts", {"window_s": window_s})
        step("server_windows", "server_windows", {"day": day, "window_s": window_s})
        step("run_role_stats_part", "run_role_stats_parts", {})
        con.sql("SELECT run_id, role, resource, q FROM run_role_stats_parts LIMIT 0").create_view(
            "spanning_quantiles"
        )
        step("run_role_stats", "run_role_stats", {"day": day})
        step("util_distribution_part", "util_distribution_parts", {"n_bins": n_bins})
        step("util_distribution", "util_distribution", {"day": day, "n_bins": n_bins})
        con.close()
        return {"seconds": time.perf_counter() - start}


def side_synth(args: dict) -> dict:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_synth

    with tempfile.TemporaryDirectory(dir=args["tmp"]) as tmp:
        fn = bench_synth.run_ours if args["mode"] == "ours" else bench_synth.run_baseline
        return fn(args["days"], args["runs_per_day"], Path(tmp))


SIDES = {
    f.__name__: f
    for f in (
        side_ingest,
        side_ingest_prometheus,
        side_parse_bare,
        side_copy,
        side_analytics,
        side_analytics_duckdb,
        side_analytics_polars,
        side_analytics_pandas,
        side_night,
        side_night_floor,
        side_night_assets,
        side_synth,
        side_ingest_process,
        side_copy_process,
    )
}


def peak_rss_mb() -> float:
    """This process's own peak resident memory. Not getrusage's ru_maxrss: Linux keeps that across the
    exec that started this process, so it would report the (larger) parent's size at fork time."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(name: str, args: str) -> None:
    result = SIDES[name](json.loads(args))
    result.setdefault("peak_rss_mb", peak_rss_mb())  # a whole-process side reports its process's
    print("RESULT " + json.dumps(result))


def measure(name: str, **args) -> dict:
    """One side in a fresh Python process (its own peak RSS); raises with its stderr if it fails."""
    p = subprocess.run(
        [sys.executable, __file__, "--child", name, json.dumps(args, default=str)],
        capture_output=True,
        text=True,
        env={**os.environ, "DAGSTER_DISABLE_TELEMETRY": "1"},
    )
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode or not lines:
        raise RuntimeError(f"{name} failed:\n{p.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix("RESULT "))


# ---------------------------------------------------------------- the table


def paired(case: str, repeats: int, product: tuple, anchor: tuple | None, note: str = "") -> dict:
    """Interleaved product/anchor runs; medians of seconds, ratio of the medians, max peak RSS."""
    ours, base = [], []
    for _ in range(repeats):
        ours.append(measure(product[0], **product[1]))
        if anchor:
            base.append(measure(anchor[0], **anchor[1]))
    row = {
        "case": case,
        "product_s": statistics.median(r["seconds"] for r in ours),
        "product_rss_mb": max(r["peak_rss_mb"] for r in ours),
        "anchor_s": statistics.median(r["seconds"] for r in base) if base else None,
        "anchor_rss_mb": max(r["peak_rss_mb"] for r in base) if base else None,
        "repeats": repeats,
        "note": note,
    }
    if all("steps_s" in r for r in ours):  # the product's own steps, timed by Dagster (side_night_assets)
        row["product_steps_s"] = statistics.median(r["steps_s"] for r in ours)
    if all("merge_s" in r for r in ours + base):  # side_night_workers
        row["product_merge_s"] = statistics.median(r["merge_s"] for r in ours)
        row["product_rate"] = statistics.median(r["per_worker_samples_s"] for r in ours)
        row["anchor_rate"] = statistics.median(r["per_worker_samples_s"] for r in base)
    if all("cores" in r for r in ours + base):  # how many of the machine's cores each side kept busy
        row["product_cores"] = statistics.median(r["cores"] for r in ours)
        row["anchor_cores"] = statistics.median(r["cores"] for r in base) if base else None
    row["ratio"] = row["product_s"] / row["anchor_s"] if row["anchor_s"] else None
    target = TARGETS.get(case)
    row["target"] = target
    row["ok"] = target is None or (row["ratio"] is not None and row["ratio"] <= target)
    return row


def print_table(rows: list[dict]) -> None:
    head = f"{'case':<22}{'product s':>11}{'anchor s':>10}{'ratio':>8}{'target':>8}"
    head += f"{'RSS MB':>9}{'anchor MB':>11}  ok"
    print(head)
    print("-" * len(head))
    for r in rows:
        anchor = f"{r['anchor_s']:.2f}" if r["anchor_s"] is not None else "-"
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        target = f"{r['target']:.2f}" if r["target"] is not None else "-"
        amb = f"{r['anchor_rss_mb']:.0f}" if r["anchor_rss_mb"] is not None else "-"
        print(
            f"{r['case']:<22}{r['product_s']:>11.2f}{anchor:>10}{ratio:>8}{target:>8}"
            f"{r['product_rss_mb']:>9.0f}{amb:>11}  {'yes' if r['ok'] else 'NO'}"
            + (f"  ({r['note']})" if r["note"] else "")
        )


def analytics_case(data: Path, tmp: Path, n: int, r: int) -> dict:
    """The product's statistics vs one hand-written DuckDB query; polars and pandas beside them."""
    tree = landing_day(data, "parquet", n)
    args = {"tree": str(tree), "day": DAY, "tmp": str(tmp)}
    row = paired("analytics", r, ("side_analytics", args), ("side_analytics_duckdb", args))
    pol = statistics.median(measure("side_analytics_polars", **args)["seconds"] for _ in range(r))
    try:
        pan = statistics.median(measure("side_analytics_pandas", **args)["seconds"] for _ in range(r))
        pan_text = f"pandas {pan:.2f} s"
    except RuntimeError as exc:
        pan_text = "pandas not installed" if "pandas" in str(exc) else "pandas failed"
    row["note"] = f"polars {pol:.2f} s, {pan_text}"
    return row


def night_cases(data: Path, tmp: Path, n: int, r: int) -> list[dict]:
    """`fleet run` of one day vs the DuckDB floor, at 1M samples (fixed costs) and at ``n``."""
    rows = []
    for size in sorted({min(n, 1_000_000), n}):
        tree = landing_day(data, "jsonl", size)
        args = {"trees": [str(tree)], "days": [DAY], "fmt": "jsonl", "tmp": str(tmp)}
        row = paired(
            f"night-{size // 1_000_000}M" if size >= 1_000_000 else f"night-{size}",
            r,
            ("side_night", args),
            ("side_night_floor", args),
            note="JSONL landing, fleet run",
        )
        if size >= 10_000_000:  # the target is set for a 10M-sample night; smaller ones are fixed costs
            row["target"] = TARGETS["night"]
            row["ok"] = row["ratio"] <= TARGETS["night"]
        rows.append(row)
    return rows


def waste_case(data: Path, tmp: Path, n: int, r: int) -> dict:
    """The night of one day with every asset vs the same night without the waste analyses."""
    tree = landing_day(data, "jsonl", n)
    args = {"trees": [str(tree)], "days": [DAY], "tmp": str(tmp)}
    args = {**args, "timed": list(WASTE_STEPS)}
    row = paired(
        "waste",
        r,
        ("side_night_assets", {**args, "without": []}),
        ("side_night_assets", {**args, "without": list(WASTE_ASSETS)}),
    )
    row["note"] = (
        f"{n:,} samples: night with vs without {', '.join(WASTE_ASSETS)}; "
        f"their steps ({', '.join(WASTE_STEPS)}) took {row['product_steps_s']:.2f} s"
    )
    if n < 10_000_000:  # like the night's, the target is set for a 10M-sample day; below, fixed costs rule
        row["target"], row["ok"] = None, True
    return row


def prometheus_case(data: Path, tmp: Path, n: int, r: int) -> dict:
    """Ingest of a Prometheus export vs the bare parser reading it; memory limit as for every ingest."""
    tree = prometheus_day(data, n)
    args = {"tree": str(tree), "day": DAY, "tmp": str(tmp)}
    row = paired("prometheus", r, ("side_ingest_prometheus", args), ("side_parse_bare", args))
    exposed = exposed_samples(tree)
    row["note"] = f"{exposed:,} exposition samples; RSS limit {RSS_LIMIT_MB} MB"
    row["ok"] = row["product_rss_mb"] < RSS_LIMIT_MB
    return row


def memory_cases(data: Path, tmp: Path, n: int) -> list[dict]:
    """Peak RSS of ingesting a day of 3x the samples, in every format."""
    rows = []
    for fmt in ("parquet", "csv", "jsonl"):
        big = 3 * n
        tree = landing_day(data, fmt, big)
        m = measure("side_ingest", tree=str(tree), day=DAY, tmp=str(tmp))
        rows.append(
            {
                "case": f"memory-{fmt}",
                "product_s": m["seconds"],
                "product_rss_mb": m["peak_rss_mb"],
                "anchor_s": None,
                "anchor_rss_mb": None,
                "ratio": None,
                "target": None,
                "repeats": 1,
                "ok": m["peak_rss_mb"] < RSS_LIMIT_MB,
                "note": f"{big:,} samples, RSS limit {RSS_LIMIT_MB} MB",
            }
        )
        print(f"  memory-{fmt}: {m['peak_rss_mb']:.0f} MB", flush=True)
    return rows


def ingest_cases(data: Path, tmp: Path, n: int, r: int) -> list[dict]:
    """Ingest of one day in each format vs DuckDB's bare copy of its samples to Parquet."""
    rows = []
    for fmt in ("parquet", "csv", "jsonl"):
        tree = landing_day(data, fmt, n)
        src = samples_file(tree, fmt)
        rows.append(
            paired(
                f"ingest-{fmt}",
                r,
                ("side_ingest", {"tree": str(tree), "day": DAY, "tmp": str(tmp)}),
                ("side_copy", {"src": str(src), "fmt": fmt, "tmp": str(tmp)}),
                note=f"{n:,} samples",
            )
        )
    return rows


PROCESS_RUNS = 1200  # a user's ordinary day (`fleet synth --runs-per-day 1200 --seed 11`): ~2.9-3.1M samples


def ingest_process_case(data: Path, tmp: Path, r: int) -> dict:
    """`fleet ingest` of an ordinary JSON Lines day as a process of its own vs a process of its own running
    DuckDB's bare copy of the same files to Parquet: start-up and imports count on both sides."""
    tree = synthetic_day(data, "jsonl", PROCESS_RUNS, seed=11)
    args = {"tree": str(tree), "fmt": "jsonl", "tmp": str(tmp)}
    with open(samples_file(tree, "jsonl"), "rb") as fh:
        samples = sum(1 for _ in fh)
    return paired(
        "ingest-process-jsonl",
        r,
        ("side_ingest_process", args),
        ("side_copy_process", args),
        note=f"{samples:,} samples, {PROCESS_RUNS} runs; whole processes",
    )


def fixed_case(data: Path, tmp: Path, n: int, r: int) -> dict:
    """A night whose lake did not change: what a night costs beyond its new data (target < 10 s)."""
    tree = landing_day(data, "parquet", min(n, 1_000_000))
    args = {"trees": [str(tree)], "days": [DAY], "tmp": str(tmp), "again": True}
    row = paired("fixed", r, ("side_night", args), None, note="a night whose lake did not change")
    row["target"], row["ok"] = 10.0, row["product_s"] < 10.0
    return row


def synth_case(tmp: Path, n: int, r: int) -> dict:
    """A fleet of 600-run days, as `fleet synth` streams it (the next day generated while one is written),
    vs generating then writing."""
    days = max(1, math.ceil(n / (SAMPLES_PER_RUN * 600)))
    args = {"days": days, "runs_per_day": 600, "tmp": str(tmp)}
    return paired(
        "synth", r, ("side_synth", {**args, "mode": "ours"}), ("side_synth", {**args, "mode": "baseline"})
    )


def backfill_case(data: Path, tmp: Path, n: int, r: int) -> dict:
    """Seven days of a backfill: concurrent runs in two worker processes vs one after another."""
    days = [(dt.date.fromisoformat(DAY) + dt.timedelta(days=i)).isoformat() for i in range(7)]
    trees = [str(landing_day(data, "parquet", max(n // 7, 1000), day=d)) for d in days]
    args = {"trees": trees, "days": days, "tmp": str(tmp)}
    row = paired(
        "backfill",
        r,
        ("side_night", {**args, "workers": 2}),
        ("side_night", {**args, "workers": 1}),
        note="7 days: parallel runs vs one after another",
    )
    row["note"] += f"; cores busy: parallel {row['product_cores']:.2f}, serial {row['anchor_cores']:.2f}"
    return row


def object_storage_case(data: Path, tmp: Path, n: int, r: int) -> dict:
    """The night of one day with the lake on object storage (SeaweedFS on 127.0.0.1) vs the local lake."""
    from tests.support.servers import seaweedfs

    tree = landing_day(data, "jsonl", n)
    args = {"trees": [str(tree)], "days": [DAY], "tmp": str(tmp)}
    with seaweedfs(tmp / "seaweedfs") as store:
        os.environ.update(store.env)  # the sides' processes reach the store the standard AWS way
        try:
            return paired(
                "night-s3",
                r,
                ("side_night", {**args, "lake": f"s3://{store.bucket}/bench"}),
                ("side_night", args),
                note=f"{n:,} samples: fleet run, lake on object storage vs in a local folder",
            )
        finally:
            for name in store.env:
                os.environ.pop(name, None)


def _busy_jiffies() -> tuple[int, int]:
    """The machine's (busy, total) CPU time in clock ticks since boot, every core and process."""
    with open("/proc/stat", encoding="ascii") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, sum(values)


def side_night_workers(args: dict) -> dict:
    """`fleet run --executor celery` of the landing days with ``workers`` `fleet worker`s on this machine
    (started before the clock starts); the seconds, how many cores the machine kept busy, the merge's
    seconds and the days' samples per second per worker."""
    from pipelines.lib.paths import PROJECT_ROOT, DataHome
    from pipelines.lib.settings import Settings
    from pipelines.orchestrate import ensure_instance, run_pipeline

    with tempfile.TemporaryDirectory(dir=args["tmp"]) as tmp:
        home = DataHome.resolve(fresh_home(Path(tmp), [Path(t) for t in args["trees"]]))
        home.dagster_home.mkdir(parents=True)
        shutil.copyfile(
            PROJECT_ROOT / "dagster_home" / "dagster.workers.yaml", home.dagster_home / "dagster.yaml"
        )
        os.environ["DAGSTER_HOME"] = str(home.dagster_home)
        instance = ensure_instance(home)
        procs = []
        for i in range(args["workers"]):
            log = Path(tmp) / f"worker{i}.log"
            with open(log, "wb") as out:
                procs.append(
                    subprocess.Popen(
                        [str(Path(sys.executable).parent / "fleet"), "worker", "--name", f"bench{i}@%h"],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        env={**os.environ, "FLEET_BROKER": args["broker"]},
                    )
                )
            while "ready." not in log.read_text():
                if procs[-1].poll() is not None:
                    raise RuntimeError(f"fleet worker exited:\n{log.read_text()[-3000:]}")
                time.sleep(0.2)
        try:
            settings = Settings(home, executor="celery", broker=args["broker"])
            busy, total = _busy_jiffies()
            start = time.perf_counter()
            result = run_pipeline(
                home, args["days"], instance=instance, progress=lambda _: None, settings=settings
            )
            seconds = time.perf_counter() - start
            busy2, total2 = _busy_jiffies()
        finally:
            for p in procs:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=120)
        merge = instance.get_run_record_by_id(result.run_ids[-1])
        merge_s = merge.end_time - merge.start_time
        cores = (os.cpu_count() or 1) * (busy2 - busy) / max(total2 - total, 1)
        return {
            "seconds": seconds,
            "cores": cores,
            "merge_s": merge_s,
            "per_worker_samples_s": args["samples"] / (seconds - merge_s) / args["workers"],
        }


def side_merge(args: dict) -> dict:
    """`fleet run` of the landing days in-process; the seconds of its merge run alone."""
    from pipelines.lib.paths import DataHome
    from pipelines.orchestrate import ensure_instance, run_pipeline

    with tempfile.TemporaryDirectory(dir=args["tmp"]) as tmp:
        home = DataHome.resolve(fresh_home(Path(tmp), [Path(t) for t in args["trees"]]))
        os.environ["DAGSTER_HOME"] = str(home.dagster_home)
        instance = ensure_instance(home)
        result = run_pipeline(home, args["days"], instance=instance, progress=lambda _: None, workers=2)
        merge = instance.get_run_record_by_id(result.run_ids[-1])
        return {"seconds": merge.end_time - merge.start_time}


def split_day(data: Path, samples: int, k: int, by_time: bool = False) -> Path:
    """The parquet landing day of ``samples`` samples with its samples file cut into ``k`` files of
    consecutive rows (a source delivering its day in parts; cached): as generated (run after run), or
    ``by_time`` (sorted by timestamp first, as hourly deliveries would be: every run in every file)."""
    out = data / (f"split-{samples}-{k}" + ("-by-time" if by_time else ""))
    if not (out / ".complete").exists():
        import pyarrow.parquet as pq

        shutil.rmtree(out, ignore_errors=True)
        tree = landing_day(data, "parquet", samples)
        shutil.copytree(tree, out, ignore=shutil.ignore_patterns(".complete", "utilisation_samples*"))
        src = samples_file(tree, "parquet")
        table = pq.read_table(src)
        if by_time:
            table = table.sort_by("ts")
        step = math.ceil(table.num_rows / k)
        for i in range(k):
            pq.write_table(
                table.slice(i * step, step),
                out / src.relative_to(tree).parent / f"utilisation_samples-{i:02d}.parquet",
            )
        (out / ".complete").touch()
    return out


def side_split(args: dict) -> dict:
    """The day read in slices and merged (``slice_bytes`` > 0), or in one pass; seconds of each phase."""
    from pipelines.lib.ingest.day import ingest_day
    from pipelines.lib.ingest.promote import _promote
    from pipelines.lib.ingest.split import merge_day, read_task, settle_day, write_tasks
    from pipelines.lib.paths import DataHome
    from pipelines.lib.settings import DEFAULT_LIMITS
    from workload_model.catalog import load_hardware

    platforms = list(load_hardware().platforms)
    limits = DEFAULT_LIMITS
    if args["slice_bytes"]:
        limits = dataclasses.replace(DEFAULT_LIMITS, slice_bytes=args["slice_bytes"])
    with tempfile.TemporaryDirectory(dir=args["tmp"]) as tmp:
        home = DataHome.resolve(fresh_home(Path(tmp), [Path(args["tree"])]))
        t0 = time.perf_counter()
        phases = {}
        if args["slice_bytes"]:
            slices = settle_day(home, args["day"], platforms, limits)
            assert len(slices) == args["slices"], len(slices)
            t1 = time.perf_counter()
            parts = [read_task(t, "bench") for t in write_tasks(home, slices)]
            t2 = time.perf_counter()
            result = merge_day(home, slices[0].root, parts)
            t3 = time.perf_counter()
            phases = {"settle_s": t1 - t0, "slices_s": t2 - t1, "merge_s": t3 - t2}
        else:
            result = ingest_day(home, args["day"], platforms, limits=limits)
        out = _promote(home, args["day"], result)
        seconds = time.perf_counter() - t0
    assert out.promoted, out.checks
    return {"seconds": seconds, "rows": out.result.samples_rows, **phases}


def side_lake_in_parts(args: dict) -> dict:
    """A data home whose day's samples are published in ``slices`` files (read in that many slices), or
    in one (``slices`` 0: one pass); kept under ``args["tmp"]`` for side_day_partials (its path: ``home``)."""
    from pipelines.lib.ingest.day import ingest_day
    from pipelines.lib.ingest.promote import _promote
    from pipelines.lib.ingest.split import ingest_slice, merge_day, settle_day
    from pipelines.lib.paths import DataHome
    from pipelines.lib.settings import DEFAULT_LIMITS
    from workload_model.catalog import load_hardware

    platforms = list(load_hardware().platforms)
    home = DataHome.resolve(fresh_home(Path(args["tmp"]), [Path(args["tree"])]))
    if args["slices"]:
        size = sum(p.stat().st_size for p in Path(args["tree"]).rglob("utilisation_samples-*.parquet"))
        limits = dataclasses.replace(DEFAULT_LIMITS, slice_bytes=math.ceil(size / args["slices"]))
        slices = settle_day(home, args["day"], platforms, limits)
        result = merge_day(home, slices[0].root, [ingest_slice(home, piece) for piece in slices])
    else:
        result = ingest_day(home, args["day"], platforms)
    assert _promote(home, args["day"], result).promoted
    return {"seconds": 0.0, "home": str(home.root)}


def side_day_partials(args: dict) -> dict:
    """The day's three sample-scanning analyses (server windows, per-run statistics, histograms) over
    the day's published files, each file a part (how many: ``parts``), taking the aggregates its slices
    left (``kept``; how many: ``hits``) or computing every part's."""
    from pipelines.lib.analysis import analytics
    from pipelines.lib.paths import DataHome
    from pipelines.lib.storage import lake

    home = DataHome.resolve(args["home"])
    day = args["day"]
    runs = lake.read_partition(home, "runs", day)
    samples = analytics.partition_relation(home, "utilisation_samples", day)
    cache = analytics.partial_cache(home, day) if args["kept"] else None
    start = time.perf_counter()
    windows = analytics.server_windows(samples, day, cache)
    stats = analytics.run_role_stats(runs, samples, day, windows, cache)
    analytics.util_distribution(runs, samples, stats, day, cache)
    seconds = time.perf_counter() - start
    hits = cache.hits if cache else 0
    return {"seconds": seconds, "parts": len(analytics.day_parts(samples)), "hits": hits}


def side_role_stats(args: dict) -> dict:
    """run_role_stats over a day already in the lake (``home``), its exact quantiles over batches of runs of
    about ``quantile_values`` values."""
    from pipelines.lib.analysis import analytics
    from pipelines.lib.paths import DataHome
    from pipelines.lib.storage import lake

    home = DataHome.resolve(args["home"])
    runs = lake.read_partition(home, "runs", args["day"])
    samples = analytics.partition_relation(home, "utilisation_samples", args["day"])
    windows = analytics.partition_relation(home, "server_windows", args["day"])
    start = time.perf_counter()
    analytics.run_role_stats(runs, samples, args["day"], windows, quantile_values=args["quantile_values"])
    return {"seconds": time.perf_counter() - start}


def side_families(args: dict) -> dict:
    """The night's recommendations (correction fit, then every family x objective x option) for a fleet of
    ``families`` runs, each of its own model name."""
    import polars as pl

    from pipelines.lib.analysis.recommend import Fleet, fit_correction
    from pipelines.lib.analysis.recommend_fleet import fleet_recommendations
    from synthetic_fleet.sampler import sample_runs
    from workload_model.catalog import load_hardware, load_models

    hw, models = load_hardware(), load_models()
    runs = sample_runs(DAY, args["families"], 7, hw, models).with_columns(
        pl.format("team-model-{}", pl.int_range(pl.len())).alias("model_name")
    )
    start = time.perf_counter()
    fleet = Fleet.from_runs(runs, hw)
    recs = fleet_recommendations(fleet, hw, models, fit_correction(fleet, hw))
    return {"seconds": time.perf_counter() - start, "rows": recs.height}


SIDES.update(
    {
        f.__name__: f
        for f in (
            side_night_workers,
            side_merge,
            side_split,
            side_lake_in_parts,
            side_day_partials,
            side_role_stats,
            side_families,
        )
    }
)


def families_case(tmp: Path, n: int, r: int) -> dict:
    """Recommendations for 4F model families vs F (F = samples / 2,000: 5,000 at 10M samples): linear
    time gives a ratio of 4, quadratic 16 (target <= 5); peak RSS of both."""
    f = max(n // 2_000, 50)
    row = paired(
        "families",
        r,
        ("side_families", {"families": 4 * f}),
        ("side_families", {"families": f}),
        note=f"{4 * f:,} model names vs {f:,}",
    )
    row["ok"] = row["ok"] and row["product_rss_mb"] < RSS_LIMIT_MB
    return row


def quantiles_cases(data: Path, tmp: Path, n: int, r: int) -> list[dict]:
    """run_role_stats of one day with its exact quantiles over batches of about 1/K of the day's values vs
    over the whole day at once (the default budget at this size): what the bound costs, and its peak RSS."""
    import polars as pl

    from pipelines.lib.analysis import analytics
    from pipelines.lib.storage import lake

    tree = landing_day(data, "parquet", n)
    home = _ingested({"tree": str(tree), "day": DAY}, tmp / "quantiles")
    samples = analytics.partition_relation(home, "utilisation_samples", DAY)
    lake.write_partition(home, "server_windows", DAY, analytics.server_windows(samples, DAY))
    counts = pl.scan_parquet(list(samples.uris)).select(pl.col(f"{c}_util").count() for c in resources())
    values = int(counts.collect().sum_horizontal().item())
    whole = {"home": str(home.root), "day": DAY, "quantile_values": values + 1}
    rows = []
    for k in (4, 16):
        rows.append(
            paired(
                f"quantiles-{k}",
                r,
                ("side_role_stats", {**whole, "quantile_values": values // k}),
                ("side_role_stats", whole),
                f"{values:,} values, batches of {values // k:,}",
            )
        )
    shutil.rmtree(tmp / "quantiles", ignore_errors=True)
    return rows


def split_cases(data: Path, tmp: Path, n: int, r: int) -> list[dict]:
    """A day in K slices vs in one pass, for K = 2, 4, 8; the merge's seconds."""
    rows = []
    for k in (2, 4, 8):
        tree = split_day(data, n, k)
        size = sum(p.stat().st_size for p in tree.rglob("utilisation_samples-*.parquet"))
        args = {"tree": str(tree), "day": DAY, "tmp": str(tmp), "slices": k}
        ours = [measure("side_split", **args, slice_bytes=math.ceil(size / k)) for _ in range(r)]
        base = [measure("side_split", **args, slice_bytes=0) for _ in range(r)]
        med = {key: statistics.median(x[key] for x in ours) for key in ("settle_s", "slices_s", "merge_s")}
        row = {
            "case": f"split-{k}",
            "product_s": statistics.median(x["seconds"] for x in ours),
            "product_rss_mb": max(x["peak_rss_mb"] for x in ours),
            "anchor_s": statistics.median(x["seconds"] for x in base),
            "anchor_rss_mb": max(x["peak_rss_mb"] for x in base),
            "repeats": r,
            **{f"product_{key}": v for key, v in med.items()},
            "target": None,
            "ok": True,
            "note": f"{n:,} samples in {k} files: {k} slices vs one pass; settle {med['settle_s']:.1f} s, "
            f"slices {med['slices_s']:.1f} s, merge {med['merge_s']:.1f} s",
        }
        row["ratio"] = row["product_s"] / row["anchor_s"]
        rows.append(row)
    return rows


def partials_cases(data: Path, tmp: Path, n: int, r: int) -> list[dict]:
    """The day's analyses over its samples published in K files (a split day's slices: K parts), taking
    the aggregates the slices left, vs the same day published in one file, for K = 2, 4, 8, with the day
    delivered run after run and by time (every run in every part: p50 and p95 taken again); the note
    gives the same K parts with every part aggregated on the day's machine."""
    rows = []
    for by_time in (False, True):
        for k in (2, 4, 8):
            tree = split_day(data, n, k, by_time)
            homes = {}
            for slices in (k, 0):
                where = tmp / f"partials-{k}-{slices}"
                shutil.rmtree(where, ignore_errors=True)
                made = measure("side_lake_in_parts", tree=str(tree), day=DAY, tmp=str(where), slices=slices)
                homes[slices] = made["home"]
            ours, base, alone = [], [], []
            for _ in range(r):
                ours.append(measure("side_day_partials", home=homes[k], day=DAY, kept=True))
                base.append(measure("side_day_partials", home=homes[0], day=DAY, kept=False))
                alone.append(measure("side_day_partials", home=homes[k], day=DAY, kept=False))
            for slices in (k, 0):
                shutil.rmtree(tmp / f"partials-{k}-{slices}", ignore_errors=True)
            assert ours[0]["parts"] == k and base[0]["parts"] == 1, (ours[0]["parts"], base[0]["parts"])
            assert ours[0]["hits"] == 3 * k, ours[0]["hits"]  # every part's three aggregates, from its slice
            order = "by time" if by_time else "run after run"
            every = statistics.median(x["seconds"] for x in alone)
            row = {
                "case": f"partials-{k}" + ("-by-time" if by_time else ""),
                "product_s": statistics.median(x["seconds"] for x in ours),
                "product_rss_mb": max(x["peak_rss_mb"] for x in ours),
                "anchor_s": statistics.median(x["seconds"] for x in base),
                "anchor_rss_mb": max(x["peak_rss_mb"] for x in base),
                "repeats": r,
                "target": None,
                "ok": True,
                "note": f"{n:,} samples delivered {order}: the analyses over {k} parts, slices' aggregates "
                f"taken, vs one file; every part aggregated here: {every:.2f} s",
            }
            row["ratio"] = row["product_s"] / row["anchor_s"]
            rows.append(row)
    return rows


def workers_cases(data: Path, tmp: Path, n: int, r: int) -> list[dict]:
    """Four days on Celery workers (Redis, PostgreSQL on 127.0.0.1): two workers vs one; and the merge's
    cost against the number of day partitions it merges."""
    from tests.support.servers import postgres_env, postgresql, redis

    days = [(dt.date.fromisoformat(DAY) + dt.timedelta(days=i)).isoformat() for i in range(8)]
    per_day = max(n // 4, 1000)
    trees = [str(landing_day(data, "parquet", per_day, day=d)) for d in days]
    rows = []
    with postgresql() as port, redis(tmp / "redis", "bench-broker") as broker:
        os.environ.update(postgres_env(port))
        args = {
            "trees": trees[:4],
            "days": days[:4],
            "tmp": str(tmp),
            "broker": broker,
            "samples": 4 * per_day,
        }
        row = paired(
            "workers",
            r,
            ("side_night_workers", {**args, "workers": 2}),
            ("side_night_workers", {**args, "workers": 1}),
            note=f"4 days x {per_day:,} samples on Celery workers: 2 workers vs 1",
        )
        row["note"] += (
            f"; cores busy: 2 workers {row['product_cores']:.2f}, 1 worker {row['anchor_cores']:.2f}"
            f"; merge {row['product_merge_s']:.1f} s; samples/s per worker: 2 workers "
            f"{row['product_rate']:,.0f}, 1 worker {row['anchor_rate']:,.0f}"
        )
        rows.append(row)
    for k in (1, 2, 4, 8):
        rows.append(
            paired(
                f"merge-{k}-days",
                r,
                ("side_merge", {"trees": trees[:k], "days": days[:k], "tmp": str(tmp)}),
                None,
                note=f"the merge run over {k} day partition(s) of {per_day:,} samples",
            )
        )
    return rows


def _add_memory(rows: list[dict], data: Path, tmp: Path, n: int) -> None:
    """The memory cases, and the memory limit applied to every ingest case already measured."""
    rows.extend(memory_cases(data, tmp, n))
    for row in rows:
        if row["case"].startswith("ingest-"):
            row["ok"] = row["ok"] and row["product_rss_mb"] < RSS_LIMIT_MB


def _commit() -> str | None:
    """The code measured: its commit, marked when the tree had changes."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        )
    except OSError:
        return None
    if head.returncode:
        return None
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=10_000_000, help="samples in the benchmark day")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats per case (medians)")
    ap.add_argument(
        "--cases",
        default="synth,ingest,process,analytics,night,waste,s3,backfill,fixed,workers,split,partials,quantiles,memory,"
        "prometheus,families",
        help="comma-separated, any of the default's cases",
    )
    ap.add_argument("--home", default=None, help="data home (default: $FLEET_HOME or ./data)")
    ap.add_argument("--child", nargs=2, metavar=("SIDE", "ARGS"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return 0
    from pipelines.lib.paths import DataHome

    home = DataHome.resolve(a.home)
    data = home.root / "bench" / "data"
    data.mkdir(parents=True, exist_ok=True)
    tmp = home.root / "bench" / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    cases = set(a.cases.split(","))
    commit = _commit()  # the code measured, before anyone edits the tree during the run
    n, r = a.samples, a.repeats
    rows: list[dict] = []

    def add(row: dict) -> None:
        rows.append(row)
        print(
            f"  {row['case']}: {row['product_s']:.2f} s"
            + (f" vs {row['anchor_s']:.2f} s" if row["anchor_s"] else ""),
            flush=True,
        )

    runners = {
        "synth": lambda: [synth_case(tmp, n, r)],
        "ingest": lambda: ingest_cases(data, tmp, n, r),
        "process": lambda: [ingest_process_case(data, tmp, r)],
        "analytics": lambda: [analytics_case(data, tmp, n, r)],
        "night": lambda: night_cases(data, tmp, n, r),
        "waste": lambda: [waste_case(data, tmp, n, r)],
        "s3": lambda: [object_storage_case(data, tmp, n, r)],
        "backfill": lambda: [backfill_case(data, tmp, n, r)],
        "fixed": lambda: [fixed_case(data, tmp, n, r)],
        "workers": lambda: workers_cases(data, tmp, n, r),
        "prometheus": lambda: [prometheus_case(data, tmp, n, r)],
        "split": lambda: split_cases(data, tmp, n, r),
        "partials": lambda: partials_cases(data, tmp, n, r),
        "quantiles": lambda: quantiles_cases(data, tmp, n, r),
        "families": lambda: [families_case(tmp, n, r)],
    }
    for name, run in runners.items():
        if name in cases:
            for row in run():
                add(row)
    if "memory" in cases:
        _add_memory(rows, data, tmp, n)
    print()
    print_table(rows)
    report = {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "samples": n,
        "cpus": os.cpu_count(),
        "commit": commit,
        "repeats": r,
        "rows": rows,
    }
    out = home.root / "bench" / f"bench-{n}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwritten: {out}")
    return 0 if all(row["ok"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
