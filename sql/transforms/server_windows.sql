-- Per run x server x window ($window_s seconds, aligned to the Unix epoch, so hours are UTC clock hours) of one
-- day: samples, first and last sample, mean utilisation of each resource. Reads the registered relation
-- `samples`: the day's scan per server (run_role_stats counts its servers from this, stragglers and hot shards
-- are found from it). The window is integer arithmetic on the timestamp (a calendar function per sample would
-- cost more than the means).
SELECT
    CAST($day AS DATE) AS day,
    run_id,
    server_id,
    role,
    to_timestamp(epoch_us(ts) // (CAST($window_s AS BIGINT) * 1000000) * $window_s) AS window_start,
    count(*) AS n_samples,
    min(ts) AS first_ts,
    max(ts) AS last_ts,
    <<resources: avg({col}) AS {col}>>
FROM samples
GROUP BY run_id, server_id, role, epoch_us(ts) // (CAST($window_s AS BIGINT) * 1000000)
