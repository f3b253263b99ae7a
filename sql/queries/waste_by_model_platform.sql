-- Servers and provisioned kW recoverable per model, platform and role over a day range ($first_day..$last_day), summed from the merged waste_summary.
-- params: {"first_day": "2000-01-01", "last_day": "2100-01-01"}
SELECT model_name, platform, role,
       CAST(sum(runs) AS BIGINT) AS runs,
       CAST(sum(n_servers) AS BIGINT) AS n_servers,
       CAST(sum(servers_judged) AS BIGINT) AS servers_judged,
       CAST(sum(servers_recoverable) AS BIGINT) AS servers_recoverable,
       sum(servers_recoverable) / nullif(sum(servers_judged), 0) AS share_recoverable,
       sum(provisioned_kw_recoverable) AS provisioned_kw_recoverable,
       CAST(sum(outlier_servers) AS BIGINT) AS outlier_servers
FROM waste_summary
WHERE day BETWEEN CAST($first_day AS DATE) AND CAST($last_day AS DATE)
GROUP BY model_name, platform, role
ORDER BY servers_recoverable DESC, model_name, platform, role
