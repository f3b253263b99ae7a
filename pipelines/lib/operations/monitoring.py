"""Operational logic behind the sensor and checks: landing inventory, changed days, row-count anomalies."""

from __future__ import annotations

import datetime as dt
import hashlib
import statistics
from dataclasses import dataclass

from pipelines.lib.paths import DataHome
from pipelines.lib.storage import lake
from pipelines.lib.storage.landing import Signature, inventory


def landing_inventory(home: DataHome) -> dict[str, Signature]:
    """Every visible entry of every landing/<source>/<YYYY-MM-DD>/, keyed by path relative to landing/."""
    return inventory(home)


@dataclass(frozen=True)
class DayChange:
    day: str
    files: tuple[str, ...]

    @property
    def run_key(self) -> str:
        """Stable for one set of file versions: the same change never triggers twice."""
        return f"{self.day}:" + hashlib.sha256("\n".join(self.files).encode()).hexdigest()[:16]


def changed_days(previous: dict[str, Signature], current: dict[str, Signature]) -> list[DayChange]:
    """Days with a new, changed or removed landing file since ``previous``."""
    touched: dict[str, list[str]] = {}
    for rel in sorted(set(previous) | set(current)):
        if previous.get(rel) != current.get(rel):
            sig = current.get(rel)
            touched.setdefault(rel.split("/")[1], []).append(
                f"{rel}@{sig[0]}:{sig[1]}" if sig else f"{rel}@removed"
            )
    return [DayChange(day, tuple(files)) for day, files in sorted(touched.items())]


def partition_row_counts(home: DataHome, table: str) -> dict[str, int]:
    """Rows per day of a partitioned table, from the lake's log (no data read)."""
    return lake.store(home).row_counts(table)


@dataclass(frozen=True)
class Anomaly:
    passed: bool
    count: int
    baseline: float | None
    ratio: float | None
    days_compared: int
    message: str


def row_count_anomaly(
    history: dict[str, int],
    day: str,
    count: int,
    *,
    window: int = 7,
    low: float = 0.5,
    high: float = 2.0,
    min_days: int = 3,
) -> Anomaly:
    """Compare a day's row count with the median of the ``window`` days before it."""
    d = dt.date.fromisoformat(day)
    prior = [
        history[k] for k in (str(d - dt.timedelta(days=i)) for i in range(1, window + 1)) if k in history
    ]
    if len(prior) < min_days:
        return Anomaly(
            True,
            count,
            None,
            None,
            len(prior),
            f"only {len(prior)} earlier day(s) in the trailing week; not judged",
        )
    base = float(statistics.median(prior))
    ratio = count / base if base else (float("inf") if count else 1.0)
    ok = low <= ratio <= high
    msg = f"{count} rows vs a trailing-week median of {base:g} ({ratio:.2f}x)" + (
        "" if ok else f": outside the expected {low:g}x..{high:g}x"
    )
    return Anomaly(ok, count, base, ratio, len(prior), msg)
