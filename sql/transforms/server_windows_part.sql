-- One part of a day's server windows (a part = one Parquet file of the day's samples; a split day publishes
-- one per slice): per run x server x window ($window_s seconds, aligned to the Unix epoch, so hours are UTC
-- clock hours) the samples, first and last sample, and each resource's sum and count, which merge across parts
-- (server_windows.sql). Reads the registered relation `samples`. The window is integer arithmetic on the
-- timestamp (a calendar function per sample would cost more than the sums).
SELECT
    run_id,
    server_id,
    role,
    epoch_us(ts) // (CAST($window_s AS BIGINT) * 1000000) AS window_n,
    count(*) AS n_samples,
    min(ts) AS first_ts,
    max(ts) AS last_ts,
    <<resources: sum({col}) AS {col}_sum, count({col}) AS {col}_n>>
FROM samples
GROUP BY run_id, server_id, role, window_n
