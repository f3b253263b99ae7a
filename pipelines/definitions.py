"""The Dagster code location: every object under defs/ is discovered by load_from_defs_folder."""

from pathlib import Path

import dagster as dg


def build_defs() -> dg.Definitions:
    """Every definition under defs/ (the day partitions live in the instance, so nothing here depends on
    what landed)."""
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)


@dg.definitions
def defs() -> dg.Definitions:
    return build_defs()
