"""A night's first steps in a process of its own, for the two-first-nights test: ``python -m
tests.support.instance_setup HOME START_AT DAY...`` waits until the wall clock reads START_AT (so several
start together), opens the data home's Dagster instance (creating it on a fresh home) and adds the days as
partitions, as `fleet run` does before its first day."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pipelines.lib.paths import DataHome


def main(home: str, start_at: float, days: list[str]) -> None:
    from pipelines.orchestrate import add_partitions, ensure_instance

    time.sleep(max(0.0, start_at - time.time()))
    add_partitions(ensure_instance(DataHome.resolve(Path(home))), days)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), sys.argv[3:])
