-- Per run x role x resource: servers, samples, mean / p50 / p95 / max utilisation. Needs samples_long.
SELECT
    CAST($day AS DATE)                          AS day,
    run_id, model_name, platform, placement, role, resource,
    CAST(count(DISTINCT server_id) AS INTEGER)  AS n_servers,
    count(*)                                    AS n_samples,
    avg(util)                                   AS mean_util,
    quantile_cont(util, 0.5)                    AS p50_util,
    quantile_cont(util, 0.95)                   AS p95_util,
    max(util)                                   AS max_util
FROM samples_long
GROUP BY run_id, model_name, platform, placement, role, resource
ORDER BY run_id, role, resource
