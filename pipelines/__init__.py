"""Fleet telemetry analytics for recommendation-model training: the Dagster code location and library."""
