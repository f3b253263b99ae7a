-- Per run x role x resource: servers, samples, mean / p50 / p95 / max utilisation of one day.
-- Reads the registered relations `samples`, `server_windows` and `runs`. The samples are aggregated first and
-- the run's system joined to the (few) aggregated rows; a resource's servers are those with at least one value
-- of it, counted from server_windows (the day's scan per server) rather than by a distinct count over every
-- sample; resource names lose their `_util` suffix after aggregation. The resource lists come from the contract
-- (expanded by pipelines/lib/sqlfiles.py).
WITH long AS (
    UNPIVOT (SELECT run_id, role, <<resources: {col}>> FROM samples)
    ON <<resources: {col}>>
    INTO NAME resource VALUE util
),
stats AS (
    SELECT run_id, role, resource,
           count(*)                                   AS n_samples,
           avg(util)                                  AS mean_util,
           quantile_cont(util, [0.5, 0.95])           AS q,
           max(util)                                  AS max_util
    FROM long
    GROUP BY run_id, role, resource
),
per_server AS (
    SELECT run_id, role, server_id,
           <<resources: count({col}) > 0 AS {col}>>
    FROM server_windows
    GROUP BY run_id, role, server_id
),
servers AS (
    SELECT run_id, role, resource, CAST(count(*) AS INTEGER) AS n_servers
    FROM (UNPIVOT per_server ON <<resources: {col}>>
          INTO NAME resource VALUE has_values)
    WHERE has_values
    GROUP BY run_id, role, resource
)
SELECT
    CAST($day AS DATE) AS day,
    s.run_id,
    coalesce(r.model_name, '(unknown)') AS model_name,
    coalesce(r.platform, '(unknown)')   AS platform,
    coalesce(r.placement, '(unknown)')  AS placement,
    s.role,
    regexp_replace(s.resource, '_util$', '') AS resource,
    v.n_servers, s.n_samples, s.mean_util,
    s.q[1] AS p50_util,
    s.q[2] AS p95_util,
    s.max_util
FROM stats AS s
JOIN servers AS v USING (run_id, role, resource)
JOIN runs AS r USING (run_id)
ORDER BY s.run_id, s.role, resource
