"""The nightly job as a run's code pointer names it: loaded once per process, by the CLI's runs and by the
workers' day processes alike (``dg.reconstructable(nightly_job)``)."""

from __future__ import annotations

import functools

import dagster as dg

JOB = "nightly"


def nightly_job() -> dg.JobDefinition:
    """The nightly job, for a worker to rebuild from its code pointer (``dg.reconstructable``)."""
    return nightly_graph()[0]


@functools.cache
def nightly_graph() -> tuple[dg.JobDefinition, list[dg.AssetKey], list[dg.AssetKey]]:
    """The nightly job and its daily and merged assets, loaded once per process (nothing in them depends
    on the data home or what landed)."""
    from pipelines.definitions import build_defs

    d = build_defs()
    graph = d.resolve_asset_graph()
    daily, merged = [], []
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if not node.is_materializable:
            continue
        (daily if node.partitions_def is not None else merged).append(key)
    return d.resolve_job_def(JOB), daily, merged
