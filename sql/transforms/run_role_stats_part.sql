-- One part of a day's per run x role x resource statistics (a part = one Parquet file of the day's samples):
-- samples, sum and max, which merge across parts, and the part's own p50, p90 and p95, which are the day's
-- exactly when the run's role lies in this part alone (run_role_stats.sql). Reads the registered relation
-- `samples`. Resource names keep their `_util` suffix until the merge; the resource list comes from the
-- contract (expanded by pipelines/lib/query/sqlfiles.py).
WITH long AS (
    UNPIVOT (SELECT run_id, role, <<resources: {col}>> FROM samples)
    ON <<resources: {col}>>
    INTO NAME resource VALUE util
)
SELECT run_id, role, resource,
       count(*)                         AS n_samples,
       sum(util)                        AS sum_util,
       max(util)                        AS max_util,
       quantile_cont(util, [0.5, 0.9, 0.95]) AS q
FROM long
GROUP BY run_id, role, resource
