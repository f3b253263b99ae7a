-- Per run x role x resource: servers, samples, mean / p50 / p90 / p95 / max utilisation of one day, merged
-- from the parts in the registered relation `run_role_stats_parts` (run_role_stats_part.sql): counts and sums
-- add, maxima take the largest; the quantiles are the part's own where one part holds the group, else the
-- exact ones in `spanning_quantiles` (run_role_quantiles.sql). A resource's servers are those with at least
-- one value of it, counted from `server_windows` (the day's scan per server) rather than by a distinct count
-- over every sample; the run's system comes from `runs`. Resource names lose their `_util` suffix here.
WITH merged AS (
    SELECT run_id, role, resource,
           sum(n_samples)                  AS n_samples,
           sum(sum_util) / sum(n_samples)  AS mean_util,
           max(max_util)                   AS max_util,
           count(*)                        AS n_parts,
           any_value(q)                    AS q
    FROM run_role_stats_parts
    GROUP BY run_id, role, resource
),
stats AS (
    SELECT m.run_id, m.role, m.resource, m.n_samples, m.mean_util, m.max_util,
           CASE WHEN m.n_parts = 1 THEN m.q ELSE x.q END AS q
    FROM merged AS m
    LEFT JOIN spanning_quantiles AS x USING (run_id, role, resource)
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
    s.q[2] AS p90_util,
    s.q[3] AS p95_util,
    s.max_util
FROM stats AS s
JOIN servers AS v USING (run_id, role, resource)
JOIN runs AS r USING (run_id)
ORDER BY s.run_id, s.role, resource
