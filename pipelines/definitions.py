"""The Dagster code location: every object under defs/ is discovered by load_from_defs_folder."""

from pathlib import Path

import dagster as dg

from pipelines.defs.partitions import partitions_start, with_start
from pipelines.lib.paths import DataHome


def build_defs(home: DataHome | None = None, start: str | None = None) -> dg.Definitions:
    """Every definition, with daily partitions from ``start`` (default: ``partitions_start`` of the home)."""
    loaded = dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
    return with_start(loaded, start or partitions_start(home or DataHome.resolve()))


@dg.definitions
def defs() -> dg.Definitions:
    return build_defs()
