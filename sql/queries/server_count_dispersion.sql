-- Dispersion of servers per run per source, platform and role: distinct counts, mean, coefficient of variation, modal count and its share.
-- params: {}
WITH h AS (
    SELECT source, platform, role, n_servers, CAST(sum(n_runs) AS BIGINT) AS runs
    FROM server_count_hist GROUP BY source, platform, role, n_servers
),
s AS (
    SELECT source, platform, role, CAST(sum(runs) AS BIGINT) AS runs, count(*) AS distinct_counts,
           sum(n_servers * runs) / sum(runs) AS mean_servers,
           sum(n_servers * n_servers * runs) / sum(runs) AS mean_sq,
           arg_max(n_servers, runs) AS modal_servers, max(runs) / sum(runs) AS share_modal
    FROM h GROUP BY source, platform, role
)
SELECT source, platform, role, runs, distinct_counts, mean_servers,
       sqrt(greatest(mean_sq - mean_servers * mean_servers, 0)) / nullif(mean_servers, 0) AS cv_servers,
       modal_servers, share_modal
FROM s
ORDER BY source, platform, role
