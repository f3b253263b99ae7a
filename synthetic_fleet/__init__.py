"""The fleet generator: a seeded sampler of runs and per-server utilisation drawn from the workload model,
the truth of the waste it made, Prometheus exporters and landing writers (test and demo data)."""
