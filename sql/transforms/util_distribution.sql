-- Fixed-width histograms ($n_bins bins over [0, 1]; 1.0 goes to the last bin) of every sample, and of each
-- run's mean per role (from the registered relation `run_role_stats`), per system. Reads `samples` and
-- `runs`: samples are binned per run first, the run's system joined to those counts.
WITH long AS (
    UNPIVOT (SELECT run_id, role, cpu_util, mem_cap_util, mem_bw_util, net_bw_util, gpu_util, gpu_mem_util FROM samples)
    ON cpu_util, mem_cap_util, mem_bw_util, net_bw_util, gpu_util, gpu_mem_util
    INTO NAME resource VALUE util
),
per_run AS (
    SELECT run_id, role, resource, least(CAST(floor(util * $n_bins) AS INTEGER), $n_bins - 1) AS bin, count(*) AS n
    FROM long
    GROUP BY ALL
),
binned AS (
    SELECT 'sample' AS statistic, p.role, regexp_replace(p.resource, '_util$', '') AS resource,
           coalesce(r.model_name, '(unknown)') AS model_name, coalesce(r.platform, '(unknown)') AS platform,
           coalesce(r.placement, '(unknown)') AS placement, p.bin, p.n
    FROM per_run AS p JOIN runs AS r USING (run_id)
    UNION ALL
    SELECT 'run_mean' AS statistic, role, resource, model_name, platform, placement,
           least(CAST(floor(mean_util * $n_bins) AS INTEGER), $n_bins - 1) AS bin, 1 AS n
    FROM run_role_stats
)
SELECT CAST($day AS DATE) AS day, statistic, role, resource, model_name, platform, placement,
       CAST(bin AS SMALLINT) AS bin, sum(n) AS n
FROM binned
GROUP BY statistic, role, resource, model_name, platform, placement, bin
ORDER BY statistic, role, resource, model_name, platform, placement, bin
