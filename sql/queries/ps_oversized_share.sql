-- Share of sparse parameter servers called oversized per source (beyond the right-sized count), of those judged; servers of runs with no utilisation samples are counted as not judged.
-- params: {}
SELECT source,
       count(*) AS runs,
       CAST(sum(n_servers) AS BIGINT) AS ps_held,
       CAST(coalesce(sum(n_servers) FILTER (WHERE basis <> 'no_telemetry'), 0) AS BIGINT) AS ps_judged,
       CAST(coalesce(sum(n_servers) FILTER (WHERE basis = 'no_telemetry'), 0) AS BIGINT) AS ps_not_judged,
       CAST(coalesce(sum(servers_recoverable), 0) AS BIGINT) AS ps_oversized,
       sum(servers_recoverable) / nullif(sum(n_servers) FILTER (WHERE basis <> 'no_telemetry'), 0) AS share_oversized,
       count(*) FILTER (WHERE servers_recoverable > 0) AS runs_with_oversized_ps
FROM run_efficiency
WHERE role = 'sparse_ps'
GROUP BY source
ORDER BY source
