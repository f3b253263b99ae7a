"""Synthetic fleet: hardware and model catalogs, an analytical workload model, a seeded fleet sampler."""
