-- Fleet totals per day, source, model, platform and role from every day's right-sizing (`run_efficiency`) and
-- outliers (`server_outliers`), registered relations over the lake's files. Sums: merge any day range by summing.
WITH eff AS (
    SELECT day, source, model_name, platform, role,
           count(*) AS runs,
           sum(n_servers) AS n_servers,
           coalesce(sum(n_servers) FILTER (WHERE right_sized_servers IS NOT NULL), 0) AS servers_judged,
           coalesce(sum(right_sized_servers), 0) AS right_sized_servers,
           coalesce(sum(servers_recoverable), 0) AS servers_recoverable,
           coalesce(sum(provisioned_w_recoverable), 0) / 1000 AS provisioned_kw_recoverable
    FROM run_efficiency
    GROUP BY day, source, model_name, platform, role
),
outl AS (
    SELECT day, source, model_name, platform, role,
           count(*) AS outlier_servers, count(DISTINCT run_id) AS runs_with_outliers
    FROM server_outliers
    GROUP BY day, source, model_name, platform, role
)
SELECT eff.*,
       coalesce(outl.outlier_servers, 0) AS outlier_servers,
       coalesce(outl.runs_with_outliers, 0) AS runs_with_outliers
FROM eff
LEFT JOIN outl USING (day, source, model_name, platform, role)
ORDER BY day, source, model_name, platform, role
