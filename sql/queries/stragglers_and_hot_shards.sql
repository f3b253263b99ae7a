-- Stragglers and hot shards over a day range with their evidence: which server, how far off its peers' median (ratio), for how long.
-- params: {"first_day": "2000-01-01", "last_day": "2100-01-01"}
SELECT day, run_id, model_name, platform, kind, server_id, resource, ratio, server_util, peer_median_util, peers,
       flagged_s / 60 AS flagged_min, share_of_samples
FROM server_outliers
WHERE day BETWEEN CAST($first_day AS DATE) AND CAST($last_day AS DATE)
ORDER BY kind, CASE kind WHEN 'hot_shard' THEN -ratio ELSE ratio END, day, run_id
