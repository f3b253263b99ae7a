-- Servers per run of parameter-server-based runs of one source ($source): median, mean, max and share at 1 and at the modal count, per role.
-- params: {"source": "synthetic"}
WITH h AS (
    SELECT role, n_servers, sum(n_runs) AS runs
    FROM server_count_hist
    WHERE source = $source AND ps_based AND role IN ('trainer', 'sparse_ps')
    GROUP BY role, n_servers
),
c AS (
    SELECT *, sum(runs) OVER (PARTITION BY role ORDER BY n_servers) AS cum, sum(runs) OVER (PARTITION BY role) AS total
    FROM h
)
SELECT
    role,
    CAST(max(total) AS BIGINT)                              AS runs,
    min(n_servers) FILTER (WHERE cum >= 0.5 * total)        AS median_servers,
    sum(n_servers * runs) / max(total)                      AS mean_servers,
    max(n_servers)                                          AS max_servers,
    coalesce(sum(runs) FILTER (WHERE n_servers = 1), 0) / max(total) AS share_exactly_1,
    arg_max(n_servers, runs)                                AS modal_servers,
    max(runs) / max(total)                                  AS share_modal
FROM c
GROUP BY role
ORDER BY role
