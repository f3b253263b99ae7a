-- Fixed-width histograms ($n_bins bins over [0, 1]; 1.0 goes to the last bin) of every sample, and of each
-- run's mean per role (from the registered relation `run_role_stats`), per system. Reads `samples` and
-- `runs`. Each sample is tagged with a small integer for its run's system (model, platform, placement)
-- before it is unpivoted, so the big aggregation groups on integers, not on run ids. A run's mean is a float
-- sum whose last bits follow the order the files are read in, and a run whose samples all hold one value
-- (memory capacity) sits on a bin's edge: the edge tolerates 1e-9 of a bin, so the bin does not flip.
WITH sys AS (
    SELECT run_id, dense_rank() OVER (ORDER BY model_name, platform, placement) AS sys_id,
           coalesce(model_name, '(unknown)') AS model_name, coalesce(platform, '(unknown)') AS platform,
           coalesce(placement, '(unknown)') AS placement
    FROM runs
),
tagged AS (
    SELECT y.sys_id, s.role, <<resources: s.{col}>>
    FROM samples AS s JOIN sys AS y USING (run_id)
),
per_sys AS (
    SELECT sys_id, role, resource, least(CAST(floor(util * $n_bins) AS INTEGER), $n_bins - 1) AS bin, count(*) AS n
    FROM (UNPIVOT tagged ON <<resources: {col}>>
          INTO NAME resource VALUE util)
    GROUP BY ALL
),
binned AS (
    SELECT 'sample' AS statistic, p.role, regexp_replace(p.resource, '_util$', '') AS resource,
           y.model_name, y.platform, y.placement, p.bin, p.n
    FROM per_sys AS p JOIN (SELECT DISTINCT sys_id, model_name, platform, placement FROM sys) AS y USING (sys_id)
    UNION ALL
    SELECT 'run_mean' AS statistic, role, resource, model_name, platform, placement,
           least(CAST(floor(mean_util * $n_bins + 1e-9) AS INTEGER), $n_bins - 1) AS bin, 1 AS n
    FROM run_role_stats
)
SELECT CAST($day AS DATE) AS day, statistic, role, resource, model_name, platform, placement,
       CAST(bin AS SMALLINT) AS bin, sum(n) AS n
FROM binned
GROUP BY statistic, role, resource, model_name, platform, placement, bin
ORDER BY statistic, role, resource, model_name, platform, placement, bin
