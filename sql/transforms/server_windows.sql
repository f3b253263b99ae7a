-- Per run x server x window of one day: samples, first and last sample, mean utilisation of each resource, merged
-- from the parts in the registered relation `server_windows_parts` (server_windows_part.sql). The day's scan per
-- server: run_role_stats counts its servers from this, stragglers and hot shards are found from it. A resource
-- with no value in a window has a null mean.
SELECT
    CAST($day AS DATE) AS day,
    run_id,
    server_id,
    role,
    to_timestamp(window_n * $window_s) AS window_start,
    sum(n_samples) AS n_samples,
    min(first_ts) AS first_ts,
    max(last_ts) AS last_ts,
    <<resources: sum({col}_sum) / nullif(sum({col}_n), 0) AS {col}>>
FROM server_windows_parts
GROUP BY run_id, server_id, role, window_n
