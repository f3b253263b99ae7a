-- One day's fixed-width histograms ($n_bins bins over [0, 1]; 1.0 goes to the last bin): of every sample, the
-- parts' counts in the registered relation `util_distribution_parts` (util_distribution_part.sql) added; of each
-- run's mean per role, from `run_role_stats`, per system. A run's mean is a float sum whose last bits follow
-- the order the files are read in, and a run whose samples all hold one value (memory capacity) sits on a
-- bin's edge: the edge tolerates 1e-9 of a bin, so the bin does not flip.
WITH binned AS (
    SELECT statistic, role, resource, model_name, platform, placement, bin, n
    FROM util_distribution_parts
    UNION ALL
    SELECT 'run_mean' AS statistic, CAST(role AS VARCHAR) AS role, resource, model_name, platform, placement,
           least(CAST(floor(mean_util * $n_bins + 1e-9) AS INTEGER), $n_bins - 1) AS bin, 1 AS n
    FROM run_role_stats
)
SELECT CAST($day AS DATE) AS day, statistic, role, resource, model_name, platform, placement,
       CAST(bin AS SMALLINT) AS bin, sum(n) AS n
FROM binned
GROUP BY statistic, role, resource, model_name, platform, placement, bin
ORDER BY statistic, role, resource, model_name, platform, placement, bin
