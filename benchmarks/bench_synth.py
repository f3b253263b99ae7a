"""Benchmark: synthesising a 10-million-sample fleet to Parquet, against pyarrow writing the same table from
memory (the limit: what the write alone costs), in the same run; medians of several repeats.

    .venv/bin/python benchmarks/bench_synth.py [--samples 10000000] [--repeats 3] [--target 2.0]

Ours is the product's path (`fleet synth --format parquet`): it streams day by day, generating the next day
while a writer thread writes the previous one, so its peak memory is bounded by two days' partitions; the
baseline holds the whole fleet in memory and only writes. Peak memory is each mode's max RSS in a
fresh subprocess. Exits non-zero if the median ratio exceeds --target.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SAMPLES_PER_RUN = 2_700  # roughly, for the default catalog (sizing only; the real count is reported)
FIRST_DAY = dt.date(2026, 1, 1)


def _fleet_days(samples: int, runs_per_day: int) -> int:
    return max(1, math.ceil(samples / (SAMPLES_PER_RUN * runs_per_day)))


def run_ours(days: int, runs_per_day: int, out: Path) -> dict:
    """The product's path (`fleet synth --format parquet`): generate day by day, writing as it goes."""
    from synthetic_fleet.writers import write_fleet
    from workload_model.catalog import load_hardware, load_models

    hw, models = load_hardware(), load_models()
    counted = {"samples": 0}
    start = time.perf_counter()
    write_fleet(
        [str(FIRST_DAY + dt.timedelta(days=i)) for i in range(days)],
        runs_per_day,
        7,
        hw,
        models,
        out,
        fmt="parquet",
        on_day=lambda fleet, _: counted.__setitem__("samples", counted["samples"] + fleet.samples.height),
    )
    return {"seconds": time.perf_counter() - start, "samples": counted["samples"]}


def run_baseline(days: int, runs_per_day: int, out: Path) -> dict:
    """The same samples, generated first (not timed), then written from memory in one go (timed)."""
    import polars as pl
    import pyarrow.parquet as pq

    from synthetic_fleet.sampler import sample_day
    from workload_model.catalog import load_hardware, load_models

    hw, models = load_hardware(), load_models()
    table = pl.concat(
        [
            sample_day(str(FIRST_DAY + dt.timedelta(days=i)), runs_per_day, 7, hw, models).samples
            for i in range(days)
        ]
    )
    arrow = table.to_arrow()
    start = time.perf_counter()
    pq.write_table(arrow, out / "all.parquet", compression="zstd")
    return {
        "seconds": time.perf_counter() - start,
        "samples": table.height,
        "table_mb": table.estimated_size() / 1e6,
    }


def child(mode: str, days: int, runs_per_day: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        result = (run_ours if mode == "ours" else run_baseline)(days, runs_per_day, Path(tmp))
    # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so it would include the parent's size
    hwm = [ln for ln in Path("/proc/self/status").read_text().splitlines() if ln.startswith("VmHWM:")]
    result["peak_rss_mb"] = (
        int(hwm[0].split()[1]) / 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    )
    print(json.dumps(result))


def measure(mode: str, days: int, runs_per_day: int) -> dict:
    p = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--days", str(days), "--runs-per-day", str(runs_per_day)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=10_000_000)
    ap.add_argument("--runs-per-day", type=int, default=600)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--target", type=float, default=2.0)
    ap.add_argument("--child", choices=("ours", "baseline"))
    ap.add_argument("--days", type=int)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.days, args.runs_per_day)
        return 0
    days = _fleet_days(args.samples, args.runs_per_day)
    ours, base = [], []
    for i in range(args.repeats):
        ours.append(measure("ours", days, args.runs_per_day))
        base.append(measure("baseline", days, args.runs_per_day))
        print(
            f"repeat {i + 1}: ours {ours[-1]['seconds']:.2f} s, "
            f"pyarrow write from memory {base[-1]['seconds']:.2f} s "
            f"({ours[-1]['samples']:,} samples)",
            flush=True,
        )
    one_day = measure("ours", 1, args.runs_per_day)
    ratio = statistics.median(o["seconds"] for o in ours) / statistics.median(b["seconds"] for b in base)
    print(
        f"\nfleet: {days} days x {args.runs_per_day} runs = {ours[0]['samples']:,} samples "
        f"({base[0]['table_mb']:.0f} MB in memory)"
    )
    print(
        f"median: ours {statistics.median(o['seconds'] for o in ours):.2f} s, "
        f"baseline {statistics.median(b['seconds'] for b in base):.2f} s  ->  "
        f"ratio {ratio:.2f}x (target <= {args.target}x)"
    )
    print(
        f"peak RSS: ours {statistics.median(o['peak_rss_mb'] for o in ours):.0f} MB for {days} days "
        f"(one day alone: {one_day['peak_rss_mb']:.0f} MB); "
        f"baseline {statistics.median(b['peak_rss_mb'] for b in base):.0f} MB"
    )
    return 0 if ratio <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
