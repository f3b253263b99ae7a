"""Daily partitions (UTC): a landing day is the unit of work.

The assets are declared with ``DAILY``; the code location replaces it, when it loads (never at import), by
daily partitions starting at ``partitions_start``: ``$FLEET_PARTITIONS_START`` if set, else the first day
folder under the data home's landing/, else yesterday. A day delivered before that start is covered once the
code location reloads (`fleet run` always loads it afresh).
"""

from __future__ import annotations

import datetime as dt
import os
import warnings

import dagster as dg

from pipelines.lib.paths import DataHome

START_ENV = "FLEET_PARTITIONS_START"
TIMEZONE = "UTC"

# The shape the asset decorators need at import; its start is replaced by `with_start` at load time.
DAILY = dg.DailyPartitionsDefinition(start_date="2020-01-01", timezone=TIMEZONE)


def partitions_start(home: DataHome) -> str:
    """The first daily partition: $FLEET_PARTITIONS_START, else the first landing day, else yesterday."""
    from pipelines.lib.landing import landing_days

    configured = os.environ.get(START_ENV, "").strip()
    if configured:
        try:
            return dt.date.fromisoformat(configured).isoformat()
        except ValueError:
            raise ValueError(f"${START_ENV}={configured!r} is not a date YYYY-MM-DD") from None
    days = landing_days(home)
    if days:
        return days[0]
    return (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)).isoformat()


def daily_partitions(start: str) -> dg.DailyPartitionsDefinition:
    return dg.DailyPartitionsDefinition(start_date=start, timezone=TIMEZONE)


def with_start(defs: dg.Definitions, start: str) -> dg.Definitions:
    """``defs`` with every daily asset (so the nightly job and its schedule) partitioned from ``start``."""
    daily = daily_partitions(start)

    def restart(spec: dg.AssetSpec) -> dg.AssetSpec:
        return spec.replace_attributes(partitions_def=daily) if spec.partitions_def == DAILY else spec

    with warnings.catch_warnings():
        # map_asset_specs is marked preview in the pinned Dagster; the pin makes its behaviour fixed.
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return defs.map_asset_specs(func=restart)
