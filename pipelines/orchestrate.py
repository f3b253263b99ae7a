"""Run the real Dagster graph in-process for the CLI: every daily partition, then the merged and publish
assets; each as a run of the `nightly` job (with its partition), so the UI shows them like scheduled runs."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import dagster as dg

from pipelines.lib.paths import INSTANCE_TEMPLATE, DataHome
from pipelines.lib.runs import WORKER_TAG, fail_dead_runs, this_worker

JOB = "nightly"


@dataclass
class PipelineRun:
    days: list[str]
    seconds: float
    run_ids: list[str]
    dead_runs_failed: list[str]


def ensure_instance(home: DataHome) -> dg.DagsterInstance:
    """The instance in $DAGSTER_HOME, else <data home>/dagster_home (so `fleet ui` shows these runs)."""
    if not os.environ.get("DAGSTER_HOME"):
        home.dagster_home.mkdir(parents=True, exist_ok=True)
        os.environ["DAGSTER_HOME"] = str(home.dagster_home)
    dh = os.environ["DAGSTER_HOME"]
    cfg = os.path.join(dh, "dagster.yaml")
    if not os.path.exists(cfg):
        os.makedirs(dh, exist_ok=True)
        shutil.copyfile(INSTANCE_TEMPLATE, cfg)
    os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")
    return dg.DagsterInstance.get()


def _graph(home: DataHome, first_day: str) -> tuple[dg.JobDefinition, list[dg.AssetKey], list[dg.AssetKey]]:
    from pipelines.definitions import build_defs
    from pipelines.defs.partitions import partitions_start

    # The partitions cover every day asked for, even one before the configured start.
    d = build_defs(home, start=min(first_day, partitions_start(home)))
    graph = d.resolve_asset_graph()
    daily, merged = [], []
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if not node.is_materializable:
            continue
        (daily if node.partitions_def is not None else merged).append(key)
    return d.resolve_job_def(JOB), daily, merged


def run_pipeline(
    home: DataHome,
    days: Sequence[str],
    *,
    instance: dg.DagsterInstance | None = None,
    progress: Callable[[str], None] = print,
) -> PipelineRun:
    """Materialise every daily asset for each day, then every unpartitioned asset once (tagged with the
    last day's partition, as the nightly schedule's run would be). Runs left unfinished by a killed earlier
    process are marked failed first."""
    start = time.perf_counter()
    instance = instance or ensure_instance(home)
    dead = fail_dead_runs(instance)
    if dead:
        progress(f"  marked {len(dead)} run(s) of a killed earlier process failed: {', '.join(dead)}")
    # The job's resources are bound in the code location; its FleetHome reads $FLEET_HOME.
    os.environ["FLEET_HOME"] = str(home.root)
    job, daily, merged = _graph(home, min(days))
    tags = {"fleet/trigger": "cli", WORKER_TAG: this_worker()}
    quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    run_ids = []
    for i, day in enumerate(days, 1):
        t = time.perf_counter()
        res = job.execute_in_process(
            asset_selection=daily,
            partition_key=day,
            instance=instance,
            tags=tags,
            run_config=quiet,
        )
        run_ids.append(res.run_id)
        progress(f"  [{i}/{len(days)}] {day}: raw -> core -> out partials ({time.perf_counter() - t:.1f} s)")
    t = time.perf_counter()
    progress(f"  merging {len(days)} day(s) of partials, rebuilding the analyst catalog and the report ...")
    res = job.execute_in_process(
        asset_selection=merged,
        partition_key=days[-1],
        instance=instance,
        tags=tags,
        run_config=quiet,
    )
    run_ids.append(res.run_id)
    progress(f"  merged analyses, analyst catalog, report ({time.perf_counter() - t:.1f} s)")
    return PipelineRun(
        days=list(days), seconds=time.perf_counter() - start, run_ids=run_ids, dead_runs_failed=dead
    )
