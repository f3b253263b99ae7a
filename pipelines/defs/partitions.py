"""Daily partitions (UTC): a landing day is the unit of work."""

import dagster as dg

DAILY = dg.DailyPartitionsDefinition(start_date="2020-01-01", timezone="UTC")
