"""Prometheus and OpenMetrics: the mapping of metric names to roles, pulls from a server, derived samples."""
