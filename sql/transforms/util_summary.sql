-- Summaries from merged_hist: moments and quantiles from bin midpoints (exact to within one bin).
-- A quantile q is the midpoint of the first bin whose cumulative count reaches q * n.
-- Every combination of model, platform and placement, '*' standing for every value of a key (CUBE): a
-- roll-up adds the per-system histograms, so its quantiles are those of the pooled samples, never a mean of
-- the groups' quantiles.
WITH hist AS (
    SELECT statistic, role, resource,
        coalesce(model_name, '*') AS model_name,
        coalesce(platform, '*')   AS platform,
        coalesce(placement, '*')  AS placement,
        bin,
        sum(n)                    AS n,
        min(first_day)            AS first_day,
        max(last_day)             AS last_day
    FROM merged_hist
    WHERE model_name <> '*'  -- the per-system rows: the cube makes the fleet-wide ones again
    GROUP BY statistic, role, resource, bin, CUBE (model_name, platform, placement)
),
cum AS (
    SELECT *,
        (bin + 0.5) / $n_bins AS mid,
        sum(n) OVER (PARTITION BY statistic, role, resource, model_name, platform, placement
                     ORDER BY bin ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS cum_n,
        sum(n) OVER (PARTITION BY statistic, role, resource, model_name, platform, placement) AS total
    FROM hist
),
s AS (
    SELECT statistic, role, resource, model_name, platform, placement,
        max(total)                                          AS n,
        sum(n * mid) / max(total)                           AS mean_util,
        sqrt(greatest(sum(n * mid * mid) / max(total) - pow(sum(n * mid) / max(total), 2), 0)) AS std_util,
        min(mid) FILTER (WHERE cum_n >= 0.05 * total)       AS p5_util,
        min(mid) FILTER (WHERE cum_n >= 0.25 * total)       AS p25_util,
        min(mid) FILTER (WHERE cum_n >= 0.50 * total)       AS p50_util,
        min(mid) FILTER (WHERE cum_n >= 0.75 * total)       AS p75_util,
        min(mid) FILTER (WHERE cum_n >= 0.90 * total)       AS p90_util,
        min(mid) FILTER (WHERE cum_n >= 0.95 * total)       AS p95_util,
        min(mid) FILTER (WHERE cum_n >= 0.99 * total)       AS p99_util,
        min(first_day)                                      AS first_day,
        max(last_day)                                       AS last_day
    FROM cum
    GROUP BY statistic, role, resource, model_name, platform, placement
)
SELECT statistic, role, resource, model_name, platform, placement, n, mean_util, std_util,
       p5_util, p25_util, p50_util, p75_util, p90_util, p95_util, p99_util,
       p75_util - p25_util AS iqr_util,
       p95_util - p50_util AS upper_tail_util,
       first_day, last_day
FROM s
ORDER BY statistic, role, resource, model_name, platform, placement
