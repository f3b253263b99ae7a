-- Per run x role x resource of one day: max / median over the role's servers of each server's mean utilisation
-- (its windows' means weighted by their samples), from the registered relation `server_windows`. The paper's
-- hot-table imbalance where the role is sparse PS; null when the median is 0.
WITH per_server AS (
    SELECT run_id, role, server_id,
           <<resources: sum({col} * n_samples) / sum(n_samples) FILTER (WHERE {col} IS NOT NULL) AS {res}>>
    FROM server_windows
    GROUP BY run_id, role, server_id
)
SELECT run_id, role, resource, max(util) / nullif(median(util), 0) AS imbalance
FROM (UNPIVOT per_server ON <<resources: {res}>> INTO NAME resource VALUE util)
GROUP BY run_id, role, resource
