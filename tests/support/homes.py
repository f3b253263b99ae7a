"""Data homes the tests build: the day they use, the public-trace slices, the whole asset graph on a home."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from pipelines.defs.partitions import add_days
from pipelines.defs.resources import FleetHome

DAY = "2026-11-20"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PAI_SLICE = FIXTURES / "alibaba_pai_gpu_v2020"
MLPERF_SLICE = FIXTURES / "mlperf_training_dlrm"


def materialize_all(home, definitions, day: str = DAY):
    """Every asset for ``day`` on a temporary instance: daily assets first, then the merged and publish.
    Returns the open instance's context manager (exit it when done) and both results."""
    graph = definitions.resolve_asset_graph()
    keys = [k for k in graph.get_all_asset_keys() if graph.get(k).is_materializable]
    daily = [k for k in keys if graph.get(k).partitions_def is not None]
    merged = [k for k in keys if graph.get(k).partitions_def is None]
    resources = {"fleet": FleetHome(home=str(home.root))}
    instance = dg.instance_for_test()
    inst = instance.__enter__()
    add_days(inst, [day])
    r1 = dg.materialize(
        definitions.assets, selection=daily, partition_key=day, instance=inst, resources=resources
    )
    r2 = dg.materialize(definitions.assets, selection=merged, instance=inst, resources=resources)
    return instance, r1, r2


def run_night(home, days: list[str]) -> None:
    """`fleet run` over ``days`` in-process, on a temporary Dagster instance."""
    from pipelines.orchestrate import run_pipeline

    with dg.instance_for_test() as instance:
        run_pipeline(home, sorted(days), instance=instance, progress=lambda m: None)
