"""Analysis: the day's statistics, right-sizing and waste, the model's fit to telemetry and to benchmarks,
recommendations."""
