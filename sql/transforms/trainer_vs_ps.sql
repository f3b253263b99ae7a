-- Trainers against each parameter-server role, from merged_hist (per-sample statistic) and the summaries
-- in the registered relation `util_summary`. KS statistic = max gap between the two step CDFs over all bins.
WITH cdf AS (
    SELECT role, resource, model_name, platform, placement, bin,
        sum(n) OVER (PARTITION BY role, resource, model_name, platform, placement ORDER BY bin
                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
        / sum(n) OVER (PARTITION BY role, resource, model_name, platform, placement) AS f
    FROM merged_hist
    WHERE statistic = 'sample'
),
ps_roles AS (SELECT unnest(['sparse_ps', 'dense_ps']) AS ps_role),
grid AS (
    SELECT DISTINCT r.ps_role, c.resource, c.model_name, c.platform, c.placement, c.bin
    FROM cdf AS c JOIN ps_roles AS r ON c.role IN ('trainer', r.ps_role)
),
trainer_cdf AS (SELECT * FROM cdf WHERE role = 'trainer'),
ps_cdf AS (SELECT * FROM cdf WHERE role <> 'trainer'),
ks AS (
    SELECT g.ps_role, g.resource, g.model_name, g.platform, g.placement,
           max(abs(coalesce(t.f, 0) - coalesce(p.f, 0))) AS ks_statistic
    FROM grid AS g
    ASOF LEFT JOIN trainer_cdf AS t
        ON g.resource = t.resource AND g.model_name = t.model_name AND g.platform = t.platform
       AND g.placement = t.placement AND g.bin >= t.bin
    ASOF LEFT JOIN ps_cdf AS p
        ON g.ps_role = p.role AND g.resource = p.resource AND g.model_name = p.model_name
       AND g.platform = p.platform AND g.placement = p.placement AND g.bin >= p.bin
    GROUP BY g.ps_role, g.resource, g.model_name, g.platform, g.placement
)
SELECT
    p.role AS ps_role, t.resource, t.model_name, t.platform, t.placement,
    t.n AS trainer_n, p.n AS ps_n,
    t.mean_util AS trainer_mean_util, p.mean_util AS ps_mean_util, p.mean_util - t.mean_util AS mean_diff_util,
    t.iqr_util AS trainer_iqr_util, p.iqr_util AS ps_iqr_util,
    t.upper_tail_util AS trainer_upper_tail_util, p.upper_tail_util AS ps_upper_tail_util,
    least(ks.ks_statistic, 1.0) AS ks_statistic,
    (p.mean_util < t.mean_util AND p.iqr_util > t.iqr_util AND p.upper_tail_util > t.upper_tail_util) AS paper_pattern
FROM util_summary AS t
JOIN util_summary AS p
  ON t.statistic = 'sample' AND p.statistic = 'sample' AND t.role = 'trainer' AND p.role IN ('sparse_ps', 'dense_ps')
 AND t.resource = p.resource AND t.model_name = p.model_name AND t.platform = p.platform AND t.placement = p.placement
JOIN ks
  ON ks.ps_role = p.role AND ks.resource = t.resource AND ks.model_name = t.model_name
 AND ks.platform = t.platform AND ks.placement = t.placement
ORDER BY ps_role, resource, model_name, platform, placement
