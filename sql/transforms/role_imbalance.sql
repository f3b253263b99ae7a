-- Per run x role x resource of one day: max / median over the role's servers of each server's mean utilisation
-- (its windows' means weighted by their samples), from the registered relation `server_windows`. The paper's
-- hot-table imbalance where the role is sparse PS; null when the median is 0.
WITH per_server AS (
    SELECT run_id, role, server_id,
           sum(cpu_util * n_samples) / sum(n_samples) FILTER (WHERE cpu_util IS NOT NULL) AS cpu,
           sum(mem_cap_util * n_samples) / sum(n_samples) FILTER (WHERE mem_cap_util IS NOT NULL) AS mem_cap,
           sum(mem_bw_util * n_samples) / sum(n_samples) FILTER (WHERE mem_bw_util IS NOT NULL) AS mem_bw,
           sum(net_bw_util * n_samples) / sum(n_samples) FILTER (WHERE net_bw_util IS NOT NULL) AS net_bw,
           sum(gpu_util * n_samples) / sum(n_samples) FILTER (WHERE gpu_util IS NOT NULL) AS gpu,
           sum(gpu_mem_util * n_samples) / sum(n_samples) FILTER (WHERE gpu_mem_util IS NOT NULL) AS gpu_mem
    FROM server_windows
    GROUP BY run_id, role, server_id
)
SELECT run_id, role, resource, max(util) / nullif(median(util), 0) AS imbalance
FROM (UNPIVOT per_server ON cpu, mem_cap, mem_bw, net_bw, gpu, gpu_mem INTO NAME resource VALUE util)
GROUP BY run_id, role, resource
