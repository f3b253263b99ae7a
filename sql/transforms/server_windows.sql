-- Per run x server x hour window ($window_s seconds, aligned to UTC clock hours) of one day: samples, first and
-- last sample, mean utilisation of each resource. Reads the registered relation `samples`: the day's one scan
-- per server (run_role_stats counts its servers from this, stragglers and hot shards are found from it).
SELECT
    CAST($day AS DATE) AS day,
    run_id,
    server_id,
    role,
    time_bucket(to_seconds($window_s), ts) AS window_start,
    count(*) AS n_samples,
    min(ts) AS first_ts,
    max(ts) AS last_ts,
    avg(cpu_util) AS cpu_util,
    avg(mem_cap_util) AS mem_cap_util,
    avg(mem_bw_util) AS mem_bw_util,
    avg(net_bw_util) AS net_bw_util,
    avg(gpu_util) AS gpu_util,
    avg(gpu_mem_util) AS gpu_mem_util
FROM samples
GROUP BY run_id, server_id, role, window_start
