-- One part of a day's per-sample histograms (a part = one Parquet file of the day's samples): fixed-width bins
-- ($n_bins over [0, 1]; 1.0 goes to the last bin) per system, counts that add across parts
-- (util_distribution.sql). Reads `samples` and `runs`. Each sample is tagged with a small integer for its run's
-- system (model, platform, placement) before it is unpivoted, so the big aggregation groups on integers, not on
-- run ids.
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
)
SELECT 'sample' AS statistic, CAST(p.role AS VARCHAR) AS role, regexp_replace(p.resource, '_util$', '') AS resource,
       y.model_name, y.platform, y.placement, p.bin, p.n
FROM per_sys AS p JOIN (SELECT DISTINCT sys_id, model_name, platform, placement FROM sys) AS y USING (sys_id)
