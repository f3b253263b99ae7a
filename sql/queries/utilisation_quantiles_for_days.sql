-- Utilisation quantiles per role and resource over a day range ($first_day..$last_day), merged from the per-day histograms (exact to within one bin).
-- params: {"first_day": "2000-01-01", "last_day": "2100-01-01"}
-- constants: {"n_bins": "util_distribution.n_bins"}
WITH h AS (
    SELECT role, resource, bin, sum(n) AS n
    FROM util_distribution
    WHERE statistic = 'sample' AND day BETWEEN CAST($first_day AS DATE) AND CAST($last_day AS DATE)
    GROUP BY role, resource, bin
),
c AS (
    SELECT *, (bin + 0.5) / $n_bins AS mid,
           sum(n) OVER (PARTITION BY role, resource ORDER BY bin) AS cum,
           sum(n) OVER (PARTITION BY role, resource) AS total
    FROM h
)
SELECT role, resource, CAST(max(total) AS BIGINT) AS samples,
       sum(n * mid) / max(total) AS mean_util,
       min(mid) FILTER (WHERE cum >= 0.25 * total) AS p25_util,
       min(mid) FILTER (WHERE cum >= 0.50 * total) AS p50_util,
       min(mid) FILTER (WHERE cum >= 0.75 * total) AS p75_util,
       min(mid) FILTER (WHERE cum >= 0.90 * total) AS p90_util,
       min(mid) FILTER (WHERE cum >= 0.95 * total) AS p95_util
FROM c
GROUP BY role, resource
ORDER BY role, resource
