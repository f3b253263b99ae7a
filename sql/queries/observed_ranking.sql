-- Observed medians per model and platform x placement over succeeded runs, with the tables' fit: what the fleet itself shows.
-- params: {}
WITH obs AS (
    SELECT model_name, platform, placement, count(*) AS n_runs,
           median(throughput_eps) AS median_throughput_eps,
           median(throughput_eps / nullif(power_w, 0)) AS median_eps_per_drawn_w
    FROM runs
    WHERE status = 'succeeded' AND throughput_eps IS NOT NULL AND model_name IS NOT NULL AND placement IS NOT NULL
    GROUP BY model_name, platform, placement
),
fit AS (
    SELECT model_name, platform, placement, bool_and(fits) AS fits, min(headroom) AS min_headroom
    FROM hardware_fit GROUP BY model_name, platform, placement
)
SELECT obs.*, fit.fits, fit.min_headroom,
       rank() OVER (PARTITION BY obs.model_name ORDER BY median_throughput_eps DESC) AS throughput_rank
FROM obs LEFT JOIN fit USING (model_name, platform, placement)
ORDER BY model_name, throughput_rank
