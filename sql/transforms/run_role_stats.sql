-- Per run x role x resource: servers, samples, mean / p50 / p95 / max utilisation of one day.
-- Reads the registered relations `samples` and `runs`. Aggregates the samples first and joins the run's
-- system to the (few) aggregated rows; resource names lose their `_util` suffix after aggregation.
WITH long AS (
    UNPIVOT (SELECT run_id, server_id, role, cpu_util, mem_cap_util, mem_bw_util, net_bw_util, gpu_util, gpu_mem_util FROM samples)
    ON cpu_util, mem_cap_util, mem_bw_util, net_bw_util, gpu_util, gpu_mem_util
    INTO NAME resource VALUE util
),
stats AS (
    SELECT run_id, role, resource,
           CAST(count(DISTINCT server_id) AS INTEGER) AS n_servers,
           count(*)                                   AS n_samples,
           avg(util)                                  AS mean_util,
           quantile_cont(util, [0.5, 0.95])           AS q,
           max(util)                                  AS max_util
    FROM long
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
    s.n_servers, s.n_samples, s.mean_util,
    s.q[1] AS p50_util,
    s.q[2] AS p95_util,
    s.max_util
FROM stats AS s
JOIN runs AS r USING (run_id)
ORDER BY s.run_id, s.role, resource
