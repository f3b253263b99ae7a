"""Large landing files for differential tests: one run over the whole day and many samples of it."""

from __future__ import annotations

import numpy as np
import polars as pl

from tests.support.homes import DAY

SERVERS = 50


def big_day(n: int, seed: int = 7) -> tuple[dict, pl.DataFrame]:
    """(the run as a JSON-ready record, ``n`` samples of it with unique keys, timestamps as text)."""
    run = {
        "run_id": "r-big",
        "start_ts": f"{DAY}T00:00:00Z",
        "end_ts": f"{DAY}T23:59:59Z",
        "status": "succeeded",
        "model_name": "M1prod",
        "platform": "cpu",
        "placement": "remote_ps",
        "n_trainers": 20,
        "n_sparse_ps": 20,
        "n_dense_ps": 5,
        "n_readers": 5,
    }
    rng = np.random.default_rng(seed)
    i = np.arange(n)
    frame = pl.DataFrame(
        {
            "run_id": "r-big",
            "server_id": pl.Series([f"s{k}" for k in range(SERVERS)])[i % SERVERS],
            "role": pl.Series(["trainer", "sparse_ps", "dense_ps", "reader", "trainer"])[i % 5],
            "ts": pl.datetime_range(
                pl.datetime(2026, 11, 20), pl.datetime(2026, 11, 20, 23, 59, 59), "1s", eager=True
            ).gather(i // SERVERS),
            "cpu_util": np.round(rng.uniform(0, 1, n), 4),
            "mem_cap_util": np.round(rng.uniform(0, 1, n), 3),
            "mem_bw_util": rng.uniform(0, 1, n),
            "net_bw_util": np.round(rng.uniform(0, 1, n), 2),
            "power_w": np.round(rng.uniform(100, 400, n), 1),
        }
    ).with_columns(pl.col("ts").dt.to_string("%Y-%m-%dT%H:%M:%SZ"))
    return run, frame
