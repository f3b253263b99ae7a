-- Share of runs on the modal trainer count per source and platform (the paper: >40% of CPU runs share one count).
-- params: {}
WITH h AS (
    SELECT source, platform, n_servers, CAST(sum(n_runs) AS BIGINT) AS runs
    FROM server_count_hist WHERE role = 'trainer'
    GROUP BY source, platform, n_servers
)
SELECT source, platform, CAST(sum(runs) AS BIGINT) AS runs, arg_max(n_servers, runs) AS modal_trainers, max(runs) / sum(runs) AS share_modal
FROM h
GROUP BY source, platform
ORDER BY source, platform
