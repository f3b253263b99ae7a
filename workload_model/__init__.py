"""The domain model: hardware and model catalogs, the analytical workload model, sizing, bottlenecks and
calibration. Plain functions over plain data; it imports nothing from the pipeline or the fleet generator."""
