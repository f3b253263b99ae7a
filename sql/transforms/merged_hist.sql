-- Per-day histograms (util_distribution) merged over every day, overall ('*') and per model x platform x placement.
CREATE OR REPLACE TEMP TABLE merged_hist AS
SELECT
    statistic, role, resource,
    coalesce(model_name, '*') AS model_name,
    coalesce(platform, '*')   AS platform,
    coalesce(placement, '*')  AS placement,
    bin,
    sum(n)                    AS n,
    min(day)                  AS first_day,
    max(day)                  AS last_day
FROM util_distribution
GROUP BY GROUPING SETS (
    (statistic, role, resource, bin),
    (statistic, role, resource, model_name, platform, placement, bin)
)
