-- Fixed-width histograms ($n_bins bins over [0, 1]; 1.0 goes to the last bin) of every sample, and of each
-- run's mean per role (from the registered relation `run_role_stats`). Needs samples_long.
WITH binned AS (
    SELECT 'sample' AS statistic, role, resource, model_name, platform, placement,
           least(CAST(floor(util * $n_bins) AS INTEGER), $n_bins - 1) AS bin
    FROM samples_long
    UNION ALL
    SELECT 'run_mean' AS statistic, role, resource, model_name, platform, placement,
           least(CAST(floor(mean_util * $n_bins) AS INTEGER), $n_bins - 1) AS bin
    FROM run_role_stats
)
SELECT CAST($day AS DATE) AS day, statistic, role, resource, model_name, platform, placement,
       CAST(bin AS SMALLINT) AS bin, count(*) AS n
FROM binned
GROUP BY statistic, role, resource, model_name, platform, placement, bin
ORDER BY statistic, role, resource, model_name, platform, placement, bin
