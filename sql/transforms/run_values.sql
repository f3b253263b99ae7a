-- Per run of the registered relation `samples`: how many utilisation values its exact p50 and p95 hold (the
-- non-null resource values, as run_role_stats_part.sql unpivots them). Sizes the batches of runs those
-- quantiles are taken over (pipelines/lib/analysis/analytics.py).
SELECT run_id, CAST(list_sum([<<resources: count({col})>>]) AS BIGINT) AS n_values
FROM samples
GROUP BY run_id
ORDER BY run_id
