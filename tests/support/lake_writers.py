"""A writer process of its own for the concurrency tests: ``python -m tests.support.lake_writers URI FIRST N
START_AT`` waits until the wall clock reads START_AT (so several start together), then publishes the N days
from FIRST to server_count_hist twice each (2 rows, then a replace with 3), and prints one JSON line: the
commits that landed and the errors of those that did not."""

from __future__ import annotations

import datetime as dt
import json
import sys
import time

import polars as pl

from pipelines.lib.storage import lake

TABLE = "server_count_hist"


def hist_rows(n: int) -> pl.DataFrame:
    """``n`` rows of server_count_hist (runs with 1..n trainers)."""
    return pl.DataFrame(
        {
            "day": [dt.date(2026, 11, 1)] * n,
            "source": ["synthetic"] * n,
            "platform": ["cpu"] * n,
            "model_name": ["M1prod"] * n,
            "ps_based": [True] * n,
            "role": ["trainer"] * n,
            "n_servers": list(range(1, n + 1)),
            "n_runs": [1] * n,
        }
    )


def days(first: str, n: int) -> list[str]:
    start = dt.date.fromisoformat(first)
    return [(start + dt.timedelta(days=i)).isoformat() for i in range(n)]


def main(uri: str, first: str, n: int, start_at: float) -> None:
    store = lake.Lake(uri)
    frames = [lake.to_arrow(hist_rows(rows), TABLE) for rows in (2, 3)]
    time.sleep(max(0.0, start_at - time.time()))
    landed, errors = 0, []
    for day in days(first, n):
        for frame in frames:
            try:
                store.publish_day(TABLE, day, frame)
                landed += 1
            except Exception as exc:  # reported, not raised: the test counts what landed
                errors.append(f"{type(exc).__name__}: {str(exc)[:300]}")
    print(json.dumps({"landed": landed, "errors": errors}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
