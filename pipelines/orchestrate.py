"""Run the real Dagster graph in-process for the CLI: every daily partition, then the merged and publish assets."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import dagster as dg

from pipelines.lib.paths import INSTANCE_TEMPLATE, DataHome


@dataclass
class PipelineRun:
    days: list[str]
    seconds: float
    run_ids: list[str]


def ensure_instance(home: DataHome) -> dg.DagsterInstance:
    """The Dagster instance in $DAGSTER_HOME, else <data home>/dagster_home (so `fleet ui` shows these runs)."""
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


def _graph(home: DataHome) -> tuple[list, dict, list[dg.AssetKey], list[dg.AssetKey]]:
    from pipelines.definitions import defs
    from pipelines.defs.resources import FleetHome

    d = defs()
    assets = list(d.assets or [])
    graph = d.resolve_asset_graph()
    daily, merged = [], []
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if not node.is_materializable:
            continue
        (daily if node.partitions_def is not None else merged).append(key)
    return assets, {"fleet": FleetHome(home=str(home.root))}, daily, merged


def run_pipeline(
    home: DataHome,
    days: Sequence[str],
    *,
    instance: dg.DagsterInstance | None = None,
    progress: Callable[[str], None] = print,
) -> PipelineRun:
    """Materialise every daily asset for each day, then every unpartitioned asset once."""
    start = time.perf_counter()
    instance = instance or ensure_instance(home)
    assets, resources, daily, merged = _graph(home)
    run_ids = []
    quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    for i, day in enumerate(days, 1):
        t = time.perf_counter()
        res = dg.materialize(
            assets,
            selection=daily,
            partition_key=day,
            instance=instance,
            resources=resources,
            tags={"fleet/trigger": "cli"},
            run_config=quiet,
        )
        run_ids.append(res.run_id)
        progress(f"  [{i}/{len(days)}] {day}: raw -> core -> out partials ({time.perf_counter() - t:.1f} s)")
    t = time.perf_counter()
    res = dg.materialize(
        assets,
        selection=merged,
        instance=instance,
        resources=resources,
        tags={"fleet/trigger": "cli"},
        run_config=quiet,
    )
    run_ids.append(res.run_id)
    progress(f"  merged analyses, analyst catalog, report ({time.perf_counter() - t:.1f} s)")
    return PipelineRun(days=list(days), seconds=time.perf_counter() - start, run_ids=run_ids)
