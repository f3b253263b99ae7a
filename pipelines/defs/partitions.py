"""Day partitions that follow what landed: a landing day is the unit of work, and a day is a partition once
files for it landed and the day is over (UTC).

The partitions are dynamic (stored in the Dagster instance), so a public trace from 2020 adds its own days
and nothing in between: the UI lists the days that exist, not years of "Missing" ones. They are added by
whoever first meets a landed day: the landing sensor (in the same tick that requests its run), the nightly
schedule, `fleet run` and `fleet demo`. No code-location reload is ever needed for a new day.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import dagster as dg

LANDING_DAYS = dg.DynamicPartitionsDefinition(name="landing_days")


def last_complete_day(now: dt.datetime | None = None) -> str:
    """Yesterday (UTC): the last day that is over, so the last that can be a partition."""
    now = now or dt.datetime.now(dt.UTC)
    return (now.astimezone(dt.UTC).date() - dt.timedelta(days=1)).isoformat()


def split_complete(days: Iterable[str], now: dt.datetime | None = None) -> tuple[list[str], list[str]]:
    """(days that are over, days that are not yet: today or later), each sorted."""
    last = last_complete_day(now)
    days = sorted(set(days))
    return [d for d in days if d <= last], [d for d in days if d > last]


def new_days(instance: dg.DagsterInstance, days: Iterable[str]) -> list[str]:
    """Of ``days``, those that are not partitions yet."""
    known = set(instance.get_dynamic_partitions(LANDING_DAYS.name))
    return sorted(set(days) - known)


def add_days(instance: dg.DagsterInstance, days: Iterable[str]) -> list[str]:
    """Make ``days`` partitions (those that are not yet); returns the days added."""
    added = new_days(instance, days)
    if added:
        instance.add_dynamic_partitions(LANDING_DAYS.name, added)
    return added
