-- Per model and objective, every platform x placement the fleet has run, ranked on observed medians of
-- succeeded runs ($runs_files), options whose tables do not fit ($fit_files) ranked last.
WITH obs AS (
    SELECT model_name, platform, placement,
           count(*)                                  AS n_runs,
           median(throughput_eps)                    AS median_throughput_eps,
           median(throughput_eps / nullif(power_w, 0)) AS median_eps_per_w
    FROM read_parquet($runs_files, union_by_name = true)
    WHERE status = 'succeeded' AND throughput_eps IS NOT NULL AND model_name IS NOT NULL AND placement IS NOT NULL AND platform IS NOT NULL
    GROUP BY model_name, platform, placement
),
fit AS (
    SELECT model_name, platform, placement, bool_and(fits) AS fits, min(headroom) AS headroom
    FROM read_parquet($fit_files, union_by_name = true)
    GROUP BY model_name, platform, placement
),
scored AS (
    SELECT o.objective, obs.*, coalesce(fit.fits, false) AS fits, fit.headroom,
           CASE WHEN o.objective = 'throughput' THEN obs.median_throughput_eps ELSE obs.median_eps_per_w END AS score
    FROM obs
    CROSS JOIN (SELECT unnest(['throughput', 'perf_per_watt']) AS objective) AS o
    LEFT JOIN fit USING (model_name, platform, placement)
),
ranked AS (
    SELECT *,
        row_number() OVER w AS rank,
        first_value(score) OVER w AS best_score,
        first_value(platform || '/' || placement) OVER w AS best_option,
        lead(score) OVER w AS next_score,
        lead(platform || '/' || placement) OVER w AS next_option
    FROM scored
    WINDOW w AS (PARTITION BY model_name, objective ORDER BY fits DESC, score DESC NULLS LAST, platform, placement)
)
SELECT
    model_name, objective, CAST(rank AS INTEGER) AS rank, platform, placement, n_runs,
    median_throughput_eps, median_eps_per_w, fits, headroom,
    (rank = 1 AND fits) AS recommended,
    'observed_fleet' AS basis,
    CASE
        WHEN NOT fits THEN format('{}: the tables do not fit {}/{}; not an option.', model_name, platform, placement)
        WHEN rank = 1 THEN format('{} on {}/{}: best observed median {} over {} runs{}{}.',
            model_name, platform, placement,
            CASE WHEN objective = 'throughput' THEN format('throughput, {:,.0f} examples/s', score)
                 ELSE format('throughput per watt, {:.2f} examples/s/W', score) END,
            n_runs,
            CASE WHEN next_score IS NOT NULL THEN format(', {:.2f}x the next option ({})', score / next_score, next_option) ELSE '' END,
            CASE WHEN headroom IS NOT NULL THEN format('; tables leave {:.0f}% of the tier free', 100 * headroom) ELSE '' END)
        ELSE format('{} on {}/{}: {:.2f}x of the best option ({}) over {} runs.',
            model_name, platform, placement, score / best_score, best_option, n_runs)
    END AS explanation
FROM ranked
ORDER BY model_name, objective, rank
