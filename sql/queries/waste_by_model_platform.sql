-- Servers and provisioned kW recoverable per model, platform and role over a day range ($first_day..$last_day), summed from the merged waste_summary.
-- params: {"first_day": "2000-01-01", "last_day": "2100-01-01"}
SELECT model_name, platform, role,
       sum(runs) AS runs,
       sum(n_servers) AS n_servers,
       sum(servers_judged) AS servers_judged,
       sum(servers_recoverable) AS servers_recoverable,
       sum(servers_recoverable) / nullif(sum(servers_judged), 0) AS share_recoverable,
       sum(provisioned_kw_recoverable) AS provisioned_kw_recoverable,
       sum(outlier_servers) AS outlier_servers
FROM waste_summary
WHERE day BETWEEN CAST($first_day AS DATE) AND CAST($last_day AS DATE)
GROUP BY model_name, platform, role
ORDER BY servers_recoverable DESC, model_name, platform, role
